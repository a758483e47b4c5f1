package cli

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgrelay/pgrelay/actors"
	"github.com/pgrelay/pgrelay/internal/testenv"
)

// benchNATS measures what publishing status events costs dispatch: the same
// burn-down of n no-op sql events runs twice on the same database, first
// without NATS, then with the publisher on against JetStream (an in-process
// server with file storage unless --nats-url names one). It reports both
// dispatch figures, their ratio, and how long after the start the last event
// was acknowledged by JetStream.
func benchNATS(ctx context.Context, a *app, pool *pgxpool.Pool, f *processorFlags, n, batch int, dbURL string,
	logger *slog.Logger) error {
	const channel = "pgrelay_bench_nats"
	if f.nats.url == "" {
		srv, err := testenv.StartNATS(testenv.NATSConfig{})
		if err != nil {
			return err
		}
		defer srv.Stop()
		f.nats.url = srv.URL()
	}
	nc, err := nats.Connect(f.nats.url)
	if err != nil {
		return fmt.Errorf("connect to NATS: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	if _, err := pool.Exec(ctx, `SELECT pgrelay.unregister(channel, p_force := true) FROM pgrelay.channels WHERE channel = $1`, channel); err != nil {
		return fmt.Errorf("reset the bench channel: %w", err)
	}
	if _, err := pool.Exec(ctx, `SELECT pgrelay.register($1, 'SELECT $1')`, channel); err != nil {
		return fmt.Errorf("register the bench channel: %w", err)
	}
	f.databaseURL = dbURL

	// run enqueues n events, then burns them down with one Processor; with
	// NATS it also waits for the last event to be in the stream.
	type result struct{ dispatch, published time.Duration }
	run := func(withNATS bool) (result, error) {
		var res result
		var startLog int64
		if err := pool.QueryRow(ctx, `SELECT COALESCE(max(id), 0) FROM pgrelay.log`).Scan(&startLog); err != nil {
			return res, err
		}
		payloads := make([]string, 0, batch)
		for i := 0; i < n; {
			payloads = payloads[:0]
			for j := 0; j < batch && i < n; j, i = j+1, i+1 {
				payloads = append(payloads, strconv.Itoa(i))
			}
			if _, err := pool.Exec(ctx, `SELECT pgrelay.notify_many($1, $2)`, channel, payloads); err != nil {
				return res, fmt.Errorf("enqueue: %w", err)
			}
		}
		if _, err := pool.Exec(ctx, `ANALYZE pgrelay.queue`); err != nil {
			return res, err
		}
		cfg := f.config(logger, prometheus.NewRegistry())
		inStream := 0
		if withNATS {
			// Publish this run's events only: the earlier run's are not news.
			if _, err := pool.Exec(ctx, `INSERT INTO pgrelay.publish_cursors (node_id, source, last_id)
				VALUES (pgrelay._this_node(), 'log', $1)
				ON CONFLICT (node_id, source) DO UPDATE SET last_id = EXCLUDED.last_id`, startLog); err != nil {
				return res, err
			}
			inStream = benchStreamMsgs(ctx, js, f.nats.stream)
		} else {
			cfg.NATS = nil
		}
		p, err := actors.New(cfg)
		if err != nil {
			return res, err
		}
		start := time.Now()
		if err := p.Start(ctx); err != nil {
			return res, err
		}
		defer func() { _ = p.Stop(context.WithoutCancel(ctx)) }()
		for done := 0; done < n; {
			select {
			case <-ctx.Done():
				return res, ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
			if err := pool.QueryRow(ctx, `SELECT count(*) FROM pgrelay.log WHERE id > $1 AND channel = $2 AND event = 'succeeded'`,
				startLog, channel).Scan(&done); err != nil {
				return res, err
			}
		}
		res.dispatch = time.Since(start)
		for withNATS && benchStreamMsgs(ctx, js, f.nats.stream)-inStream < n {
			select {
			case <-ctx.Done():
				return res, ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
		res.published = time.Since(start)
		return res, p.Stop(context.WithoutCancel(ctx))
	}

	without, err := run(false)
	if err != nil {
		return err
	}
	with, err := run(true)
	if err != nil {
		return err
	}
	rate := func(d time.Duration) float64 { return float64(n) / d.Seconds() }
	var pgVersion string
	_ = pool.QueryRow(ctx, `SHOW server_version`).Scan(&pgVersion)
	fmt.Fprintf(a.stdout, "pgrelay %s bench --nats: %d no-op sql events per run, PostgreSQL %s, NATS %s, %d CPUs, concurrency %d, batch %d, publish batch %d\n",
		Version, n, pgVersion, nc.ConnectedServerVersion(), runtime.NumCPU(), f.concurrency, f.batchSize, f.nats.batch)
	fmt.Fprintf(a.stdout, "burn-down without NATS:              %8.0f events/s (%s)\n", rate(without.dispatch), without.dispatch.Round(time.Millisecond))
	fmt.Fprintf(a.stdout, "burn-down with events to JetStream:  %8.0f events/s (%s)\n", rate(with.dispatch), with.dispatch.Round(time.Millisecond))
	fmt.Fprintf(a.stdout, "ratio with/without: %.3f (overhead %.1f%%)\n", rate(with.dispatch)/rate(without.dispatch),
		100*(1-rate(with.dispatch)/rate(without.dispatch)))
	fmt.Fprintf(a.stdout, "last event acknowledged by JetStream %s after the start (%.0f events/s end to end)\n",
		with.published.Round(time.Millisecond), rate(with.published))
	return nil
}

// benchStreamMsgs is the number of messages in stream (0 while it is missing).
func benchStreamMsgs(ctx context.Context, js jetstream.JetStream, stream string) int {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return 0
	}
	info, err := s.Info(ctx)
	if err != nil {
		return 0
	}
	return int(info.State.Msgs)
}
