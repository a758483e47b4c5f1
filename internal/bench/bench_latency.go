package bench

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgrelay/pgrelay/actors"
	"github.com/pgrelay/pgrelay/events/store"
	"github.com/pgrelay/pgrelay/internal/handlers"
)

// The latency measurement that the latency and latency-load scenarios
// share: events enqueued on an open-loop schedule into a running Processor,
// each one's handler start minus the return of its notify() (its commit).

// latencyChannel is the channel whose handler records its start.
const latencyChannel = "pgrelay_bench_latency"

// latencySpec is one latency measurement.
type latencySpec struct {
	label string  // progress label and CPU profile part
	n     int     // events measured
	rate  float64 // events enqueued per second
	dbURL string  // the Processor's and the inserts' database (empty: the bench's)
	// backlog events are pending in backlogChannel (a no-op channel) when the
	// Processor starts: it drains them while the events are measured.
	backlog        int
	backlogChannel string
	// goHandler, when set, makes the latency channel one of kind go with
	// this handler (registered as goBenchHandler) instead of a sql one whose
	// statement records the start. It records each event's start in the
	// bench table itself, or hands it to afterStop.
	goHandler *handlers.GoHandler
	// afterStop, when set, runs once the Processor stopped, before the
	// starts are read: it writes those recorded outside the database.
	afterStop func(ctx context.Context) error
}

// latencyInsert records event k's handler start in the bench table: the
// sql kind's statement (a Go function's start is written after the run).
const latencyInsert = `INSERT INTO pgrelay_bench.latency (k, started_at) VALUES ($1::pg_catalog.int4, pg_catalog.clock_timestamp())`

// latencyRun is a latency measurement's result.
type latencyRun struct {
	lat       []time.Duration // sorted
	start     time.Time       // the schedule's start
	lastStart time.Time       // the last handler start
	enqRate   float64         // the enqueue rate achieved (commits/s)
	// fromSchedule are the handler starts minus the events' scheduled
	// enqueue times (sorted): with the wait for an insert connection and
	// the commit, which the latency leaves out.
	fromSchedule []time.Duration
	backlogPre   *measurement // the backlog's pre-insert (nil without one)
	// backlogAtLastEnqueue is what was left of the backlog when the last
	// event was enqueued: zero means it drained too early for every event
	// to have been measured under it. backlogLeft is what was left once the
	// last event completed (the Processor stopped).
	backlogAtLastEnqueue, backlogLeft int64
}

// measureLatency runs one latency measurement: the bench table and the
// latency channel afresh (and the backlog, pre-inserted, when asked), one
// Processor, a warm-up event, the open-loop schedule through an insert pool
// of latencyInsertConns connections, and the log checked afterwards. An
// event's latency is its handler's start (clock_timestamp() in the
// handler's statement, recorded in the bench's own table; for a go channel,
// what its Go handler recorded there) minus the time just after its notify
// returned. Both clocks are this machine's: the
// database must run here. The bench table and the channels are removed
// afterwards.
func (b *bench) measureLatency(ctx context.Context, spec latencySpec) (*latencyRun, error) {
	const channel = latencyChannel
	dbURL := spec.dbURL
	if dbURL == "" {
		dbURL = b.dbURL
	}
	n := spec.n
	if _, err := b.pool.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS pgrelay_bench;
		DROP TABLE IF EXISTS pgrelay_bench.latency;
		CREATE TABLE pgrelay_bench.latency (k int NOT NULL, started_at timestamptz NOT NULL)`); err != nil {
		return nil, fmt.Errorf("create the bench table: %w", err)
	}
	defer func() {
		_ = cleanup(ctx, func(ctx context.Context) error {
			chans := []string{channel}
			if spec.backlog > 0 {
				chans = append(chans, spec.backlogChannel)
			}
			if err := unregisterChannels(ctx, b.pool, chans...); err != nil {
				return err
			}
			_, err := b.pool.Exec(ctx, `DROP TABLE IF EXISTS pgrelay_bench.latency`)
			// The schema goes too when nothing else is in it.
			_, _ = b.pool.Exec(ctx, `DROP SCHEMA IF EXISTS pgrelay_bench`)
			return err
		})
	}()
	run := &latencyRun{}
	if spec.backlog > 0 {
		var err error
		if _, run.backlogPre, err = b.preinsert(ctx, spec.label+": backlog", spec.backlogChannel, spec.backlog); err != nil {
			return nil, err
		}
		run.backlogPre.Backlog = int64(spec.backlog)
	}
	cfg := b.procConfig(dbURL, "")
	if spec.goHandler == nil {
		if err := b.resetChannel(ctx, b.pool, channel, "sql", latencyInsert, "none"); err != nil {
			return nil, err
		}
	} else {
		if err := b.resetChannel(ctx, b.pool, channel, "go", goBenchHandler, "none"); err != nil {
			return nil, err
		}
		cfg.GoHandlers = map[string]handlers.GoHandler{goBenchHandler: *spec.goHandler}
	}
	mark, err := logMark(ctx, b.pool)
	if err != nil {
		return nil, err
	}
	if err := settle(ctx, b.pool); err != nil {
		return nil, err
	}
	p, err := newProcessor(cfg)
	if err != nil {
		return nil, err
	}
	if err := p.Start(ctx); err != nil {
		return nil, err
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = p.Stop(context.WithoutCancel(ctx))
		}
	}()
	succ, gave := procCounters([]*actors.Processor{p}, []string{channel})

	// One warm-up event, not counted, so that the first measured one does not
	// pay for the Processor's start (River's harness does the same).
	if _, err := b.pool.Exec(ctx, `SELECT pgrelay.notify($1::pg_catalog.text, '-1'::pg_catalog.text)`, channel); err != nil {
		return nil, fmt.Errorf("notify: %w", err)
	}
	if _, err := b.follow(ctx, follow{label: spec.label + ": warm-up", target: 1, done: succ.value, lost: gave.value,
		start: time.Now()}); err != nil {
		return nil, err
	}

	// The inserts go through a pool of their own, as an application's would.
	pcfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return nil, fmt.Errorf("parse the database URL: %w", err)
	}
	if !strings.Contains(dbURL, "pool_max_conns") {
		pcfg.MaxConns = latencyInsertConns
	}
	store.PinSearchPath(pcfg.ConnConfig)
	ins, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("connect the insert pool: %w", err)
	}
	defer ins.Close()
	// Its connections are opened, and each runs a notify() that it rolls
	// back, before the schedule starts (River's harness does the same): the
	// measure is the relay's, not the time the server takes to start the
	// producer's backends.
	if err := openAll(ctx, ins, func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `SELECT pgrelay.notify($1::pg_catalog.text, '-2'::pg_catalog.text)`, channel)
		return err
	}); err != nil {
		return nil, fmt.Errorf("connect the insert pool: %w", err)
	}

	stopProf, err := b.prof.start(spec.label)
	if err != nil {
		return nil, err
	}
	defer stopProf()
	inserted, start, err := b.openLoop(ctx, fmt.Sprintf("%s: enqueue at %g/s", spec.label, spec.rate), n, spec.rate,
		func(ctx context.Context, i int) error {
			if _, err := ins.Exec(ctx, `SELECT pgrelay.notify($1::pg_catalog.text, $2::pg_catalog.text)`, channel, strconv.Itoa(i)); err != nil {
				return fmt.Errorf("notify: %w", err)
			}
			return nil
		})
	if err != nil {
		return nil, err
	}
	if spec.backlog > 0 {
		if err := b.pool.QueryRow(ctx, `SELECT count(*) FROM pgrelay.queue WHERE channel = $1`,
			spec.backlogChannel).Scan(&run.backlogAtLastEnqueue); err != nil {
			return nil, fmt.Errorf("count the backlog's rows: %w", err)
		}
	}
	if _, err := b.follow(ctx, follow{label: spec.label + ": pgrelay", target: int64(n) + 1, done: succ.value,
		lost: gave.value, start: start}); err != nil {
		return nil, err
	}
	stopProf()
	stopped = true
	if err := p.Stop(context.WithoutCancel(ctx)); err != nil {
		return nil, fmt.Errorf("stop the Processor: %w", err)
	}
	if spec.backlog > 0 {
		if err := b.pool.QueryRow(ctx, `SELECT count(*) FROM pgrelay.queue WHERE channel = $1`,
			spec.backlogChannel).Scan(&run.backlogLeft); err != nil {
			return nil, fmt.Errorf("count the backlog's rows: %w", err)
		}
	}
	if spec.afterStop != nil {
		if err := spec.afterStop(ctx); err != nil {
			return nil, err
		}
	}
	if err := checkLog(ctx, b.pool, mark, []string{channel}, int64(n)+1, true); err != nil {
		return nil, err
	}
	started, err := handlerStarts(ctx, b.pool, n)
	if err != nil {
		return nil, err
	}
	lat := make([]time.Duration, n)
	run.fromSchedule = make([]time.Duration, n)
	interval := time.Duration(float64(time.Second) / spec.rate)
	lastStart, lastInsert := started[0], inserted[0]
	for i := range lat {
		lat[i] = started[i].Sub(inserted[i])
		run.fromSchedule[i] = started[i].Sub(start.Add(time.Duration(i) * interval))
		if started[i].After(lastStart) {
			lastStart = started[i]
		}
		if inserted[i].After(lastInsert) {
			lastInsert = inserted[i]
		}
	}
	slices.Sort(lat)
	slices.Sort(run.fromSchedule)
	run.lat, run.start, run.lastStart = lat, start, lastStart
	if d := lastInsert.Sub(start); d > 0 {
		run.enqRate = float64(n) / d.Seconds()
	}
	return run, nil
}

// scheduleText is the latency from the scheduled enqueue, for the table.
func (r *latencyRun) scheduleText() string {
	l := latencyOf(r.fromSchedule)
	return fmt.Sprintf("from the scheduled enqueue (with the wait for a connection and the commit): p50 %.2fms p99 %.2fms", l.P50, l.P99)
}

// measurement is the run as a figure of system pgrelay.
func (r *latencyRun) measurement(name string) *measurement {
	return &measurement{Name: name, System: "pgrelay", Events: int64(len(r.lat)),
		Seconds: secs(r.lastStart.Sub(r.start)), Counted: true, LatencyMS: latencyOf(r.lat), samplesMS: msOf(r.lat)}
}

// riverLatency runs the River harness's latency scenario with args and
// returns its figure.
func (b *bench) riverLatency(ctx context.Context, name string, n int, rate float64, args ...string) (*measurement, *riverResult, error) {
	if err := quiesce(ctx, b.pool); err != nil {
		return nil, nil, err
	}
	r, err := b.river.run(ctx, b, "latency", append([]string{"--events", strconv.Itoa(n),
		"--rate", strconv.FormatFloat(rate, 'g', -1, 64)}, args...)...)
	if err != nil {
		return nil, nil, err
	}
	if r.LatencyMS == nil {
		return nil, nil, fmt.Errorf("river harness: no latency in its result")
	}
	rm := riverMeasurement(name, r.Events, 0, r.Seconds, "")
	rm.LatencyMS, rm.samplesMS = r.LatencyMS, r.LatencySamplesMS
	rm.Detail = fmt.Sprintf("offered %g/s, inserted at %.0f/s; handler start: time.Now() in Work(); %s", rate, r.InsertPerSec, r.workerSettings())
	return rm, r, nil
}
