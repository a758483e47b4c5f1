package bench

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgrelay/pgrelay/actors"
	"github.com/pgrelay/pgrelay/events/store"
)

// The producers scenario: many connections committing one event per
// transaction at once, as an application's request handlers do.

const (
	producersChannel = "pgrelay_bench_producers"
	// producerApp is the producers' application_name: the wait-event
	// samples count their backends only (River's harness names its
	// producers the same).
	producerApp = "pgrelay_bench_producer"
	// commitDelayUS is the commit_delay of the delayed variant: each WAL
	// flush at commit sleeps this long first (commit_siblings 0: always).
	commitDelayUS = 1000
	// waitSampleEvery is the interval of the pg_stat_activity samples.
	waitSampleEvery = 100 * time.Millisecond
	// commitProbes: the single-connection commit latency is measured over
	// this many commits.
	commitProbes = 200
)

// producerVariant is one of the producers runs at each number of
// producers.
type producerVariant struct {
	name      string
	processor bool // a Processor runs and drains the channel meanwhile
	delay     bool // every connection's commits flush commitDelayUS later
}

var producerVariants = []producerVariant{
	{name: "no Processor"},
	{name: "Processor draining", processor: true},
	{name: "Processor draining, commit +1 ms", processor: true, delay: true},
}

// delayParams are the connection parameters of the delayed variant, for
// every connection of it: the producers', the Processor's and River's.
var delayParams = map[string]string{"commit_delay": strconv.Itoa(commitDelayUS), "commit_siblings": "0"}

// scenarioProducers: for each --producers N and each variant, N
// connections each commit BEGIN; SELECT pgrelay.notify(); COMMIT in a loop
// for --producer-duration: committed events/s, each transaction's latency,
// what the Processor completed meanwhile, and the producers' backends per
// wait event (pg_stat_activity sampled every 100 ms). River's InsertTx, one
// job per transaction, on as many connections follows each run.
func (b *bench) scenarioProducers(ctx context.Context) (*scenarioResult, error) {
	res := &scenarioResult{Name: "producers"}
	defer func() {
		_ = cleanup(ctx, func(ctx context.Context) error { return unregisterChannels(ctx, b.pool, producersChannel) })
	}()
	delayURL, err := withParams(b.dbURL, delayParams)
	if err != nil {
		return nil, err
	}
	// The delayed variant adds ~1 ms to each WAL flush at commit: measured
	// here on one connection, before and after.
	if _, err := b.pool.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS pgrelay_bench;
		CREATE TABLE IF NOT EXISTS pgrelay_bench.commit_probe (x int NOT NULL)`); err != nil {
		return nil, fmt.Errorf("create the commit probe's table: %w", err)
	}
	defer func() {
		_ = cleanup(ctx, func(ctx context.Context) error {
			_, err := b.pool.Exec(ctx, `DROP TABLE IF EXISTS pgrelay_bench.commit_probe`)
			// The schema goes too when nothing else is in it.
			_, _ = b.pool.Exec(ctx, `DROP SCHEMA IF EXISTS pgrelay_bench`)
			return err
		})
	}()
	plain, err := commitLatency(ctx, b.dbURL)
	if err != nil {
		return nil, err
	}
	pm := res.add(&measurement{Name: "commit latency, one connection", System: "pgrelay", Events: commitProbes,
		LatencyMS: latencyOf(plain), Counted: false})
	pm.Detail = "a one-row INSERT in autocommit, one after the other (each commit waits for its WAL flush)"
	delayed, err := commitLatency(ctx, delayURL)
	var pgErr *pgconn.PgError
	delayOK := err == nil
	switch {
	case err == nil:
		dm := res.add(&measurement{Name: "commit latency, one connection, commit_delay", System: "pgrelay",
			Events: commitProbes, LatencyMS: latencyOf(delayed), Counted: false})
		dm.Detail = fmt.Sprintf("the same with commit_delay = %d, commit_siblings = 0 set at connection", commitDelayUS)
	case errors.As(err, &pgErr) && pgErr.Code == "42501":
		// commit_delay is a superuser's setting.
		res.add(&measurement{Name: "commit +1 ms variant skipped", System: "pgrelay",
			Detail: "commit_delay needs a superuser: " + pgErr.Message})
	default:
		return res, err
	}
	for _, n := range b.o.Producers {
		for _, v := range producerVariants {
			if v.delay && !delayOK {
				continue
			}
			dbURL := b.dbURL
			if v.delay {
				dbURL = delayURL
			}
			m, err := b.runProducers(ctx, n, v, dbURL)
			if err != nil {
				return res, err
			}
			res.add(m)
			if b.o.Peer == "" {
				continue
			}
			rm, err := b.riverProducers(ctx, n, v, dbURL)
			if err != nil {
				return res, err
			}
			res.add(rm)
			res.ratio(fmt.Sprintf("%d producers, %s pgrelay/river", n, v.name), m.Rate, rm.Rate, 0)
		}
	}
	return res, nil
}

// runProducers is one run of n producers in variant v on dbURL.
func (b *bench) runProducers(ctx context.Context, n int, v producerVariant, dbURL string) (*measurement, error) {
	label := fmt.Sprintf("producers %d, %s", n, v.name)
	if err := b.resetChannel(ctx, b.pool, producersChannel, "sql", noopHandler, "none"); err != nil {
		return nil, err
	}
	mark, err := logMark(ctx, b.pool)
	if err != nil {
		return nil, err
	}
	if err := settle(ctx, b.pool); err != nil {
		return nil, err
	}
	pool, err := producerPool(ctx, dbURL, n)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	if err := openAll(ctx, pool, func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `SELECT pgrelay.notify($1::pg_catalog.text, '-'::pg_catalog.text)`, producersChannel)
		return err
	}); err != nil {
		return nil, fmt.Errorf("connect the producers: %w", err)
	}
	var completed func() int64
	if v.processor {
		p, err := newProcessor(b.procConfig(dbURL, ""))
		if err != nil {
			return nil, err
		}
		if err := p.Start(ctx); err != nil {
			return nil, err
		}
		defer func() { _ = p.Stop(context.WithoutCancel(ctx)) }()
		succ, _ := procCounters([]*actors.Processor{p}, []string{producersChannel})
		completed = succ.value
	}
	stopProf, err := b.prof.start(fmt.Sprintf("producers-%d-%d", n, slices.IndexFunc(producerVariants,
		func(x producerVariant) bool { return x.name == v.name })))
	if err != nil {
		return nil, err
	}
	defer stopProf()
	waits := b.sampleWaits(ctx, producerApp)
	took, lat, err := b.produce(ctx, label, pool, n, b.o.ProducerDuration,
		func(ctx context.Context, tx pgx.Tx, g, i int) error {
			_, err := tx.Exec(ctx, `SELECT pgrelay.notify($1::pg_catalog.text, $2::pg_catalog.text)`, producersChannel, strconv.Itoa(g)+"-"+strconv.Itoa(i))
			return err
		})
	shares, werr := waits()
	stopProf()
	if err != nil {
		return nil, err
	}
	if werr != nil {
		return nil, werr
	}
	var drained int64
	if completed != nil {
		drained = completed()
	}
	// Every committed event is in the queue or, completed, in the log.
	var queued, logged int64
	if err := b.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM pgrelay.queue WHERE channel = $1),
		(SELECT count(*) FROM pgrelay.log WHERE id > $2 AND channel = $1 AND event = 'succeeded')`,
		producersChannel, mark).Scan(&queued, &logged); err != nil {
		return nil, fmt.Errorf("count the producers' events: %w", err)
	}
	committed := int64(len(lat))
	if queued+logged != committed {
		return nil, fmt.Errorf("%s: %d events committed, but %d are queued and %d completed", label, committed, queued, logged)
	}
	m := newMeasurement(v.name, "pgrelay", committed, took, "events/s")
	m.Producers, m.WaitEvents = n, shares
	l := latencyOf(lat)
	m.Detail = fmt.Sprintf("%d connections, BEGIN; SELECT pgrelay.notify(); COMMIT each; transaction p50 %.2fms p99 %.2fms",
		n, l.P50, l.P99)
	if completed != nil {
		m.Detail += fmt.Sprintf("; the Processor completed %.0f/s meanwhile", float64(drained)/took.Seconds())
	}
	if v.delay {
		m.Detail += fmt.Sprintf("; commit_delay = %d, commit_siblings = 0 on every connection", commitDelayUS)
	}
	m.Detail += "; " + waitText(shares, n)
	return m, nil
}

// producerPool is a pool of n connections on dbURL named producerApp, with
// pgrelay's search_path.
func producerPool(ctx context.Context, dbURL string, n int) (*pgxpool.Pool, error) {
	pcfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return nil, fmt.Errorf("parse the database URL: %w", err)
	}
	pcfg.MaxConns = int32(n)
	store.PinSearchPath(pcfg.ConnConfig)
	pcfg.ConnConfig.RuntimeParams["application_name"] = producerApp
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("connect the producers: %w", err)
	}
	return pool, nil
}

// produce runs n goroutines, each on a connection of pool, each committing
// transactions that run body until d has passed; it returns the time from
// the start to the last commit and every transaction's duration.
func (b *bench) produce(ctx context.Context, label string, pool *pgxpool.Pool, n int, d time.Duration,
	body func(ctx context.Context, tx pgx.Tx, g, i int) error) (time.Duration, []time.Duration, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	lats := make([][]time.Duration, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	for g := range n {
		wg.Go(func() {
			for i := 0; time.Now().Before(deadline); i++ {
				t0 := time.Now()
				err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return body(ctx, tx, g, i) })
				if err != nil {
					errs[g] = fmt.Errorf("producer %d, transaction %d: %w", g, i, err)
					cancel()
					return
				}
				lats[g] = append(lats[g], time.Since(t0))
			}
		})
	}
	bar := b.prog.start(label, 0)
	t := time.NewTicker(100 * time.Millisecond)
	waited := make(chan struct{})
	go func() { wg.Wait(); close(waited) }()
wait:
	for {
		select {
		case <-waited:
			break wait
		case <-t.C:
			bar.set(0)
		}
	}
	t.Stop()
	bar.finish()
	took := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return 0, nil, err
	}
	all := slices.Concat(lats...)
	slices.Sort(all)
	return took, all, nil
}

// waitShare is the mean number of backends seen in a wait event.
type waitShare struct {
	Event string  `json:"event"`
	Mean  float64 `json:"mean"`
}

// sampleWaits samples pg_stat_activity every waitSampleEvery for the
// backends named app on the bench database until stop, which returns the mean number of them per
// wait event (wait_event_type:wait_event; "running" without one) over the
// samples that saw any, largest first.
func (b *bench) sampleWaits(ctx context.Context, app string) (stop func() ([]waitShare, error)) {
	ctx, cancel := context.WithCancel(ctx)
	counts := map[string]int64{}
	var samples int64
	var serr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(waitSampleEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			rows, err := b.pool.Query(ctx, `SELECT COALESCE(a.wait_event_type || ':' || a.wait_event, 'running'),
				count(*)::bigint FROM pg_catalog.pg_stat_activity a
				WHERE a.application_name = $1 AND a.datname = pg_catalog.current_database() GROUP BY 1`, app)
			if err != nil {
				if ctx.Err() == nil {
					serr = fmt.Errorf("sample pg_stat_activity: %w", err)
				}
				return
			}
			var event string
			var k, seen int64
			_, err = pgx.ForEachRow(rows, []any{&event, &k}, func() error {
				counts[event] += k
				seen += k
				return nil
			})
			if err != nil {
				if ctx.Err() == nil {
					serr = fmt.Errorf("sample pg_stat_activity: %w", err)
				}
				return
			}
			if seen > 0 {
				samples++
			}
		}
	}()
	return func() ([]waitShare, error) {
		cancel()
		<-done
		var out []waitShare
		for e, k := range counts {
			out = append(out, waitShare{Event: e, Mean: round(float64(k)/float64(max(samples, 1)), 2)})
		}
		slices.SortFunc(out, func(a, b waitShare) int {
			if a.Mean != b.Mean {
				if a.Mean > b.Mean {
					return -1
				}
				return 1
			}
			return strings.Compare(a.Event, b.Event)
		})
		return out, serr
	}
}

// waitText is the top wait events of n backends, for the table.
func waitText(shares []waitShare, n int) string {
	var parts []string
	for _, s := range shares[:min(len(shares), 5)] {
		parts = append(parts, fmt.Sprintf("%s %.1f", s.Event, s.Mean))
	}
	if len(parts) == 0 {
		return "no wait-event sample"
	}
	return fmt.Sprintf("backends of %d per wait event: %s", n, strings.Join(parts, ", "))
}

// commitLatency is the sorted duration of commitProbes commits, one after
// the other on one connection to dbURL, each a one-row INSERT into
// pgrelay_bench.commit_probe, after 20 not counted. (A transaction that
// writes no WAL before its commit record does not wait for the flush.)
func commitLatency(ctx context.Context, dbURL string) ([]time.Duration, error) {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return nil, fmt.Errorf("connect to measure the commit latency: %w", err)
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	lat := make([]time.Duration, 0, commitProbes)
	for i := range commitProbes + 20 {
		t0 := time.Now()
		if _, err := conn.Exec(ctx, `INSERT INTO pgrelay_bench.commit_probe (x) VALUES (1)`); err != nil {
			return nil, fmt.Errorf("measure the commit latency: %w", err)
		}
		if i >= 20 {
			lat = append(lat, time.Since(t0))
		}
	}
	slices.Sort(lat)
	return lat, nil
}

// withParams is dbURL (a URL or keyword/value connection string) with
// params added as connection parameters, which the server applies as
// settings of each session.
func withParams(dbURL string, params map[string]string) (string, error) {
	keys := make([]string, 0, len(params))
	for k := range params {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if strings.HasPrefix(dbURL, "postgres://") || strings.HasPrefix(dbURL, "postgresql://") {
		u, err := url.Parse(dbURL)
		if err != nil {
			return "", fmt.Errorf("parse the database URL: %w", err)
		}
		q := u.Query()
		for _, k := range keys {
			q.Set(k, params[k])
		}
		u.RawQuery = q.Encode()
		return u.String(), nil
	}
	s := dbURL
	for _, k := range keys {
		s += " " + k + "=" + params[k]
	}
	return s, nil
}

// riverProducers runs River's producers at n connections in variant v on
// dbURL, sampling its producers' wait events meanwhile.
func (b *bench) riverProducers(ctx context.Context, n int, v producerVariant, dbURL string) (*measurement, error) {
	if err := quiesce(ctx, b.pool); err != nil {
		return nil, err
	}
	args := []string{"--database-url", dbURL, "--producers", strconv.Itoa(n),
		"--duration", b.o.ProducerDuration.String()}
	if v.processor {
		args = append(args, "--work")
	}
	waits := b.sampleWaits(ctx, producerApp)
	r, err := b.river.run(ctx, b, "producers", args...)
	shares, werr := waits()
	if err != nil {
		return nil, err
	}
	if werr != nil {
		return nil, werr
	}
	rm := riverMeasurement(v.name, r.Events, r.InsertPerSec, r.Seconds, "jobs/s")
	rm.Producers, rm.WaitEvents = n, shares
	rm.Detail = fmt.Sprintf("%d connections, InsertTx one job per transaction", n)
	if r.CommitLatencyMS != nil {
		rm.Detail += fmt.Sprintf("; transaction p50 %.2fms p99 %.2fms", r.CommitLatencyMS.P50, r.CommitLatencyMS.P99)
	}
	if v.processor {
		rm.Detail += fmt.Sprintf("; a River client worked %.0f/s meanwhile (%s)", r.EventsPerSec, r.workerSettings())
	}
	if v.delay {
		rm.Detail += fmt.Sprintf("; commit_delay = %d, commit_siblings = 0 on every connection", commitDelayUS)
	}
	rm.Detail += "; " + waitText(shares, n)
	return rm, nil
}
