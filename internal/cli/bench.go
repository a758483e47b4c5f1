package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgrelay/pgrelay/events/store"
	"github.com/pgrelay/pgrelay/internal/devenv"
	"github.com/pgrelay/pgrelay/migrations"
)

// benchScenario is one scenario of `pgrelay bench`.
type benchScenario struct {
	name    string
	summary string
	// local: runs on the bench database (every scenario but cluster, which
	// starts a cluster of its own).
	local bool
	// peer: --peer runs the peer's version of the scenario too.
	peer bool
	run  func(b *bench, ctx context.Context) (*scenarioResult, error)
}

// benchScenarios are the scenarios, in the order `all` runs the first six.
func benchScenarios() []benchScenario {
	return []benchScenario{
		{"burn-down", "N no-op events pre-inserted, drained by one Processor: events/s", true, true, (*bench).scenarioBurnDown},
		{"enqueue", "notify_many in batches, notify() one per transaction: events/s", true, true, (*bench).scenarioEnqueue},
		{"latency", "events at --rate into a running Processor: commit to handler start", true, true, (*bench).scenarioLatency},
		{"backlog", "burn-down with --backlog-sizes rows pending: events/s, large/small", true, false, (*bench).scenarioBacklog},
		{"channels", "'channel'-mode channels, then one 'none' channel: events/s, RSS", true, false, (*bench).scenarioChannels},
		{"ceiling", "the burn-down by a bare loop without actors: events/s", true, false, (*bench).scenarioCeiling},
		{"nats", "burn-down without, then with status events to JetStream: ratio", true, false, (*bench).scenarioNATS},
		{"email", "emails via pgrelay_notifier.send() to an SMTP catcher: emails/s", true, false, (*bench).scenarioEmail},
		{"cluster", "multi-node burn-down on a two-node pglogical cluster: 1 node, 2", false, false, (*bench).scenarioCluster},
		{"cluster-spock", "the same on a three-node Spock cluster (SPOCK_PG_HOME): 1 node, 2, 3", false, false, (*bench).scenarioClusterSpock},
		{"soak", "integrity: mixed workload under faults for --duration, then invariants", false, false, (*bench).scenarioSoak},
	}
}

// benchAll is what the scenario name "all" stands for.
func benchAll() []string {
	return []string{"burn-down", "enqueue", "latency", "backlog", "channels", "ceiling"}
}

// benchOptions are the bench's own flags.
type benchOptions struct {
	databaseURL    string
	events         int
	batch          int
	latencyEvents  int
	rate           float64
	backlogSizes   []int
	backlogMeasure int
	channels       int
	perChannel     int
	peer           string
	peerDir        string
	json           bool
	plot           string
	progress       bool
	cpuprofile     string
	duration       time.Duration
	seed           uint64
	soakRate       float64
	faultEvery     time.Duration
	drainTimeout   time.Duration
}

// bench is one run of `pgrelay bench`: its options, the database and the
// helpers the scenarios share.
type bench struct {
	a      *app
	o      benchOptions
	f      processorFlags // the measured Processors' flags (databaseURL is set per Processor)
	logger *slog.Logger
	dbURL  string        // the bench database (empty when only cluster runs)
	pool   *pgxpool.Pool // on dbURL
	prog   *progress
	prof   *cpuProfiler
	river  *riverHarness
}

const benchUsage = `Usage: pgrelay bench [flags] [scenario ...]

Measures pgrelay on PostgreSQL. Unless --database-url names a database, it
starts a throwaway PostgreSQL 15 with default durability (fsync and
synchronous_commit on) and removes it afterwards; it never touches a database
it was not pointed at. Scenarios run in the order given (default: burn-down),
each showing a progress bar on stderr when stderr is a terminal (or with
--progress); a result table follows on stdout (--json: one JSON document).

Scenarios (as arguments, or --scenario a,b):
`

func printBenchUsage(fs *flag.FlagSet) {
	w := fs.Output()
	fmt.Fprint(w, benchUsage)
	for _, s := range benchScenarios() {
		fmt.Fprintf(w, "  %-10s %s\n", s.name, s.summary)
	}
	fmt.Fprintf(w, "  %-10s %s\n", "all", strings.Join(benchAll(), " "))
	fmt.Fprint(w, `
docs/reference.md describes what each scenario measures and how.

--peer river runs River's version of burn-down, enqueue and latency (the
harness in bench/river, built with the go command) on the same database right
after pgrelay's, and prints the ratios pgrelay/River.

Flags (every flag also reads PGRELAY_<FLAG>; the Processor flags configure
every measured Processor):
`)
	fs.PrintDefaults()
}

// runBench is `pgrelay bench`.
func runBench(ctx context.Context, a *app, args []string) error {
	fs := a.newFlags("bench")
	var o benchOptions
	var scenarioList, backlogSizes string
	fs.StringVar(&o.databaseURL, "database-url", "", "benchmark against this database instead: pgrelay's schema is migrated there and the bench creates and removes only its own channels (pgrelay_bench_*) and schema (pgrelay_bench); River's tables too with --peer (default: a throwaway PostgreSQL with default durability)")
	fs.StringVar(&scenarioList, "scenario", "", "comma-separated scenarios to run, after those named as arguments (default: burn-down)")
	fs.IntVar(&o.events, "events", 100000, "events of burn-down, ceiling, enqueue (its single notify() part runs min(events, 10000)), nats, email and cluster")
	fs.IntVar(&o.batch, "enqueue-batch", 1000, "payloads per notify_many call when enqueueing (email: notifications per send() statement)")
	fs.IntVar(&o.latencyEvents, "latency-events", 2000, "latency: events to send")
	fs.Float64Var(&o.rate, "rate", 200, "latency: events enqueued per second, on a schedule that does not wait for earlier inserts")
	fs.StringVar(&backlogSizes, "backlog-sizes", "10000,1000000", "backlog: comma-separated numbers of pending rows to measure the burn-down with")
	fs.IntVar(&o.backlogMeasure, "backlog-measure", 50000, "backlog: completions measured at each size (at most the size)")
	fs.IntVar(&o.channels, "channels", 10000, "channels: number of 'channel'-mode channels")
	fs.IntVar(&o.perChannel, "events-per-channel", 20, "channels: events per channel")
	fs.StringVar(&o.peer, "peer", "", "also run burn-down, enqueue and latency with this peer queue on the same database and print the ratios: river (needs the repository's bench/river module and the go command)")
	fs.StringVar(&o.peerDir, "peer-dir", "", "the peer harness's module directory (default bench/river)")
	fs.BoolVar(&o.json, "json", false, "print one JSON document with every result instead of the table")
	fs.StringVar(&o.plot, "plot", "", "also write an HTML report (throughput over time, latency CDF; inline SVG) to this .html file")
	fs.BoolVar(&o.progress, "progress", false, "show progress on stderr even when it is not a terminal (then one line a second)")
	fs.StringVar(&o.cpuprofile, "cpuprofile", "", "write a Go CPU profile of each measured part to this file (with several parts, one file each: the part's name goes before the extension)")
	fs.DurationVar(&o.duration, "duration", 10*time.Minute, "soak: how long the workload runs under faults (the drain and the checks follow)")
	fs.Uint64Var(&o.seed, "seed", 0, "soak: seed of the workload and of the fault schedule (default: from the clock; printed)")
	fs.Float64Var(&o.soakRate, "soak-rate", 25, "soak: producer transactions per second (1-3 events each)")
	fs.DurationVar(&o.faultEvery, "fault-every", 10*time.Second, "soak: mean time between two faults")
	fs.DurationVar(&o.drainTimeout, "drain-timeout", 3*time.Minute, "soak: how long, after the faults, everything may take to end before what is left counts as stuck")
	natsMode := fs.Bool("nats", false, "same as the scenario nats")
	emailMode := fs.Bool("email", false, "same as the scenario email")
	clusterMode := fs.Bool("cluster", false, "same as the scenario cluster")
	var f processorFlags
	f.register(fs, false)
	mkLog := logFlagsAt(fs, "warn") // the Processors' start and stop are not news here
	fs.Usage = func() { printBenchUsage(fs) }
	pos, err := a.parseMixed(fs, args)
	if err != nil {
		return err
	}
	if err := f.validate(); err != nil {
		return err
	}
	if scenarioList != "" {
		pos = append(pos, strings.Split(scenarioList, ",")...)
	}
	for _, alias := range []struct {
		on   bool
		name string
	}{{*natsMode, "nats"}, {*emailMode, "email"}, {*clusterMode, "cluster"}} {
		if alias.on {
			pos = append(pos, alias.name)
		}
	}
	list, err := selectScenarios(pos)
	if err != nil {
		return err
	}
	if o.backlogSizes, err = parseSizes(backlogSizes); err != nil {
		return err
	}
	if err := o.validate(list); err != nil {
		return err
	}
	logger, err := mkLog(a.stderr)
	if err != nil {
		return err
	}
	b := &bench{a: a, o: o, f: f, logger: logger, prog: newProgress(a.stderr, o.progress),
		prof: &cpuProfiler{path: o.cpuprofile}, river: &riverHarness{dir: riverDir(o.peerDir)}}
	return b.run(ctx, list)
}

// selectScenarios turns scenario names into scenarios, in order, without
// repeats; none means burn-down.
func selectScenarios(names []string) ([]benchScenario, error) {
	all := benchScenarios()
	if len(names) == 0 {
		names = []string{"burn-down"}
	}
	var out []benchScenario
	add := func(name string) error {
		i := slices.IndexFunc(all, func(s benchScenario) bool { return s.name == name })
		if i < 0 {
			var known []string
			for _, s := range all {
				known = append(known, s.name)
			}
			return &usageError{msg: fmt.Sprintf("unknown scenario %q: expected %s or all", name, strings.Join(known, ", "))}
		}
		if !slices.ContainsFunc(out, func(s benchScenario) bool { return s.name == name }) {
			out = append(out, all[i])
		}
		return nil
	}
	for _, n := range names {
		n = strings.TrimSpace(n)
		if n == "all" {
			for _, a := range benchAll() {
				if err := add(a); err != nil {
					return nil, err
				}
			}
			continue
		}
		if err := add(n); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// parseSizes parses a comma-separated list of positive integers.
func parseSizes(s string) ([]int, error) {
	var out []int
	for part := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil || n < 1 {
			return nil, &usageError{msg: fmt.Sprintf("--backlog-sizes %q: expected positive integers separated by commas", s)}
		}
		out = append(out, n)
	}
	return out, nil
}

func (o *benchOptions) validate(list []benchScenario) error {
	switch {
	case o.events < 1 || o.batch < 1:
		return &usageError{msg: "--events and --enqueue-batch must be positive"}
	case o.latencyEvents < 1:
		return &usageError{msg: "--latency-events must be positive"}
	case !(o.rate > 0) || math.IsInf(o.rate, 0):
		return &usageError{msg: "--rate must be a positive number"}
	case o.backlogMeasure < 1:
		return &usageError{msg: "--backlog-measure must be positive"}
	case o.channels < 1 || o.perChannel < 1:
		return &usageError{msg: "--channels and --events-per-channel must be positive"}
	case o.duration <= 0 || o.faultEvery <= 0 || o.drainTimeout <= 0:
		return &usageError{msg: "--duration, --fault-every and --drain-timeout must be positive"}
	case !(o.soakRate > 0) || math.IsInf(o.soakRate, 0):
		return &usageError{msg: "--soak-rate must be a positive number"}
	case o.databaseURL != "" && slices.ContainsFunc(list, func(s benchScenario) bool { return s.name == "soak" }):
		return &usageError{msg: "soak starts and restarts a PostgreSQL of its own: it does not run with --database-url"}
	case o.peer != "" && o.peer != "river":
		return &usageError{msg: fmt.Sprintf("--peer %q: the only peer is river", o.peer)}
	case o.peer != "" && !slices.ContainsFunc(list, func(s benchScenario) bool { return s.peer }):
		return &usageError{msg: "--peer runs with burn-down, enqueue and latency only: name one of them"}
	}
	if o.plot != "" {
		if ext := strings.ToLower(filepath.Ext(o.plot)); ext != ".html" && ext != ".htm" {
			return &usageError{msg: fmt.Sprintf("--plot %s: only HTML reports are supported (name the file .html)", o.plot)}
		}
	}
	return nil
}

// run prepares the database, runs the scenarios and reports. Results of the
// scenarios that ran are reported even when a later one fails.
func (b *bench) run(ctx context.Context, list []benchScenario) error {
	defer b.river.close()
	rep := &benchReport{
		Version:    Version,
		CPUs:       runtime.NumCPU(),
		GOMAXPROCS: runtime.GOMAXPROCS(0),
		Go:         runtime.Version(),
		Processor:  processorSettingsOf(&b.f),
	}
	if slices.ContainsFunc(list, func(s benchScenario) bool { return s.local }) {
		stop, err := b.openDatabase(ctx, rep)
		if err != nil {
			return err
		}
		defer stop()
	}
	var runErr error
	for _, s := range list {
		res, err := s.run(b, ctx)
		if res != nil {
			rep.Scenarios = append(rep.Scenarios, res)
		}
		if err != nil {
			runErr = fmt.Errorf("%s: %w", s.name, err)
			break
		}
	}
	rep.crossRatios()
	if runErr != nil {
		rep.Error = oneLine(runErr.Error())
	}
	files, err := b.prof.write()
	for _, f := range files {
		fmt.Fprintf(b.a.stderr, "pgrelay bench: CPU profile written to %s\n", f)
	}
	runErr = errors.Join(runErr, err)
	if b.o.json {
		err = rep.writeJSON(b.a.stdout)
	} else {
		err = rep.writeText(b.a.stdout)
	}
	runErr = errors.Join(runErr, err)
	if b.o.plot != "" && len(rep.Scenarios) > 0 {
		if err := writePlot(b.o.plot, rep); err != nil {
			runErr = errors.Join(runErr, err)
		} else if !b.o.json {
			fmt.Fprintf(b.a.stdout, "\nHTML report: %s\n", b.o.plot)
		}
	}
	return runErr
}

// openDatabase starts the throwaway PostgreSQL (unless --database-url),
// connects and migrates; stop undoes it.
func (b *bench) openDatabase(ctx context.Context, rep *benchReport) (stop func(), err error) {
	var undo []func()
	undoAll := func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	// Not the named result: a failed return sets that to nil.
	defer func() {
		if err != nil {
			undoAll()
		}
	}()
	b.dbURL = b.o.databaseURL
	rep.Database = "given (--database-url)"
	if b.dbURL == "" {
		pg, err := devenv.StartPostgres(ctx, devenv.PostgresConfig{Durable: true, Logger: b.logger})
		if err != nil {
			return nil, err
		}
		undo = append(undo, func() { _ = pg.Stop() })
		if err := pg.Exec(ctx, "postgres", "CREATE DATABASE pgrelay_bench"); err != nil {
			return nil, err
		}
		b.dbURL = pg.URL("pgrelay_bench")
		rep.Database = "throwaway PostgreSQL, default durability"
	}
	// The bench's own statements run under pgrelay's search_path, as the
	// Processor's background ones do.
	pcfg, err := pgxpool.ParseConfig(b.dbURL)
	if err != nil {
		return nil, fmt.Errorf("parse the database URL: %w", err)
	}
	store.PinSearchPath(pcfg.ConnConfig)
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	undo = append(undo, pool.Close)
	b.pool = pool
	if _, err := migrations.Up(ctx, pool); err != nil {
		return nil, err
	}
	if err := pool.QueryRow(ctx, `SELECT current_setting('server_version'), current_setting('fsync'),
		current_setting('synchronous_commit')`).Scan(&rep.Postgres, &rep.Fsync, &rep.SynchronousCommit); err != nil {
		return nil, fmt.Errorf("read the server's settings: %w", err)
	}
	return undoAll, nil
}

// procFlags are the measured Processor's flags on url, in mode (empty: the
// --mode flag's).
func (b *bench) procFlags(url, mode string) processorFlags {
	f := b.f
	f.databaseURL = url
	if mode != "" {
		f.mode = mode
	}
	return f
}
