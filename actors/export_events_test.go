package actors

import "github.com/pgrelay/pgrelay/events/bus"

// SetNATSBatchHook installs a function that sees, and may change, the outcome
// of every batch the publisher sends (c.NATS must be set).
func SetNATSBatchHook(c *Config, h func(bus.BatchResult, error) (bus.BatchResult, error)) {
	c.NATS.testBatch = h
}
