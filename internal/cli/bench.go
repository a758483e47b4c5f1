package cli

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pgrelay/pgrelay/internal/bench"
)

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
	for _, s := range bench.Scenarios() {
		fmt.Fprintf(w, "  %-10s %s\n", s.Name, s.Summary)
	}
	fmt.Fprintf(w, "  %-10s %s\n", "all", strings.Join(bench.All(), " "))
	fmt.Fprint(w, `
docs/benchmarks.md describes what each scenario measures and how; docs/reference.md
names the scenarios and their flags.

--peer river runs River's version of burn-down, enqueue, latency, producers,
latency-load and go (the harness in bench/river, built with the go command) on
the same database right after pgrelay's, and prints the ratios pgrelay/River.

Flags (every flag also reads PGRELAY_<FLAG>; the Processor flags configure
every measured Processor):
`)
	fs.PrintDefaults()
}

// runBench is `pgrelay bench`: its flags, checked here, and the run
// (internal/bench).
func runBench(ctx context.Context, a *app, args []string) error {
	fs := a.newFlags("bench")
	var o bench.Options
	var scenarioList, backlogSizes, producers string
	fs.StringVar(&o.DatabaseURL, "database-url", "", "benchmark against this database instead: pgrelay's schema is migrated there and the bench creates and removes only its own channels (pgrelay_bench_*) and schema (pgrelay_bench); River's tables too with --peer (default: a throwaway PostgreSQL with default durability)")
	fs.StringVar(&scenarioList, "scenario", "", "comma-separated scenarios to run, after those named as arguments (default: burn-down)")
	fs.IntVar(&o.Events, "events", 100000, "events of burn-down, ceiling, enqueue (its single notify() part runs min(events, 10000)), nats, email, go and cluster")
	fs.IntVar(&o.Batch, "enqueue-batch", 1000, "payloads per notify_many call when enqueueing (email: notifications per send() statement)")
	fs.IntVar(&o.LatencyEvents, "latency-events", 2000, "latency and go (its latency part, once per handler kind): events to send")
	fs.Float64Var(&o.Rate, "rate", 200, "latency and go (its latency part): events enqueued per second, on a schedule that does not wait for earlier inserts")
	fs.StringVar(&backlogSizes, "backlog-sizes", "10000,1000000", "backlog: comma-separated numbers of pending rows to measure the burn-down with")
	fs.IntVar(&o.BacklogMeasure, "backlog-measure", 50000, "backlog: completions measured at each size (at most the size)")
	fs.IntVar(&o.Channels, "channels", 10000, "channels: number of 'channel'-mode channels")
	fs.IntVar(&o.PerChannel, "events-per-channel", 20, "channels: events per channel")
	fs.IntVar(&o.CeilingLoops, "ceiling-loops", 0, "ceiling: connections, each looping on one transaction at a time (default: the fastest found, see docs/benchmarks.md)")
	fs.IntVar(&o.CeilingClaim, "ceiling-claim", 0, "ceiling: rows each transaction claims (default: the fastest found)")
	fs.BoolVar(&o.RoundTrips, "round-trips", false, "count the measured systems' round trips per event: the Processor, the River harness and the bare loop connect through a counting proxy (its extra hop slows them: compare that run's costs, not its rates)")
	fs.IntVar(&o.Rounds, "rounds", 1, "run the scenarios this many times, every other round in the reverse order, each result named with its round; burn-down and ceiling's ratio is then given a round and as the median of the rounds")
	fs.BoolVar(&o.CeilingReset, "ceiling-reset", false, "ceiling: also send what a Processor's batch sends besides the savepoints: the channel's statement_timeout before the first handler, the session reset after the last")
	fs.IntVar(&o.MixedProducers, "mixed-producers", 0, "burn-down: also enqueue with this many producers while the backlog drains (notify(), one event per transaction), until as many events completed as were pre-inserted; the rate counts every event (0: none)")
	fs.Float64Var(&o.MixedRate, "mixed-rate", 2000, "burn-down with --mixed-producers: the producers' events per second, in all")
	fs.BoolVar(&o.BurnDownRun, "burn-down-run", false, "burn-down: also time a `pgrelay run` process this program starts with run's defaults (only --database-url) on --events pre-inserted events: from just before its exec to the last completion in the log, with its startup (to the first completion)")
	fs.StringVar(&o.Peer, "peer", "", "also run burn-down, enqueue, latency, producers, latency-load and go with this peer queue on the same database and print the ratios: river (needs the repository's bench/river module and the go command)")
	fs.StringVar(&o.PeerDir, "peer-dir", "", "the peer harness's module directory (default bench/river)")
	fs.BoolVar(&o.JSON, "json", false, "print one JSON document with every result instead of the table")
	fs.StringVar(&o.Plot, "plot", "", "also write an HTML report (throughput over time, latency CDFs, costs per event, cluster-load's figures per node; inline SVG) to this .html file")
	fs.BoolVar(&o.Progress, "progress", false, "show progress on stderr even when it is not a terminal (then one line a second)")
	fs.StringVar(&o.CPUProfile, "cpuprofile", "", "write a Go CPU profile of each measured part to this file (with several parts, one file each: the part's name goes before the extension)")
	fs.DurationVar(&o.Duration, "duration", 10*time.Minute, "soak: how long the workload runs under faults (the drain and the checks follow)")
	fs.Uint64Var(&o.Seed, "seed", 0, "soak: seed of the workload and of the fault schedule (default: from the clock; printed)")
	fs.Float64Var(&o.SoakRate, "soak-rate", 25, "soak: producer transactions per second (1-3 events each)")
	fs.DurationVar(&o.FaultEvery, "fault-every", 10*time.Second, "soak: mean time between two faults")
	fs.DurationVar(&o.DrainTimeout, "drain-timeout", 3*time.Minute, "soak: how long, after the faults, everything may take to end before what is left counts as stuck")
	fs.StringVar(&producers, "producers", "16", "producers: comma-separated numbers of producer connections to measure with")
	fs.DurationVar(&o.ProducerDuration, "producer-duration", 10*time.Second, "producers: how long each run commits")
	fs.Float64Var(&o.LoadRate, "load-rate", 5000, "latency-load: events enqueued per second in its steady-load part")
	fs.DurationVar(&o.LoadDuration, "load-duration", 10*time.Second, "latency-load: how long the steady-load part enqueues")
	fs.IntVar(&o.HOLBacklog, "hol-backlog", 1000000, "latency-load: events pending in another channel in its head-of-line part")
	fs.IntVar(&o.HOLEvents, "hol-events", 200, "latency-load: events on the idle channel in its head-of-line part")
	fs.Float64Var(&o.HOLRate, "hol-rate", 20, "latency-load: events enqueued per second on the idle channel in its head-of-line part")
	fs.IntVar(&o.ClusterNodes, "cluster-nodes", 3, "cluster-load: Spock nodes (2 to 4)")
	fs.Float64Var(&o.ClusterRate, "cluster-rate", 300, "cluster-load: events enqueued per second on each producing node (notify(), one per transaction)")
	fs.DurationVar(&o.ClusterDuration, "cluster-duration", 20*time.Second, "cluster-load: the measured window of each phase (after a 2 s warm-up)")
	fs.IntVar(&o.ClusterProducers, "cluster-producers", 4, "cluster-load: producer connections on each producing node")
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
	if o.BacklogSizes, err = parseSizes("--backlog-sizes", backlogSizes); err != nil {
		return err
	}
	if o.Producers, err = parseSizes("--producers", producers); err != nil {
		return err
	}
	if err := validateBench(&o, list); err != nil {
		return err
	}
	logger, err := mkLog(a.stderr)
	if err != nil {
		return err
	}
	return bench.Run(ctx, bench.Config{Options: o, Processor: f.config(nil, nil), Logger: logger,
		Stdout: a.stdout, Stderr: a.stderr, StderrTerminal: isTTY(a.stderr),
		RunEnv: runDefaultsEnv(os.Environ())}, list)
}

// runDefaultsEnv is environ without the PGRELAY_ variables of `pgrelay
// run`'s flags: the process that --burn-down-run starts runs with run's
// defaults, whatever configures the bench's own Processors.
func runDefaultsEnv(environ []string) []string {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	registerRun(fs)
	addFileFlags(fs)
	flagVars := map[string]bool{}
	fs.VisitAll(func(f *flag.Flag) { flagVars[flagEnv(f.Name)] = true })
	var out []string
	for _, kv := range environ {
		if name, _, _ := strings.Cut(kv, "="); !flagVars[name] {
			out = append(out, kv)
		}
	}
	return out
}

// selectScenarios turns scenario names into scenarios, in order, without
// repeats; none means burn-down.
func selectScenarios(names []string) ([]bench.Scenario, error) {
	all := bench.Scenarios()
	if len(names) == 0 {
		names = []string{"burn-down"}
	}
	var out []bench.Scenario
	add := func(name string) error {
		i := slices.IndexFunc(all, func(s bench.Scenario) bool { return s.Name == name })
		if i < 0 {
			var known []string
			for _, s := range all {
				known = append(known, s.Name)
			}
			return &usageError{msg: fmt.Sprintf("unknown scenario %q: expected %s or all", name, strings.Join(known, ", "))}
		}
		if !slices.ContainsFunc(out, func(s bench.Scenario) bool { return s.Name == name }) {
			out = append(out, all[i])
		}
		return nil
	}
	for _, n := range names {
		n = strings.TrimSpace(n)
		if n == "all" {
			for _, a := range bench.All() {
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

// parseSizes parses the flag name's comma-separated list of positive integers.
func parseSizes(name, s string) ([]int, error) {
	var out []int
	for part := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil || n < 1 {
			return nil, &usageError{msg: fmt.Sprintf("%s %q: expected positive integers separated by commas", name, s)}
		}
		out = append(out, n)
	}
	return out, nil
}

// validateBench checks the bench's own flags for the scenarios of list.
func validateBench(o *bench.Options, list []bench.Scenario) error {
	switch {
	case o.Events < 1 || o.Batch < 1:
		return &usageError{msg: "--events and --enqueue-batch must be positive"}
	case o.MixedProducers < 0:
		return &usageError{msg: "--mixed-producers must not be negative"}
	case o.MixedProducers > 0 && (!(o.MixedRate > 0) || math.IsInf(o.MixedRate, 0)):
		return &usageError{msg: "--mixed-rate must be a positive number"}
	case o.Rounds < 1:
		return &usageError{msg: "--rounds must be positive"}
	case o.CeilingLoops < 0 || o.CeilingClaim < 0:
		return &usageError{msg: "--ceiling-loops and --ceiling-claim must not be negative"}
	case o.LatencyEvents < 1:
		return &usageError{msg: "--latency-events must be positive"}
	case !(o.Rate > 0) || math.IsInf(o.Rate, 0):
		return &usageError{msg: "--rate must be a positive number"}
	case o.BacklogMeasure < 1:
		return &usageError{msg: "--backlog-measure must be positive"}
	case o.Channels < 1 || o.PerChannel < 1:
		return &usageError{msg: "--channels and --events-per-channel must be positive"}
	case o.Duration <= 0 || o.FaultEvery <= 0 || o.DrainTimeout <= 0:
		return &usageError{msg: "--duration, --fault-every and --drain-timeout must be positive"}
	case !(o.SoakRate > 0) || math.IsInf(o.SoakRate, 0):
		return &usageError{msg: "--soak-rate must be a positive number"}
	case o.DatabaseURL != "" && slices.ContainsFunc(list, func(s bench.Scenario) bool { return s.Name == "soak" }):
		return &usageError{msg: "soak starts and restarts a PostgreSQL of its own: it does not run with --database-url"}
	case o.ProducerDuration <= 0 || o.LoadDuration <= 0:
		return &usageError{msg: "--producer-duration and --load-duration must be positive"}
	case !(o.LoadRate > 0) || math.IsInf(o.LoadRate, 0) || !(o.HOLRate > 0) || math.IsInf(o.HOLRate, 0):
		return &usageError{msg: "--load-rate and --hol-rate must be positive numbers"}
	case o.HOLBacklog < 1 || o.HOLEvents < 1:
		return &usageError{msg: "--hol-backlog and --hol-events must be positive"}
	case o.ClusterNodes < 2 || o.ClusterNodes > 4:
		return &usageError{msg: "--cluster-nodes must be 2, 3 or 4"}
	case !(o.ClusterRate > 0) || math.IsInf(o.ClusterRate, 0) || o.ClusterDuration <= 0 || o.ClusterProducers < 1:
		return &usageError{msg: "--cluster-rate, --cluster-duration and --cluster-producers must be positive"}
	case o.Peer != "" && o.Peer != "river":
		return &usageError{msg: fmt.Sprintf("--peer %q: the only peer is river", o.Peer)}
	case o.Peer != "" && !slices.ContainsFunc(list, func(s bench.Scenario) bool { return s.Peer }):
		return &usageError{msg: "--peer runs with burn-down, enqueue, latency, producers, latency-load and go only: name one of them"}
	}
	if o.Plot != "" {
		if ext := strings.ToLower(filepath.Ext(o.Plot)); ext != ".html" && ext != ".htm" {
			return &usageError{msg: fmt.Sprintf("--plot %s: only HTML reports are supported (name the file .html)", o.Plot)}
		}
	}
	return nil
}
