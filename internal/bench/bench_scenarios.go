package bench

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgrelay/pgrelay/actors"
)

// The scenarios burn-down, enqueue, latency, backlog, channels and ceiling.

const (
	// noopHandler is the handler of the bench's no-op channels.
	noopHandler = "SELECT $1"
	// singleNotifyMax bounds the one-event-per-transaction part of enqueue
	// (as the River harness bounds its single Inserts).
	singleNotifyMax = 10000
	// latencyInsertConns is the latency scenario's insert pool (the River
	// harness inserts through a pool of 10 connections too).
	latencyInsertConns = 10
)

// cleanup runs f with a context that outlives a cancelled ctx (bounded).
func cleanup(ctx context.Context, f func(ctx context.Context) error) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	return f(cctx)
}

// preinsert registers channel afresh (the no-op handler, mode none), notes
// the log's position, enqueues n events with notify_many (the fastest
// documented way) and settles the queue. The enqueue is reported, not
// counted.
func (b *bench) preinsert(ctx context.Context, label, channel string, n int) (mark int64, pre *measurement, err error) {
	if err := b.resetChannel(ctx, b.pool, channel, "sql", noopHandler, "none"); err != nil {
		return 0, nil, err
	}
	if mark, err = logMark(ctx, b.pool); err != nil {
		return 0, nil, err
	}
	took, err := b.insertBatches(ctx, label+": enqueue", n, b.o.Batch, notifyMany(b.pool, channel, ""))
	if err != nil {
		return 0, nil, err
	}
	if err := settle(ctx, b.pool); err != nil {
		return 0, nil, err
	}
	pre = newMeasurement(fmt.Sprintf("pre-insert (notify_many x %d)", b.o.Batch), "pgrelay", int64(n), took, "events/s")
	pre.Counted = false
	return mark, pre, nil
}

// scenarioBurnDown: N events pre-inserted, then one Processor drains them;
// events/s from its start to the last completion.
func (b *bench) scenarioBurnDown(ctx context.Context) (*scenarioResult, error) {
	const channel = "pgrelay_bench_noop"
	res := &scenarioResult{Name: "burn-down"}
	n := b.o.Events
	defer func() {
		_ = cleanup(ctx, func(ctx context.Context) error { return unregisterChannels(ctx, b.pool, channel) })
	}()
	mark, pre, err := b.preinsert(ctx, "burn-down", channel, n)
	if err != nil {
		return nil, err
	}
	res.add(pre)
	commitMS, err := b.commitFloor(ctx)
	if err != nil {
		return res, err
	}
	walFrom, err := b.mark(ctx)
	if err != nil {
		return res, err
	}
	spec := drainSpec{label: "burn-down: pgrelay", profile: "burn-down",
		procs: []actors.Config{b.procConfig(b.dbURL, "")}, channels: []string{channel}, target: int64(n)}
	if b.o.MixedProducers > 0 {
		spec.produce = func(ctx context.Context) (func() (int64, error), error) { return b.mixedProducers(ctx, channel) }
	}
	d, err := b.drain(ctx, spec)
	if err != nil {
		return res, err
	}
	total := int64(n) + d.produced
	cost, err := b.costSince(ctx, walFrom, total, commitMS)
	if err != nil {
		return res, err
	}
	if err := checkLog(ctx, b.pool, mark, []string{channel}, total, true); err != nil {
		return res, err
	}
	m := res.add(newMeasurement("burn-down", "pgrelay", total, d.took, "events/s"))
	m.Series = d.series
	m.Detail = fmt.Sprintf("claim, run, complete; %d succeeded log rows checked", total)
	if b.o.MixedProducers > 0 {
		m.Detail = fmt.Sprintf("%d pre-inserted, %d enqueued meanwhile by %d producers (notify(), one per transaction, %g/s in all); %d succeeded log rows checked",
			n, d.produced, b.o.MixedProducers, b.o.MixedRate, total)
	}
	m.Cost = cost
	if b.o.BurnDownRun {
		if err := b.burnDownRun(ctx, res, channel, n); err != nil {
			return res, err
		}
	}
	if b.o.Peer == "" {
		return res, nil
	}
	args := []string{"--events", strconv.Itoa(n), "--insert-batch", strconv.Itoa(b.o.Batch)}
	if b.o.MixedProducers > 0 {
		args = append(args, "--mixed-producers", strconv.Itoa(b.o.MixedProducers),
			"--mixed-rate", strconv.FormatFloat(b.o.MixedRate, 'g', -1, 64))
	}
	r, err := b.river.run(ctx, b, "burn-down", args...)
	if err != nil {
		return res, err
	}
	rpre := res.add(riverMeasurement(fmt.Sprintf("pre-insert (InsertMany x %d)", b.o.Batch), r.Events, r.InsertPerSec, 0, "jobs/s"))
	rpre.Counted = false
	rm := res.add(riverMeasurement("burn-down", r.Events, r.EventsPerSec, r.Seconds, "jobs/s"))
	rm.Series = r.Series
	rm.Detail = r.workerSettings() + "; completions from River's event subscription"
	rm.Cost = b.riverCost(r.Cost["burn_down"], commitMS)
	if b.o.MixedProducers > 0 {
		rm.Detail += fmt.Sprintf("; %d pre-inserted, %d inserted meanwhile by %d producers (Insert, one per transaction, %g/s in all)",
			n, r.Produced, b.o.MixedProducers, b.o.MixedRate)
	}
	res.ratio("pgrelay/river", m.Rate, rm.Rate, 0)
	return res, nil
}

// scenarioEnqueue: notify_many in batches, then single notify() calls in
// autocommit on one connection (one event per transaction, each waiting for
// its commit, as River's single Insert does).
func (b *bench) scenarioEnqueue(ctx context.Context) (*scenarioResult, error) {
	const channel = "pgrelay_bench_enqueue"
	res := &scenarioResult{Name: "enqueue"}
	n := b.o.Events
	singles := min(n, singleNotifyMax)
	if err := b.resetChannel(ctx, b.pool, channel, "sql", noopHandler, "none"); err != nil {
		return nil, err
	}
	// No Processor runs: the rows are discarded with the channel.
	defer func() {
		_ = cleanup(ctx, func(ctx context.Context) error { return unregisterChannels(ctx, b.pool, channel) })
	}()
	stopProf, err := b.prof.start("enqueue")
	if err != nil {
		return nil, err
	}
	defer stopProf()
	commitMS, err := b.commitFloor(ctx)
	if err != nil {
		return nil, err
	}
	walFrom, err := b.mark(ctx)
	if err != nil {
		return nil, err
	}
	manyTook, err := b.insertBatches(ctx, "enqueue: notify_many", n, b.o.Batch, notifyMany(b.pool, channel, "m"))
	if err != nil {
		return nil, err
	}
	manyCost, err := b.costSince(ctx, walFrom, int64(n), commitMS)
	if err != nil {
		return nil, err
	}
	conn, err := b.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	defer conn.Release()
	single := func(ctx context.Context, from, k int) error {
		for i := from; i < from+k; i++ {
			if _, err := conn.Exec(ctx, `SELECT pgrelay.notify($1::pg_catalog.text, $2::pg_catalog.text)`, channel, "s"+strconv.Itoa(i)); err != nil {
				return fmt.Errorf("notify: %w", err)
			}
		}
		return nil
	}
	if walFrom, err = b.mark(ctx); err != nil {
		return nil, err
	}
	singleTook, err := b.insertBatches(ctx, "enqueue: notify", singles, 1, single)
	if err != nil {
		return nil, err
	}
	oneCost, err := b.costSince(ctx, walFrom, int64(singles), commitMS)
	if err != nil {
		return nil, err
	}
	stopProf()
	var rows int64
	if err := b.pool.QueryRow(ctx, `SELECT count(*) FROM pgrelay.queue WHERE channel = $1`, channel).Scan(&rows); err != nil {
		return nil, fmt.Errorf("count the enqueued rows: %w", err)
	}
	if rows != int64(n+singles) {
		return nil, fmt.Errorf("the queue holds %d rows of the bench channel, want %d", rows, n+singles)
	}
	many := res.add(newMeasurement(fmt.Sprintf("notify_many x %d", b.o.Batch), "pgrelay", int64(n), manyTook, "events/s"))
	many.Detail = "one statement per batch; queue rows counted"
	many.Cost = manyCost
	one := res.add(newMeasurement("notify, one per transaction", "pgrelay", int64(singles), singleTook, "events/s"))
	one.Detail = "autocommit, one connection, one call after the other"
	one.Cost = oneCost
	if b.o.Peer == "" {
		return res, nil
	}
	r, err := b.river.run(ctx, b, "enqueue", "--events", strconv.Itoa(n), "--insert-batch", strconv.Itoa(b.o.Batch))
	if err != nil {
		return res, err
	}
	rmany := res.add(riverMeasurement(fmt.Sprintf("InsertMany x %d", b.o.Batch), r.Events, r.InsertPerSec, r.Seconds, "jobs/s"))
	rone := res.add(riverMeasurement("Insert, one per transaction", r.SingleInserts, r.SingleInsertPerSec, 0, "jobs/s"))
	rone.Detail = "one client, one call after the other"
	rmany.Cost = b.riverCost(r.Cost["insert_many"], commitMS)
	rone.Cost = b.riverCost(r.Cost["insert"], commitMS)
	res.ratio("notify_many/InsertMany", many.Rate, rmany.Rate, 0)
	res.ratio("notify/Insert", one.Rate, rone.Rate, 0)
	return res, nil
}

// scenarioLatency: events enqueued at --rate into a running Processor, each
// by a notify() in autocommit started on schedule (open loop: the schedule
// does not wait for earlier inserts); see measureLatency.
func (b *bench) scenarioLatency(ctx context.Context) (*scenarioResult, error) {
	res := &scenarioResult{Name: "latency"}
	n := b.o.LatencyEvents
	run, err := b.measureLatency(ctx, latencySpec{label: "latency", n: n, rate: b.o.Rate})
	if err != nil {
		return nil, err
	}
	m := res.add(run.measurement("enqueue commit to handler start"))
	m.Detail = fmt.Sprintf("offered %g/s, enqueued at %.0f/s; handler start: clock_timestamp() in the handler; %s",
		b.o.Rate, run.enqRate, run.scheduleText())
	if b.o.Peer == "" {
		return res, nil
	}
	rm, _, err := b.riverLatency(ctx, "enqueue commit to handler start", n, b.o.Rate)
	if err != nil {
		return res, err
	}
	res.add(rm)
	res.ratio("p50 pgrelay/river", m.LatencyMS.P50, rm.LatencyMS.P50, 0)
	res.ratio("p99 pgrelay/river", m.LatencyMS.P99, rm.LatencyMS.P99, 0)
	return res, nil
}

// openAll opens every connection pool may hold, at once, keeps them, and
// runs warm in a transaction on each that it then rolls back: a backend's
// first call of a function loads its caches, which costs many times a call.
func openAll(ctx context.Context, pool *pgxpool.Pool, warm func(ctx context.Context, tx pgx.Tx) error) error {
	n := int(pool.Config().MaxConns)
	conns := make([]*pgxpool.Conn, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if conns[i], errs[i] = pool.Acquire(ctx); errs[i] != nil {
				return
			}
			tx, err := conns[i].Begin(ctx)
			if err == nil {
				err = warm(ctx, tx)
				if rerr := tx.Rollback(ctx); err == nil {
					err = rerr
				}
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for _, c := range conns {
		if c != nil {
			c.Release()
		}
	}
	return errors.Join(errs...)
}

// openLoop calls insert(i) for i in 0..n-1, each in a goroutine of its own
// started at start + i/rate (labelled label) whatever the earlier ones cost, and returns when
// each insert returned (just after its commit) and the schedule's start.
func (b *bench) openLoop(ctx context.Context, label string, n int, rate float64, insert func(ctx context.Context, i int) error) ([]time.Time, time.Time, error) {
	inserted := make([]time.Time, n)
	insertErr := make(chan error, 1)
	var wg sync.WaitGroup
	interval := time.Duration(float64(time.Second) / rate)
	bar := b.prog.start(label, int64(n))
	defer bar.finish()
	var err error
	start := time.Now()
schedule:
	for i := range n {
		if wait := time.Until(start.Add(time.Duration(i) * interval)); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				err = ctx.Err()
				break schedule
			case err = <-insertErr:
				t.Stop()
				break schedule
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := insert(ctx, i); err != nil {
				select {
				case insertErr <- err:
				default:
				}
				return
			}
			inserted[i] = time.Now()
		}()
		bar.set(int64(i + 1))
	}
	wg.Wait()
	if err == nil {
		select {
		case err = <-insertErr:
		default:
		}
	}
	return inserted, start, err
}

// handlerStarts reads the latency handler's start times of events 0..n-1
// (the first, should one have run twice).
func handlerStarts(ctx context.Context, pool *pgxpool.Pool, n int) ([]time.Time, error) {
	rows, err := pool.Query(ctx, `SELECT k, min(started_at) FROM pgrelay_bench.latency WHERE k >= 0 GROUP BY k`)
	if err != nil {
		return nil, fmt.Errorf("read the handler starts: %w", err)
	}
	started := make([]time.Time, n)
	seen := 0
	var k int
	var at time.Time
	_, err = pgx.ForEachRow(rows, []any{&k, &at}, func() error {
		if k < n {
			started[k] = at
			seen++
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the handler starts: %w", err)
	}
	if seen != n {
		return nil, fmt.Errorf("the bench table holds the handler starts of %d events, want %d", seen, n)
	}
	return started, nil
}

func msOf(sorted []time.Duration) []float64 {
	out := make([]float64, len(sorted))
	for i, d := range sorted {
		out[i] = ms(d)
	}
	return out
}

// scenarioBacklog: at each backlog size P, P events pending, then a
// Processor runs until M = min(P, --backlog-measure) completed; the rest is
// discarded. The claim must not slow down with the backlog: the ratio of
// the largest size's rate to the smallest's should be about 1.
func (b *bench) scenarioBacklog(ctx context.Context) (*scenarioResult, error) {
	const channel = "pgrelay_bench_backlog"
	res := &scenarioResult{Name: "backlog"}
	defer func() {
		_ = cleanup(ctx, func(ctx context.Context) error { return unregisterChannels(ctx, b.pool, channel) })
	}()
	var small, large *measurement
	for _, size := range b.o.BacklogSizes {
		measure := min(size, b.o.BacklogMeasure)
		label := fmt.Sprintf("backlog %d", size)
		mark, pre, err := b.preinsert(ctx, label, channel, size)
		if err != nil {
			return res, err
		}
		pre.Backlog = int64(size)
		res.add(pre)
		d, err := b.drain(ctx, drainSpec{label: label + ": pgrelay", profile: fmt.Sprintf("backlog-%d", size),
			procs: []actors.Config{b.procConfig(b.dbURL, "")}, channels: []string{channel}, target: int64(measure)})
		if err != nil {
			return res, err
		}
		// The Processor ran on until stopped: the log holds what it counted.
		if err := checkLog(ctx, b.pool, mark, []string{channel}, d.succeeded, d.succeeded == int64(size)); err != nil {
			return res, err
		}
		m := res.add(newMeasurement(fmt.Sprintf("burn-down of %d", measure), "pgrelay", int64(measure), d.took, "events/s"))
		m.Backlog, m.Series = int64(size), d.series
		m.Detail = fmt.Sprintf("%d pending at the start; %d completed until the stop, as many log rows", size, d.succeeded)
		// Discard the rest before the next size.
		if err := unregisterChannels(ctx, b.pool, channel); err != nil {
			return res, err
		}
		if small == nil || m.Backlog < small.Backlog {
			small = m
		}
		if large == nil || m.Backlog > large.Backlog {
			large = m
		}
	}
	if small != large {
		res.ratio(fmt.Sprintf("%d/%d pending", large.Backlog, small.Backlog), large.Rate, small.Rate, 0)
	}
	return res, nil
}

// scenarioChannels: K 'channel'-mode channels (one event at a time each)
// with E events each, then K*E events in one 'none' channel; events/s and
// the peak RSS of each run.
func (b *bench) scenarioChannels(ctx context.Context) (*scenarioResult, error) {
	const none = "pgrelay_bench_none"
	res := &scenarioResult{Name: "channels"}
	k, e := b.o.Channels, b.o.PerChannel
	total := k * e
	names := make([]string, k)
	for i := range names {
		names[i] = "pgrelay_bench_ch_" + strconv.Itoa(i+1)
	}
	all := append(slices.Clone(names), none)
	if err := unregisterChannels(ctx, b.pool, all...); err != nil {
		return nil, err
	}
	defer func() {
		_ = cleanup(ctx, func(ctx context.Context) error { return unregisterChannels(ctx, b.pool, all...) })
	}()
	if _, err := b.pool.Exec(ctx, `SELECT pgrelay.register('pgrelay_bench_ch_' || g, $2, p_concurrency_mode := 'channel')
		FROM generate_series(1, $1::int) g`, k, noopHandler); err != nil {
		return nil, fmt.Errorf("register the bench channels: %w", err)
	}
	mark, err := logMark(ctx, b.pool)
	if err != nil {
		return nil, err
	}
	// A statement enqueues whole channels: notify_many per channel.
	chunk := max(1, b.o.Batch/e)
	took, err := b.insertBatches(ctx, "channels: enqueue", total, chunk*e, func(ctx context.Context, from, n int) error {
		if _, err := b.pool.Exec(ctx, `SELECT count(*) FROM generate_series($1::int, $2::int) c
			CROSS JOIN LATERAL pgrelay.notify_many('pgrelay_bench_ch_' || c,
				ARRAY(SELECT c || '-' || e FROM generate_series(1, $3::int) e))`, from/e+1, (from+n)/e, e); err != nil {
			return fmt.Errorf("enqueue with notify_many: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := settle(ctx, b.pool); err != nil {
		return nil, err
	}
	pre := res.add(newMeasurement(fmt.Sprintf("pre-insert (notify_many per channel, %d channels per statement)", chunk),
		"pgrelay", int64(total), took, "events/s"))
	pre.Counted = false
	cm, err := b.measureRSS(ctx, "channels: 'channel' mode", "channels-channel", names, total)
	if err != nil {
		return res, err
	}
	if err := checkLog(ctx, b.pool, mark, names, int64(total), true); err != nil {
		return res, err
	}
	cm.Name = fmt.Sprintf("%d 'channel'-mode channels x %d", k, e)
	res.add(cm)

	mark, pre, err = b.preinsert(ctx, "channels: one 'none' channel", none, total)
	if err != nil {
		return res, err
	}
	res.add(pre)
	nm, err := b.measureRSS(ctx, "channels: one 'none' channel", "channels-none", []string{none}, total)
	if err != nil {
		return res, err
	}
	if err := checkLog(ctx, b.pool, mark, []string{none}, int64(total), true); err != nil {
		return res, err
	}
	nm.Name = "one 'none' channel"
	res.add(nm)
	res.ratio("channel mode/none", cm.Rate, nm.Rate, 0.5)
	return res, nil
}

// measureRSS drains total events of channels with one Processor and
// measures the peak RSS of this process (which hosts the Processor) from
// just before its start to just after its stop: the bench's freed memory is
// returned to the OS and the peak reset first, and the bench itself only
// reads counters in that window.
func (b *bench) measureRSS(ctx context.Context, label, profile string, channels []string, total int) (*measurement, error) {
	debug.FreeOSMemory()
	resetErr := resetPeakRSS()
	d, err := b.drain(ctx, drainSpec{label: label, profile: profile, procs: []actors.Config{b.procConfig(b.dbURL, "")},
		channels: channels, target: int64(total)})
	if err != nil {
		return nil, err
	}
	m := newMeasurement("", "pgrelay", int64(total), d.took, "events/s")
	m.Series = d.series
	if resetErr != nil {
		m.Detail = "peak RSS not measured: " + resetErr.Error()
		return m, nil
	}
	peak, err := peakRSS()
	if err != nil {
		m.Detail = "peak RSS not measured: " + err.Error()
		return m, nil
	}
	m.PeakRSSBytes = peak
	m.Detail = "peak RSS of the bench process, which hosts the Processor"
	return m, nil
}
