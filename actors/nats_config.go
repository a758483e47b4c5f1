package actors

import (
	"fmt"
	"strings"
	"time"

	"github.com/pgrelay/pgrelay/events/bus"
	"github.com/pgrelay/pgrelay/internal/handlers"
)

// NATSConfig connects a Processor to NATS (docs/events.md): its publisher
// publishes every log event (and notifier status change) of its node, and it
// runs the channels of kind nats. Zero values mean the documented defaults.
type NATSConfig struct {
	// URL of the NATS server (or a comma-separated list). Empty: no NATS.
	URL string
	// CredsFile is a NATS credentials file.
	CredsFile string
	// TLSCert, TLSKey: a client certificate and its key; TLSCA: the CA bundle
	// to verify the server with.
	TLSCert, TLSKey, TLSCA string
	// Stream is the JetStream stream of the events (default PGRELAY_EVENTS).
	Stream string
	// MaxAge of the stream's messages: applied to the stream when set; when
	// zero a new stream gets 7 days and an existing one keeps its own.
	MaxAge time.Duration
	// Retention of the stream: "limits" or "interest" (bus.RetentionLimits,
	// bus.RetentionInterest); applied when set, else a new stream gets
	// limits and an existing one keeps its own.
	Retention string
	// MaxBytes of the stream: applied when set; when zero a new stream has
	// no size limit and an existing one keeps its own.
	MaxBytes int64
	// Replicas of the stream in a NATS cluster (1..5): applied when set,
	// also to an existing stream (the servers add or drop copies in place);
	// when zero a new stream gets 1 and an existing one keeps its own.
	Replicas int
	// PublishBatch is the most events published per round (default 500):
	// one log query, one burst of publishes, one wait for the acks and one
	// cursor update each.
	PublishBatch int
	// PublishInterval is how often the publisher looks for new events when
	// it has caught up (default 200ms).
	PublishInterval time.Duration

	// testBatch, when set (by tests only), sees and may change the outcome
	// of every batch the publisher sent.
	testBatch func(bus.BatchResult, error) (bus.BatchResult, error)
	// testSourceBatch is testBatch told the batch's source.
	testSourceBatch func(string, bus.BatchResult, error) (bus.BatchResult, error)
	// testStored, when set (by tests only), sees and may change the outcome
	// of every read of the stream for events stored without acknowledgement.
	testStored func(map[string]bool, error) (map[string]bool, error)
}

// natsOn reports whether NATS is configured.
func (c *Config) natsOn() bool { return c.NATS != nil && strings.TrimSpace(c.NATS.URL) != "" }

// natsDefaults fills in the NATS settings' defaults (d: Defaults().NATS).
func (c *Config) natsDefaults(d NATSConfig) {
	if !c.natsOn() {
		return
	}
	n := *c.NATS // a copy: the caller's struct stays as given
	c.NATS = &n
	setDefault(&n.Stream, d.Stream)
	setDefault(&n.PublishBatch, d.PublishBatch)
	setDefault(&n.PublishInterval, d.PublishInterval)
}

// startNATS connects to NATS (an unreachable server is retried in the
// background: the Processor starts and dispatches regardless) and adds the
// nats handler kind to reg; the connection's Close goes on undo.
func (p *Processor) startNATS(reg handlers.Registry, metrics *Metrics, undo *undoStack) error {
	if !p.cfg.natsOn() {
		return nil
	}
	n := p.cfg.NATS
	conn, err := bus.Connect(bus.Options{URL: n.URL, CredsFile: n.CredsFile, TLSCert: n.TLSCert,
		TLSKey: n.TLSKey, TLSCA: n.TLSCA, Name: "pgrelay " + p.cfg.Version,
		Logger: p.cfg.Logger.With("component", "nats")})
	if err != nil {
		return fmt.Errorf("pgrelay: %w", err)
	}
	undo.push(func() { _ = conn.Close() })
	p.bus = conn
	p.closers = append(p.closers, conn)
	reg["nats"] = handlers.NATS{Bus: conn, OnTooLarge: func(ev handlers.Event) {
		metrics.Events.HandlerTooLarge.WithLabelValues(ev.Channel).Inc()
	}}
	return nil
}
