// Package bench is `pgrelay bench`: the scenarios that measure pgrelay on
// PostgreSQL (burn-down, enqueue, latency, backlog, channels, ceiling, nats,
// email, producers, latency-load, go, cluster, cluster-load), the integrity soak, the River peer and the reports (table,
// JSON, HTML). The command line (internal/cli) parses and checks the flags
// and calls Run.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgrelay/pgrelay/actors"
	"github.com/pgrelay/pgrelay/events/store"
	"github.com/pgrelay/pgrelay/internal/devenv"
	"github.com/pgrelay/pgrelay/migrations"
)

// Scenario is one scenario of `pgrelay bench`.
type Scenario struct {
	Name    string
	Summary string
	// Peer: --peer runs the peer's version of the scenario too.
	Peer bool
	// local: runs on the bench database (every scenario but cluster and
	// soak, which start PostgreSQL of their own).
	local bool
	run   func(b *bench, ctx context.Context) (*scenarioResult, error)
}

// Scenarios are the scenarios, in the order `all` runs the first six.
func Scenarios() []Scenario {
	return []Scenario{
		{"burn-down", "N no-op events pre-inserted, drained by one Processor: events/s", true, true, (*bench).scenarioBurnDown},
		{"enqueue", "notify_many in batches, notify() one per transaction: events/s", true, true, (*bench).scenarioEnqueue},
		{"latency", "events at --rate into a running Processor: commit to handler start", true, true, (*bench).scenarioLatency},
		{"backlog", "burn-down with --backlog-sizes rows pending: events/s, large/small", false, true, (*bench).scenarioBacklog},
		{"channels", "'channel'-mode channels, then one 'none' channel: events/s, RSS", false, true, (*bench).scenarioChannels},
		{"ceiling", "the burn-down by a bare loop without actors: events/s", false, true, (*bench).scenarioCeiling},
		{"statements", "a direct batch at a time on one connection, the Processor's and the bare loop's: their backend's CPU per event", false, true, (*bench).scenarioStatements},
		{"nats", "burn-down without, then with status events to JetStream: ratio", false, true, (*bench).scenarioNATS},
		{"email", "emails via pgrelay_notifier.send() to an SMTP catcher: emails/s", false, true, (*bench).scenarioEmail},
		{"producers", "--producers connections each committing notify() one per transaction: events/s, waits", true, true, (*bench).scenarioProducers},
		{"latency-load", "latency idle, at --load-rate, and on an idle channel behind a --hol-backlog", true, true, (*bench).scenarioLatencyLoad},
		{"go", "burn-down on a go channel: a no-op Handle, HandleTx (batched, then --sql-batch 1), HandleTxBatch: events/s; then latency at --rate of HandleTx and Handle beside the sql kind's", true, true, (*bench).scenarioGo},
		{"cluster", "multi-node burn-down on a two-node pglogical cluster: 1 node, 2", false, false, (*bench).scenarioCluster},
		{"cluster-spock", "the same on a three-node Spock cluster (SPOCK_PG_HOME): 1 node, 2, 3", false, false, (*bench).scenarioClusterSpock},
		{"cluster-load", "three Spock nodes (--cluster-nodes) at --cluster-rate per producing node: multi-node idle, node 1 producing, every node; leader: events/s, WAL, bytes sent to each peer, apply lag, server CPU per node", false, false, (*bench).scenarioClusterLoad},
		{"soak", "integrity: mixed workload under faults for --duration, then invariants", false, false, (*bench).scenarioSoak},
	}
}

// All is what the scenario name "all" stands for.
func All() []string {
	return []string{"burn-down", "enqueue", "latency", "backlog", "channels", "ceiling"}
}

// Options are the bench's own flags (internal/cli registers and checks them).
type Options struct {
	DatabaseURL    string
	Events         int
	Batch          int
	LatencyEvents  int
	Rate           float64
	BacklogSizes   []int
	BacklogMeasure int
	Channels       int
	CeilingLoops   int // 0: the default
	CeilingClaim   int // 0: the default
	CeilingReset   bool
	RoundTrips     bool // the measured systems connect through a proxy that counts round trips
	// Rounds runs the scenarios this many times, every other round in the
	// reverse order (1 when 0).
	Rounds         int
	MixedProducers int     // burn-down's mixed load: producers (0: none)
	MixedRate      float64 // their events/s in total
	PerChannel     int
	Peer           string
	PeerDir        string
	JSON           bool
	Plot           string
	Progress       bool
	CPUProfile     string
	Duration       time.Duration
	Seed           uint64
	SoakRate       float64
	FaultEvery     time.Duration
	DrainTimeout   time.Duration
	// burn-down: also time a `pgrelay run` process (bench_burndown_run.go)
	BurnDownRun bool
	// producers
	Producers        []int
	ProducerDuration time.Duration
	// latency-load
	LoadRate     float64
	LoadDuration time.Duration
	HOLBacklog   int
	HOLEvents    int
	HOLRate      float64
	// cluster-load
	ClusterNodes     int
	ClusterRate      float64 // events/s per producing node
	ClusterDuration  time.Duration
	ClusterProducers int // connections per producing node
}

// Config is one run of the bench: its options, the measured Processors'
// configuration and where it writes.
type Config struct {
	Options
	// Processor configures every measured Processor: the bench sets
	// DatabaseURL, Mode (cluster), Logger and Registerer per Processor.
	// The nats scenario publishes with its NATS settings, to a NATS server
	// of its own when NATS is nil or has no URL.
	Processor actors.Config
	Logger    *slog.Logger
	// Stdout gets the report; Stderr the progress bars and notes.
	Stdout, Stderr io.Writer
	// StderrTerminal: Stderr is a terminal (progress bars redrawn in place).
	StderrTerminal bool
	// RunEnv is the environment of the `pgrelay run` process that
	// BurnDownRun starts (nil: this process's).
	RunEnv []string
}

// bench is one run of `pgrelay bench`: its options, the database and the
// helpers the scenarios share.
type bench struct {
	o              Options
	proc           actors.Config // the measured Processors' configuration (DatabaseURL is set per Processor)
	logger         *slog.Logger
	stdout, stderr io.Writer
	dbURL          string        // the bench database (empty when only cluster runs)
	pool           *pgxpool.Pool // on dbURL
	prog           *progress
	prof           *cpuProfiler
	river          *riverHarness
	meter          *meter // server CPU and round trips (bench_meter.go)
	proxyURL       string // dbURL through the round-trip proxy (--round-trips), or empty
	runEnv         []string
}

// measuredURL is the URL the measured systems connect to: the bench
// database, through the round-trip proxy with --round-trips.
func (b *bench) measuredURL() string {
	if b.proxyURL != "" {
		return b.proxyURL
	}
	return b.dbURL
}

// Run runs the scenarios of list, in order, and reports on cfg.Stdout.
// Results of the scenarios that ran are reported even when a later one
// fails.
func Run(ctx context.Context, cfg Config, list []Scenario) error {
	b := &bench{o: cfg.Options, proc: cfg.Processor, logger: cfg.Logger, stdout: cfg.Stdout, stderr: cfg.Stderr,
		prog:  newProgress(cfg.Stderr, cfg.StderrTerminal, cfg.Progress),
		prof:  &cpuProfiler{path: cfg.CPUProfile},
		river: &riverHarness{dir: riverDir(cfg.PeerDir)}, runEnv: cfg.RunEnv}
	return b.run(ctx, list)
}

// run prepares the database, runs the scenarios and reports. Results of the
// scenarios that ran are reported even when a later one fails.
func (b *bench) run(ctx context.Context, list []Scenario) error {
	defer b.river.close()
	rep := &benchReport{
		Version:    b.proc.WithDefaults().Version,
		CPUs:       runtime.NumCPU(),
		GOMAXPROCS: runtime.GOMAXPROCS(0),
		Go:         runtime.Version(),
		Processor:  processorSettingsOf(&b.proc),
	}
	if slices.ContainsFunc(list, func(s Scenario) bool { return s.local }) {
		stop, err := b.openDatabase(ctx, rep)
		if err != nil {
			return err
		}
		defer stop()
	}
	var runErr error
	rounds := max(b.o.Rounds, 1)
run:
	for round := 1; round <= rounds; round++ {
		order := list
		if round%2 == 0 {
			// Every other round in the reverse order: what runs later in
			// a round (on a database the others grew, or as the machine's
			// load moves) is not always the same scenario.
			order = slices.Clone(list)
			slices.Reverse(order)
		}
		if rounds > 1 {
			b.prof.suffix = "-" + strconv.Itoa(round)
		}
		for _, s := range order {
			res, err := s.run(b, ctx)
			if res != nil {
				if rounds > 1 {
					res.Round = round
				}
				rep.Scenarios = append(rep.Scenarios, res)
			}
			if err != nil {
				runErr = fmt.Errorf("%s: %w", s.Name, err)
				break run
			}
		}
	}
	rep.crossRatios()
	if runErr != nil {
		rep.Error = strings.Join(strings.Fields(runErr.Error()), " ") // one line
	}
	files, err := b.prof.write()
	for _, f := range files {
		fmt.Fprintf(b.stderr, "pgrelay bench: CPU profile written to %s\n", f)
	}
	runErr = errors.Join(runErr, err)
	if b.o.JSON {
		err = rep.writeJSON(b.stdout)
	} else {
		err = rep.writeText(b.stdout)
	}
	runErr = errors.Join(runErr, err)
	if b.o.Plot != "" && len(rep.Scenarios) > 0 {
		if err := writePlot(b.o.Plot, rep); err != nil {
			runErr = errors.Join(runErr, err)
		} else if !b.o.JSON {
			fmt.Fprintf(b.stdout, "\nHTML report: %s\n", b.o.Plot)
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
	b.dbURL = b.o.DatabaseURL
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
	var proxy *rtProxy
	if b.o.RoundTrips {
		if proxy, b.proxyURL, err = startProxy(b.dbURL); err != nil {
			return nil, err
		}
		undo = append(undo, proxy.close)
		rep.Database += "; measured systems connect through a round-trip counting proxy (--round-trips): compare its costs, not its rates"
	}
	if b.meter, err = startMeter(ctx, pool, proxy); err != nil {
		return nil, err
	}
	undo = append(undo, b.meter.close)
	if err := pool.QueryRow(ctx, `SELECT current_setting('server_version'), current_setting('fsync'),
		current_setting('synchronous_commit')`).Scan(&rep.Postgres, &rep.Fsync, &rep.SynchronousCommit); err != nil {
		return nil, fmt.Errorf("read the server's settings: %w", err)
	}
	return undoAll, nil
}

// procConfig is the measured Processor's configuration on url, in mode
// (empty: the --mode flag's).
func (b *bench) procConfig(url, mode string) actors.Config {
	c := b.proc
	if url == b.dbURL {
		url = b.measuredURL()
	}
	c.DatabaseURL = url
	if mode != "" {
		c.Mode = mode
	}
	c.Logger = b.logger
	return c
}

// newProcessor is actors.New with a registry of its own: the bench runs
// Processors one after another and side by side.
func newProcessor(c actors.Config) (*actors.Processor, error) {
	c.Registerer = prometheus.NewRegistry()
	return actors.New(c)
}
