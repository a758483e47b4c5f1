package cli

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgrelay/pgrelay/actors"
	"github.com/pgrelay/pgrelay/internal/testenv"
	"github.com/pgrelay/pgrelay/migrations"
)

// runBench measures the burn-down throughput of no-op sql events: N events
// are enqueued first (notify_many in batches), then one Processor runs them
// all; the figure is events per second from the Processor's start to the last
// success.
func runBench(ctx context.Context, a *app, args []string) error {
	fs := a.newFlags("bench")
	url := fs.String("database-url", "", "benchmark against this database (default: a throwaway PostgreSQL with default durability)")
	events := fs.Int("events", 100000, "events to enqueue and run")
	batch := fs.Int("enqueue-batch", 1000, "payloads per notify_many call while enqueueing")
	natsMode := fs.Bool("nats", false, "measure the burn-down twice, without NATS and with every status event published to JetStream (in process, or --nats-url), and report the ratio")
	peer := fs.String("peer", "", "also run the same burn-down with this peer queue on the same database and print the ratio: river (needs the repository's bench/river module and the go command)")
	peerDir := fs.String("peer-dir", "", "the peer harness's module directory (default bench/river)")
	clusterMode := fs.Bool("cluster", false, "measure multi-node throughput on a throwaway two-node cluster: one node, then two (needs pglogical)")
	emailMode := fs.Bool("email", false, "send emails instead: notifications through an email channel to an in-process SMTP catcher (or --smtp-url)")
	var f processorFlags
	f.register(fs, false)
	mkLog := logFlags(fs)
	if err := a.parse(fs, args); err != nil {
		return err
	}
	if err := f.validate(); err != nil {
		return err
	}
	if *events < 1 || *batch < 1 {
		return &usageError{msg: "--events and --enqueue-batch must be positive"}
	}
	if *peer != "" && *peer != "river" {
		return &usageError{msg: fmt.Sprintf("--peer %q: the only peer is river", *peer)}
	}
	logger, err := mkLog(a.stderr)
	if err != nil {
		return err
	}
	if *clusterMode {
		return benchCluster(ctx, a, f, *events, logger)
	}
	dbURL := *url
	if dbURL == "" {
		pg, err := testenv.StartPostgres(ctx, testenv.PostgresConfig{Durable: true, Logger: logger})
		if err != nil {
			return err
		}
		defer func() { _ = pg.Stop() }()
		if err := pg.Exec(ctx, "postgres", "CREATE DATABASE pgrelay_bench"); err != nil {
			return err
		}
		dbURL = pg.URL("pgrelay_bench")
	}
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer pool.Close()
	if _, err := migrations.Up(ctx, pool); err != nil {
		return err
	}
	if *natsMode {
		return benchNATS(ctx, a, pool, &f, *events, *batch, dbURL, logger)
	}
	if *emailMode {
		return benchEmail(ctx, a, pool, dbURL, &f, *events, *batch, logger)
	}
	const channel = "pgrelay_bench_noop"
	if _, err := pool.Exec(ctx, `SELECT pgrelay.unregister(channel, p_force := true) FROM pgrelay.channels WHERE channel = $1`, channel); err != nil {
		return fmt.Errorf("reset the bench channel: %w", err)
	}
	if _, err := pool.Exec(ctx, `SELECT pgrelay.register($1, 'SELECT $1')`, channel); err != nil {
		return fmt.Errorf("register the bench channel: %w", err)
	}
	enqTook, runTook, err := burnDown(ctx, f, []*pgxpool.Pool{pool}, []string{dbURL}, f.mode, channel,
		*events, *batch, logger)
	if err != nil {
		return err
	}
	cfg := f.config(logger, nil)
	var pgVersion string
	_ = pool.QueryRow(ctx, `SHOW server_version`).Scan(&pgVersion)
	fmt.Fprintf(a.stdout, "pgrelay %s bench: %d no-op sql events, PostgreSQL %s, %d CPUs, concurrency %d, batch %d\n",
		Version, *events, pgVersion, runtime.NumCPU(), cfg.Concurrency, cfg.BatchSize)
	fmt.Fprintf(a.stdout, "enqueue (notify_many x %d): %8.0f events/s (%s)\n", *batch,
		float64(*events)/enqTook.Seconds(), enqTook.Round(time.Millisecond))
	rate := float64(*events) / runTook.Seconds()
	fmt.Fprintf(a.stdout, "burn-down (claim, run, complete): %8.0f events/s (%s)\n",
		rate, runTook.Round(time.Millisecond))
	if *peer == "river" {
		r, err := benchRiver(ctx, riverDir(*peerDir), dbURL, *events)
		if err != nil {
			return err
		}
		fmt.Fprintf(a.stdout, "river %s burn-down (same database, 2000 workers, fetch cooldown 2ms, poll 20ms): %8.0f jobs/s (%.3fs)\n",
			r.Version, r.EventsPerSec, r.Seconds)
		fmt.Fprintf(a.stdout, "ratio pgrelay/river: %.2f\n", rate/r.EventsPerSec)
	}
	return nil
}

// benchEmail measures the email path: n notifications composed with
// pgrelay_notifier.send() (batch per statement), then one Processor sends
// them all through pooled SMTP connections; the figure is emails per second
// from the Processor's start to the last 'sent' status.
func benchEmail(ctx context.Context, a *app, pool *pgxpool.Pool, dbURL string, f *processorFlags, n, batch int,
	logger *slog.Logger) error {
	const channel = "pgrelay_bench_email"
	var catcher *testenv.SMTP
	if f.smtpURL == "" && (f.file == nil || f.file.SMTP == nil || f.file.SMTP.Default == "") {
		var err error
		if catcher, err = testenv.StartSMTP(testenv.SMTPConfig{Logger: logger}); err != nil {
			return err
		}
		defer func() { _ = catcher.Close() }()
		f.smtpURL = catcher.URL()
	}
	if _, err := pool.Exec(ctx, `SELECT pgrelay.unregister(channel, p_force := true) FROM pgrelay.channels WHERE channel = $1`, channel); err != nil {
		return fmt.Errorf("reset the bench channel: %w", err)
	}
	if _, err := pool.Exec(ctx, `SELECT pgrelay_notifier.create_channel($1, 'bench@pgrelay.localhost')`, channel); err != nil {
		return fmt.Errorf("create the bench channel: %w", err)
	}
	var startID int64
	if err := pool.QueryRow(ctx, `SELECT COALESCE(max(notification_id), 0) FROM pgrelay_notifier.notifications`).Scan(&startID); err != nil {
		return err
	}
	enqStart := time.Now()
	for i := 0; i < n; i += batch {
		k := min(batch, n-i)
		if _, err := pool.Exec(ctx, `SELECT count(pgrelay_notifier.send($1, ARRAY['user' || g || '@example.com'],
			'Order ' || g || ' confirmed', 'Thank you for order ' || g || '.', '<p>Thank you for order <b>' || g || '</b>.</p>'))
			FROM generate_series($2::int, $3::int) g`, channel, i+1, i+k); err != nil {
			return fmt.Errorf("enqueue: %w", err)
		}
	}
	enqTook := time.Since(enqStart)
	if _, err := pool.Exec(ctx, `ANALYZE pgrelay.queue`); err != nil {
		return err
	}

	f.databaseURL = dbURL
	cfg := f.config(logger, prometheus.NewRegistry())
	p, err := actors.New(cfg)
	if err != nil {
		return err
	}
	runStart := time.Now()
	if err := p.Start(ctx); err != nil {
		return err
	}
	var done, failed int
	for done+failed < n {
		select {
		case <-ctx.Done():
			_ = p.Stop(context.WithoutCancel(ctx))
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status = 'sent'), count(*) FILTER (WHERE status = 'failed')
			FROM pgrelay_notifier.notifications WHERE notification_id > $1 AND channel = $2`, startID, channel).Scan(&done, &failed); err != nil {
			return err
		}
	}
	runTook := time.Since(runStart)
	if err := p.Stop(context.WithoutCancel(ctx)); err != nil {
		return err
	}
	var pgVersion string
	_ = pool.QueryRow(ctx, `SHOW server_version`).Scan(&pgVersion)
	fmt.Fprintf(a.stdout, "pgrelay %s bench --email: %d notifications, PostgreSQL %s, %d CPUs, concurrency %d, batch %d\n",
		Version, n, pgVersion, runtime.NumCPU(), cfg.Concurrency, cfg.BatchSize)
	fmt.Fprintf(a.stdout, "compose (pgrelay_notifier.send x %d per statement): %8.0f emails/s (%s)\n", batch,
		float64(n)/enqTook.Seconds(), enqTook.Round(time.Millisecond))
	fmt.Fprintf(a.stdout, "send (fetch, SMTP, set_status, complete): %8.0f emails/s (%s), %d sent, %d failed\n",
		float64(n)/runTook.Seconds(), runTook.Round(time.Millisecond), done, failed)
	if catcher != nil {
		fmt.Fprintf(a.stdout, "SMTP catcher: %d messages received over %d SMTP sessions (connections reused)\n",
			catcher.Count(), catcher.Sessions())
	}
	return nil
}
