package actors

import (
	"time"

	"github.com/pgrelay/pgrelay/events/bus"
	"github.com/pgrelay/pgrelay/internal/version"
)

// deadAfterBeats is DeadAfter's default in heartbeats.
const deadAfterBeats = 10

// Defaults returns the settings a zero field of Config takes: the one
// place the Processor's defaults are set. `pgrelay run`'s flags default to
// them, and docs/reference.md lists them (a test compares). DeadAfter's
// default is 10 × HeartbeatInterval, whatever HeartbeatInterval is set to;
// NATS holds the defaults of a NATSConfig with a URL.
func Defaults() Config {
	return Config{
		Mode:        ModeSingle,
		Concurrency: 1000,
		BatchSize:   100,
		// Two Processors and an application fit PostgreSQL's default
		// max_connections (100) with room to spare.
		MaxConnections: 24,
		// Two batches of 1 000 at once drain a backlog fastest on two cores,
		// as the bench's bare loop does (docs/benchmarks.md).
		SQLBatch:            1000,
		SQLBatchConcurrency: 2500,
		PollInterval:        time.Second,
		HeartbeatInterval:   time.Second,
		DeadAfter:           deadAfterBeats * time.Second,
		LeaseGrace:          time.Minute,
		LeaderSettle:        2 * time.Second,
		ShutdownTimeout:     30 * time.Second,
		LogRetention:        7 * 24 * time.Hour,
		// A NATS outage of up to 30 days loses no status event.
		LogRetentionUnpublished: 30 * 24 * time.Hour,
		DeadLetterRetention:     14 * 24 * time.Hour,
		JanitorInterval:         time.Minute,
		IdleTimeout:             30 * time.Second,
		Version:                 version.Release,
		NATS: &NATSConfig{
			Stream:          bus.DefaultStream,
			PublishBatch:    500,
			PublishInterval: 200 * time.Millisecond,
		},
	}
}

// WithDefaults returns c with the defaults in its zero fields, as New
// fills them in.
func (c Config) WithDefaults() Config {
	c.defaults()
	return c
}
