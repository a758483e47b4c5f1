package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgrelay/pgrelay/actors"
	"github.com/pgrelay/pgrelay/internal/handlers"
)

// goBenchHandler is the Go handler name of the go scenario's channel.
const goBenchHandler = "pgrelay_bench_noop"

// scenarioGo: the burn-down on a channel of kind go, whose no-op handler
// runs outside the database (Handle), then in the event's completion
// transaction (HandleTx: the events of a claim in one transaction, a
// savepoint each, up to --sql-batch), then so with a transaction per event
// (HandleTx with --sql-batch 1), then on batches (HandleTxBatch); River's
// no-op worker is the peer of all four. Then the latency of a go channel
// beside the sql kind's (goLatency).
func (b *bench) scenarioGo(ctx context.Context) (*scenarioResult, error) {
	const channel = "pgrelay_bench_go"
	res := &scenarioResult{Name: "go"}
	n := b.o.Events
	defer func() {
		_ = cleanup(ctx, func(ctx context.Context) error { return unregisterChannels(ctx, b.pool, channel) })
	}()
	noop := func(context.Context, pgx.Tx, handlers.Event) error { return nil }
	noopBatch := func(context.Context, pgx.Tx, []handlers.Event) error { return nil }
	variants := []struct {
		name string
		h    handlers.GoHandler
		// single: a transaction per event (SQLBatch 1).
		single bool
	}{
		{name: "Handle", h: handlers.GoHandler{Fn: noop}},
		{name: "HandleTx", h: handlers.GoHandler{Fn: noop, Tx: true}},
		{name: "HandleTx, --sql-batch 1", h: handlers.GoHandler{Fn: noop, Tx: true}, single: true},
		{name: "HandleTxBatch", h: handlers.GoHandler{Batch: noopBatch}},
	}
	var rates []float64
	for _, v := range variants {
		if err := b.resetChannel(ctx, b.pool, channel, "go", goBenchHandler, "none"); err != nil {
			return res, err
		}
		mark, err := logMark(ctx, b.pool)
		if err != nil {
			return res, err
		}
		label := "go: no-op " + v.name
		took, err := b.insertBatches(ctx, label+": enqueue", n, b.o.Batch, notifyMany(b.pool, channel, ""))
		if err != nil {
			return res, err
		}
		if err := settle(ctx, b.pool); err != nil {
			return res, err
		}
		pre := res.add(newMeasurement(fmt.Sprintf("pre-insert for %s (notify_many x %d)", v.name, b.o.Batch), "pgrelay", int64(n), took, "events/s"))
		pre.Counted = false
		cfg := b.procConfig(b.dbURL, "")
		cfg.GoHandlers = map[string]handlers.GoHandler{goBenchHandler: v.h}
		if v.single {
			cfg.SQLBatch = 1
		}
		d, err := b.drain(ctx, drainSpec{label: label, profile: "go-" + strings.NewReplacer(", ", "-", " ", "").Replace(v.name),
			procs: []actors.Config{cfg}, channels: []string{channel}, target: int64(n)})
		if err != nil {
			return res, err
		}
		if err := checkLog(ctx, b.pool, mark, []string{channel}, int64(n), true); err != nil {
			return res, err
		}
		m := res.add(newMeasurement("burn-down, no-op "+v.name, "pgrelay", int64(n), d.took, "events/s"))
		m.Series = d.series
		switch {
		case v.h.Batch != nil:
			m.Detail = fmt.Sprintf("claim, then a transaction per claimed batch that completes it; %d succeeded log rows checked", n)
		case v.h.Tx && cfg.SQLBatch > 1:
			m.Detail = fmt.Sprintf("direct batches: a transaction locks up to --sql-batch %d events (no claim), a savepoint per event, "+
				"one _complete and one commit; %d succeeded log rows checked", cfg.SQLBatch, n)
		case v.h.Tx:
			m.Detail = fmt.Sprintf("claim, then a transaction per event that completes it; %d succeeded log rows checked", n)
		default:
			m.Detail = fmt.Sprintf("claim, run, complete; %d succeeded log rows checked", n)
		}
		rates = append(rates, m.Rate)
	}
	if b.o.Peer != "" {
		r, err := b.river.run(ctx, b, "burn-down", "--events", strconv.Itoa(n), "--insert-batch", strconv.Itoa(b.o.Batch))
		if err != nil {
			return res, err
		}
		rm := res.add(riverMeasurement("burn-down, no-op worker", r.Events, r.EventsPerSec, r.Seconds, "jobs/s"))
		rm.Series = r.Series
		rm.Detail = r.workerSettings() + "; completions from River's event subscription"
		for i, v := range variants {
			res.ratio(v.name+"/river", rates[i], rm.Rate, 0)
		}
	}
	return res, b.goLatency(ctx, res)
}

// goLatency: the latency measurement (see measureLatency) of --latency-events
// at --rate on the sql kind's channel, then on a go channel whose handler
// runs with HandleTx, then with Handle, all in this run so that they compare;
// with --peer river, River's no-op worker follows. The sql kind's start is
// clock_timestamp() in its statement; a Go function's (HandleTx's and
// Handle's) is time.Now() at its entry, kept in memory and written to the
// bench table once the Processor stopped, so that the function does nothing
// else (a write through HandleTx's tx would be a round trip after its
// start). Both clocks are this machine's, as the enqueue's time is.
func (b *bench) goLatency(ctx context.Context, res *scenarioResult) error {
	n := b.o.LatencyEvents
	starts := &goStarts{at: map[int]time.Time{}}
	write := func(ctx context.Context) error { return starts.write(ctx, b.pool) }
	const goStart = "time.Now() at the function's entry, written to the bench table after the run (the same machine's clock as the enqueue's)"
	parts := []struct {
		name  string
		h     *handlers.GoHandler
		start string // how the handler's start is taken
		after func(ctx context.Context) error
	}{
		{name: "sql statement", start: "clock_timestamp() in the channel's statement"},
		{name: "HandleTx", h: &handlers.GoHandler{Fn: starts.handle, Tx: true}, start: goStart, after: write},
		{name: "Handle", h: &handlers.GoHandler{Fn: starts.handle}, start: goStart, after: write},
	}
	lat := map[string]*measurement{}
	for _, part := range parts {
		clear(starts.at)
		run, err := b.measureLatency(ctx, latencySpec{label: "go latency " + part.name, n: n, rate: b.o.Rate,
			goHandler: part.h, afterStop: part.after})
		if err != nil {
			return err
		}
		m := res.add(run.measurement("latency, " + part.name))
		m.Detail = fmt.Sprintf("offered %g/s, enqueued at %.0f/s; handler start: %s; %s",
			b.o.Rate, run.enqRate, part.start, run.scheduleText())
		lat[part.name] = m
	}
	sql := lat["sql statement"].LatencyMS
	for _, name := range []string{"HandleTx", "Handle"} {
		res.ratio("latency p50 "+name+"/sql", lat[name].LatencyMS.P50, sql.P50, 0)
		res.ratio("latency p99 "+name+"/sql", lat[name].LatencyMS.P99, sql.P99, 0)
	}
	if b.o.Peer == "" {
		return nil
	}
	rm, _, err := b.riverLatency(ctx, "latency, no-op worker", n, b.o.Rate)
	if err != nil {
		return err
	}
	res.add(rm)
	for _, part := range parts {
		res.ratio("latency p99 "+part.name+"/river", lat[part.name].LatencyMS.P99, rm.LatencyMS.P99, 0)
	}
	return nil
}

// goStarts are the starts of goLatency's Go functions, by event number
// (the payload): the first of each, should one run twice.
type goStarts struct {
	mu sync.Mutex
	at map[int]time.Time
}

// handle is the function (of HandleTx or Handle): it notes the time at
// its entry.
func (g *goStarts) handle(_ context.Context, _ pgx.Tx, ev handlers.Event) error {
	at := time.Now()
	k, err := strconv.Atoi(ev.Payload)
	if err != nil {
		return fmt.Errorf("bench latency event %d: payload %q: %w", ev.ID, ev.Payload, err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.at[k]; !ok {
		g.at[k] = at
	}
	return nil
}

// write copies the starts into the bench table (once the Processor stopped).
func (g *goStarts) write(ctx context.Context, pool *pgxpool.Pool) error {
	g.mu.Lock()
	rows := make([][]any, 0, len(g.at))
	for k, at := range g.at {
		rows = append(rows, []any{k, at})
	}
	g.mu.Unlock()
	if _, err := pool.CopyFrom(ctx, pgx.Identifier{"pgrelay_bench", "latency"}, []string{"k", "started_at"},
		pgx.CopyFromRows(rows)); err != nil {
		return fmt.Errorf("write the Handle handler's starts to the bench table: %w", err)
	}
	return nil
}
