package actors

import (
	"time"

	"github.com/pgrelay/pgrelay/events/bus"
)

// SetNATSBatchHook installs a function that sees, and may change, the outcome
// of every batch the publisher sends (c.NATS must be set).
func SetNATSBatchHook(c *Config, h func(bus.BatchResult, error) (bus.BatchResult, error)) {
	c.NATS.testBatch = h
}

// SetNATSSourceBatchHook is SetNATSBatchHook with the batch's source
// (events.SourceLog or events.SourceNotifier).
func SetNATSSourceBatchHook(c *Config, h func(string, bus.BatchResult, error) (bus.BatchResult, error)) {
	c.NATS.testSourceBatch = h
}

// SetNATSStoredHook installs a function that sees, and may change, the
// outcome of every read of the stream for events stored without
// acknowledgement (c.NATS must be set).
func SetNATSStoredHook(c *Config, h func(map[string]bool, error) (map[string]bool, error)) {
	c.NATS.testStored = h
}

// PubSource is one source of the publisher, for tests of its bookkeeping.
type PubSource struct{ s *pubSource }

// NewPubSource returns a source whose floor is floor.
func NewPubSource(name string, floor uint64) PubSource {
	return PubSource{&pubSource{name: name, floor: floor, floorSet: true}}
}

// NoteBatch records the outcome of a batch sent at sentAt whose last row is last.
func (p PubSource) NoteBatch(res bus.BatchResult, err error, sentAt time.Time, last int64) {
	p.s.noteBatch(res, err, sentAt, last)
}

// Floor is the stream sequence the source reads after for its messages
// stored without acknowledgement.
func (p PubSource) Floor() uint64 { return p.s.floor }

// Unacked reports a batch of the source awaiting acknowledgements.
func (p PubSource) Unacked() bool { return !p.s.unackedAt.IsZero() }

// NATSBatchHook is the batch hook installed (nil for none).
func NATSBatchHook(c *Config) func(bus.BatchResult, error) (bus.BatchResult, error) {
	return c.NATS.testBatch
}
