package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/pgrelay/pgrelay/actors"
	"github.com/pgrelay/pgrelay/events/store"
	"github.com/pgrelay/pgrelay/internal/handlers/email"
	"github.com/pgrelay/pgrelay/migrations"
)

// processorFlags are the flags of `pgrelay run` (and `pgrelay dev`).
type processorFlags struct {
	databaseURL         string
	mode                string
	nodeID              int
	metricsAddr         string
	concurrency         int
	sqlBatchConcurrency int
	batchSize           int
	maxConnections      int
	sqlBatch            int
	pollInterval        time.Duration
	heartbeatInterval   time.Duration
	deadAfter           time.Duration
	leaseGrace          time.Duration
	leaderSettle        time.Duration
	shutdownTimeout     time.Duration
	logRetention        time.Duration
	logUnpublished      time.Duration
	deadRetention       time.Duration
	smtpURL             string
	configFile          string
	file                *fileConfig // the --config file, loaded by validate
	nats                natsFlags
}

func (f *processorFlags) register(fs *flag.FlagSet, withDB bool) {
	d := actors.Defaults() // the Processor's defaults are the flags'
	if withDB {
		fs.StringVar(&f.databaseURL, "database-url", "", "PostgreSQL URL, e.g. postgres://user:pass@host:5432/db (required)")
	}
	fs.StringVar(&f.mode, "mode", d.Mode, "dispatch mode: single (one primary), multi-node (every node dispatches its own rows) or leader (the lease holder dispatches all unrestricted rows)")
	fs.IntVar(&f.nodeID, "node-id", -1, "set pg_relay.node_id (0-1023) on the Processor's sessions (default: the server's setting)")
	fs.StringVar(&f.metricsAddr, "metrics-addr", "", "serve Prometheus /metrics and /healthz on this address, e.g. :9187 (default: off)")
	fs.IntVar(&f.concurrency, "concurrency", d.Concurrency, "most claimed events in flight at once (claimed and not yet ended: email, nats, Go Handle, and every kind with --sql-batch 1); sql batches count against --sql-batch-concurrency")
	fs.IntVar(&f.batchSize, "batch-size", d.BatchSize, "most rows one claim takes")
	fs.IntVar(&f.maxConnections, "max-connections", d.MaxConnections, "most database connections this Processor opens (at least 10): 4 background, 1 LISTEN, 1 NATS publisher, the rest for claims, batches and handlers")
	fs.IntVar(&f.sqlBatch, "sql-batch", d.SQLBatch, "most events of a sql batch: one transaction that locks the events (of one 'none' channel, or the heads of many 'channel'/'payload' lanes), runs each under a savepoint and completes them (1: a claim, then a transaction per event)")
	fs.IntVar(&f.sqlBatchConcurrency, "sql-batch-concurrency", d.SQLBatchConcurrency, "most events the running sql batches hold at once, each until it commits; a channel that runs one batch starts another only while a quarter of these (at most --sql-batch) stays free for other channels")
	fs.DurationVar(&f.pollInterval, "poll-interval", d.PollInterval, "fallback poll when no NOTIFY arrives (also picks up due retries)")
	fs.DurationVar(&f.heartbeatInterval, "heartbeat-interval", d.HeartbeatInterval, "how often this instance marks itself alive")
	fs.DurationVar(&f.deadAfter, "dead-after", 0, "an instance or node silent this long is dead: its claims are rescued, its work adopted; also the leader lease's length (default 10 × heartbeat-interval)")
	fs.DurationVar(&f.leaderSettle, "leader-settle", d.LeaderSettle, "leader mode: after taking the lease, lead once every live node has answered and, for nodes that look dead, this long has passed (must exceed the replication lag); multi-node and leader: a node that was dead or adopted dispatches only its pinned rows until every live node has answered and, for nodes that look dead, this long after it starts (must exceed twice the lag)")
	fs.DurationVar(&f.leaseGrace, "lease-grace", d.LeaseGrace, "a claim held longer than its channel's timeout plus this is rescued")
	fs.DurationVar(&f.shutdownTimeout, "shutdown-timeout", d.ShutdownTimeout, "on SIGTERM/SIGINT, how long in-flight handlers may finish before they are cancelled")
	fs.DurationVar(&f.logRetention, "log-retention", d.LogRetention, "delete pgrelay.log rows older than this (rows the NATS publisher of their node has not published: see --log-retention-unpublished)")
	fs.DurationVar(&f.logUnpublished, "log-retention-unpublished", d.LogRetentionUnpublished, "keep log rows that the NATS publisher of their node has not published at most this long (at least --log-retention); older ones are deleted all the same, logged as an error and recorded in pgrelay.log_dropped")
	fs.DurationVar(&f.deadRetention, "dead-letter-retention", d.DeadLetterRetention, "delete dead letters (events that ended gave_up or expired, kept with their payloads for 'pgrelay dead retry') this long after they ended")
	fs.StringVar(&f.smtpURL, "smtp-url", "", "SMTP server of email channels: smtp://user:pass@host:port (STARTTLS when offered) or smtps://... (implicit TLS), options in docs/notifier.md (default: email channels stay pending)")
	f.nats.register(fs)
	fs.StringVar(&f.configFile, "config", "", "JSON configuration file: SMTP servers per channel and more (docs/notifier.md)")
}

func (f *processorFlags) config(logger *slog.Logger, reg prometheus.Registerer) actors.Config {
	cfg := actors.Config{
		DatabaseURL:             f.databaseURL,
		Mode:                    f.mode,
		Concurrency:             f.concurrency,
		BatchSize:               f.batchSize,
		MaxConnections:          f.maxConnections,
		SQLBatch:                f.sqlBatch,
		SQLBatchConcurrency:     f.sqlBatchConcurrency,
		PollInterval:            f.pollInterval,
		HeartbeatInterval:       f.heartbeatInterval,
		DeadAfter:               f.deadAfter,
		LeaseGrace:              f.leaseGrace,
		LeaderSettle:            f.leaderSettle,
		ShutdownTimeout:         f.shutdownTimeout,
		LogRetention:            f.logRetention,
		LogRetentionUnpublished: f.logUnpublished,
		DeadLetterRetention:     f.deadRetention,
		Logger:                  logger,
		Registerer:              reg,
	}
	if f.nodeID != -1 { // -1: the server's setting
		n := f.nodeID
		cfg.NodeID = &n
	}
	if f.file != nil && f.file.SMTP != nil {
		cfg.SMTPURL = f.file.SMTP.Default
		cfg.SMTPChannels = f.file.SMTP.Channels
		cfg.MessageIDDomain = f.file.SMTP.MessageIDDomain
	}
	if f.smtpURL != "" {
		cfg.SMTPURL = f.smtpURL
	}
	cfg.NATS = f.nats.config()
	return cfg
}

// effectiveDeadAfter is --dead-after, or its default (10 heartbeats), as
// the Processor fills it in.
func (f *processorFlags) effectiveDeadAfter() time.Duration {
	return f.config(nil, nil).WithDefaults().DeadAfter
}

// validate checks the flags: the Processor's settings by the Processor's own
// rules (actors.Config.Validate), then loads the --config file.
func (f *processorFlags) validate() error {
	cfg := f.config(nil, nil)
	if err := cfg.Validate(); err != nil {
		return configUsage(err)
	}
	if f.configFile != "" {
		c, err := loadConfigFile(f.configFile)
		if err != nil {
			return &usageError{msg: err.Error()}
		}
		f.file = c
	}
	return nil
}

// configUsage turns a setting that actors.Config.Validate (or actors.New)
// refuses into a usage error that names its flag.
func configUsage(err error) error {
	var ce *actors.ConfigError
	if errors.As(err, &ce) {
		return &usageError{msg: "--" + ce.Setting + " " + ce.Problem}
	}
	return &usageError{msg: strings.TrimPrefix(err.Error(), "pgrelay: ")}
}

// registerRun adds the flags of `pgrelay run` to fs.
func registerRun(fs *flag.FlagSet) (*processorFlags, *webFlags, func(w io.Writer) (*slog.Logger, error)) {
	var f processorFlags
	f.register(fs, true)
	var wf webFlags
	wf.register(fs, "web-addr", "", "serve the console on this address, e.g. 127.0.0.1:8080 (default: off; anything but loopback needs --web-auth)")
	return &f, &wf, logFlags(fs)
}

func runRun(ctx context.Context, a *app, args []string) error {
	fs := a.newFlags("run")
	f, wf, mkLog := registerRun(fs)
	if err := a.parse(fs, args); err != nil {
		return err
	}
	if f.databaseURL == "" {
		return &usageError{msg: "--database-url (or PGRELAY_DATABASE_URL) is required"}
	}
	if err := f.validate(); err != nil {
		return err
	}
	webAuth, err := wf.check("web-addr")
	if err != nil {
		return err
	}
	if f.file.holdsCredentials() {
		a.warnWorldReadable("--config "+f.configFile, f.configFile)
	}
	logger, err := mkLog(a.stderr)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// New only checks the configuration (connects nothing): what it refuses
	// (an unsupported --mode, --dead-after not above --heartbeat-interval) is
	// a command-line mistake, reported before any connection attempt.
	tracing, err := otlpTracing(ctx)
	if err != nil {
		return err
	}
	pcfg := f.config(logger, reg)
	if tracing != nil {
		pcfg.TracerProvider = tracing
		logger.Info("exporting traces over OTLP (OTEL_* environment)")
		// Last of all, once the Processor has stopped: the spans of the
		// last attempts are flushed.
		defer func() {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			if err := tracing.Shutdown(sctx); err != nil {
				logger.Warn("flushing the last spans failed", "err", err)
			}
		}()
	}
	p, err := actors.New(pcfg)
	if err != nil {
		return configUsage(err)
	}
	if err := startChecks(ctx, f.databaseURL, f.mode, p.Connections(), logger); err != nil {
		return err
	}
	// The SMTP servers are checked beside the start, not before it: a server
	// that does not answer holds up no other channel.
	cfg := f.config(logger, nil)
	smtpCtx, stopSMTPCheck := context.WithCancel(ctx)
	smtpChecked := make(chan struct{})
	go func() {
		defer close(smtpChecked)
		checkSMTP(smtpCtx, email.Config{Default: cfg.SMTPURL, Channels: cfg.SMTPChannels}, logger)
	}()
	// Every part the stop waits for is a step of it, so that the time it
	// logs last is the whole stop; until then, an early return waits here.
	steps := []stopStep{}
	defer func() {
		for i := len(steps) - 1; i >= 0; i-- {
			steps[i].run()
		}
	}()
	steps = append(steps, stopStep{name: "the SMTP check", run: func() {
		stopSMTPCheck()
		<-smtpChecked
	}})
	if err := p.Start(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // interrupted while starting: Start undid itself
		}
		return err
	}
	inFlight, inBatches := p.Metrics().InFlight, p.Metrics().BatchSlotsInUse
	// Stopped first: the metrics and the console serve while it stops.
	processor := stopStep{name: "in-flight events and outcomes to be written",
		detail: func() string { return slotsInUse(inFlight, inBatches) },
		run:    func() { err = p.Stop(context.WithoutCancel(ctx)) }}
	if f.metricsAddr != "" {
		srv, serr := serveMetrics(f.metricsAddr, reg, p.Ping, logger)
		if serr != nil {
			_ = p.Stop(context.WithoutCancel(ctx))
			return serr
		}
		steps = append(steps, stopStep{name: "the metrics server", run: func() { shutdownHTTP(srv) }})
	}
	if wf.addr != "" {
		_, stopWeb, werr := startWeb(ctx, f.databaseURL, wf.addr, *wf, webAuth, f.effectiveDeadAfter(), logger)
		if werr != nil {
			_ = p.Stop(context.WithoutCancel(ctx))
			return werr
		}
		steps = append(steps, stopStep{name: "the console", run: stopWeb})
	}
	<-ctx.Done()
	began := time.Now()
	logger.Info("stopping: finishing in-flight events", "shutdown_timeout", f.shutdownTimeout)
	st := &stopper{say: func(l string) { logger.Info(l) }, every: 5 * time.Second, log: logger}
	all := append([]stopStep{processor}, reversed(steps)...)
	steps = nil
	_ = st.stop(all...)
	// Last: nothing the process waits for comes after it.
	logger.Info("stopped", "took", time.Since(began).Round(time.Millisecond))
	return err
}

// shutdownHTTP stops srv: requests under way get a moment to finish, then
// every connection is closed (one that never sends a request would
// otherwise hold Shutdown for its ReadHeaderTimeout).
func shutdownHTTP(srv *http.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), httpStopGrace)
	defer cancel()
	if srv.Shutdown(ctx) != nil {
		_ = srv.Close()
	}
}

// httpStopGrace is how long a stopping HTTP server lets requests under way
// finish: a scrape or a page takes milliseconds.
const httpStopGrace = time.Second

// reversed is steps, last first: what started last stops first.
func reversed(steps []stopStep) []stopStep {
	out := make([]stopStep, len(steps))
	for i, st := range steps {
		out[len(steps)-1-i] = st
	}
	return out
}

// serveMetrics serves /metrics and /healthz (200 while ping, of the
// database, answers).
func serveMetrics(addr string, reg *prometheus.Registry, ping func(context.Context) error, logger *slog.Logger) (*http.Server, error) {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := ping(ctx); err != nil {
			// The detail (a database error, a host name) goes to the log,
			// not to whoever can reach the port.
			logger.Warn("healthz: unavailable", "err", err)
			http.Error(w, "unavailable", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr %s: %w", addr, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("metrics server stopped", "err", err)
		}
	}()
	logger.Info("serving metrics", "addr", ln.Addr().String())
	return srv, nil
}

// startChecks runs run's checks before the Processor starts, on one
// session that is closed before it starts: it fails with a clear message
// when the database cannot be reached; it warns, without stopping, when
// pgrelay's tables are not replicated (multi-node and leader modes) or the
// Processor's connections may not fit. The schema's version is the
// Processor's own check, at its start.
func startChecks(ctx context.Context, url, mode string, planned int, logger *slog.Logger) error {
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	conn, err := connect(cctx, url)
	if err != nil {
		return fmt.Errorf("cannot connect to the database: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if mode == "multi-node" || mode == "leader" {
		warnUnreplicated(cctx, conn, mode, logger)
	}
	warnConnections(cctx, conn, planned, logger)
	return nil
}

// warnConnections logs a warning when this Processor's connections (up to
// planned) may not fit in what the server has left: max_connections, less
// the superuser reserve, less the connections open now (conn's own, which
// closes before the Processor starts, not counted). It never stops the
// Processor.
func warnConnections(ctx context.Context, conn *pgx.Conn, planned int, logger *slog.Logger) {
	c, err := store.ServerConnections(ctx, conn)
	if err != nil {
		logger.Warn("connections: could not check the server's max_connections", "err", err)
		return
	}
	maxConns, reserved, open := c.Max, c.Reserved, c.Open
	if free := maxConns - reserved - (open - 1); planned > free {
		logger.Warn(fmt.Sprintf("connections: this Processor may open %d connections but the server has %d free "+
			"(max_connections %d, %d reserved for superusers, %d open): lower --max-connections or raise max_connections",
			planned, max(free, 0), maxConns, reserved, open-1))
	}
}

// warnUnreplicated logs a warning when pgrelay's or the notifier's tables
// are not replicated on this node (checkReplication), or cannot be checked:
// in multi-node and leader mode every node must see every other node's
// rows. It never stops the Processor.
func warnUnreplicated(ctx context.Context, conn *pgx.Conn, mode string, logger *slog.Logger) {
	r, err := checkReplication(ctx, conn)
	switch {
	case err != nil:
		logger.Warn("replication: could not check that pgrelay's tables are replicated", "err", err)
	case r.Extension == "":
		logger.Warn("replication: no pglogical or Spock in this database; --mode "+mode+
			" needs pgrelay's and the notifier's tables replicated to every node (docs/multi-master.md)", "node", r.Node)
	case len(r.Missing) > 0:
		msg := "replication: tables not in a subscribed replication set on this node; --mode " + mode +
			" needs them replicated to every node (docs/multi-master.md)"
		if r.notifierMissing() {
			msg += "; email events whose notification was composed on another node will fail as missing"
		}
		logger.Warn(msg, "node", r.Node, "extension", r.Extension, "tables", strings.Join(r.Missing, ", "))
	}
	if err == nil && len(r.NodeLocal) > 0 {
		logger.Warn("replication: node-local tables in a replication set: each node's record of its migrations "+
			"and its channels' lock rows must stay on the node ("+r.nodeLocalFix()+")",
			"node", r.Node, "extension", r.Extension, "tables", r.nodeLocalList())
	}
	if err != nil || r.Extension != "spock" {
		return
	}
	st, ok, err := readSpockStatus(ctx, conn, r.Node)
	switch {
	case err != nil:
		logger.Warn("replication: could not read Spock's subscriptions and exception_log", "err", err)
	case !ok:
	default:
		if down := st.notReplicating(); len(down) > 0 {
			logger.Warn("replication: Spock subscriptions not replicating on this node: the other nodes' rows "+
				"stop arriving here (spock.sub_show_status())", "node", r.Node, "subscriptions", strings.Join(down, ", "))
		}
		if st.Exceptions > 0 {
			logger.Warn("replication: spock.exception_log has rows: transactions from other nodes this node skipped",
				"node", r.Node, "rows", st.Exceptions, "on_pgrelay", st.OnPgrelay, "latest", st.Latest)
		}
	}
}

// checkSMTP opens a session to each SMTP server of cfg, as a send would
// (email.CheckTargets: connect, EHLO, STARTTLS per the tls= policy, AUTH
// with a user, each within its target's timeout), and logs the outcome: an
// info line for a server that works, a warning naming a server that does
// not (without credentials), what it serves and why. It never stops the
// Processor: the other channels go on, and that server's emails are retried
// with their channel's backoff (docs/notifier.md).
func checkSMTP(ctx context.Context, cfg email.Config, logger *slog.Logger) {
	if !cfg.Enabled() {
		return
	}
	res, err := email.CheckTargets(ctx, cfg)
	if err != nil {
		logger.Warn("smtp check: could not check the SMTP servers", "err", err)
		return
	}
	for _, r := range res {
		switch {
		case r.Err == nil:
			logger.Info("smtp check: server ready (connect, EHLO, STARTTLS and AUTH as configured)",
				"target", r.Target, "serves", r.ServesText())
		case ctx.Err() != nil:
			// Stopped before the check could end: nothing to say.
		default:
			logger.Warn("smtp check: cannot open a session with this SMTP server; its emails are retried with "+
				"their channel's backoff and fail at the last attempt unless it is fixed (other channels are not affected)",
				"target", r.Target, "serves", r.ServesText(), "err", r.Err)
		}
	}
}

// schemaUpToDate fails when the database is not migrated to this version's
// schema: for the commands that read (a newer schema is read as it is).
func schemaUpToDate(ctx context.Context, conn *pgx.Conn) error {
	return migrations.RequireMigrated(ctx, conn)
}

func runMigrate(ctx context.Context, a *app, args []string) error {
	fs := a.newFlags("migrate")
	url := fs.String("database-url", "", "PostgreSQL URL (required)")
	deadAfter := fs.Duration("dead-after", actors.Defaults().DeadAfter,
		"a Processor silent this long counts as stopped; with migrations to apply, migrate refuses while any runs (give the Processors' --dead-after; the default is theirs)")
	lockWait := fs.Duration("lock-wait", migrations.DefaultLockWait,
		"how long to wait for transactions that hold pgrelay's tables before giving up, changing nothing")
	allowReplication := fs.Bool("allow-replication", false,
		"on a Spock node, upgrade while its subscriptions are enabled or a peer streams from it (refused otherwise: docs/upgrading.md)")
	if err := a.parse(fs, args); err != nil {
		return err
	}
	if *url == "" {
		return &usageError{msg: "--database-url (or PGRELAY_DATABASE_URL) is required"}
	}
	if *deadAfter < 0 || *lockWait <= 0 {
		return &usageError{msg: "--dead-after must not be negative, --lock-wait must be positive"}
	}
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	conn, err := connect(cctx, *url)
	cancel()
	if err != nil {
		return fmt.Errorf("cannot connect to the database: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	res, err := migrations.UpWith(ctx, conn, migrations.Options{ProcessorDeadAfter: *deadAfter, LockWait: *lockWait,
		AllowReplication: *allowReplication,
		Waiting: func(w migrations.LockWait) {
			held := make([]string, len(w.Holders))
			for i, h := range w.Holders {
				held[i] = h.String()
			}
			fmt.Fprintf(a.stderr, "pgrelay migrate: waited %s for %s (lock timeout), held by %s; waiting again, holding no other table (--lock-wait %s)\n",
				w.Waited.Round(time.Second), w.Table, strings.Join(held, ", "), *lockWait)
		}})
	if err != nil {
		return err
	}
	sayMigrated(a.stdout, res)
	// The node id producers stamp: this session's pg_relay.node_id (the
	// database's or the server's setting), until a Processor records its own.
	if err := store.RecordNodeID(ctx, conn); err != nil {
		return err
	}
	return warnOwnerStats(ctx, conn, a.stderr, "pgrelay migrate")
}

// sayMigrated prints what migrations.Up did, as `pgrelay migrate` does.
func sayMigrated(w io.Writer, res migrations.Result) {
	for _, m := range res.Applied {
		fmt.Fprintf(w, "applied %04d_%s\n", m.Version, m.Name)
	}
	if res.Functions {
		fmt.Fprintln(w, "applied the function files (migrations/functions)")
	}
	for _, r := range res.Replication {
		fmt.Fprintln(w, r)
	}
	fmt.Fprintf(w, "schema at version %d\n", res.Version)
}

// warnOwnerStats warns on w, prefixed with cmd, when the user conn logs in
// as, who owns what it migrated, cannot see every session's transaction.
func warnOwnerStats(ctx context.Context, conn *pgx.Conn, w io.Writer, cmd string) error {
	// The NATS publisher's horizon (pgrelay._publish_horizon, SECURITY
	// DEFINER) must see every session's transaction: its owner, who ran
	// this, needs pg_read_all_stats unless a superuser.
	owner, sees, err := store.SeesAllSessions(ctx, conn)
	if err != nil {
		return err
	}
	if !sees {
		fmt.Fprintf(w, "%s: warning: %s, the owner of the schema, is neither a superuser nor a member of pg_read_all_stats:\n"+
			"  publishing status events on NATS (pgrelay run --nats-url) will stall with PR040 until a superuser runs\n"+
			"  GRANT pg_read_all_stats TO %s;\n", cmd, owner, pgx.Identifier{owner}.Sanitize())
	}
	return nil
}

func runStats(ctx context.Context, a *app, args []string) error {
	fs := a.newFlags("stats")
	url := fs.String("database-url", "", "PostgreSQL URL (required)")
	deadAfter := fs.Duration("dead-after", actors.Defaults().DeadAfter, "a Processor silent this long is shown dead")
	if err := a.parse(fs, args); err != nil {
		return err
	}
	if *url == "" {
		return &usageError{msg: "--database-url (or PGRELAY_DATABASE_URL) is required"}
	}
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	conn, err := connect(cctx, *url)
	if err != nil {
		return fmt.Errorf("cannot connect to the database: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := schemaUpToDate(cctx, conn); err != nil {
		return err
	}
	stats, err := store.QueueStats(cctx, conn)
	if err != nil {
		return err
	}
	writeStats(a.stdout, stats)
	unhandled, err := store.UnhandledGoChannels(cctx, conn)
	if err != nil {
		return err
	}
	writeUnhandledGo(a.stdout, unhandled)
	cancels, err := store.CancelsWaitingOf(cctx, conn)
	if err != nil {
		return err
	}
	writeCancelsWaiting(a.stdout, cancels)
	backlog, err := store.PublishBacklog(cctx, conn)
	if err != nil {
		return err
	}
	dropped, err := store.LogDropped(cctx, conn)
	if err != nil {
		return err
	}
	writeBacklog(a.stdout, backlog, dropped)
	schedules, err := store.Schedules(cctx, conn)
	if err != nil {
		return err
	}
	writeSchedules(a.stdout, schedules, time.Now())
	procs, err := store.Processors(cctx, conn, *deadAfter)
	if err != nil {
		return err
	}
	writeProcessors(a.stdout, procs, time.Now())
	return nil
}
