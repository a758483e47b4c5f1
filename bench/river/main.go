// Command river measures the peer queue River (github.com/riverqueue/river
// with its pgx v5 driver) on a PostgreSQL database, so that pgrelay's bench
// can compare it with pgrelay in the same run on the same server.
//
// It lives in its own Go module so that River never enters the dependencies
// of the main pgrelay module. From the repository root:
//
//	go -C bench/river run . --database-url postgres://... --scenario burn-down
//
// Scenarios:
//
//   - burn-down: N no-op jobs are pre-inserted with InsertMany in batches (not
//     counted in the throughput; their rate is reported as insert_per_sec),
//     then a River client with a no-op worker drains them; events_per_sec is
//     N over the time from the client's Start to the last completion, the
//     completions being counted from River's event subscription. series is
//     the number of completions seen every 100 ms from the Start (for a
//     throughput-over-time plot).
//     With --producers, producers also insert jobs (Insert, one per
//     transaction, --producer-rate jobs/s in all) from the Start until the
//     backlog's worth of jobs completed; the run then waits for theirs too,
//     and events and events_per_sec count every job (produced: theirs).
//   - enqueue: InsertMany in batches of --insert-batch (insert_per_sec), then
//     single Insert calls, one job per transaction, for min(N, 10000) jobs
//     (single_insert_per_sec).
//   - latency: jobs are inserted one at a time (one Insert, one transaction
//     each) at --rate per second into a running client, on a schedule that
//     does not wait for earlier inserts (open loop); latency is the handler's
//     start time minus the time just after Insert returned (the insert
//     transaction committed). insert_per_sec is the insert rate achieved,
//     which shows whether the database kept up with --rate;
//     latency_samples_ms holds every job's latency, sorted (for a CDF). With
//     --backlog N, N jobs are first pre-inserted with InsertMany into a second
//     queue (pgrelay_bench_backlog) that the same client works with as many
//     workers, so the measured jobs start while it drains (head-of-line);
//     backlog_at_last_insert is what was left of it when the last measured job
//     was inserted (zero: it drained too early), backlog_left once the last
//     one started, and backlog_insert_per_sec its pre-insert rate.
//   - producers: --producers connections each insert one job per transaction
//     (begin, InsertTx, commit) in a loop for --duration; insert_per_sec is the
//     committed jobs per second, commit_latency_ms each transaction's
//     duration. With --work a River client works the jobs meanwhile
//     (events_per_sec: jobs it worked per second). The producers' connections
//     are named pgrelay_bench_producer (application_name), so that pgrelay's
//     bench can sample their wait events.
//
// River's tables live in the database's default schema (its search_path), so
// the database should be a dedicated benchmark database: the harness runs
// River's migrations there and empties river_job before and after each
// scenario.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

const (
	riverModule = "github.com/riverqueue/river"
	// riverVersionPinned is the River version in go.mod; the binary's build
	// information is preferred when it is available.
	riverVersionPinned = "v0.51.2"

	scenarioBurnDown  = "burn-down"
	scenarioEnqueue   = "enqueue"
	scenarioLatency   = "latency"
	scenarioProducers = "producers"

	// backlogQueue is the second queue of latency with --backlog.
	backlogQueue = "pgrelay_bench_backlog"
	// producerApp is the producers' application_name.
	producerApp = "pgrelay_bench_producer"
	// backlogSeq marks the backlog's jobs (not measured).
	backlogSeq = -3

	// singleInsertMax bounds the single-Insert part of the enqueue scenario.
	singleInsertMax = 10000
	// defaultPoolMaxConns is used unless the URL sets pool_max_conns.
	defaultPoolMaxConns = 10
	// stallCheck is how long the burn-down waits without a completion event
	// before it asks the database whether events were lost.
	stallCheck = 10 * time.Second
	// sampleEvery is the interval of the burn-down's completion series.
	sampleEvery = 100 * time.Millisecond
)

// config holds the parsed flags.
type config struct {
	DatabaseURL       string
	Scenario          string
	Events            int
	Rate              float64
	Workers           int
	FetchCooldown     time.Duration
	FetchPollInterval time.Duration
	InsertBatch       int
	MixedProducers    int     // burn-down: producers inserting while the backlog drains
	MixedRate         float64 // their jobs/s in all
	JSON              bool
	Timeout           time.Duration
	Backlog           int
	Producers         int
	Duration          time.Duration
	Work              bool
}

// usageError is a bad command line: main prints it with the usage and exits 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

const usageHeader = `Usage: go run . --database-url URL [flags]   (from bench/river)
       go -C bench/river run . --database-url URL [flags]   (from the repository root)

Measures the peer queue River %s (pgx v5 driver) on PostgreSQL, with the
same protocol as pgrelay bench: burn-down, enqueue, latency (with --backlog:
behind a second queue's backlog) or producers.

WARNING: River's tables (river_job, river_queue, river_leader, ...) are
created in the database's default schema by River's migrations, and every
row of river_job is deleted before and after each scenario. Point
--database-url at a dedicated benchmark database, never at one whose River
jobs matter. Nothing outside that database is touched.

Flags:
`

func parseFlags(args []string, stderr io.Writer) (*config, error) {
	fs := flag.NewFlagSet("river-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := &config{}
	fs.StringVar(&c.DatabaseURL, "database-url", "", "PostgreSQL URL or DSN of a dedicated benchmark database (required); a pool_max_conns parameter in it is honoured, else the pool has 10 connections")
	fs.StringVar(&c.Scenario, "scenario", scenarioBurnDown, "burn-down, enqueue, latency or producers")
	fs.IntVar(&c.Events, "events", 0, "jobs to run (default 100000 for burn-down and enqueue, 2000 for latency)")
	fs.Float64Var(&c.Rate, "rate", 200, "latency: jobs inserted per second")
	fs.IntVar(&c.Workers, "workers", 2000, "River MaxWorkers of the default queue (1..10000)")
	fs.DurationVar(&c.FetchCooldown, "fetch-cooldown", 2*time.Millisecond, "River FetchCooldown (at least 1ms)")
	fs.DurationVar(&c.FetchPollInterval, "fetch-poll-interval", 20*time.Millisecond, "River FetchPollInterval (at least --fetch-cooldown)")
	fs.IntVar(&c.InsertBatch, "insert-batch", 1000, "jobs per InsertMany call (burn-down pre-insert and enqueue)")
	fs.IntVar(&c.MixedProducers, "mixed-producers", 0, "burn-down: also insert with this many producers while the backlog drains (Insert, one job per transaction), until as many jobs completed as were pre-inserted; the rate counts every job (0: none)")
	fs.Float64Var(&c.MixedRate, "mixed-rate", 2000, "burn-down with --mixed-producers: the producers' jobs per second, in all")
	fs.BoolVar(&c.JSON, "json", false, "print one JSON object with the results instead of text")
	fs.DurationVar(&c.Timeout, "timeout", 10*time.Minute, "give up on the scenario after this long")
	fs.IntVar(&c.Backlog, "backlog", 0, "latency: jobs pre-inserted into a second queue that the client drains while the jobs are measured")
	fs.IntVar(&c.Producers, "producers", 16, "producers: connections inserting at once")
	fs.DurationVar(&c.Duration, "duration", 10*time.Second, "producers: how long they insert")
	fs.BoolVar(&c.Work, "work", false, "producers: a River client works the jobs meanwhile")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), usageHeader, riverVersion())
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, &usageError{msg: fmt.Sprintf("unexpected arguments: %s", strings.Join(fs.Args(), " "))}
	}
	if c.DatabaseURL == "" {
		return nil, &usageError{msg: "--database-url is required (a dedicated benchmark database)"}
	}
	switch c.Scenario {
	case scenarioBurnDown, scenarioEnqueue:
		if c.Events == 0 {
			c.Events = 100000
		}
	case scenarioLatency:
		if c.Events == 0 {
			c.Events = 2000
		}
	case scenarioProducers:
		if c.Events == 0 {
			c.Events = 1 // the jobs committed are counted, not set
		}
	default:
		return nil, &usageError{msg: fmt.Sprintf("--scenario must be burn-down, enqueue, latency or producers, not %q", c.Scenario)}
	}
	switch {
	case c.Events < 1:
		return nil, &usageError{msg: "--events must be positive"}
	case c.InsertBatch < 1:
		return nil, &usageError{msg: "--insert-batch must be positive"}
	case c.Workers < 1 || c.Workers > river.QueueNumWorkersMax:
		return nil, &usageError{msg: fmt.Sprintf("--workers must be between 1 and %d", river.QueueNumWorkersMax)}
	case c.FetchCooldown < river.FetchCooldownMin:
		return nil, &usageError{msg: fmt.Sprintf("--fetch-cooldown must be at least %s", river.FetchCooldownMin)}
	case c.FetchPollInterval < c.FetchCooldown:
		return nil, &usageError{msg: "--fetch-poll-interval must be at least --fetch-cooldown"}
	case !(c.Rate > 0) || math.IsInf(c.Rate, 0):
		return nil, &usageError{msg: "--rate must be a positive number"}
	case c.Timeout <= 0:
		return nil, &usageError{msg: "--timeout must be positive"}
	case c.Backlog < 0:
		return nil, &usageError{msg: "--backlog must not be negative"}
	case c.Producers < 1 || c.Duration <= 0:
		return nil, &usageError{msg: "--producers and --duration must be positive"}
	case c.MixedProducers < 0:
		return nil, &usageError{msg: "--mixed-producers must not be negative"}
	case c.MixedProducers > 0 && (!(c.MixedRate > 0) || math.IsInf(c.MixedRate, 0)):
		return nil, &usageError{msg: "--mixed-rate must be a positive number"}
	case c.MixedProducers > 0 && c.Scenario != scenarioBurnDown:
		return nil, &usageError{msg: "--mixed-producers runs with the burn-down only"}
	}
	return c, nil
}

// riverVersion is the River module version this binary was built with.
func riverVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			if m.Path == riverModule {
				if m.Replace != nil && m.Replace.Version != "" {
					return m.Replace.Version
				}
				if m.Version != "" {
					return m.Version
				}
			}
		}
	}
	return riverVersionPinned
}

// latencyMS are the latency percentiles in milliseconds.
type latencyMS struct {
	P50 float64 `json:"p50"`
	P95 float64 `json:"p95"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// result is the JSON object printed with --json. Fields a scenario does not
// produce are omitted.
type result struct {
	Peer               string         `json:"peer"`
	Version            string         `json:"version"`
	Scenario           string         `json:"scenario"`
	Events             int            `json:"events"`
	Seconds            float64        `json:"seconds"`
	EventsPerSec       *float64       `json:"events_per_sec,omitempty"`
	InsertPerSec       *float64       `json:"insert_per_sec,omitempty"`
	SingleInsertPerSec *float64       `json:"single_insert_per_sec,omitempty"`
	SingleInserts      *int           `json:"single_inserts,omitempty"`
	Produced           *int           `json:"produced,omitempty"`
	LatencyMS          *latencyMS     `json:"latency_ms,omitempty"`
	LatencySamplesMS   []float64      `json:"latency_samples_ms,omitempty"`
	Series             []point        `json:"series,omitempty"`
	Settings           map[string]any `json:"settings"`

	CommitLatencyMS     *latencyMS `json:"commit_latency_ms,omitempty"`
	BacklogAtLastInsert *int64     `json:"backlog_at_last_insert,omitempty"`
	BacklogLeft         *int64     `json:"backlog_left,omitempty"`
	BacklogInsertPerSec *float64   `json:"backlog_insert_per_sec,omitempty"`
	// Cost is what each phase wrote (wal.go), by phase.
	Cost map[string]*walCost `json:"cost,omitempty"`
}

// point is one sample of a burn-down: completions seen T seconds after the
// client's Start.
type point struct {
	T    float64 `json:"t"`
	Done int64   `json:"done"`
}

// benchArgs is the no-op job. Seq numbers the jobs of a latency run; -1 marks
// the warm-up job.
type benchArgs struct {
	Seq int `json:"seq"`
}

func (benchArgs) Kind() string { return "pgrelay_bench_noop" }

// noopWorker does nothing; when rec is set it records its start time first,
// and when worked is set it counts the jobs.
type noopWorker struct {
	river.WorkerDefaults[benchArgs]
	rec    *startRecorder
	worked *atomic.Int64
}

func (w *noopWorker) Work(_ context.Context, job *river.Job[benchArgs]) error {
	now := time.Now()
	if w.rec != nil {
		w.rec.record(job.Args.Seq, now)
	}
	if w.worked != nil {
		w.worked.Add(1)
	}
	return nil
}

// startRecorder keeps the handler start time of each latency job.
type startRecorder struct {
	starts  []time.Time
	n       atomic.Int64
	all     chan struct{} // closed when every job has started
	warm    chan struct{} // closed when the warm-up job has started
	warmed  atomic.Bool
	retried atomic.Int64 // a job started twice (should not happen)
}

func newStartRecorder(n int) *startRecorder {
	return &startRecorder{starts: make([]time.Time, n), all: make(chan struct{}), warm: make(chan struct{})}
}

func (r *startRecorder) record(seq int, now time.Time) {
	if seq < 0 {
		if seq == -1 && r.warmed.CompareAndSwap(false, true) {
			close(r.warm)
		}
		return
	}
	if seq >= len(r.starts) {
		return
	}
	if job := &r.starts[seq]; job.IsZero() {
		*job = now
	} else {
		r.retried.Add(1)
		return
	}
	if r.n.Add(1) == int64(len(r.starts)) {
		close(r.all)
	}
}

func main() {
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		var ue *usageError
		if errors.As(err, &ue) {
			fmt.Fprintln(os.Stderr, "river-bench:", err)
			fmt.Fprintln(os.Stderr, "Run with -h for the flags.")
		}
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	res, err := run(ctx, cfg, logger)
	if err != nil {
		fmt.Fprintln(os.Stderr, "river-bench:", err)
		os.Exit(1)
	}
	if err := report(os.Stdout, cfg, res); err != nil {
		fmt.Fprintln(os.Stderr, "river-bench:", err)
		os.Exit(1)
	}
}

// run connects, migrates, empties river_job, runs the scenario and empties
// river_job again.
func run(ctx context.Context, cfg *config, logger *slog.Logger) (*result, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()

	pcfg, err := pgxpool.ParseConfig(cfg.DatabaseURL)
	if err != nil {
		return nil, fmt.Errorf("parse --database-url: %w", err)
	}
	if !strings.Contains(cfg.DatabaseURL, "pool_max_conns") {
		pcfg.MaxConns = defaultPoolMaxConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	defer pool.Close()
	if err := pool.Ping(ctx); err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}

	driver := riverpgxv5.New(pool)
	migrator, err := rivermigrate.New(driver, &rivermigrate.Config{Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("river migrator: %w", err)
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return nil, fmt.Errorf("river migrations: %w", err)
	}

	settings, err := settingsOf(ctx, pool, cfg)
	if err != nil {
		return nil, err
	}
	res := &result{
		Peer:     "river",
		Version:  riverVersion(),
		Scenario: cfg.Scenario,
		Events:   cfg.Events,
		Settings: settings,
	}

	if err := emptyJobs(ctx, pool); err != nil {
		return nil, err
	}
	// Leave no completed rows behind for autovacuum to chew on while the next
	// measurement (pgrelay's, say) runs on the same server.
	defer func() {
		cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer ccancel()
		if err := emptyJobs(cctx, pool); err != nil {
			logger.Warn("empty river_job after the run", "error", err)
		}
	}()

	switch cfg.Scenario {
	case scenarioBurnDown:
		err = burnDown(ctx, cfg, pool, logger, res)
	case scenarioEnqueue:
		err = enqueue(ctx, cfg, pool, logger, res)
	case scenarioLatency:
		err = latency(ctx, cfg, pool, logger, res)
	case scenarioProducers:
		err = producers(ctx, cfg, pool, logger, res)
	}
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
			return nil, fmt.Errorf("%s: gave up after --timeout %s: %w", cfg.Scenario, cfg.Timeout, err)
		}
		return nil, fmt.Errorf("%s: %w", cfg.Scenario, err)
	}
	return res, nil
}

// emptyJobs deletes every row of river_job (TRUNCATE, so that no dead rows
// of an earlier run slow this one down).
func emptyJobs(ctx context.Context, pool *pgxpool.Pool) error {
	if _, err := pool.Exec(ctx, "TRUNCATE river_job"); err != nil {
		return fmt.Errorf("empty river_job: %w", err)
	}
	return nil
}

// settingsOf records the harness settings and the server's durability
// settings, which the figures depend on.
func settingsOf(ctx context.Context, pool *pgxpool.Pool, cfg *config) (map[string]any, error) {
	s := map[string]any{
		"workers":                cfg.Workers,
		"fetch_cooldown_ms":      ms(cfg.FetchCooldown),
		"fetch_poll_interval_ms": ms(cfg.FetchPollInterval),
		"pool_max_conns":         pool.Config().MaxConns,
		"go":                     runtime.Version(),
		"gomaxprocs":             runtime.GOMAXPROCS(0),
	}
	switch cfg.Scenario {
	case scenarioBurnDown, scenarioEnqueue:
		s["insert_batch"] = cfg.InsertBatch
	case scenarioLatency:
		s["rate"] = cfg.Rate
		if cfg.Backlog > 0 {
			s["backlog"] = cfg.Backlog
			s["backlog_queue"] = backlogQueue
			s["insert_batch"] = cfg.InsertBatch
		}
	case scenarioProducers:
		s["mixed_producers"] = cfg.MixedProducers
		s["duration_ms"] = ms(cfg.Duration)
		s["work"] = cfg.Work
	}
	var version, fsync, syncCommit string
	err := pool.QueryRow(ctx, `SELECT current_setting('server_version'), current_setting('fsync'), current_setting('synchronous_commit')`).
		Scan(&version, &fsync, &syncCommit)
	if err != nil {
		return nil, fmt.Errorf("read server settings: %w", err)
	}
	s["postgres_version"] = version
	s["postgres_fsync"] = fsync
	s["postgres_synchronous_commit"] = syncCommit
	return s, nil
}

// newClient builds a River client on pool with one no-op worker and the
// default queue configured from the flags (and the backlog queue, as many
// workers, with --backlog).
func newClient(pool *pgxpool.Pool, cfg *config, logger *slog.Logger, rec *startRecorder) (*river.Client[pgx.Tx], error) {
	return newCountingClient(pool, cfg, logger, rec, nil)
}

// newCountingClient is newClient whose worker counts its jobs in worked
// (when set).
func newCountingClient(pool *pgxpool.Pool, cfg *config, logger *slog.Logger, rec *startRecorder, worked *atomic.Int64) (*river.Client[pgx.Tx], error) {
	workers := river.NewWorkers()
	if err := river.AddWorkerSafely(workers, &noopWorker{rec: rec, worked: worked}); err != nil {
		return nil, err
	}
	queues := map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: cfg.Workers}}
	if cfg.Scenario == scenarioLatency && cfg.Backlog > 0 {
		queues[backlogQueue] = river.QueueConfig{MaxWorkers: cfg.Workers}
	}
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		FetchCooldown:     cfg.FetchCooldown,
		FetchPollInterval: cfg.FetchPollInterval,
		Logger:            logger,
		Queues:            queues,
		Workers:           workers,
	})
	if err != nil {
		return nil, fmt.Errorf("river client: %w", err)
	}
	return client, nil
}

// newInsertClient builds a River client that only inserts (no queues).
func newInsertClient(pool *pgxpool.Pool, cfg *config, logger *slog.Logger) (*river.Client[pgx.Tx], error) {
	workers := river.NewWorkers()
	if err := river.AddWorkerSafely(workers, &noopWorker{}); err != nil {
		return nil, err
	}
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		FetchCooldown: cfg.FetchCooldown, // also spaces its insert notifications
		Logger:        logger,
		Workers:       workers,
	})
	if err != nil {
		return nil, fmt.Errorf("river insert client: %w", err)
	}
	return client, nil
}

// insertBatches inserts n no-op jobs with InsertMany in batches and returns
// the time it took.
func insertBatches(ctx context.Context, client *river.Client[pgx.Tx], n, batch int) (time.Duration, error) {
	params := make([]river.InsertManyParams, 0, min(n, batch))
	start := time.Now()
	for done := 0; done < n; {
		k := min(batch, n-done)
		params = params[:0]
		for i := range k {
			params = append(params, river.InsertManyParams{Args: benchArgs{Seq: done + i}})
		}
		if _, err := client.InsertMany(ctx, params); err != nil {
			return 0, fmt.Errorf("InsertMany: %w", err)
		}
		done += k
	}
	return time.Since(start), nil
}

// stopClient stops the client gracefully, bounded in time.
func stopClient(ctx context.Context, client *river.Client[pgx.Tx], logger *slog.Logger) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := client.Stop(sctx); err != nil {
		logger.Warn("stop the River client", "error", err)
	}
}

func burnDown(ctx context.Context, cfg *config, pool *pgxpool.Pool, logger *slog.Logger, res *result) error {
	client, err := newClient(pool, cfg, logger, nil)
	if err != nil {
		return err
	}
	insertTook, err := insertBatches(ctx, client, cfg.Events, cfg.InsertBatch)
	if err != nil {
		return err
	}
	res.InsertPerSec = ptr(rate(cfg.Events, insertTook))

	// River drops events when a subscriber's buffer is full, and its completer
	// hands them over in batches of up to 5000, so the buffer is sized for
	// every job of the run rather than Subscribe's default of 1000.
	chanSize := cfg.Events + 1000
	if cfg.MixedProducers > 0 {
		chanSize += cfg.Events // the producers' jobs, which run alongside
	}
	events, cancelSub := client.SubscribeConfig(&river.SubscribeConfig{
		ChanSize: chanSize,
		Kinds:    []river.EventKind{river.EventKindJobCompleted},
	})
	defer cancelSub()
	var completed atomic.Int64
	var last atomic.Int64 // unix nanoseconds of the last completion seen
	// target is the number of completions that ends the run: the backlog's,
	// then, with producers, the backlog's and theirs.
	var target atomic.Int64
	target.Store(int64(cfg.Events))
	done := make(chan time.Time, 1)
	go func() {
		for ev := range events {
			if ev.Kind != river.EventKindJobCompleted {
				continue
			}
			now := time.Now()
			last.Store(now.UnixNano())
			if completed.Add(1) == target.Load() {
				select {
				case done <- now:
				default:
				}
				if cfg.MixedProducers == 0 {
					return
				}
			}
		}
	}()

	walFrom, err := markWAL(ctx, pool)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := client.Start(ctx); err != nil {
		return fmt.Errorf("start the River client: %w", err)
	}
	defer stopClient(ctx, client, logger)
	var stopProducers func() (int, error)
	if cfg.MixedProducers > 0 {
		if stopProducers, err = startProducers(ctx, cfg, pool, logger); err != nil {
			return err
		}
		defer func() {
			if stopProducers != nil {
				_, _ = stopProducers()
			}
		}()
	}

	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	sample := time.NewTicker(sampleEvery)
	defer sample.Stop()
	res.Series = append(res.Series, point{T: 0, Done: 0}) // nothing can complete before the Start
	lastCount, lastChange := int64(0), time.Now()
	for {
		select {
		case end := <-done:
			if stopProducers != nil {
				// The backlog's worth completed: the producers stop, and the
				// run waits for their jobs too.
				produced, err := stopProducers()
				stopProducers = nil
				if err != nil {
					return err
				}
				res.Produced = ptr(produced)
				res.Events = cfg.Events + produced
				target.Store(int64(res.Events))
				if completed.Load() < int64(res.Events) {
					continue
				}
				end = time.Unix(0, last.Load())
			}
			took := end.Sub(start)
			res.Seconds = round(took.Seconds(), 3)
			res.EventsPerSec = ptr(rate(res.Events, took))
			// A sample taken after the last completion but handled first
			// gives way to the exact end.
			for len(res.Series) > 0 && res.Series[len(res.Series)-1].T >= took.Seconds() {
				res.Series = res.Series[:len(res.Series)-1]
			}
			res.Series = append(res.Series, point{T: round(took.Seconds(), 3), Done: int64(res.Events)})
			return recordCost(ctx, pool, res, costBurnDown, walFrom, res.Events)
		case now := <-sample.C:
			res.Series = append(res.Series, point{T: round(now.Sub(start).Seconds(), 3), Done: completed.Load()})
		case <-ctx.Done():
			return fmt.Errorf("%d of %d completions seen: %w", completed.Load(), target.Load(), ctx.Err())
		case <-tick.C:
			if n := completed.Load(); n != lastCount {
				lastCount, lastChange = n, time.Now()
				continue
			}
			if time.Since(lastChange) < stallCheck {
				continue
			}
			var left int64
			if err := pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE state <> 'completed'`).Scan(&left); err != nil {
				return fmt.Errorf("count unfinished jobs: %w", err)
			}
			if left == 0 {
				return fmt.Errorf("every job is completed in river_job but only %d of %d completion events arrived: River dropped subscription events", lastCount, cfg.Events)
			}
			logger.Warn("burn-down: no completion for a while", "completed_events", lastCount, "unfinished_rows", left)
			lastChange = time.Now()
		}
	}
}

// startProducers starts cfg.MixedProducers producers, each inserting a job per
// transaction with Insert on a connection of its own, on an open-loop
// schedule of cfg.MixedRate jobs/s in all (a producer behind its schedule
// inserts at once). stop ends them and returns how many jobs they inserted;
// an insert under way when stop is called finishes first, so that every job
// counted is committed and none committed uncounted.
func startProducers(ctx context.Context, cfg *config, pool *pgxpool.Pool, logger *slog.Logger) (stop func() (int, error), err error) {
	pcfg := pool.Config().Copy()
	pcfg.MaxConns, pcfg.MinConns = int32(cfg.MixedProducers), int32(cfg.MixedProducers)
	ppool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("connect the producers: %w", err)
	}
	client, err := newInsertClient(ppool, cfg, logger)
	if err != nil {
		ppool.Close()
		return nil, err
	}
	stopped, cancel := context.WithCancel(ctx)
	var produced atomic.Int64
	errs := make(chan error, cfg.MixedProducers)
	var wg sync.WaitGroup
	every := time.Duration(float64(time.Second) * float64(cfg.MixedProducers) / cfg.MixedRate)
	start := time.Now()
	for i := range cfg.MixedProducers {
		first := start.Add(every * time.Duration(i) / time.Duration(cfg.MixedProducers))
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTimer(0)
			defer t.Stop()
			for k := 0; ; k++ {
				t.Reset(time.Until(first.Add(every * time.Duration(k))))
				select {
				case <-stopped.Done():
					return
				case <-t.C:
				}
				if _, err := client.Insert(ctx, benchArgs{Seq: -1}, nil); err != nil {
					errs <- fmt.Errorf("producer %d: Insert: %w", i, err)
					return
				}
				produced.Add(1)
			}
		}()
	}
	return func() (int, error) {
		cancel()
		wg.Wait()
		ppool.Close()
		close(errs)
		var all []error
		for err := range errs {
			all = append(all, err)
		}
		return int(produced.Load()), errors.Join(all...)
	}, nil
}

func enqueue(ctx context.Context, cfg *config, pool *pgxpool.Pool, logger *slog.Logger, res *result) error {
	client, err := newClient(pool, cfg, logger, nil)
	if err != nil {
		return err
	}
	walFrom, err := markWAL(ctx, pool)
	if err != nil {
		return err
	}
	took, err := insertBatches(ctx, client, cfg.Events, cfg.InsertBatch)
	if err != nil {
		return err
	}
	res.Seconds = round(took.Seconds(), 3)
	res.InsertPerSec = ptr(rate(cfg.Events, took))
	if err := recordCost(ctx, pool, res, costInsertMany, walFrom, cfg.Events); err != nil {
		return err
	}

	singles := min(cfg.Events, singleInsertMax)
	if walFrom, err = markWAL(ctx, pool); err != nil {
		return err
	}
	start := time.Now()
	for i := range singles {
		// Insert runs in a transaction of its own: one job per commit.
		if _, err := client.Insert(ctx, benchArgs{Seq: i}, nil); err != nil {
			return fmt.Errorf("Insert: %w", err)
		}
	}
	res.SingleInsertPerSec = ptr(rate(singles, time.Since(start)))
	res.SingleInserts = ptr(singles)
	return recordCost(ctx, pool, res, costInsert, walFrom, singles)
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

func latency(ctx context.Context, cfg *config, pool *pgxpool.Pool, logger *slog.Logger, res *result) error {
	rec := newStartRecorder(cfg.Events)
	client, err := newClient(pool, cfg, logger, rec)
	if err != nil {
		return err
	}
	if cfg.Backlog > 0 {
		took, err := insertBacklog(ctx, client, cfg.Backlog, cfg.InsertBatch)
		if err != nil {
			return err
		}
		res.BacklogInsertPerSec = ptr(rate(cfg.Backlog, took))
		// The backlog's dead tuples of the pre-insert are not the measure's.
		if _, err := pool.Exec(ctx, "VACUUM (ANALYZE) river_job"); err != nil {
			return fmt.Errorf("vacuum river_job: %w", err)
		}
	}
	if err := client.Start(ctx); err != nil {
		return fmt.Errorf("start the River client: %w", err)
	}
	defer stopClient(ctx, client, logger)

	// One warm-up job, not counted, so that the first measured job does not
	// pay for the client's start-up (listener, leader election).
	if _, err := client.Insert(ctx, benchArgs{Seq: -1}, nil); err != nil {
		return fmt.Errorf("Insert: %w", err)
	}
	select {
	case <-rec.warm:
	case <-ctx.Done():
		return fmt.Errorf("waiting for the warm-up job: %w", ctx.Err())
	}

	// The inserts go through a client of their own on a pool of their own,
	// as an application's would, so that inserts waiting for a connection
	// do not hold up the worker client's fetches and completions.
	insPool, err := pgxpool.NewWithConfig(ctx, pool.Config())
	if err != nil {
		return fmt.Errorf("connect the insert pool: %w", err)
	}
	defer insPool.Close()
	inserter, err := newInsertClient(insPool, cfg, logger)
	if err != nil {
		return err
	}

	// Its connections are opened, and each runs an insert that it rolls
	// back, before the schedule starts (pgrelay's bench does the same): the
	// measure is the queue's, not the time the server takes to start the
	// producer's backends.
	if err := openAll(ctx, insPool, func(ctx context.Context, tx pgx.Tx) error {
		_, err := inserter.InsertTx(ctx, tx, benchArgs{Seq: -2}, nil)
		return err
	}); err != nil {
		return fmt.Errorf("connect the insert pool: %w", err)
	}

	// Open loop: job i is inserted at start + i/rate in a goroutine of its
	// own (one job per transaction), whatever the earlier inserts cost, so a
	// slow commit does not lower the offered rate.
	inserted := make([]time.Time, cfg.Events)
	insertErr := make(chan error, 1)
	var wg sync.WaitGroup
	interval := time.Duration(float64(time.Second) / cfg.Rate)
	start := time.Now()
	for i := range cfg.Events {
		if wait := time.Until(start.Add(time.Duration(i) * interval)); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				wg.Wait()
				return ctx.Err()
			case err := <-insertErr:
				t.Stop()
				wg.Wait()
				return err
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := inserter.Insert(ctx, benchArgs{Seq: i}, nil); err != nil {
				select {
				case insertErr <- fmt.Errorf("Insert: %w", err):
				default:
				}
				return
			}
			inserted[i] = time.Now()
		}()
	}
	wg.Wait()
	select {
	case err := <-insertErr:
		return err
	default:
	}
	lastInsert := slices.MaxFunc(inserted, time.Time.Compare)
	res.InsertPerSec = ptr(rate(cfg.Events, lastInsert.Sub(start)))
	if cfg.Backlog > 0 {
		left, err := backlogLeft(ctx, pool)
		if err != nil {
			return err
		}
		res.BacklogAtLastInsert = ptr(left)
	}
	select {
	case <-rec.all:
	case <-ctx.Done():
		return fmt.Errorf("%d of %d jobs started: %w", rec.n.Load(), cfg.Events, ctx.Err())
	}
	if n := rec.retried.Load(); n > 0 {
		logger.Warn("latency: some jobs started more than once; their first start was kept", "count", n)
	}
	if cfg.Backlog > 0 {
		left, err := backlogLeft(ctx, pool)
		if err != nil {
			return err
		}
		res.BacklogLeft = ptr(left)
	}

	lat := make([]time.Duration, cfg.Events)
	lastStart := rec.starts[0]
	for i := range lat {
		lat[i] = rec.starts[i].Sub(inserted[i])
		if rec.starts[i].After(lastStart) {
			lastStart = rec.starts[i]
		}
	}
	slices.Sort(lat)
	res.LatencySamplesMS = make([]float64, len(lat))
	for i, d := range lat {
		res.LatencySamplesMS[i] = ms(d)
	}
	res.Seconds = round(lastStart.Sub(start).Seconds(), 3)
	res.LatencyMS = &latencyMS{
		P50: ms(percentile(lat, 50)),
		P95: ms(percentile(lat, 95)),
		P99: ms(percentile(lat, 99)),
		Max: ms(lat[len(lat)-1]),
	}
	return nil
}

// insertBacklog inserts n no-op jobs into backlogQueue with InsertMany in
// batches and returns the time it took.
func insertBacklog(ctx context.Context, client *river.Client[pgx.Tx], n, batch int) (time.Duration, error) {
	params := make([]river.InsertManyParams, 0, min(n, batch))
	opts := &river.InsertOpts{Queue: backlogQueue}
	start := time.Now()
	for done := 0; done < n; {
		k := min(batch, n-done)
		params = params[:0]
		for range k {
			params = append(params, river.InsertManyParams{Args: benchArgs{Seq: backlogSeq}, InsertOpts: opts})
		}
		if _, err := client.InsertMany(ctx, params); err != nil {
			return 0, fmt.Errorf("InsertMany into %s: %w", backlogQueue, err)
		}
		done += k
	}
	return time.Since(start), nil
}

// producers: cfg.Producers goroutines, each on a connection of a pool of
// their own (named producerApp), insert one job per transaction (begin,
// InsertTx, commit) until cfg.Duration has passed; with cfg.Work a client
// on the main pool works the jobs meanwhile.
func producers(ctx context.Context, cfg *config, pool *pgxpool.Pool, logger *slog.Logger, res *result) error {
	var worked atomic.Int64
	if cfg.Work {
		client, err := newCountingClient(pool, cfg, logger, nil, &worked)
		if err != nil {
			return err
		}
		if err := client.Start(ctx); err != nil {
			return fmt.Errorf("start the River client: %w", err)
		}
		defer stopClient(ctx, client, logger)
	}
	pcfg := pool.Config().Copy()
	pcfg.MaxConns = int32(cfg.Producers)
	pcfg.ConnConfig.RuntimeParams["application_name"] = producerApp
	prodPool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return fmt.Errorf("connect the producers: %w", err)
	}
	defer prodPool.Close()
	inserter, err := newInsertClient(prodPool, cfg, logger)
	if err != nil {
		return err
	}
	if err := openAll(ctx, prodPool, func(ctx context.Context, tx pgx.Tx) error {
		_, err := inserter.InsertTx(ctx, tx, benchArgs{Seq: -2}, nil)
		return err
	}); err != nil {
		return fmt.Errorf("connect the producers: %w", err)
	}

	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	lats := make([][]time.Duration, cfg.Producers)
	errs := make([]error, cfg.Producers)
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(cfg.Duration)
	for g := range cfg.Producers {
		wg.Go(func() {
			for i := 0; time.Now().Before(deadline); i++ {
				t0 := time.Now()
				err := pgx.BeginFunc(pctx, prodPool, func(tx pgx.Tx) error {
					_, err := inserter.InsertTx(pctx, tx, benchArgs{Seq: i}, nil)
					return err
				})
				if err != nil {
					errs[g] = fmt.Errorf("producer %d, transaction %d: InsertTx: %w", g, i, err)
					cancel()
					return
				}
				lats[g] = append(lats[g], time.Since(t0))
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return err
	}
	lat := slices.Concat(lats...)
	slices.Sort(lat)
	if len(lat) == 0 {
		return fmt.Errorf("no transaction committed in %s", cfg.Duration)
	}
	res.Events = len(lat)
	res.Seconds = round(took.Seconds(), 3)
	res.InsertPerSec = ptr(rate(len(lat), took))
	res.CommitLatencyMS = &latencyMS{P50: ms(percentile(lat, 50)), P95: ms(percentile(lat, 95)),
		P99: ms(percentile(lat, 99)), Max: ms(lat[len(lat)-1])}
	if cfg.Work {
		res.EventsPerSec = ptr(rate(int(worked.Load()), took))
	}
	return nil
}

// backlogLeft counts the backlog queue's jobs not completed.
func backlogLeft(ctx context.Context, pool *pgxpool.Pool) (int64, error) {
	var left int64
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE queue = $1 AND state <> 'completed'`,
		backlogQueue).Scan(&left); err != nil {
		return 0, fmt.Errorf("count the backlog's jobs: %w", err)
	}
	return left, nil
}

// percentile is the nearest-rank percentile of sorted durations.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

func rate(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return round(float64(n)/d.Seconds(), 1)
}

// ms is d in milliseconds, rounded to the microsecond.
func ms(d time.Duration) float64 { return round(float64(d)/float64(time.Millisecond), 3) }

func round(x float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(x*p) / p
}

func ptr[T any](v T) *T { return &v }

// report prints the result as JSON (--json) or as text.
func report(w io.Writer, cfg *config, res *result) error {
	if cfg.JSON {
		enc := json.NewEncoder(w)
		return enc.Encode(res)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "River %s, scenario %s (PostgreSQL %v, fsync=%v, synchronous_commit=%v)\n",
		res.Version, res.Scenario, res.Settings["postgres_version"], res.Settings["postgres_fsync"], res.Settings["postgres_synchronous_commit"])
	switch res.Scenario {
	case scenarioBurnDown:
		fmt.Fprintf(&b, "  pre-insert:  %d jobs with InsertMany (batches of %d): %.0f jobs/s (not counted)\n", res.Events, cfg.InsertBatch, deref(res.InsertPerSec))
		fmt.Fprintf(&b, "  burn-down:   %d jobs in %.3f s: %.0f events/s\n", res.Events, res.Seconds, deref(res.EventsPerSec))
		fmt.Fprintf(&b, "  settings:    workers=%d fetch-cooldown=%s fetch-poll-interval=%s pool_max_conns=%v\n", cfg.Workers, cfg.FetchCooldown, cfg.FetchPollInterval, res.Settings["pool_max_conns"])
	case scenarioEnqueue:
		fmt.Fprintf(&b, "  InsertMany:  %d jobs (batches of %d) in %.3f s: %.0f jobs/s\n", res.Events, cfg.InsertBatch, res.Seconds, deref(res.InsertPerSec))
		if res.SingleInserts != nil {
			fmt.Fprintf(&b, "  Insert:      %d jobs, one per transaction: %.0f jobs/s\n", *res.SingleInserts, deref(res.SingleInsertPerSec))
		}
		fmt.Fprintf(&b, "  settings:    pool_max_conns=%v\n", res.Settings["pool_max_conns"])
	case scenarioLatency:
		l := res.LatencyMS
		fmt.Fprintf(&b, "  latency:     %d jobs offered at %g/s (achieved %.1f/s) over %.3f s, insert commit to handler start\n", res.Events, cfg.Rate, deref(res.InsertPerSec), res.Seconds)
		fmt.Fprintf(&b, "               p50 %.3f ms  p95 %.3f ms  p99 %.3f ms  max %.3f ms\n", l.P50, l.P95, l.P99, l.Max)
		if res.BacklogLeft != nil {
			fmt.Fprintf(&b, "  backlog:     %d jobs in queue %s, pre-inserted at %.0f jobs/s; %d left after the last insert, %d at the end\n", cfg.Backlog, backlogQueue, deref(res.BacklogInsertPerSec), deref64(res.BacklogAtLastInsert), *res.BacklogLeft)
		}
		fmt.Fprintf(&b, "  settings:    workers=%d fetch-cooldown=%s fetch-poll-interval=%s pool_max_conns=%v\n", cfg.Workers, cfg.FetchCooldown, cfg.FetchPollInterval, res.Settings["pool_max_conns"])
	case scenarioProducers:
		l := res.CommitLatencyMS
		fmt.Fprintf(&b, "  producers:   %d connections, one job per transaction, %d jobs in %.3f s: %.0f jobs/s\n", cfg.Producers, res.Events, res.Seconds, deref(res.InsertPerSec))
		fmt.Fprintf(&b, "               transaction p50 %.3f ms  p95 %.3f ms  p99 %.3f ms  max %.3f ms\n", l.P50, l.P95, l.P99, l.Max)
		if res.EventsPerSec != nil {
			fmt.Fprintf(&b, "  worked:      %.0f jobs/s meanwhile (workers=%d)\n", *res.EventsPerSec, cfg.Workers)
		}
	}
	reportCost(&b, res)
	_, err := io.WriteString(w, b.String())
	return err
}

func deref64(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

func deref(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}
