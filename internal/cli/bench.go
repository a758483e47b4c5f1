package cli

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
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
	logger, err := mkLog(a.stderr)
	if err != nil {
		return err
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
	const channel = "pgrelay_bench_noop"
	if _, err := pool.Exec(ctx, `SELECT pgrelay.unregister(channel, p_force := true) FROM pgrelay.channels WHERE channel = $1`, channel); err != nil {
		return fmt.Errorf("reset the bench channel: %w", err)
	}
	if _, err := pool.Exec(ctx, `SELECT pgrelay.register($1, 'SELECT $1')`, channel); err != nil {
		return fmt.Errorf("register the bench channel: %w", err)
	}
	var startLog int64
	if err := pool.QueryRow(ctx, `SELECT COALESCE(max(id), 0) FROM pgrelay.log`).Scan(&startLog); err != nil {
		return err
	}

	// Enqueue.
	payloads := make([]string, 0, *batch)
	enqStart := time.Now()
	for i := 0; i < *events; {
		payloads = payloads[:0]
		for j := 0; j < *batch && i < *events; j, i = j+1, i+1 {
			payloads = append(payloads, strconv.Itoa(i))
		}
		if _, err := pool.Exec(ctx, `SELECT pgrelay.notify_many($1, $2)`, channel, payloads); err != nil {
			return fmt.Errorf("enqueue: %w", err)
		}
	}
	enqTook := time.Since(enqStart)
	if _, err := pool.Exec(ctx, `ANALYZE pgrelay.queue`); err != nil {
		return err
	}

	// Burn down.
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
	var done int
	for done < *events {
		select {
		case <-ctx.Done():
			_ = p.Stop(context.WithoutCancel(ctx))
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM pgrelay.log WHERE id > $1 AND channel = $2 AND event = 'succeeded'`,
			startLog, channel).Scan(&done); err != nil {
			return err
		}
	}
	runTook := time.Since(runStart)
	if err := p.Stop(context.WithoutCancel(ctx)); err != nil {
		return err
	}
	var pgVersion string
	_ = pool.QueryRow(ctx, `SHOW server_version`).Scan(&pgVersion)
	fmt.Fprintf(a.stdout, "pgrelay %s bench: %d no-op sql events, PostgreSQL %s, %d CPUs, concurrency %d, batch %d\n",
		Version, *events, pgVersion, runtime.NumCPU(), cfg.Concurrency, cfg.BatchSize)
	fmt.Fprintf(a.stdout, "enqueue (notify_many x %d): %8.0f events/s (%s)\n", *batch,
		float64(*events)/enqTook.Seconds(), enqTook.Round(time.Millisecond))
	fmt.Fprintf(a.stdout, "burn-down (claim, run, complete): %8.0f events/s (%s)\n",
		float64(*events)/runTook.Seconds(), runTook.Round(time.Millisecond))
	return nil
}
