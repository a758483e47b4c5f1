package actors

import (
	"fmt"
	"strings"
	"time"

	"github.com/pgrelay/pgrelay/events/bus"
	"github.com/pgrelay/pgrelay/internal/handlers"
)

// ConfigError is a Config setting that a Processor refuses. Setting is
// spelled as the `pgrelay run` flag that sets it (Config.DeadAfter:
// "dead-after"), so that the command line reports it as its own.
type ConfigError struct {
	Setting string
	// Problem follows the setting's name: "must be at least 1".
	Problem string
}

func (e *ConfigError) Error() string { return "pgrelay: " + e.Setting + " " + e.Problem }

func refuse(setting, format string, args ...any) error {
	return &ConfigError{Setting: setting, Problem: fmt.Sprintf(format, args...)}
}

// Validate reports the first setting of c that a Processor refuses, as a
// *ConfigError. It checks c as it stands: New fills in the defaults of zero
// settings before it calls Validate, so a zero Concurrency passes New but
// not Validate. DeadAfter zero (10 × HeartbeatInterval), an empty Mode
// (single), and the settings Validate does not name stand for their
// defaults.
func (c *Config) Validate() error {
	switch c.Mode {
	case "", ModeSingle, ModeMultiNode, ModeLeader:
	default:
		return refuse("mode", "%q: unknown mode (expected single, multi-node or leader)", c.Mode)
	}
	if c.NodeID != nil && (*c.NodeID < 0 || *c.NodeID > 1023) {
		return refuse("node-id", "%d: expected 0..1023", *c.NodeID)
	}
	for _, s := range []struct {
		name string
		v    int
	}{{"concurrency", c.Concurrency}, {"batch-size", c.BatchSize}, {"sql-batch", c.SQLBatch},
		{"sql-batch-concurrency", c.SQLBatchConcurrency}} {
		if s.v < 1 {
			return refuse(s.name, "must be at least 1")
		}
	}
	if c.MaxConnections < minTotalConns {
		return refuse("max-connections", "must be at least %d (%d background, %d LISTEN, %d NATS publisher, "+
			"%d for claims, batches and handlers)", minTotalConns, bgConns, listenConns, publishConns, minHotConns)
	}
	for _, s := range []struct {
		name string
		d    time.Duration
	}{{"poll-interval", c.PollInterval}, {"heartbeat-interval", c.HeartbeatInterval},
		{"shutdown-timeout", c.ShutdownTimeout}, {"log-retention", c.LogRetention},
		{"log-retention-unpublished", c.LogRetentionUnpublished},
		{"dead-letter-retention", c.DeadLetterRetention}} {
		if s.d <= 0 {
			return refuse(s.name, "must be positive")
		}
	}
	for _, s := range []struct {
		name string
		d    time.Duration
	}{{"dead-after", c.DeadAfter}, {"lease-grace", c.LeaseGrace}, {"leader-settle", c.LeaderSettle}} {
		if s.d < 0 {
			return refuse(s.name, "must not be negative")
		}
	}
	if c.DeadAfter != 0 && c.DeadAfter <= c.HeartbeatInterval {
		return refuse("dead-after", "(%s) must be longer than the heartbeat interval (%s)",
			c.DeadAfter, c.HeartbeatInterval)
	}
	if c.natsOn() {
		if err := c.NATS.validate(); err != nil {
			return err
		}
	}
	if err := c.emailConfig().Validate(); err != nil {
		return fmt.Errorf("pgrelay: %w", err)
	}
	if err := c.validateKinds(); err != nil {
		return err
	}
	for name, h := range c.GoHandlers {
		if !handlers.GoHandlerName.MatchString(name) {
			return refuse("go handler", "%q: not a valid name (1 to 100 letters, digits, \"_\", \".\" or \"-\", "+
				"starting with a letter or \"_\")", name)
		}
		if (h.Fn == nil) == (h.Batch == nil) {
			return refuse("go handler", "%q: needs exactly one of a function and a batch function", name)
		}
	}
	return nil
}

// validate checks the NATS settings as they stand (see Config.Validate).
func (n *NATSConfig) validate() error {
	switch {
	case n.PublishBatch < 1 || n.PublishBatch > 4000:
		// 4000: below the client's limit of unacknowledged async publishes.
		return refuse("nats-publish-batch", "%d: expected 1..4000", n.PublishBatch)
	case n.PublishInterval <= 0:
		return refuse("nats-publish-interval", "must be positive")
	case n.MaxAge < 0:
		return refuse("nats-max-age", "must not be negative")
	case n.MaxBytes < 0:
		return refuse("nats-max-bytes", "must not be negative")
	case n.Replicas < 0 || n.Replicas > bus.MaxReplicas:
		return refuse("nats-replicas", "%d: expected 1..%d (a copy of the stream on each of that many servers "+
			"of the NATS cluster)", n.Replicas, bus.MaxReplicas)
	case n.Retention != "" && n.Retention != bus.RetentionLimits && n.Retention != bus.RetentionInterest:
		return refuse("nats-retention", "%q: expected %s or %s (work-queue retention would allow only one "+
			"consumer of the events)", n.Retention, bus.RetentionLimits, bus.RetentionInterest)
	case strings.ContainsAny(n.Stream, " \t\r\n.*>/\\"):
		return refuse("nats-stream", "%q: no spaces, '.', '*', '>', '/' or '\\' in a stream name", n.Stream)
	case (n.TLSCert == "") != (n.TLSKey == ""):
		return refuse("nats-tls-cert", "and --nats-tls-key go together: a client certificate needs its key")
	}
	return nil
}
