package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/pgrelay/pgrelay/actors"
)

// The helpers every scenario shares: channels, enqueueing, following the
// completions, running Processors and checking the log afterwards.

const (
	// sampleEvery is the interval of the completions-over-time series.
	sampleEvery = 100 * time.Millisecond
	// stallAfter: a run in which no event completes for this long fails.
	stallAfter = 2 * time.Minute
)

// resetChannel force-unregisters channel when it exists (discarding its
// queued rows) and registers it afresh: of kind, with handler, in mode.
func (b *bench) resetChannel(ctx context.Context, pool *pgxpool.Pool, channel, kind, handler, mode string) error {
	if err := unregisterChannels(ctx, pool, channel); err != nil {
		return err
	}
	if _, err := pool.Exec(ctx, `SELECT pgrelay.register($1::pg_catalog.text, $2::pg_catalog.text,
		p_kind := $3::pg_catalog.text, p_concurrency_mode := $4::pg_catalog.text)`, channel, handler, kind, mode); err != nil {
		return fmt.Errorf("register the bench channel %s: %w", channel, err)
	}
	return nil
}

// unregisterChannels force-unregisters those of channels that exist; their
// queued rows are deleted with them (their log rows stay).
func unregisterChannels(ctx context.Context, pool *pgxpool.Pool, channels ...string) error {
	if _, err := pool.Exec(ctx, `SELECT pgrelay.unregister(channel, p_force := true) FROM pgrelay.channels
		WHERE channel = ANY($1)`, channels); err != nil {
		return fmt.Errorf("unregister the bench channels: %w", err)
	}
	return nil
}

// logMark is the newest log id: the rows of a run come after it.
func logMark(ctx context.Context, pool *pgxpool.Pool) (int64, error) {
	var id int64
	if err := pool.QueryRow(ctx, `SELECT COALESCE(max(id), 0) FROM pgrelay.log`).Scan(&id); err != nil {
		return 0, fmt.Errorf("read the log's last id: %w", err)
	}
	return id, nil
}

// enqueueFunc enqueues the events from, from+1, ..., from+k-1.
type enqueueFunc func(ctx context.Context, from, k int) error

// insertBatches enqueues n events with send, batch per call, showing
// progress, and returns how long it took.
func (b *bench) insertBatches(ctx context.Context, label string, n, batch int, send enqueueFunc) (time.Duration, error) {
	bar := b.prog.start(label, int64(n))
	defer bar.finish()
	start := time.Now()
	for i := 0; i < n; i += batch {
		k := min(batch, n-i)
		if err := send(ctx, i, k); err != nil {
			return 0, err
		}
		bar.set(int64(i + k))
	}
	return time.Since(start), nil
}

// notifyMany enqueues into channel with pgrelay.notify_many (payloads
// prefix+number), one call per batch.
func notifyMany(pool *pgxpool.Pool, channel, prefix string) enqueueFunc {
	var payloads []string
	return func(ctx context.Context, from, k int) error {
		payloads = payloads[:0]
		for i := from; i < from+k; i++ {
			payloads = append(payloads, prefix+strconv.Itoa(i))
		}
		if _, err := pool.Exec(ctx, `SELECT count(*) FROM pgrelay.notify_many($1, $2)`, channel, payloads); err != nil {
			return fmt.Errorf("enqueue into %s with notify_many: %w", channel, err)
		}
		return nil
	}
}

// settle vacuums and analyzes the queue before a measured run, so that it
// neither starts on stale statistics nor on an earlier run's dead rows, and
// autovacuum has nothing to catch up on while it runs; then quiesce.
func settle(ctx context.Context, pool *pgxpool.Pool) error {
	if _, err := pool.Exec(ctx, `VACUUM (ANALYZE) pgrelay.queue`); err != nil {
		return fmt.Errorf("vacuum the queue: %w", err)
	}
	return quiesce(ctx, pool)
}

// quiesce lets the server catch up before a measurement, whichever system
// is measured next: a checkpoint, so that the writes of what ran before are
// not flushed during it (skipped without the privilege), and a wait of up to
// quiesceWait for the autovacuum workers to finish.
func quiesce(ctx context.Context, pool *pgxpool.Pool) error {
	if _, err := pool.Exec(ctx, `CHECKPOINT`); err != nil {
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "42501" {
			return fmt.Errorf("checkpoint: %w", err)
		}
	}
	deadline := time.Now().Add(quiesceWait)
	for {
		var workers int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_catalog.pg_stat_activity
			WHERE backend_type = 'autovacuum worker'`).Scan(&workers); err != nil {
			return fmt.Errorf("look for autovacuum workers: %w", err)
		}
		if workers == 0 || time.Now().After(deadline) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// quiesceWait bounds how long quiesce waits for autovacuum.
const quiesceWait = 30 * time.Second

// counterSum is a sum of Prometheus counters: the Processors' own counts,
// read without a query (a count(*) of the log every few milliseconds would
// take the database's CPU from what is measured).
type counterSum []prometheus.Counter

func (c counterSum) value() int64 {
	var m dto.Metric
	var sum float64
	for _, x := range c {
		m.Reset()
		if x.Write(&m) == nil {
			sum += m.GetCounter().GetValue()
		}
	}
	return int64(sum)
}

// procCounters are the Processors' succeeded and gave-up counters of
// channels. Succeeded is counted once the completion is committed.
func procCounters(procs []*actors.Processor, channels []string) (succeeded, gaveUp counterSum) {
	for _, p := range procs {
		m := p.Metrics()
		for _, ch := range channels {
			succeeded = append(succeeded, m.Succeeded.WithLabelValues(ch))
			gaveUp = append(gaveUp, m.GaveUp.WithLabelValues(ch))
		}
	}
	return succeeded, gaveUp
}

// seriesPoint is a sample of a run: Done events completed T seconds after
// its start.
type seriesPoint struct {
	T    float64 `json:"t"`
	Done int64   `json:"done"`
}

// follow says what to follow until when.
type follow struct {
	label  string       // progress label
	target int64        // done when this many events completed
	done   func() int64 // events completed since start
	lost   func() int64 // events that will never complete (nil: none)
	start  time.Time    // the clock's start
	tick   time.Duration
}

// followed is the end of a run (the first reading that reached the target)
// and its completions over time.
type followed struct {
	end    time.Time
	series []seriesPoint
}

// follow reads the completions every tick (default 10 ms) until the target,
// showing progress and sampling the series every sampleEvery. It fails when
// events gave up or nothing completed for stallAfter.
func (b *bench) follow(ctx context.Context, w follow) (followed, error) {
	tick := w.tick
	if tick <= 0 {
		tick = 10 * time.Millisecond
	}
	bar := b.prog.startAt(w.label, w.target, w.start)
	defer bar.finish()
	t := time.NewTicker(tick)
	defer t.Stop()
	series := []seriesPoint{{T: 0, Done: 0}}
	lastSample := w.start
	var lastDone int64
	lastChange := time.Now()
	for {
		var now time.Time
		select {
		case <-ctx.Done():
			return followed{series: series}, fmt.Errorf("%d of %d events completed: %w", w.done(), w.target, ctx.Err())
		case now = <-t.C:
		}
		done := w.done()
		bar.set(done)
		if done >= w.target {
			series = append(series, seriesPoint{T: secs(now.Sub(w.start)), Done: done})
			return followed{end: now, series: series}, nil
		}
		if now.Sub(lastSample) < sampleEvery {
			continue
		}
		lastSample = now
		series = append(series, seriesPoint{T: secs(now.Sub(w.start)), Done: done})
		var lost int64
		if w.lost != nil {
			lost = w.lost()
		}
		if lost > 0 && done+lost >= w.target {
			return followed{series: series}, fmt.Errorf("%d of %d events gave up (see the log's errors); %d completed", lost, w.target, done)
		}
		if done != lastDone {
			lastDone, lastChange = done, now
		} else if now.Sub(lastChange) > stallAfter {
			return followed{series: series}, fmt.Errorf("no event completed for %s: %d of %d completed, %d gave up", stallAfter, done, w.target, lost)
		}
	}
}

// drainSpec is a measured run of Processors.
type drainSpec struct {
	label    string          // progress label
	profile  string          // the CPU profile part's name
	procs    []actors.Config // one Processor each (DatabaseURL set)
	channels []string        // whose completions count
	target   int64           // the run ends when this many completed
	// gaveUpDone counts events that gave up as done (email: a failed email
	// is an outcome too).
	gaveUpDone bool
	// atTarget runs after the target, before the Processors stop.
	atTarget func(ctx context.Context, start time.Time) error
	// produce, when set, starts producers with the Processors; they run
	// until the target completed, and the run ends once the events they
	// enqueued completed too (stop returns how many).
	produce func(ctx context.Context) (stop func() (int64, error), err error)
}

// drained is a measured run's result.
type drained struct {
	start  time.Time     // just before the first Processor's Start
	took   time.Duration // from start to the target
	series []seriesPoint
	// succeeded and gaveUp are the counters after the Processors stopped
	// (they may exceed the target: the Processors run on until stopped).
	succeeded, gaveUp int64
	// produced is how many events spec.produce enqueued (within took).
	produced int64
}

// drain starts a Processor per spec.procs (each with its own metrics
// registry), follows their completion counters until spec.target, and stops
// them. The clock starts just before the first Processor's Start.
func (b *bench) drain(ctx context.Context, spec drainSpec) (drained, error) {
	var procs []*actors.Processor
	stopAll := func() error {
		var errs []error
		for _, p := range procs {
			if err := p.Stop(context.WithoutCancel(ctx)); err != nil {
				errs = append(errs, fmt.Errorf("stop the Processor: %w", err))
			}
		}
		procs = nil
		return errors.Join(errs...)
	}
	defer func() { _ = stopAll() }()
	stopProf, err := b.prof.start(spec.profile)
	if err != nil {
		return drained{}, err
	}
	defer stopProf()
	start := time.Now()
	for _, c := range spec.procs {
		p, err := newProcessor(c)
		if err != nil {
			return drained{}, err
		}
		if err := p.Start(ctx); err != nil {
			return drained{}, err
		}
		procs = append(procs, p)
	}
	succ, gave := procCounters(procs, spec.channels)
	done, lost := succ.value, gave.value
	if spec.gaveUpDone {
		done, lost = func() int64 { return succ.value() + gave.value() }, nil
	}
	var tick time.Duration // follow's default
	if len(succ) > 16 {
		tick = sampleEvery // reading thousands of counters costs
	}
	var stopProducers func() (int64, error)
	if spec.produce != nil {
		if stopProducers, err = spec.produce(ctx); err != nil {
			return drained{}, err
		}
		defer func() {
			if stopProducers != nil {
				_, _ = stopProducers()
			}
		}()
	}
	fw, err := b.follow(ctx, follow{label: spec.label, target: spec.target, done: done, lost: lost, start: start, tick: tick})
	var produced int64
	if err == nil && stopProducers != nil {
		produced, err = stopProducers()
		stopProducers = nil
		if err == nil {
			var more followed
			more, err = b.follow(ctx, follow{label: spec.label + " (produced)", target: spec.target + produced,
				done: done, lost: lost, start: start, tick: tick})
			fw.end = more.end
			fw.series = append(fw.series, more.series[1:]...) // without its start
		}
	}
	stopProf()
	d := drained{start: start, series: fw.series, produced: produced}
	if err != nil {
		return d, err
	}
	d.took = fw.end.Sub(start)
	if spec.atTarget != nil {
		if err := spec.atTarget(ctx, start); err != nil {
			return d, err
		}
	}
	if err := stopAll(); err != nil {
		return d, err
	}
	d.succeeded, d.gaveUp = succ.value(), gave.value()
	return d, nil
}

// checkLog checks the log after a run: it must hold exactly want succeeded
// rows for channels after mark, one per event; with drained set, the
// channels must have nothing left in the queue.
func checkLog(ctx context.Context, pool *pgxpool.Pool, mark int64, channels []string, want int64, drainedAll bool) error {
	var rows, events, left int64
	if err := pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT origin_id) FROM pgrelay.log
		WHERE id > $1 AND channel = ANY($2) AND event = 'succeeded'`, mark, channels).Scan(&rows, &events); err != nil {
		return fmt.Errorf("count the run's log rows: %w", err)
	}
	if rows != want || events != want {
		return fmt.Errorf("the log holds %d succeeded rows for %d events of this run, want %d", rows, events, want)
	}
	if !drainedAll {
		return nil
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM pgrelay.queue WHERE channel = ANY($1)`, channels).Scan(&left); err != nil {
		return fmt.Errorf("count the queue's rows: %w", err)
	}
	if left != 0 {
		return fmt.Errorf("%d rows are left in the queue after the run", left)
	}
	return nil
}

// secs is d in seconds, rounded to the millisecond.
func secs(d time.Duration) float64 { return round(d.Seconds(), 3) }
