package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgrelay/pgrelay/actors"
	"github.com/pgrelay/pgrelay/internal/testenv"
	"github.com/pgrelay/pgrelay/migrations"
)

// riverResult is what the River harness (bench/river) prints with --json.
type riverResult struct {
	Version      string  `json:"version"`
	Events       int     `json:"events"`
	Seconds      float64 `json:"seconds"`
	EventsPerSec float64 `json:"events_per_sec"`
	InsertPerSec float64 `json:"insert_per_sec"`
}

// benchRiver runs the River harness's burn-down on the same database, right
// after pgrelay's, and returns its result. The harness is a separate Go
// module (River stays out of pgrelay's dependencies), run from its source.
func benchRiver(ctx context.Context, dir, dbURL string, n int) (riverResult, error) {
	cmd := exec.CommandContext(ctx, "go", "-C", dir, "run", ".", "--database-url", dbURL,
		"--scenario", "burn-down", "--events", strconv.Itoa(n), "--json")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return riverResult{}, fmt.Errorf("river harness (%s): %w: %s", dir, err, lastLine(errOut.String()))
	}
	var r riverResult
	if err := json.Unmarshal(bytes.TrimSpace(out.Bytes()), &r); err != nil {
		return riverResult{}, fmt.Errorf("river harness output: %w: %q", err, lastLine(out.String()))
	}
	return r, nil
}

func lastLine(s string) string {
	b := bytes.TrimSpace([]byte(s))
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[i+1:]
	}
	return string(b)
}

// burnDown enqueues n no-op events, spread over pools (one per node), with
// notify_many in batches of batch, and runs one Processor per url in mode
// until every event succeeded; it returns how long the enqueue took and the
// time from the Processors' start to the last success.
func burnDown(ctx context.Context, f processorFlags, pools []*pgxpool.Pool, urls []string, mode, channel string,
	n, batch int, logger *slog.Logger) (enqueue, run time.Duration, err error) {
	var startLog int64
	if err := pools[0].QueryRow(ctx, `SELECT COALESCE(max(id), 0) FROM pgrelay.log`).Scan(&startLog); err != nil {
		return 0, 0, err
	}
	per := n / len(pools)
	payloads := make([]string, 0, batch)
	enqStart := time.Now()
	for node, pool := range pools {
		for i := 0; i < per; {
			payloads = payloads[:0]
			for j := 0; j < batch && i < per; j, i = j+1, i+1 {
				payloads = append(payloads, fmt.Sprintf("%d-%d", node, i))
			}
			if _, err := pool.Exec(ctx, `SELECT pgrelay.notify_many($1, $2)`, channel, payloads); err != nil {
				return 0, 0, fmt.Errorf("enqueue: %w", err)
			}
		}
	}
	enqueue = time.Since(enqStart)
	total := per * len(pools)
	// Every node must see every row, with fresh statistics, before the clock
	// starts.
	for _, pool := range pools {
		for {
			var c int
			if err := pool.QueryRow(ctx, `SELECT count(*) FROM pgrelay.queue WHERE channel = $1`, channel).Scan(&c); err != nil {
				return 0, 0, err
			}
			if c >= total {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if _, err := pool.Exec(ctx, `ANALYZE pgrelay.queue`); err != nil {
			return 0, 0, err
		}
	}
	var procs []*actors.Processor
	start := time.Now()
	for _, url := range urls {
		f.databaseURL, f.mode = url, mode
		p, err := actors.New(f.config(logger, prometheus.NewRegistry()))
		if err != nil {
			return 0, 0, err
		}
		if err := p.Start(ctx); err != nil {
			return 0, 0, err
		}
		procs = append(procs, p)
	}
	defer func() {
		for _, p := range procs {
			_ = p.Stop(context.WithoutCancel(ctx))
		}
	}()
	for {
		var done int
		if err := pools[0].QueryRow(ctx, `SELECT count(*) FROM pgrelay.log WHERE id > $1 AND channel = $2 AND event = 'succeeded'`,
			startLog, channel).Scan(&done); err != nil {
			return 0, 0, err
		}
		if done >= total {
			return enqueue, time.Since(start), nil
		}
		select {
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// benchCluster measures multi-node throughput on a real two-node cluster:
// n events on one node with one Processor, then n events spread over both
// nodes with a Processor on each (same cluster, same run).
func benchCluster(ctx context.Context, a *app, f processorFlags, n int, logger *slog.Logger) error {
	c, err := testenv.StartCluster(ctx, testenv.ClusterConfig{})
	if err != nil {
		return err
	}
	defer c.Stop()
	var pools []*pgxpool.Pool
	for node := 1; node <= 2; node++ {
		pool, err := pgxpool.New(ctx, c.URL(node))
		if err != nil {
			return err
		}
		defer pool.Close()
		if _, err := migrations.Up(ctx, pool); err != nil {
			return err
		}
		pools = append(pools, pool)
	}
	const channel = "pgrelay_bench_mn"
	if _, err := pools[0].Exec(ctx, `SELECT pgrelay.register($1, 'SELECT $1')`, channel); err != nil {
		return err
	}
	for {
		var ok bool
		if err := pools[1].QueryRow(ctx, `SELECT EXISTS (SELECT FROM pgrelay.channels WHERE channel = $1)`, channel).Scan(&ok); err != nil {
			return err
		}
		if ok {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	_, one, err := burnDown(ctx, f, pools[:1], []string{c.URL(1)}, actors.ModeMultiNode, channel, n, 1000, logger)
	if err != nil {
		return err
	}
	_, two, err := burnDown(ctx, f, pools, []string{c.URL(1), c.URL(2)}, actors.ModeMultiNode, channel, n, 1000, logger)
	if err != nil {
		return err
	}
	r1, r2 := float64(n)/one.Seconds(), float64(n)/two.Seconds()
	fmt.Fprintf(a.stdout, "pgrelay %s bench --cluster: %d no-op sql events, two-node PostgreSQL 15 + pglogical cluster on one machine, %d CPUs\n",
		Version, n, runtime.NumCPU())
	fmt.Fprintf(a.stdout, "multi-node, one node:  %8.0f events/s (%s)\n", r1, one.Round(time.Millisecond))
	fmt.Fprintf(a.stdout, "multi-node, two nodes: %8.0f events/s (%s)  ratio %.2f\n", r2, two.Round(time.Millisecond), r2/r1)
	return nil
}

// riverDir is where the River harness's module is, relative to the working
// directory (the repository root when run with make).
func riverDir(dir string) string {
	if dir != "" {
		return dir
	}
	return filepath.Join("bench", "river")
}
