package processor

import (
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/pgrelay/pgrelay/actors"
)

// The channel kinds a Processor can run besides go (Config.Kinds).
const (
	// KindSQL: the statements of sql channels, run as the Processor's
	// database login.
	KindSQL = "sql"
	// KindEmail: the emails of email channels, sent through Config.SMTPURL.
	KindEmail = "email"
	// KindNATS: the publishes of nats channels, through Config.NATS.
	KindNATS = "nats"
)

// The Processor's modes (Config.Mode).
const (
	// ModeSingle: one primary (or several Processors on one database); every
	// event runs on whichever Processor claims it first.
	ModeSingle = "single"
	// ModeMultiNode: every node of an active-active cluster runs the events
	// it owns (docs/multi-master.md).
	ModeMultiNode = "multi-node"
	// ModeLeader: the node holding the leader lease runs every unrestricted
	// event; every node runs the events pinned to it.
	ModeLeader = "leader"
)

// Config configures a Processor embedded in a program. DatabaseURL is
// required; every other zero value means the default given with it, the
// same as `pgrelay run`'s flag of the same name (docs/user-guide.md).
type Config struct {
	// DatabaseURL is the PostgreSQL connection URL (required). Its login
	// needs pgrelay_processor, and whatever the handlers' own SQL needs.
	DatabaseURL string
	// Kinds lists the channel kinds the Processor runs besides the go
	// channels of its handlers: KindSQL, KindEmail (needs SMTPURL or
	// SMTPChannels) and KindNATS (needs NATS). Default none: the
	// Processor claims only the events of the go channels whose handler it
	// has, and leaves sql, email and nats channels to `pgrelay run`.
	Kinds []string
	// Mode: ModeSingle (default), ModeMultiNode or ModeLeader.
	Mode string
	// NodeID, when set, is applied as pg_relay.node_id on the Processor's
	// sessions (0 to 1023); default: the server's setting.
	NodeID *int
	// Concurrency is the most claimed events in flight at once (default
	// 1000): claimed and not yet ended. Events that direct batches hold
	// count against SQLBatchConcurrency instead.
	Concurrency int
	// BatchSize is the most events one claim takes (default 100), and the
	// most one HandleTxBatch call gets.
	BatchSize int
	// MaxConnections is the most database connections the Processor opens
	// (default 24, at least 10): 4 background, 1 for LISTEN, 1 for the NATS
	// publisher when there is NATS, the rest for claims, batches and
	// handlers.
	MaxConnections int
	// SQLBatch is the most events of one direct batch (default 1000): the
	// events of a 'none' go channel of a HandleTx handler (and, with
	// KindSQL, of a 'none' sql channel) run in one transaction, each under
	// a savepoint of its own, with one commit. 1: each event is claimed and
	// runs in a transaction of its own.
	SQLBatch int
	// SQLBatchConcurrency is the most events the running direct batches
	// hold at once, each until it commits (default 2500). A channel that
	// runs a batch starts another only while a quarter of these (at most
	// SQLBatch) stays free for other channels.
	SQLBatchConcurrency int
	// PollInterval is the fallback poll when no NOTIFY arrives (default
	// 1s); it also picks up retries whose backoff has passed.
	PollInterval time.Duration
	// HeartbeatInterval is how often the Processor marks itself alive in
	// pgrelay.processors and looks for dead instances' claims (default 1s).
	HeartbeatInterval time.Duration
	// DeadAfter: an instance or node silent this long is dead; its claims
	// are rescued, its work adopted; also the leader lease's length
	// (default 10 × HeartbeatInterval).
	DeadAfter time.Duration
	// LeaderSettle: in leader mode, how long a new leader waits before it
	// leads; in multi-node and leader modes, how long a node that was dead
	// runs only its pinned events (default 2s; must exceed the replication
	// lag, twice it for the latter).
	LeaderSettle time.Duration
	// LeaseGrace: a claim held longer than its channel's timeout plus this
	// is rescued even from a live instance (default 1m).
	LeaseGrace time.Duration
	// ShutdownTimeout bounds how long Stop waits for running handlers
	// before it cancels their contexts (default 30s).
	ShutdownTimeout time.Duration
	// LogRetention is how long pgrelay.log rows are kept (default 7 days).
	LogRetention time.Duration
	// LogRetentionUnpublished caps how long log rows not yet published on
	// NATS are kept past LogRetention (default 30 days, at least
	// LogRetention).
	LogRetentionUnpublished time.Duration
	// DeadLetterRetention is how long dead letters are kept after they
	// ended (default 14 days).
	DeadLetterRetention time.Duration
	// JanitorInterval is how often the log and the dead letters are
	// trimmed, and the cancel requests of events pending again applied
	// (default 1m).
	JanitorInterval time.Duration
	// IdleTimeout: a channel's actor with nothing to do for this long is
	// stopped (default 30s).
	IdleTimeout time.Duration
	// NATS, with a URL, publishes the status event of every outcome of its
	// node on NATS (docs/events.md); with KindNATS in Kinds it also runs
	// nats channels. Nil (default): no NATS.
	NATS *NATSConfig
	// SMTPURL is the SMTP server of email channels, with KindEmail in Kinds
	// (smtp://user:pass@host:port or smtps://...; docs/notifier.md).
	// Default: none.
	SMTPURL string
	// SMTPChannels maps an email channel to an SMTP URL of its own
	// (default: none).
	SMTPChannels map[string]string
	// MessageIDDomain is the right-hand side of the Message-IDs of emails
	// (default "pgrelay").
	MessageIDDomain string
	// Logger receives structured logs (default slog.Default()).
	Logger *slog.Logger
	// Registerer receives the Processor's metrics, the pgrelay_* series of
	// `pgrelay run`'s /metrics (docs/operations.md); default none. A
	// program serving Prometheus passes its registry.
	Registerer prometheus.Registerer
	// TracerProvider, when set, receives an OpenTelemetry span for every
	// attempt the Processor runs, of every kind it runs: "process
	// <channel>", linked to the producer's span of Notify when the event
	// was enqueued with a trace context, and in a Go handler's ctx
	// (docs/go.md). The application chooses the SDK and the exporter
	// (go.opentelemetry.io/otel/sdk/trace's provider, or
	// otel.GetTracerProvider()). Default nil: no spans, and none of the
	// queries that read the trace context.
	TracerProvider trace.TracerProvider
}

// NATSConfig is Config.NATS: the NATS server and the JetStream stream of
// status events. Zero values mean the defaults given, those of `pgrelay
// run`'s --nats-* flags.
type NATSConfig struct {
	// URL of the NATS server (or a comma-separated list). Empty: no NATS.
	URL string
	// CredsFile is a NATS credentials file (default none).
	CredsFile string
	// TLSCert, TLSKey: a client certificate and its key; TLSCA: the CA
	// bundle to verify the server with (default none).
	TLSCert, TLSKey, TLSCA string
	// Stream is the JetStream stream of the events (default PGRELAY_EVENTS).
	Stream string
	// MaxAge of the stream's messages: applied when set; when zero a new
	// stream gets 7 days and an existing one keeps its own.
	MaxAge time.Duration
	// Retention of the stream, "limits" or "interest": applied when set;
	// when empty a new stream gets limits and an existing one keeps its own.
	Retention string
	// MaxBytes of the stream: applied when set; when zero a new stream has
	// no size limit and an existing one keeps its own.
	MaxBytes int64
	// Replicas of the stream in a NATS cluster (1..5): applied when set,
	// also to an existing stream; when zero a new stream gets 1 and an
	// existing one keeps its own.
	Replicas int
	// PublishBatch is the most events published per round (default 500).
	PublishBatch int
	// PublishInterval is how often the publisher looks for new events once
	// it has caught up (default 200ms).
	PublishInterval time.Duration
}

// actorsConfig is c as the Processor runs it.
func (c Config) actorsConfig() actors.Config {
	kinds := c.Kinds
	if kinds == nil {
		kinds = []string{} // not nil: none besides go
	}
	ac := actors.Config{
		DatabaseURL:             c.DatabaseURL,
		Kinds:                   kinds,
		Mode:                    c.Mode,
		NodeID:                  c.NodeID,
		Concurrency:             c.Concurrency,
		BatchSize:               c.BatchSize,
		MaxConnections:          c.MaxConnections,
		SQLBatch:                c.SQLBatch,
		SQLBatchConcurrency:     c.SQLBatchConcurrency,
		PollInterval:            c.PollInterval,
		HeartbeatInterval:       c.HeartbeatInterval,
		DeadAfter:               c.DeadAfter,
		LeaderSettle:            c.LeaderSettle,
		LeaseGrace:              c.LeaseGrace,
		ShutdownTimeout:         c.ShutdownTimeout,
		LogRetention:            c.LogRetention,
		LogRetentionUnpublished: c.LogRetentionUnpublished,
		DeadLetterRetention:     c.DeadLetterRetention,
		JanitorInterval:         c.JanitorInterval,
		IdleTimeout:             c.IdleTimeout,
		SMTPURL:                 c.SMTPURL,
		SMTPChannels:            c.SMTPChannels,
		MessageIDDomain:         c.MessageIDDomain,
		Logger:                  c.Logger,
		Registerer:              c.Registerer,
		TracerProvider:          c.TracerProvider,
	}
	if n := c.NATS; n != nil {
		ac.NATS = &actors.NATSConfig{URL: n.URL, CredsFile: n.CredsFile, TLSCert: n.TLSCert,
			TLSKey: n.TLSKey, TLSCA: n.TLSCA, Stream: n.Stream, MaxAge: n.MaxAge,
			Retention: n.Retention, MaxBytes: n.MaxBytes, Replicas: n.Replicas, PublishBatch: n.PublishBatch,
			PublishInterval: n.PublishInterval}
	}
	return ac
}
