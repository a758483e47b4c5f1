// Package actors is the Processor: the actor tree that claims queued events,
// runs their handlers and records every outcome (docs/architecture.md).
//
//	relay (supervisor: restarts a failed child with backoff)
//	├── claimer     wakes on LISTEN/NOTIFY and a fallback poll; claims the
//	│               events batches do not run (email, nats; every kind with
//	│               --sql-batch 1) into the free slots, and reports the sql
//	│               channels and lanes ready for batches
//	├── dispatcher  routes each claimed event to its channel's actor, and each
//	│   │           ready sql channel to its batcher
//	│   ├── channel actors (one per channel, spawned on demand, stopped when idle)
//	│   │   └── lane actors (one per payload, in 'payload' mode)
//	│   ├── batchers (one per 'none' sql channel, or 'none' go channel of a
//	│   │           HandleTx handler): direct batches, each one transaction
//	│   │           that locks, runs and records its events
//	│   └── lane batcher (the 'channel' and 'payload' sql channels): lane
//	│               batches, one event per lane in one transaction
//	├── completer   writes the outcomes of claimed events to the log in batches
//	├── heartbeat   keeps this instance and its node alive in
//	│               pgrelay.processors and pgrelay.nodes; answers other
//	│               nodes' asks
//	├── rescuer     rescues claims of dead instances, adopts dead nodes'
//	│               work, ends a rejoin
//	├── leader      (leader mode) holds the leader lease: the election
//	├── janitor     trims pgrelay.log past its retention
//	├── scheduler   fires the periodic events of pgrelay.schedules this node
//	│               may fire, each tick once
//	└── publisher   publishes the log's events on NATS (only with NATS)
//
// The durable truth is always in PostgreSQL: actors hold only claims, and a
// claim that an actor loses (crash, lost connection, kill -9 of the process)
// is released or rescued back to pending. A batch writes no claim: its
// transaction commits whole or rolls back, leaving its rows pending.
package actors

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/pgrelay/pgrelay/events/bus"
	"github.com/pgrelay/pgrelay/events/store"
	"github.com/pgrelay/pgrelay/internal/handlers"
	"github.com/pgrelay/pgrelay/internal/handlers/email"
	"github.com/pgrelay/pgrelay/migrations"
)

// maxHotConns bounds the hot-path pool (plus a few for claims and
// completions) whatever the concurrency: handlers waiting for a connection
// wait without their timeout running.
const maxHotConns = 64

// Connections besides the hot pool: the background pool, the LISTEN
// connection, and the NATS publisher's own (with NATS).
const (
	bgConns       = 4
	listenConns   = 1
	publishConns  = 1
	minHotConns   = 4
	minTotalConns = bgConns + listenConns + publishConns + minHotConns
)

// Modes a Processor runs in.
const (
	// ModeSingle: one primary (or several Processors on one database); every
	// row is dispatched by whichever Processor claims it first.
	ModeSingle = "single"
	// ModeMultiNode: every node of an active-active cluster dispatches the
	// rows it owns (enqueued on it, or adopted from a dead node) and the rows
	// pinned to it.
	ModeMultiNode = "multi-node"
	// ModeLeader: the node holding the leader lease dispatches every
	// unrestricted row; every node dispatches the rows pinned to it.
	ModeLeader = "leader"
)

// Config configures a Processor. Zero values mean the defaults (Defaults).
type Config struct {
	// DatabaseURL is the PostgreSQL connection URL (required).
	DatabaseURL string
	// Mode: "single" (default), "multi-node" or "leader".
	Mode string
	// NodeID, when set, is applied as pg_relay.node_id on the Processor's own
	// sessions; otherwise the server's setting is used.
	NodeID *int
	// Concurrency is the most claimed events in flight at once (default
	// 1000): claimed and not yet ended. Events that sql batches hold count
	// against SQLBatchConcurrency instead.
	Concurrency int
	// BatchSize is the most rows one claim takes (default 100).
	BatchSize int
	// MaxConnections is the most database connections the Processor opens
	// (default 24, at least 10): 4 background, 1 for
	// LISTEN, 1 for the NATS publisher when there is NATS, the rest for the
	// hot pool (claims, batches, handlers, completions), which never grows
	// past min(Concurrency + SQLBatchConcurrency, 64) + 4.
	MaxConnections int
	// SQLBatch is the most events of one sql batch (default 1000): events of
	// one 'none' sql channel, or the heads of many lanes of 'channel' and
	// 'payload' sql channels, run in one transaction, each under its own
	// savepoint. A batch claims its rows by locking them and records their
	// outcomes in the same transaction: one commit for the batch. 1 runs sql
	// channels like the others: a claim, then a transaction per event.
	// The 'none' go channels of HandleTx handlers run in such direct
	// batches too, a Go function in place of each statement (1: each event
	// claimed, in a transaction of its own).
	SQLBatch int
	// SQLBatchConcurrency is the most events the running sql batches hold
	// at once, each until it commits (default 2500). A channel that runs a
	// batch starts another only while a quarter of these (at most SQLBatch)
	// stays free for other channels' batches.
	SQLBatchConcurrency int
	// PollInterval is the fallback poll when no NOTIFY arrives (default 1s); it
	// also picks up retries whose backoff has passed.
	PollInterval time.Duration
	// HeartbeatInterval is how often the instance marks itself alive and looks
	// for dead instances' claims (default 1s).
	HeartbeatInterval time.Duration
	// DeadAfter: an instance with no heartbeat for this long is dead and its
	// claims are rescued; a node with no heartbeat for this long is dead and
	// its work is adopted (multi-node, leader); it is also the leader lease's
	// duration (default 10 × HeartbeatInterval).
	DeadAfter time.Duration
	// LeaderSettle: how long a node that took the leader lease waits, then
	// reads the lease again, before it dispatches as the leader. It must exceed
	// the replication lag between nodes (default 2s). It is also the rejoin
	// settle: a node that comes back after being dead or adopted dispatches
	// only the rows pinned to it for this long before it claims unrestricted
	// rows (multi-node and leader modes), so that an adoption still on its
	// way reaches it first; for that it must exceed twice the lag.
	LeaderSettle time.Duration
	// LeaseGrace: a claim held longer than its channel's timeout plus this is
	// rescued even from a live instance (default 1m).
	LeaseGrace time.Duration
	// ShutdownTimeout bounds how long Stop waits for in-flight handlers before
	// cancelling them (default 30s).
	ShutdownTimeout time.Duration
	// LogRetention is how long pgrelay.log rows are kept (default 7 days).
	// Rows that the NATS publisher of their node has not published yet are
	// kept longer, up to LogRetentionUnpublished.
	LogRetention time.Duration
	// LogRetentionUnpublished is the cap on how long log rows that the NATS
	// publisher of their node (a node with a publish cursor) has not
	// published are kept past LogRetention (default 30 days; never less than
	// LogRetention). Past it they are deleted all the same: the janitor logs
	// an error with the count and ids, counts them in
	// pgrelay_log_unpublished_dropped_total and records them in
	// pgrelay.log_dropped.
	LogRetentionUnpublished time.Duration
	// DeadLetterRetention is how long dead letters (pgrelay.dead_letters:
	// events that ended gave_up or expired, kept with their payloads for
	// pgrelay.retry) are kept after they ended (default 14 days).
	DeadLetterRetention time.Duration
	// JanitorInterval is how often the log and the dead letters are trimmed
	// (default 1m).
	JanitorInterval time.Duration
	// IdleTimeout: a channel or lane actor with nothing to do for this long is
	// stopped (default 30s).
	IdleTimeout time.Duration
	// Handlers overrides or adds handlers by channel kind. "sql" is built in.
	Handlers handlers.Registry
	// GoHandlers are the Go handlers of channels of kind go, by handler
	// name: the Processor claims the events of the go channels naming one of
	// them, and leaves the others pending (the processor package's Handle and
	// HandleTx fill it in).
	GoHandlers map[string]handlers.GoHandler
	// Kinds, when not nil, are the only channel kinds the Processor runs
	// besides the go channels of GoHandlers: of "sql", "email" (with an SMTP
	// server), "nats" (with NATS) and the keys of Handlers. Nil: every kind
	// it has a handler for (`pgrelay run`). An embedded Processor sets it
	// (the processor package's Config.Kinds).
	Kinds []string
	// NATS, with a URL, publishes every log event on NATS and runs the
	// channels of kind nats (docs/events.md). Nil or no URL: no NATS.
	NATS *NATSConfig
	// SMTPURL is the SMTP server of email channels (smtp://user:pass@host:port,
	// smtps://...; options in docs/notifier.md). With SMTPURL or SMTPChannels
	// set the Processor runs email channels; without, it leaves them pending.
	SMTPURL string
	// SMTPChannels maps an email channel to its own SMTP URL.
	SMTPChannels map[string]string
	// MessageIDDomain is the right-hand side of the Message-IDs of emails
	// (default "pgrelay").
	MessageIDDomain string
	// Logger receives structured logs (default slog.Default()).
	Logger *slog.Logger
	// Registerer receives the Processor's metrics (default: none).
	Registerer prometheus.Registerer
	// TracerProvider, when set, receives a span for every attempt the
	// Processor runs, linked to the producer's span when the event has a
	// trace context (one more query per claim or batch reads it). Nil
	// (default): no spans, and no query.
	TracerProvider trace.TracerProvider
	// Version is the release this Processor reports: in pgrelay.processors
	// (the console, pgrelay nodes), in the pgrelay_build_info metric and
	// to NATS (default: pgrelay's release, internal/version).
	Version string

	// testHook, when set (by tests only), sees every message an actor
	// receives before the actor does; a panic in it is a panic of the actor.
	testHook func(actor string, msg any)
}

// defaults fills in the defaults of zero settings (Defaults).
func (c *Config) defaults() {
	d := Defaults()
	setDefault(&c.Mode, d.Mode)
	setDefault(&c.Concurrency, d.Concurrency)
	setDefault(&c.BatchSize, d.BatchSize)
	setDefault(&c.MaxConnections, d.MaxConnections)
	setDefault(&c.SQLBatch, d.SQLBatch)
	setDefault(&c.SQLBatchConcurrency, d.SQLBatchConcurrency)
	setDefault(&c.PollInterval, d.PollInterval)
	setDefault(&c.HeartbeatInterval, d.HeartbeatInterval)
	setDefault(&c.DeadAfter, deadAfterBeats*c.HeartbeatInterval)
	setDefault(&c.LeaseGrace, d.LeaseGrace)
	setDefault(&c.LeaderSettle, d.LeaderSettle)
	setDefault(&c.ShutdownTimeout, d.ShutdownTimeout)
	setDefault(&c.LogRetention, d.LogRetention)
	setDefault(&c.LogRetentionUnpublished, d.LogRetentionUnpublished)
	c.LogRetentionUnpublished = max(c.LogRetentionUnpublished, c.LogRetention)
	setDefault(&c.DeadLetterRetention, d.DeadLetterRetention)
	setDefault(&c.JanitorInterval, d.JanitorInterval)
	setDefault(&c.IdleTimeout, d.IdleTimeout)
	setDefault(&c.Version, d.Version)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	c.natsDefaults(*d.NATS)
}

func (c *Config) emailConfig() email.Config {
	return email.Config{Default: c.SMTPURL, Channels: c.SMTPChannels, MessageIDDomain: c.MessageIDDomain,
		Logger: c.Logger}
}

func setDefault[T comparable](v *T, d T) {
	var zero T
	if *v == zero {
		*v = d
	}
}

// Processor claims and dispatches events. Start it, then Stop it.
type Processor struct {
	cfg     Config
	d       *deps
	hot     *pgxpool.Pool
	bg      *pgxpool.Pool
	root    *actor.PID
	cancel  context.CancelFunc // cancels runCtx: in-flight handlers
	listen  *listener          // nil until the tree is up
	stopped sync.Once
	stopErr error
	closers []io.Closer        // handlers holding connections of their own
	backlog *DatabaseCollector // registered on cfg.Registerer while the pools are open
	bus     *bus.Conn          // nil without NATS
}

// New fills in cfg's defaults, validates it and prepares a Processor; it
// connects nothing yet.
func New(cfg Config) (*Processor, error) {
	if cfg.DatabaseURL == "" {
		return nil, errors.New("pgrelay: a database URL is required (--database-url or PGRELAY_DATABASE_URL)")
	}
	cfg.defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Processor{cfg: cfg}, nil
}

// hotConns is the size of the hot pool: what MaxConnections leaves, and no
// more than the slots can use.
func (c *Config) hotConns() int {
	return min(c.MaxConnections-c.otherConns(), min(c.Concurrency+c.SQLBatchConcurrency, maxHotConns)+4)
}

// otherConns is what the Processor opens besides the hot pool: the
// background pool, the LISTEN connection and, with NATS, the publisher's.
func (c *Config) otherConns() int {
	if c.NATS != nil && c.NATS.URL != "" {
		return bgConns + listenConns + publishConns
	}
	return bgConns + listenConns
}

// Connections is the most database connections the Processor opens.
func (p *Processor) Connections() int { return p.cfg.hotConns() + p.cfg.otherConns() }

// ID is the instance id in pgrelay.processors (0 before Start).
func (p *Processor) ID() int64 {
	if p.d == nil {
		return 0
	}
	return p.d.processor
}

// Metrics returns the Processor's collectors (nil before Start).
func (p *Processor) Metrics() *Metrics {
	if p.d == nil {
		return nil
	}
	return p.d.metrics
}

func (p *Processor) poolConfig(maxConns int32, app string) (*pgxpool.Config, error) {
	pc, err := pgxpool.ParseConfig(p.cfg.DatabaseURL)
	if err != nil {
		return nil, fmt.Errorf("pgrelay: invalid database URL: %w", err)
	}
	pc.MaxConns = maxConns
	rp := pc.ConnConfig.RuntimeParams
	if rp["application_name"] == "" {
		rp["application_name"] = app
	}
	if p.cfg.NodeID != nil {
		rp["pg_relay.node_id"] = strconv.Itoa(*p.cfg.NodeID)
	}
	return pc, nil
}

// warmHotConns is how many hot connections are opened before the Processor
// starts and kept open: the first events after a start do not wait for
// the server to start backends for them.
const warmHotConns = 4

// warmWait is how long Start waits for the hot pool's first connections
// before it opens them itself (which returns the server's refusal, that the
// pool's own attempts keep to themselves).
const warmWait = 5 * time.Second

// warm waits for the n connections the pool opens by itself (MinConns),
// hearing of each on warmed, or, after wait, opens n itself. Opening them
// at once as well would start twice as many backends as the pool keeps,
// each compiling and planning pgrelay's statements.
func warm(ctx context.Context, pool *pgxpool.Pool, n int, warmed <-chan struct{}, wait time.Duration) error {
	t := time.NewTimer(wait)
	defer t.Stop()
	for got := 0; got < n; got++ {
		select {
		case <-warmed:
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			return acquireAll(ctx, pool, n)
		}
	}
	return nil
}

// acquireAll opens n connections of pool at once and gives them back.
func acquireAll(ctx context.Context, pool *pgxpool.Pool, n int) error {
	conns := make([]*pgxpool.Conn, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { conns[i], errs[i] = pool.Acquire(ctx) })
	}
	wg.Wait()
	for _, c := range conns {
		if c != nil {
			c.Release()
		}
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// Start checks that the database's pgrelay schema is the one this version
// needs (migrations.RequireLatest: run `pgrelay migrate`, or migrations.Up,
// first), connects, registers the instance and starts the actor tree. It
// returns once the Processor is claiming.
func (p *Processor) Start(ctx context.Context) error {
	// Each resource is pushed on undo as it is acquired. A Start that fails
	// returns through the deferred unwind, which releases them in reverse
	// and leaves Stop nothing to do; a Start that succeeds hands them to Stop.
	var undo undoStack
	defer func() {
		if undo.pending() {
			p.stopped.Do(undo.unwind)
		}
	}()

	// Slots are events, and a batch runs many on one connection: the hot
	// pool need not grow with the slots past what the server and the
	// handlers can use at once.
	hotCfg, err := p.poolConfig(int32(p.cfg.hotConns()), "pgrelay")
	if err != nil {
		return err
	}
	bgCfg, err := p.poolConfig(bgConns, "pgrelay-background")
	if err != nil {
		return err
	}
	// pgrelay's background statements run under its own search_path; the
	// hot pool keeps the login's, which the handlers' SQL may rely on.
	store.PinSearchPath(bgCfg.ConnConfig)
	hotCfg.MinConns = min(warmHotConns, hotCfg.MaxConns)
	stmts := &store.Statements{}
	// warmed hears of each hot connection the pool readied.
	warmed := make(chan struct{}, hotCfg.MaxConns)
	hotCfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		if err := stmts.Warm(ctx, c); err != nil {
			return err
		}
		select {
		case warmed <- struct{}{}:
		default:
		}
		return nil
	}
	bg, err := pgxpool.NewWithConfig(ctx, bgCfg)
	if err != nil {
		return fmt.Errorf("pgrelay: connect: %w", err)
	}
	undo.push(bg.Close)
	// The hot pool opens its connections while the schema is checked. One
	// that finds no pgrelay schema prepares nothing, and one that fails to
	// prepare on an older schema is dropped; either way RequireLatest then
	// refuses the start, and on the latest schema they are ready.
	hot, err := pgxpool.NewWithConfig(ctx, hotCfg)
	if err != nil {
		return fmt.Errorf("pgrelay: connect: %w", err)
	}
	undo.push(hot.Close)
	if err := migrations.RequireLatest(ctx, bg); err != nil {
		return fmt.Errorf("pgrelay: %w", err)
	}
	if err := warm(ctx, hot, int(hotCfg.MinConns), warmed, warmWait); err != nil {
		return fmt.Errorf("pgrelay: connect: %w", err)
	}
	p.hot, p.bg = hot, bg
	st := store.New(hot, bg, stmts)

	metrics, err := NewMetrics(p.cfg.Registerer)
	if err != nil {
		return fmt.Errorf("pgrelay: register metrics: %w", err)
	}
	if p.cfg.Registerer != nil && p.cfg.natsOn() {
		if err := metrics.Events.register(p.cfg.Registerer); err != nil {
			return fmt.Errorf("pgrelay: register metrics: %w", err)
		}
	}
	if p.cfg.Registerer != nil {
		if err := p.cfg.Registerer.Register(newBuildInfo(p.cfg.Version)); err != nil {
			return fmt.Errorf("pgrelay: register metrics: %w", err)
		}
		backlog := NewDatabaseCollector(DatabaseCollectorConfig{DB: bg, DeadAfter: p.cfg.DeadAfter,
			Errors: metrics.DBErrors, Channel: metrics.initChannel, Logger: p.cfg.Logger})
		if err := p.cfg.Registerer.Register(backlog); err != nil {
			return fmt.Errorf("pgrelay: register metrics: %w", err)
		}
		p.backlog = backlog
		undo.push(func() { p.cfg.Registerer.Unregister(backlog) })
	}
	host, _ := os.Hostname()
	info := store.ProcessorInfo{Mode: p.cfg.Mode, Hostname: host, PID: os.Getpid(), Version: p.cfg.Version}
	// Read before this instance's first heartbeat marks the node alive.
	rejoin, err := rejoining(ctx, st, p.cfg)
	if err != nil {
		return fmt.Errorf("pgrelay: %w", err)
	}
	// The node id producers stamp is the one the Processors of the node
	// run with (they cannot set their own).
	recorded, err := st.RecordNode(ctx)
	if err != nil {
		return fmt.Errorf("pgrelay: %w", err)
	}
	procID, node, err := st.StartProcessor(ctx, info)
	if err != nil {
		return fmt.Errorf("pgrelay: %w", err)
	}
	logger := p.cfg.Logger.With("processor", procID, "node", node)
	undo.push(func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if _, err := st.StopProcessor(sctx, procID); err != nil {
			logger.Warn("abort start: unregister", "err", err)
		}
	})

	reg := handlers.Registry{"sql": handlers.SQL{Store: st}}
	if ec := p.cfg.emailConfig(); ec.Enabled() {
		h, err := email.New(st, ec)
		if err != nil {
			return fmt.Errorf("pgrelay: %w", err)
		}
		undo.push(func() { _ = h.Close() })
		reg["email"] = h
		p.closers = append(p.closers, h)
	}
	if err := p.startNATS(reg, metrics, &undo); err != nil {
		return err
	}
	for k, h := range p.cfg.Handlers {
		reg[k] = h
	}
	p.cfg.limitKinds(reg)
	kinds := make([]string, 0, len(reg)+len(p.cfg.GoHandlers))
	for k := range reg {
		kinds = append(kinds, k)
	}
	var names []string
	if len(p.cfg.GoHandlers) > 0 {
		// Claimed by name: a Processor is offered only the go channels
		// whose handler it has.
		reg["go"] = handlers.Go{Store: st, Handlers: p.cfg.GoHandlers}
		for name := range p.cfg.GoHandlers {
			names = append(names, name)
			kinds = append(kinds, store.GoKind(name))
		}
		if err := st.SetGoHandlers(ctx, procID, names); err != nil {
			return fmt.Errorf("pgrelay: %w", err)
		}
	}
	// Direct batches run the built-in sql handler's statements themselves.
	_, builtinSQL := reg["sql"].(handlers.SQL)
	direct := builtinSQL && p.cfg.SQLBatch > 1
	// So do the 'none' go channels of HandleTx handlers, unless SQLBatch is 1
	// (a transaction per event): Handle runs outside a transaction,
	// HandleTxBatch as one call.
	var directGo []string
	if gh, ok := reg["go"].(handlers.Go); ok && p.cfg.SQLBatch > 1 {
		for _, name := range names {
			if gh.IsTx(name) {
				directGo = append(directGo, store.GoKind(name))
			}
		}
	}

	if recorded != node {
		logger.Warn("this database's node id changed: producers' events are stamped with this Processor's node id from now on",
			"was", recorded)
	}
	// The actor system's own messages (started, dead letters after a stop)
	// are routine: only its warnings and errors reach the log.
	actorLog := slog.New(minLevel{Handler: logger.Handler(), min: slog.LevelWarn}).With("component", "actor")
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return actorLog
	}))
	runCtx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	undo.push(cancel)
	p.d = &deps{
		cfg: p.cfg, store: st, handlers: reg, kinds: kinds, goHandlers: names, direct: direct, directGo: directGo, metrics: metrics, log: logger, bus: p.bus,
		processor: procID, node: node, hints: &wakeHints{}, armDue: make(chan struct{}, 1), info: info, runCtx: runCtx,
		tracing: newTracing(p.cfg.TracerProvider), actorIDs: actorIDs{system: system},
	}
	p.d.slots = newSlots(p.cfg.Concurrency, metrics.InFlight, p.d.notifySlotsFreed)
	p.d.batchSlots = newSlots(p.cfg.SQLBatchConcurrency, metrics.BatchSlotsInUse, p.d.notifyBatchSlotsFreed)
	if rejoin {
		p.d.rejoinUntil = time.Now().Add(p.cfg.LeaderSettle)
		p.d.rejoining.Store(true)
		logger.Warn("this node had been dead or adopted: dispatching only rows pinned to it until every other "+
			"node has answered (or, for a node that looks dead, the settle has passed), so that an adoption "+
			"still replicating reaches it first", "settle", p.cfg.LeaderSettle)
	}

	ready := make(chan struct{})
	root, err := system.Root.SpawnNamed(relayProps(p.d, ready), "relay")
	if err != nil {
		return fmt.Errorf("pgrelay: start actor tree: %w", err)
	}
	p.root = root
	d := p.d
	undo.push(func() {
		// Handlers first, so that the tree stops at once.
		cancel()
		if err := system.Root.PoisonFuture(root).Wait(); err != nil {
			logger.Warn("abort start: actor tree", "err", err)
		}
		d.work.Wait()
		system.Shutdown()
	})
	select {
	case <-ready:
	case <-ctx.Done():
		// Stopped before the tree was up.
		return ctx.Err()
	}

	p.listen = startListener(p.d, hotCfg)
	undo.release()
	logger.Info("processor started", "mode", p.cfg.Mode, "concurrency", p.cfg.Concurrency,
		"sql_batch", p.cfg.SQLBatch, "sql_batch_concurrency", p.cfg.SQLBatchConcurrency, "kinds", kinds)
	return nil
}

// Run starts the Processor and stops it gracefully when ctx is done.
func (p *Processor) Run(ctx context.Context) error {
	if err := p.Start(ctx); err != nil {
		return err
	}
	<-ctx.Done()
	return p.Stop(context.WithoutCancel(ctx))
}

// Stop stops gracefully: stop claiming; let in-flight handlers finish within
// ShutdownTimeout, releasing events that had not started; then cancel what is
// still running (released, not counted as attempts); write every outcome;
// unregister the instance. Safe to call more than once.
func (p *Processor) Stop(ctx context.Context) error {
	p.stopped.Do(func() { p.stopErr = p.stop(ctx) })
	return p.stopErr
}

func (p *Processor) stop(ctx context.Context) error {
	if p.d == nil {
		return nil
	}
	d := p.d
	root := d.system.Root
	claimer, dispatcher, completer := d.pids()
	log := d.log
	start := time.Now()

	// 1. Stop claiming (waits for a claim in progress to be handed over).
	if _, err := root.RequestFuture(claimer, &stopClaiming{}, 30*time.Second).Result(); err != nil {
		log.Warn("stop: claimer did not confirm", "err", err)
	}
	// 2. Drain: unstarted events are released, running ones may finish.
	if _, err := root.RequestFuture(dispatcher, &drain{}, p.cfg.ShutdownTimeout).Result(); err != nil {
		log.Warn("stop: in-flight handlers still running at the shutdown timeout; cancelling them",
			"timeout", p.cfg.ShutdownTimeout)
		p.cancel()
		if _, err := root.RequestFuture(dispatcher, &drain{}, 30*time.Second).Result(); err != nil {
			log.Error("stop: handlers did not return after cancellation", "err", err)
		}
	}
	p.cancel()
	// 3. Write every outcome.
	if _, err := root.RequestFuture(completer, &flushAll{}, 60*time.Second).Result(); err != nil {
		log.Error("stop: could not write all outcomes; their claims are released below", "err", err)
	}
	// 4. Stop the tree and the listener, once the batches have reported.
	d.batches.Wait()
	p.listen.Stop()
	if err := root.PoisonFuture(p.root).Wait(); err != nil {
		log.Warn("stop: actor tree", "err", err)
	}
	d.work.Wait()
	d.system.Shutdown()
	// 5. Release anything still held and unregister; hand the leader lease
	// over at once rather than let it run out.
	var err error
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if term := max(d.leaderTerm.Swap(0), d.leaseTerm.Load()); term > 0 {
		if lerr := d.store.LeaseRelease(sctx, term); lerr != nil {
			log.Warn("stop: could not release the leader lease; it runs out after dead-after", "err", lerr)
		}
	}
	released, serr := d.store.StopProcessor(sctx, d.processor)
	if serr != nil {
		err = fmt.Errorf("pgrelay: stop: %w", serr)
		log.Error("stop: could not unregister; claims will be rescued when the heartbeat lapses", "err", serr)
	} else if released > 0 {
		log.Warn("stop: released claims that had no outcome", "released", released)
	}
	p.closePools()
	log.Info("processor stopped", "took", time.Since(start).Round(time.Millisecond))
	return err
}

// closePools closes, at Stop, the database pools and the handlers' own
// connections.
func (p *Processor) closePools() {
	if p.backlog != nil {
		p.cfg.Registerer.Unregister(p.backlog)
		p.backlog = nil
	}
	for _, c := range p.closers {
		_ = c.Close()
	}
	p.closers = nil
	if p.hot != nil {
		p.hot.Close()
	}
	if p.bg != nil {
		p.bg.Close()
	}
}

// Ping checks that the database answers.
func (p *Processor) Ping(ctx context.Context) error {
	if p.bg == nil {
		return errors.New("pgrelay: processor not started")
	}
	return p.bg.Ping(ctx)
}

// undoStack holds the undo of each resource acquired so far.
type undoStack []func()

// push records the undo of a resource just acquired.
func (u *undoStack) push(undo func()) { *u = append(*u, undo) }

// pending reports whether any undo is still held.
func (u *undoStack) pending() bool { return len(*u) > 0 }

// unwind runs the undos, last acquired first.
func (u *undoStack) unwind() {
	for i := len(*u) - 1; i >= 0; i-- {
		(*u)[i]()
	}
	*u = nil
}

// release hands the resources over: nothing is undone.
func (u *undoStack) release() { *u = nil }

// minLevel passes on records at min or above.
type minLevel struct {
	slog.Handler
	min slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h minLevel) WithAttrs(attrs []slog.Attr) slog.Handler {
	return minLevel{Handler: h.Handler.WithAttrs(attrs), min: h.min}
}

func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{Handler: h.Handler.WithGroup(name), min: h.min}
}
