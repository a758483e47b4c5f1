package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

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
// no-op worker is the peer of all four.
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
		if err := unregisterChannels(ctx, b.pool, channel); err != nil {
			return res, err
		}
		if _, err := b.pool.Exec(ctx, `SELECT pgrelay.register($1, $2, p_kind := 'go')`, channel, goBenchHandler); err != nil {
			return res, fmt.Errorf("register the bench channel %s: %w", channel, err)
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
			m.Detail = fmt.Sprintf("claim, then one transaction per claim's events (up to --sql-batch %d), a savepoint per event, "+
				"one _complete and one commit; %d succeeded log rows checked", cfg.SQLBatch, n)
		case v.h.Tx:
			m.Detail = fmt.Sprintf("claim, then a transaction per event that completes it; %d succeeded log rows checked", n)
		default:
			m.Detail = fmt.Sprintf("claim, run, complete; %d succeeded log rows checked", n)
		}
		rates = append(rates, m.Rate)
	}
	if b.o.Peer == "" {
		return res, nil
	}
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
	return res, nil
}
