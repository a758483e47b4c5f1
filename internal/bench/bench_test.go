package bench_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/cli/clitest"
	"github.com/pgrelay/pgrelay/internal/devenv"
	"github.com/pgrelay/pgrelay/internal/testenv"
	"github.com/pgrelay/pgrelay/internal/version"
)

// benchDoc is the --json document of pgrelay bench, as far as the tests
// read it.
type benchDoc struct {
	Version   string `json:"pgrelay_version"`
	Postgres  string `json:"postgres_version"`
	CPUs      int    `json:"cpus"`
	Scenarios []struct {
		Name         string         `json:"name"`
		Round        int            `json:"round"`
		Measurements []benchMeasure `json:"measurements"`
		Ratios       []benchRatio   `json:"ratios"`
	} `json:"scenarios"`
	Ratios []benchRatio `json:"ratios"`
	Error  string       `json:"error"`
}

type benchMeasure struct {
	Name       string `json:"name"`
	Producers  int    `json:"producers"`
	WaitEvents []struct {
		Event string  `json:"event"`
		Mean  float64 `json:"mean"`
	} `json:"wait_events"`
	System       string  `json:"system"`
	Events       int     `json:"events"`
	Seconds      float64 `json:"seconds"`
	Startup      float64 `json:"startup_seconds"`
	Rate         float64 `json:"rate"`
	Counted      bool    `json:"counted"`
	Backlog      int     `json:"backlog"`
	PeakRSSBytes int64   `json:"peak_rss_bytes"`
	Detail       string  `json:"detail"`
	LatencyMS    *struct {
		P50, P95, P99, Max float64
	} `json:"latency_ms"`
	Series []struct {
		T    float64 `json:"t"`
		Done int     `json:"done"`
	} `json:"series"`
	Cost *struct {
		WALBytesPerEvent    float64 `json:"wal_bytes_per_event"`
		WriteXactsPerEvent  float64 `json:"write_xacts_per_event"`
		CommitMS            float64 `json:"commit_ms"`
		FlushLimit          float64 `json:"flush_limit_per_sec"`
		ServerCPUUSPerEvent float64 `json:"server_cpu_us_per_event"`
		RoundTripsPerEvent  float64 `json:"round_trips_per_event"`
	} `json:"cost"`
}

// costed checks m's cost: some WAL per event, write transactions per event
// between lo and hi (the server's other writers may add a few), and the
// flush limit they give with the commit measured in the same scenario.
func costed(t *testing.T, m benchMeasure, lo, hi float64) {
	t.Helper()
	if !assert.NotNil(t, m.Cost, "%s (%s): cost", m.Name, m.System) {
		return
	}
	c := m.Cost
	finite(t, m.Name+" WAL bytes per event", c.WALBytesPerEvent)
	assert.True(t, c.WriteXactsPerEvent >= lo && c.WriteXactsPerEvent <= hi, "%s (%s): %v write transactions per event, want %v..%v",
		m.Name, m.System, c.WriteXactsPerEvent, lo, hi)
	finite(t, m.Name+" commit", c.CommitMS)
	assert.InDelta(t, 1000/c.CommitMS/c.WriteXactsPerEvent, c.FlushLimit, 0.01*c.FlushLimit+0.1)
}

type benchRatio struct {
	Name      string  `json:"name"`
	Value     float64 `json:"value"`
	Target    float64 `json:"target"`
	TargetMax float64 `json:"target_max"`
}

func parseBench(t *testing.T, out string) benchDoc {
	t.Helper()
	var doc benchDoc
	dec := json.NewDecoder(strings.NewReader(out))
	require.NoError(t, dec.Decode(&doc), out)
	require.False(t, dec.More(), "one JSON document: %s", out)
	require.Empty(t, doc.Error)
	require.NotEmpty(t, doc.Postgres)
	require.Positive(t, doc.CPUs)
	return doc
}

// measure returns the measurement name of system in scenario.
func (d benchDoc) measure(t *testing.T, scenario, name, system string) benchMeasure {
	t.Helper()
	for _, s := range d.Scenarios {
		if s.Name != scenario {
			continue
		}
		for _, m := range s.Measurements {
			if m.Name == name && m.System == system {
				return m
			}
		}
	}
	t.Fatalf("no measurement %q of %s in scenario %s: %+v", name, system, scenario, d.Scenarios)
	return benchMeasure{}
}

func (d benchDoc) ratio(t *testing.T, scenario, name string) benchRatio {
	t.Helper()
	for _, s := range d.Scenarios {
		for _, r := range s.Ratios {
			if s.Name == scenario && r.Name == name {
				return r
			}
		}
	}
	for _, r := range d.Ratios {
		if scenario == "" && r.Name == name {
			return r
		}
	}
	t.Fatalf("no ratio %q in scenario %q: %+v", name, scenario, d)
	return benchRatio{}
}

// finite fails unless v is a positive finite number (no timing is asserted
// beyond that).
func finite(t *testing.T, what string, v float64) {
	t.Helper()
	if !(v > 0) || math.IsInf(v, 0) {
		t.Errorf("%s = %v, want a positive finite number", what, v)
	}
}

// burnedDown checks a run measured from real completions: the figure, its
// series (ending at every event), and the log's rows for the channel.
func burnedDown(t *testing.T, d *testenv.DB, m benchMeasure, events int, channel string) {
	t.Helper()
	assert.Equal(t, events, m.Events)
	finite(t, m.Name+" rate", m.Rate)
	finite(t, m.Name+" seconds", m.Seconds)
	require.NotEmpty(t, m.Series)
	last := m.Series[len(m.Series)-1]
	assert.GreaterOrEqual(t, last.Done, events, "series ends with every event done")
	for i := 1; i < len(m.Series); i++ {
		assert.GreaterOrEqual(t, m.Series[i].Done, m.Series[i-1].Done)
		assert.GreaterOrEqual(t, m.Series[i].T, m.Series[i-1].T)
	}
	if channel != "" {
		assert.Equal(t, events, d.Count(`SELECT count(DISTINCT origin_id) FROM pgrelay.log
			WHERE channel = $1 AND event = 'succeeded'`, channel))
	}
}

// Every scenario at a tiny size in one run, with --json, --plot and
// --cpuprofile: the figures come from real completions. Not in parallel with
// the other tests: the write transactions per event it checks are counted on
// the server's transaction ids, which every database of the server draws.
func TestBenchScenarios(t *testing.T) {
	d := pg.NewDB(t)
	dir := t.TempDir()
	plot, prof := filepath.Join(dir, "report.html"), filepath.Join(dir, "cpu.pprof")
	code, out, errOut := cliMain("bench", "--database-url", d.URL, "--scenario", "all", "--json", "--progress",
		"--events", "2000", "--latency-events", "200", "--rate", "200",
		"--backlog-sizes", "1000,5000", "--backlog-measure", "1000", "--channels", "200", "--events-per-channel", "5",
		"--plot", plot, "--cpuprofile", prof, "--log-level", "warn")
	require.Equal(t, 0, code, errOut)
	doc := parseBench(t, out)
	var names []string
	for _, s := range doc.Scenarios {
		names = append(names, s.Name)
	}
	require.Equal(t, []string{"burn-down", "enqueue", "latency", "backlog", "channels", "ceiling"}, names)

	t.Run("burn-down", func(t *testing.T) {
		pre := doc.measure(t, "burn-down", "pre-insert (notify_many x 1000)", "pgrelay")
		assert.False(t, pre.Counted)
		finite(t, "pre-insert rate", pre.Rate)
		burnedDown(t, d, doc.measure(t, "burn-down", "burn-down", "pgrelay"), 2000, "pgrelay_bench_noop")
		costed(t, doc.measure(t, "burn-down", "burn-down", "pgrelay"), 0.0005, 1)
	})
	t.Run("enqueue", func(t *testing.T) {
		many := doc.measure(t, "enqueue", "notify_many x 1000", "pgrelay")
		one := doc.measure(t, "enqueue", "notify, one per transaction", "pgrelay")
		assert.Equal(t, 2000, many.Events)
		assert.Equal(t, 2000, one.Events) // min(--events, 10000)
		finite(t, "notify_many rate", many.Rate)
		finite(t, "notify rate", one.Rate)
		// One transaction per notify_many of 1000, one per notify() (and a
		// few more: the id counter's moves to the clock lock this node's row
		// in a subtransaction, which draws an id, at most every 100 ms).
		costed(t, many, 0.001, 0.01)
		costed(t, one, 1, 1.1)
	})
	t.Run("latency", func(t *testing.T) {
		m := doc.measure(t, "latency", "enqueue commit to handler start", "pgrelay")
		assert.Equal(t, 200, m.Events)
		require.NotNil(t, m.LatencyMS)
		l := m.LatencyMS
		assert.True(t, l.P50 <= l.P95 && l.P95 <= l.P99 && l.P99 <= l.Max, "%+v", l)
		finite(t, "latency max", l.Max)
		// 200 events and the warm-up, each handler's start recorded then dropped
		// with the bench's schema.
		assert.Equal(t, 201, d.Count(`SELECT count(*) FROM pgrelay.log WHERE channel = 'pgrelay_bench_latency' AND event = 'succeeded'`))
		assert.Equal(t, 0, d.Count(`SELECT count(*) FROM pg_namespace WHERE nspname = 'pgrelay_bench'`))
	})
	t.Run("backlog", func(t *testing.T) {
		var sizes []int
		for _, s := range doc.Scenarios {
			for _, m := range s.Measurements {
				if s.Name == "backlog" && m.Counted {
					assert.Equal(t, "burn-down of 1000", m.Name)
					burnedDown(t, d, m, 1000, "")
					sizes = append(sizes, m.Backlog)
				}
			}
		}
		assert.Equal(t, []int{1000, 5000}, sizes)
		finite(t, "backlog ratio", doc.ratio(t, "backlog", "5000/1000 pending").Value)
		// At least the measured completions of both sizes are in the log.
		assert.GreaterOrEqual(t, d.Count(`SELECT count(*) FROM pgrelay.log WHERE channel = 'pgrelay_bench_backlog' AND event = 'succeeded'`), 2000)
	})
	t.Run("channels", func(t *testing.T) {
		ch := doc.measure(t, "channels", "200 'channel'-mode channels x 5", "pgrelay")
		burnedDown(t, d, ch, 1000, "")
		assert.Equal(t, 1000, d.Count(`SELECT count(*) FROM pgrelay.log WHERE channel LIKE 'pgrelay\_bench\_ch\_%' AND event = 'succeeded'`))
		assert.Equal(t, 200, d.Count(`SELECT count(DISTINCT channel) FROM pgrelay.log WHERE channel LIKE 'pgrelay\_bench\_ch\_%'`))
		none := doc.measure(t, "channels", "one 'none' channel", "pgrelay")
		burnedDown(t, d, none, 1000, "pgrelay_bench_none")
		assert.Positive(t, ch.PeakRSSBytes)
		assert.Positive(t, none.PeakRSSBytes)
		r := doc.ratio(t, "channels", "channel mode/none")
		finite(t, "channels ratio", r.Value)
		assert.Equal(t, 0.5, r.Target)
	})
	t.Run("ceiling", func(t *testing.T) {
		burnedDown(t, d, doc.measure(t, "ceiling", "burn-down", "bare loop"), 2000, "pgrelay_bench_ceiling")
		r := doc.ratio(t, "", "burn-down/ceiling (pgrelay/bare loop)")
		finite(t, "burn-down/ceiling", r.Value)
		assert.Equal(t, 0.9, r.Target)
	})
	t.Run("leftovers", func(t *testing.T) {
		// The bench removes its channels, and with them anything left queued.
		assert.Equal(t, 0, d.Count(`SELECT count(*) FROM pgrelay.queue`))
		assert.Equal(t, 0, d.Count(`SELECT count(*) FROM pgrelay.channels`))
	})
	t.Run("report", func(t *testing.T) {
		html, err := os.ReadFile(plot)
		require.NoError(t, err)
		assert.Contains(t, string(html), "<svg")
		assert.Contains(t, string(html), "Throughput over time: burn-down")
		assert.Contains(t, string(html), "Latency: enqueue commit to handler start (CDF)")
		assert.NotContains(t, string(html), "<script")
		// In a browser: every chart draws its marks, the costs per event
		// among them (no --round-trips: no round-trips chart).
		charts := reportCharts(t, plot)
		for _, title := range []string{"Throughput over time: burn-down", "Latency: enqueue commit to handler start (CDF)",
			"Cost per event: server CPU", "Cost per event: WAL"} {
			assert.Positive(t, charts[title], "%s: %v", title, charts)
		}
		assert.NotContains(t, charts, "Cost per event: round trips")
		// One CPU profile per measured part.
		for _, part := range []string{"burn-down", "enqueue", "latency", "backlog-1000", "backlog-5000",
			"channels-channel", "channels-none", "ceiling"} {
			st, err := os.Stat(filepath.Join(dir, "cpu."+part+".pprof"))
			if assert.NoError(t, err, part) {
				assert.Positive(t, st.Size(), part)
			}
		}
	})
	t.Run("progress", func(t *testing.T) {
		// --progress on a stderr that is not a terminal: whole lines, no
		// carriage returns; stdout holds the JSON alone.
		assert.Regexp(t, `(?m)^burn-down: pgrelay\s+\[#+\] 100% 2000/2000 `, errOut)
		assert.NotContains(t, errOut, "\r")
	})
}

// latencyOK checks a latency figure of events events.
func latencyOK(t *testing.T, m benchMeasure, events int) {
	t.Helper()
	assert.Equal(t, events, m.Events, m.Name)
	if assert.NotNil(t, m.LatencyMS, m.Name) {
		l := m.LatencyMS
		assert.True(t, l.P50 <= l.P95 && l.P95 <= l.P99 && l.P99 <= l.Max, "%s: %+v", m.Name, l)
		finite(t, m.Name+" latency max", l.Max)
	}
}

// producers and latency-load at a tiny size: the producers' events all
// committed and counted, their wait events sampled; the latency parts each
// measured from real handler starts, the head-of-line part behind a
// backlog that was still draining.
func TestBenchProducersLatencyLoad(t *testing.T) {
	t.Parallel()
	d := pg.NewDB(t)
	plot := filepath.Join(t.TempDir(), "report.html")
	code, out, errOut := cliMain("bench", "producers", "latency-load", "--database-url", d.URL, "--json",
		"--producers", "2,4", "--producer-duration", "1s",
		"--latency-events", "50", "--rate", "100", "--load-rate", "400", "--load-duration", "1s",
		"--hol-backlog", "20000", "--hol-events", "20", "--hol-rate", "20",
		"--plot", plot, "--log-level", "warn")
	require.Equal(t, 0, code, errOut)
	doc := parseBench(t, out)

	t.Run("producers", func(t *testing.T) {
		// The test server's role is a superuser: the commit +1 ms variant runs.
		for _, name := range []string{"commit latency, one connection", "commit latency, one connection, commit_delay"} {
			m := doc.measure(t, "producers", name, "pgrelay")
			assert.False(t, m.Counted)
			latencyOK(t, m, 200)
		}
		var committed int
		for _, n := range []int{2, 4} {
			for _, v := range []string{"no Processor", "Processor draining", "Processor draining, commit +1 ms"} {
				var m benchMeasure
				for _, s := range doc.Scenarios {
					for _, x := range s.Measurements {
						if s.Name == "producers" && x.Name == v && x.Producers == n {
							m = x
						}
					}
				}
				require.Equal(t, n, m.Producers, "%d producers, %s: %+v", n, v, doc.Scenarios)
				finite(t, v+" rate", m.Rate)
				assert.Positive(t, m.Events)
				assert.GreaterOrEqual(t, m.Seconds, 1.0)
				committed += m.Events
				// Every producer's backend was seen in a wait event (or running).
				var seen float64
				for _, w := range m.WaitEvents {
					assert.NotEmpty(t, w.Event)
					seen += w.Mean
				}
				assert.InDelta(t, float64(n), seen, 0.5, "%s: %+v", v, m.WaitEvents)
				assert.Contains(t, m.Detail, fmt.Sprintf("backends of %d per wait event: ", n))
				if v != "no Processor" {
					assert.Contains(t, m.Detail, "the Processor completed")
				}
			}
		}
		// Each run's events went to the log when a Processor completed them,
		// or were discarded with the channel; every payload is one event.
		assert.LessOrEqual(t, d.Count(`SELECT count(*) FROM pgrelay.log WHERE channel = 'pgrelay_bench_producers' AND event = 'succeeded'`), committed)
	})
	t.Run("latency-load", func(t *testing.T) {
		latencyOK(t, doc.measure(t, "latency-load", "at 100/s, idle", "pgrelay"), 50)
		steady := doc.measure(t, "latency-load", "at 400/s, steady", "pgrelay")
		latencyOK(t, steady, 400)
		assert.Contains(t, steady.Detail, "from the scheduled enqueue")
		latencyOK(t, doc.measure(t, "latency-load", "fresh channel at 20/s, idle", "pgrelay"), 20)
		hol := doc.measure(t, "latency-load", "fresh channel at 20/s, 20000 pending in another", "pgrelay")
		latencyOK(t, hol, 20)
		assert.Equal(t, 20000, hol.Backlog)
		assert.Regexp(t, `; of the backlog \d+ left when the last event was enqueued, \d+ when it had started`, hol.Detail)
		pre := doc.measure(t, "latency-load", "pre-insert (notify_many x 1000)", "pgrelay")
		assert.False(t, pre.Counted)
		assert.Equal(t, 20000, pre.Events)
		for _, name := range []string{"head-of-line p50 backlog/idle", "head-of-line p99 backlog/idle"} {
			r := doc.ratio(t, "latency-load", name)
			finite(t, name, r.Value)
			assert.Equal(t, 2.0, r.TargetMax)
		}
		// Each part's events and warm-up completed; the bench's schema is gone.
		assert.Equal(t, 4+50+400+20+20, d.Count(`SELECT count(*) FROM pgrelay.log WHERE channel = 'pgrelay_bench_latency' AND event = 'succeeded'`))
		assert.Equal(t, 0, d.Count(`SELECT count(*) FROM pg_namespace WHERE nspname = 'pgrelay_bench'`))
	})
	t.Run("leftovers", func(t *testing.T) {
		assert.Equal(t, 0, d.Count(`SELECT count(*) FROM pgrelay.queue`))
		assert.Equal(t, 0, d.Count(`SELECT count(*) FROM pgrelay.channels`))
	})
	t.Run("report", func(t *testing.T) {
		html, err := os.ReadFile(plot)
		require.NoError(t, err)
		assert.Contains(t, string(html), "Enqueue: producers committing one event per transaction")
		assert.Contains(t, string(html), "Latency under load: enqueue commit to handler start (CDF)")
		assert.Contains(t, string(html), "pgrelay Processor draining, commit +1 ms")
		assert.Contains(t, string(html), "pgrelay fresh channel at 20/s, 20000 pending in another")
		assert.Contains(t, string(html), "&le; 2.00")
	})
}

// The default scenario with the table on stdout, scenario names before and
// after the flags, and no progress when stderr is not a terminal.
func TestBenchTable(t *testing.T) {
	t.Parallel()
	d := pg.NewDB(t)
	code, out, errOut := cliMain("bench", "burn-down", "--database-url", d.URL, "--events", "2000", "ceiling", "--log-level", "warn")
	require.Equal(t, 0, code, errOut)
	m := regexp.MustCompile(`(?m)^burn-down\s+burn-down\s+pgrelay\s+2000\s+[\d.]+s\s+(\d+) events/s`).FindStringSubmatch(out)
	require.NotNil(t, m, out)
	rate, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	require.Positive(t, rate)
	assert.Regexp(t, `(?m)^burn-down\s+pre-insert \(notify_many x 1000\)\s+pgrelay\s+2000\s`, out)
	assert.Regexp(t, `(?m)^ceiling\s+burn-down\s+bare loop\s+2000\s+[\d.]+s\s+\d+ events/s`, out)
	assert.Regexp(t, `(?m)^burn-down/ceiling \(pgrelay/bare loop\)\s+[\d.]+\s+>= 0.90`, out)
	assert.NotContains(t, errOut, "[#")
	assert.Equal(t, 2000, d.Count(`SELECT count(DISTINCT origin_id) FROM pgrelay.log
		WHERE channel = 'pgrelay_bench_noop' AND event = 'succeeded'`))
	assert.Equal(t, 0, d.Count(`SELECT count(*) FROM pgrelay.queue`))
}

// The former modes --nats, --email and --cluster are scenarios now; the
// flags stay as aliases.
func TestBenchNATSEmailCluster(t *testing.T) {
	t.Parallel()
	d := pg.NewDB(t)
	code, out, errOut := cliMain("bench", "--database-url", d.URL, "--nats", "--email", "--cluster", "--json",
		"--events", "400", "--enqueue-batch", "100", "--log-level", "warn")
	require.Equal(t, 0, code, errOut)
	doc := parseBench(t, out)
	burnedDown(t, d, doc.measure(t, "nats", "burn-down without NATS", "pgrelay"), 400, "")
	burnedDown(t, d, doc.measure(t, "nats", "burn-down with events to JetStream", "pgrelay"), 400, "")
	assert.Equal(t, 800, d.Count(`SELECT count(*) FROM pgrelay.log WHERE channel = 'pgrelay_bench_nats' AND event = 'succeeded'`))
	finite(t, "last event in JetStream", doc.measure(t, "nats", "last event acknowledged by JetStream", "pgrelay").Rate)
	finite(t, "nats ratio", doc.ratio(t, "nats", "with/without").Value)

	burnedDown(t, d, doc.measure(t, "email", "send (fetch, SMTP, set_status, complete)", "pgrelay"), 400, "")
	assert.Equal(t, 400, d.Count(`SELECT count(*) FROM pgrelay_notifier.notifications WHERE status = 'sent'`))

	burnedDown(t, d, doc.measure(t, "cluster", "multi-node, one node", "pgrelay"), 400, "")
	burnedDown(t, d, doc.measure(t, "cluster", "multi-node, two nodes", "pgrelay"), 400, "")
	finite(t, "cluster ratio", doc.ratio(t, "cluster", "two nodes/one node").Value)
}

// The cluster scenario on three Spock nodes: one node, two, three, each
// run's events all succeeded and replicated to node 1.
func TestBenchClusterSpock(t *testing.T) {
	if _, err := devenv.FindSpock(); err != nil {
		t.Skipf("Spock variant skipped: %v", err)
	}
	d := pg.NewDB(t)
	code, out, errOut := cliMain("bench", "--database-url", d.URL, "cluster-spock", "--json",
		"--events", "300", "--enqueue-batch", "100", "--log-level", "warn")
	require.Equal(t, 0, code, errOut)
	// Its own cluster only: no figure of the --database-url server.
	var doc benchDoc
	require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
	require.Empty(t, doc.Error)
	burnedDown(t, d, doc.measure(t, "cluster-spock", "multi-node, one node", "pgrelay"), 300, "")
	burnedDown(t, d, doc.measure(t, "cluster-spock", "multi-node, two nodes", "pgrelay"), 300, "")
	burnedDown(t, d, doc.measure(t, "cluster-spock", "multi-node, three nodes", "pgrelay"), 300, "")
	finite(t, "ratio", doc.ratio(t, "cluster-spock", "three nodes/one node").Value)
}

// --peer river runs the River harness (a separate module, built with the
// go command) on the same database: burn-down, enqueue and latency, and the
// harness's own tests. Skipped with -short: it needs River's module.
func TestBenchPeerRiver(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the go command and River's module (run without -short)")
	}
	// Not in parallel with the other tests: it checks write transactions per
	// event, counted on the server's transaction ids (TestBenchScenarios).
	d := pg.NewDB(t)
	riverDir := filepath.Join("..", "..", "bench", "river")
	plot := filepath.Join(t.TempDir(), "report.html")
	code, out, errOut := cliMain("bench", "burn-down", "enqueue", "latency", "ceiling", "--database-url", d.URL, "--peer", "river",
		"--peer-dir", riverDir, "--events", "2000", "--latency-events", "100", "--rate", "200", "--json",
		"--round-trips", "--plot", plot, "--log-level", "warn")
	require.Equal(t, 0, code, errOut)
	doc := parseBench(t, out)
	burnedDown(t, d, doc.measure(t, "burn-down", "burn-down", "pgrelay"), 2000, "pgrelay_bench_noop")
	burnedDown(t, d, doc.measure(t, "burn-down", "burn-down", "river"), 2000, "")
	finite(t, "river pre-insert", doc.measure(t, "burn-down", "pre-insert (InsertMany x 1000)", "river").Rate)
	finite(t, "pgrelay/river", doc.ratio(t, "burn-down", "pgrelay/river").Value)
	for _, system := range []string{"pgrelay", "river"} {
		m := doc.measure(t, "latency", "enqueue commit to handler start", system)
		assert.Equal(t, 100, m.Events)
		if assert.NotNil(t, m.LatencyMS, system) {
			finite(t, system+" latency max", m.LatencyMS.Max)
		}
	}
	assert.Equal(t, 2000, doc.measure(t, "enqueue", "InsertMany x 1000", "river").Events)
	assert.Equal(t, 2000, doc.measure(t, "enqueue", "Insert, one per transaction", "river").Events)
	finite(t, "notify_many/InsertMany", doc.ratio(t, "enqueue", "notify_many/InsertMany").Value)
	finite(t, "notify/Insert", doc.ratio(t, "enqueue", "notify/Insert").Value)
	// What each phase wrote, both systems measured alike.
	costed(t, doc.measure(t, "enqueue", "notify_many x 1000", "pgrelay"), 0.001, 0.01)
	costed(t, doc.measure(t, "enqueue", "InsertMany x 1000", "river"), 0.001, 0.01)
	costed(t, doc.measure(t, "enqueue", "notify, one per transaction", "pgrelay"), 1, 1.1)
	costed(t, doc.measure(t, "enqueue", "Insert, one per transaction", "river"), 1, 1.1)
	costed(t, doc.measure(t, "burn-down", "burn-down", "pgrelay"), 0.0005, 1)
	costed(t, doc.measure(t, "burn-down", "burn-down", "river"), 0.0005, 1)
	// The server's CPU and the round trips of each system that drains,
	// the bare loop's included: the server runs on this machine, and
	// --round-trips put a counting proxy before each of them. A Processor
	// and the bare loop run many events per round trip.
	for _, m := range []benchMeasure{doc.measure(t, "burn-down", "burn-down", "pgrelay"),
		doc.measure(t, "burn-down", "burn-down", "river"), doc.measure(t, "ceiling", "burn-down", "bare loop")} {
		if assert.NotNil(t, m.Cost, m.System) {
			assert.Positive(t, m.Cost.ServerCPUUSPerEvent, m.System)
			assert.Positive(t, m.Cost.RoundTripsPerEvent, m.System)
			if m.System != "river" {
				assert.Less(t, m.Cost.RoundTripsPerEvent, 1.0, m.System)
			}
		}
	}
	// The producers' pool is the bench's own: no proxy, no round trips.
	assert.Zero(t, doc.measure(t, "enqueue", "notify_many x 1000", "pgrelay").Cost.RoundTripsPerEvent)
	// River leaves its jobs table empty behind it.
	assert.Equal(t, 0, d.Count(`SELECT count(*) FROM river_job`))
	html, err := os.ReadFile(plot)
	require.NoError(t, err)
	assert.Contains(t, string(html), "river burn-down")
	// Throughput, latency, and the three costs per event with River's
	// phases and the bare loop's beside pgrelay's.
	assert.Equal(t, 5, strings.Count(string(html), "<svg"))
	for _, row := range []string{"burn-down: burn-down (river)", "burn-down: burn-down (pgrelay)", "ceiling: burn-down (bare loop)"} {
		assert.Contains(t, string(html), row)
	}
	charts := reportCharts(t, plot)
	for _, title := range []string{"Cost per event: server CPU", "Cost per event: round trips", "Cost per event: WAL"} {
		assert.GreaterOrEqual(t, charts[title], 3, "%s: a bar for pgrelay, River and the bare loop at least: %v", title, charts)
	}

	t.Run("harness tests", func(t *testing.T) {
		// The harness's own tests run against a database of their own.
		cmd := exec.CommandContext(context.Background(), "go", "-C", riverDir, "test", "-count=1", "./...")
		cmd.Env = append(os.Environ(), "RIVER_BENCH_DATABASE_URL="+pg.EmptyDB(t))
		res, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", res)
		assert.NotContains(t, string(res), "no test files")
	})
}

// producers and latency-load with --peer river: River's figure follows each
// of pgrelay's, with the ratios. Skipped with -short: it needs River's module.
func TestBenchPeerRiverLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the go command and River's module (run without -short)")
	}
	t.Parallel()
	d := pg.NewDB(t)
	code, out, errOut := cliMain("bench", "producers", "latency-load", "--database-url", d.URL, "--peer", "river",
		"--peer-dir", filepath.Join("..", "..", "bench", "river"), "--json",
		"--producers", "2", "--producer-duration", "1s",
		"--latency-events", "20", "--rate", "100", "--load-rate", "200", "--load-duration", "500ms",
		"--hol-backlog", "5000", "--hol-events", "10", "--hol-rate", "20", "--log-level", "warn")
	require.Equal(t, 0, code, errOut)
	doc := parseBench(t, out)
	for _, v := range []string{"no Processor", "Processor draining", "Processor draining, commit +1 ms"} {
		m := doc.measure(t, "producers", v, "river")
		assert.Equal(t, 2, m.Producers)
		finite(t, "river "+v, m.Rate)
		assert.NotEmpty(t, m.WaitEvents, v)
		finite(t, v+" ratio", doc.ratio(t, "producers", "2 producers, "+v+" pgrelay/river").Value)
	}
	assert.Contains(t, doc.measure(t, "producers", "Processor draining", "river").Detail, "a River client worked")
	latencyOK(t, doc.measure(t, "latency-load", "at 100/s, idle", "river"), 20)
	latencyOK(t, doc.measure(t, "latency-load", "at 200/s, steady", "river"), 100)
	latencyOK(t, doc.measure(t, "latency-load", "fresh channel at 20/s, idle", "river"), 10)
	hol := doc.measure(t, "latency-load", "fresh channel at 20/s, 5000 pending in another", "river")
	latencyOK(t, hol, 10)
	assert.Contains(t, hol.Detail, "the backlog in a second queue (pgrelay_bench_backlog)")
	assert.Equal(t, 5000, doc.measure(t, "latency-load", "backlog pre-insert (InsertMany x 1000)", "river").Events)
	finite(t, "p99 steady pgrelay/river", doc.ratio(t, "latency-load", "p99 at 200/s, steady pgrelay/river").Value)
	assert.Equal(t, 2.0, doc.ratio(t, "latency-load", "river head-of-line p99 backlog/idle").TargetMax)
	assert.Equal(t, 0, d.Count(`SELECT count(*) FROM river_job`))
}

// Bad flags and scenarios are usage errors (exit 2) before anything starts.
func TestBenchUsage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--events", "0"}, "--events and --enqueue-batch must be positive"},
		{[]string{"--peer", "sidekiq"}, `--peer "sidekiq": the only peer is river`},
		{[]string{"--sql-batch", "0"}, "--sql-batch must be at least 1"},
		{[]string{"sideways"}, `unknown scenario "sideways"`},
		{[]string{"--scenario", "burn-down,nope"}, `unknown scenario "nope"`},
		{[]string{"burn-down", "--plot", "out.png"}, "only HTML reports are supported"},
		{[]string{"--rate", "0"}, "--rate must be a positive number"},
		{[]string{"--latency-events", "-1"}, "--latency-events must be positive"},
		{[]string{"--backlog-sizes", "10,x"}, `--backlog-sizes "10,x"`},
		{[]string{"--backlog-measure", "0"}, "--backlog-measure must be positive"},
		{[]string{"--channels", "0"}, "--channels and --events-per-channel must be positive"},
		{[]string{"channels", "--peer", "river"}, "--peer runs with burn-down, enqueue, latency, producers, latency-load and go only"},
		{[]string{"--producers", "16,0"}, `--producers "16,0"`},
		{[]string{"--producer-duration", "0s"}, "--producer-duration and --load-duration must be positive"},
		{[]string{"--load-rate", "0"}, "--load-rate and --hol-rate must be positive numbers"},
		{[]string{"--hol-backlog", "0"}, "--hol-backlog and --hol-events must be positive"},
		{[]string{"--cluster-nodes", "5"}, "--cluster-nodes must be 2, 3 or 4"},
		{[]string{"--cluster-rate", "0"}, "--cluster-rate, --cluster-duration and --cluster-producers must be positive"},
		{[]string{"--bogus"}, "flag provided but not defined"},
		{[]string{"soak", "--duration", "0s"}, "--duration, --fault-every and --drain-timeout must be positive"},
		{[]string{"soak", "--soak-rate", "0"}, "--soak-rate must be a positive number"},
		{[]string{"soak", "--database-url", "postgres://nowhere/db"}, "soak starts and restarts a PostgreSQL of its own"},
	} {
		code, out, errOut := cliMain(append([]string{"bench"}, tc.args...)...)
		assert.Equal(t, 2, code, "%v: %s", tc.args, errOut)
		assert.Empty(t, out, tc.args)
		assert.Contains(t, errOut, tc.want, tc.args)
	}
	code, _, errOut := cliMain("bench", "-h")
	assert.Equal(t, 0, code)
	assert.Contains(t, errOut, "Usage: pgrelay bench [flags] [scenario ...]")
	for _, s := range []string{"burn-down", "enqueue", "latency", "backlog", "channels", "ceiling", "nats", "email", "producers", "latency-load", "cluster", "cluster-load", "soak", "all"} {
		assert.Regexp(t, `(?m)^  `+s+`\s`, errOut)
	}
	for _, f := range []string{"scenario", "json", "plot", "progress", "cpuprofile", "rate", "backlog-sizes", "channels", "peer", "nats", "email", "cluster", "duration", "seed", "soak-rate", "fault-every", "drain-timeout",
		"producers", "producer-duration", "load-rate", "load-duration", "hol-backlog", "hol-events", "hol-rate",
		"cluster-nodes", "cluster-rate", "cluster-duration", "cluster-producers", "burn-down-run", "rounds"} {
		assert.Regexp(t, `(?m)^  -`+f+`\b`, errOut)
	}
}

// TestBenchDatabaseUnreachable: a --database-url nothing listens on is a
// clear error with exit 1, not a crash.
func TestBenchDatabaseUnreachable(t *testing.T) {
	t.Parallel()
	code, out, errOut := cliMain("bench", "burn-down", "--database-url", "postgres://postgres@127.0.0.1:1/none?connect_timeout=5")
	assert.Equal(t, 1, code, errOut)
	assert.Empty(t, out)
	assert.NotContains(t, errOut, "panic")
	assert.Contains(t, errOut, "pgrelay bench: ")
}

// The ceiling's shape flags: several loops, claims smaller than the backlog
// (so each loop commits many transactions, each pipelined with the next
// claim), and --ceiling-reset; every event is logged once and the queue ends
// empty.
func TestBenchCeilingShape(t *testing.T) {
	t.Parallel()
	d := pg.NewDB(t)
	code, out, errOut := cliMain("bench", "ceiling", "--database-url", d.URL, "--events", "503", "--json",
		"--ceiling-loops", "3", "--ceiling-claim", "17", "--ceiling-reset", "--log-level", "warn")
	require.Equal(t, 0, code, errOut)
	doc := parseBench(t, out)
	assert.Equal(t, version.Release, doc.Version, "the report names the release")
	m := doc.measure(t, "ceiling", "burn-down", "bare loop")
	burnedDown(t, d, m, 503, "pgrelay_bench_ceiling")
	assert.Contains(t, m.Detail, "3 connections; claim 17 ")
	assert.Contains(t, m.Detail, "the timeout and the session reset")
	assert.Equal(t, 503, d.Count(`SELECT count(*) FROM pgrelay.log WHERE channel = 'pgrelay_bench_ceiling'`))
	assert.Equal(t, 0, d.Count(`SELECT count(*) FROM pgrelay.queue`))

	code, _, errOut = cliMain("bench", "ceiling", "--database-url", d.URL, "--ceiling-loops", "-1")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "--ceiling-loops and --ceiling-claim must not be negative")
}

// --rounds: the scenarios run that many times, every other round in the
// reverse order, each result with its round; burn-down and ceiling's ratio
// comes for each round, then as their median.
func TestBenchRounds(t *testing.T) {
	t.Parallel()
	d := pg.NewDB(t)
	code, out, errOut := cliMain("bench", "burn-down", "ceiling", "--database-url", d.URL, "--events", "300",
		"--rounds", "3", "--json", "--log-level", "warn")
	require.Equal(t, 0, code, errOut)
	doc := parseBench(t, out)
	var ran []string
	for _, s := range doc.Scenarios {
		ran = append(ran, fmt.Sprintf("%s #%d", s.Name, s.Round))
	}
	assert.Equal(t, []string{"burn-down #1", "ceiling #1", "ceiling #2", "burn-down #2", "burn-down #3", "ceiling #3"}, ran)
	rate := func(scenario string, round int, system string) float64 {
		for _, s := range doc.Scenarios {
			for _, m := range s.Measurements {
				if s.Name == scenario && s.Round == round && m.Name == "burn-down" && m.System == system {
					return m.Rate
				}
			}
		}
		t.Fatalf("no burn-down of %s in %s #%d", system, scenario, round)
		return 0
	}
	var values []float64
	for k := 1; k <= 3; k++ {
		r := doc.ratio(t, "", fmt.Sprintf("burn-down/ceiling (pgrelay/bare loop), round %d", k))
		assert.InDelta(t, rate("burn-down", k, "pgrelay")/rate("ceiling", k, "bare loop"), r.Value, 0.001)
		values = append(values, r.Value)
	}
	slices.Sort(values)
	assert.Equal(t, values[1], doc.ratio(t, "", "burn-down/ceiling (pgrelay/bare loop), median of 3 rounds").Value)
	assert.Equal(t, 1800, d.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'succeeded'`))

	code, _, errOut = cliMain("bench", "burn-down", "--database-url", d.URL, "--rounds", "0")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "--rounds must be positive")
}

// statements: each side drains the events on one connection, a batch of
// --sql-batch at a time, every event succeeding once; each reports its
// backend's CPU per event, and their ratio.
func TestBenchStatements(t *testing.T) {
	t.Parallel()
	d := pg.NewDB(t)
	code, out, errOut := cliMain("bench", "statements", "--database-url", d.URL, "--events", "1200", "--sql-batch", "100",
		"--json", "--log-level", "warn")
	require.Equal(t, 0, code, errOut)
	doc := parseBench(t, out)
	cpu := map[string]float64{}
	for _, system := range []string{"pgrelay", "bare loop"} {
		m := doc.measure(t, "statements", "a batch at a time, one connection", system)
		assert.True(t, m.Counted)
		assert.Equal(t, 1200, m.Events)
		finite(t, system+" rate", m.Rate)
		// Server-wide (the tests beside this one write too): only present.
		require.NotNil(t, m.Cost, system)
		var us float64
		_, err := fmt.Sscanf(m.Detail, "its backend's CPU: %f µs an event", &us)
		require.NoError(t, err, m.Detail)
		require.Positive(t, us, system)
		cpu[system] = us
		assert.Contains(t, m.Detail, "batches of 100); 1200 log rows checked")
	}
	r := doc.ratio(t, "statements", "statements: backend CPU per event, pgrelay/bare loop")
	assert.InDelta(t, cpu["pgrelay"]/cpu["bare loop"], r.Value, 0.01)
	// Both sides' events, each succeeded once.
	assert.Equal(t, 2400, d.Count(`SELECT count(DISTINCT origin_id) FROM pgrelay.log
		WHERE channel = 'pgrelay_bench_statements' AND event = 'succeeded'`))
	assert.Equal(t, 0, d.Count(`SELECT count(*) FROM pgrelay.queue`))
}

// burn-down's mixed load: producers enqueue while the backlog drains; the
// figure counts every event, and the log holds one succeeded row for each.
func TestBenchBurnDownProducers(t *testing.T) {
	t.Parallel()
	d := pg.NewDB(t)
	code, out, errOut := cliMain("bench", "burn-down", "--database-url", d.URL, "--events", "3000", "--json",
		"--mixed-producers", "3", "--mixed-rate", "300", "--log-level", "warn")
	require.Equal(t, 0, code, errOut)
	m := parseBench(t, out).measure(t, "burn-down", "burn-down", "pgrelay")
	require.Greater(t, m.Events, 3000, "some events were produced while the backlog drained")
	burnedDown(t, d, m, m.Events, "pgrelay_bench_noop")
	assert.Contains(t, m.Detail, "3000 pre-inserted, ")
	assert.Contains(t, m.Detail, "by 3 producers")
	assert.Equal(t, 0, d.Count(`SELECT count(*) FROM pgrelay.queue`))

	code, _, errOut = cliMain("bench", "burn-down", "--database-url", d.URL, "--mixed-producers", "2", "--mixed-rate", "0")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "--mixed-rate must be a positive number")
}

// --burn-down-run: burn-down also times a `pgrelay run` process on as many
// pre-inserted events, started with run's defaults: a PGRELAY_ variable of
// run's flags does not reach it (this one would stop it at its start). It
// exits 0 on SIGTERM; its startup lies within its time.
func TestBenchBurnDownRun(t *testing.T) {
	// The bench starts `pgrelay run` as this program: as this test binary,
	// it must act as the pgrelay command (TestMain).
	t.Setenv(clitest.RunMainEnv, "1")
	t.Setenv("PGRELAY_WEB_ADDR", "0.0.0.0:1")
	d := pg.NewDB(t)
	code, out, errOut := cliMain("bench", "burn-down", "--database-url", d.URL, "--events", "2000", "--json",
		"--burn-down-run", "--log-level", "warn")
	require.Equal(t, 0, code, errOut)
	doc := parseBench(t, out)
	pre := doc.measure(t, "burn-down", "pre-insert for the run process (notify_many x 1000)", "pgrelay")
	assert.False(t, pre.Counted)
	assert.Equal(t, 2000, pre.Events)
	m := doc.measure(t, "burn-down", "run process, from its exec", "pgrelay")
	burnedDown(t, d, m, 2000, "")
	assert.True(t, m.Counted)
	assert.Positive(t, m.Startup)
	assert.LessOrEqual(t, m.Startup, m.Seconds)
	assert.Contains(t, m.Detail, "SIGTERM: exit 0; 2000 succeeded log rows checked")
	// The in-process run's events and the process's, each succeeded once.
	assert.Equal(t, 4000, d.Count(`SELECT count(DISTINCT origin_id) FROM pgrelay.log
		WHERE channel = 'pgrelay_bench_noop' AND event = 'succeeded'`))
	assert.Equal(t, 0, d.Count(`SELECT count(*) FROM pgrelay.queue`))
}

// The go scenario drains a go channel with a no-op Handle, HandleTx (in
// batches, then a transaction per event) and HandleTxBatch, every event
// succeeding once; then measures the latency of a HandleTx and a Handle
// handler beside the sql kind's, each from real handler starts.
func TestBenchGo(t *testing.T) {
	t.Parallel()
	d := pg.NewDB(t)
	plot := filepath.Join(t.TempDir(), "report.html")
	code, out, errOut := cliMain("bench", "go", "--database-url", d.URL, "--json", "--events", "300",
		"--enqueue-batch", "100", "--latency-events", "40", "--rate", "100", "--plot", plot, "--log-level", "warn")
	require.Equal(t, 0, code, errOut)
	doc := parseBench(t, out)
	burnedDown(t, d, doc.measure(t, "go", "burn-down, no-op Handle", "pgrelay"), 300, "")
	tx := doc.measure(t, "go", "burn-down, no-op HandleTx", "pgrelay")
	burnedDown(t, d, tx, 300, "")
	assert.Contains(t, tx.Detail, "a savepoint per event")
	burnedDown(t, d, doc.measure(t, "go", "burn-down, no-op HandleTx, --sql-batch 1", "pgrelay"), 300, "")
	burnedDown(t, d, doc.measure(t, "go", "burn-down, no-op HandleTxBatch", "pgrelay"), 300, "")
	assert.Equal(t, 1200, d.Count(`SELECT count(DISTINCT origin_id) FROM pgrelay.log
		WHERE channel = 'pgrelay_bench_go' AND event = 'succeeded'`))
	assert.Zero(t, d.Count(`SELECT count(*) FROM pgrelay.channels WHERE channel = 'pgrelay_bench_go'`))

	for _, name := range []string{"latency, sql statement", "latency, HandleTx", "latency, Handle"} {
		latencyOK(t, doc.measure(t, "go", name, "pgrelay"), 40)
	}
	assert.Contains(t, doc.measure(t, "go", "latency, Handle", "pgrelay").Detail, "time.Now()")
	for _, name := range []string{"latency p50 HandleTx/sql", "latency p99 HandleTx/sql",
		"latency p50 Handle/sql", "latency p99 Handle/sql"} {
		finite(t, name, doc.ratio(t, "go", name).Value)
	}
	// Each kind's 40 events and its warm-up ran on the latency channel, the
	// sql kind's with its statement, the others in Go; the bench's schema is
	// gone.
	assert.Equal(t, 3*41, d.Count(`SELECT count(*) FROM pgrelay.log
		WHERE channel = 'pgrelay_bench_latency' AND event = 'succeeded'`))
	assert.Zero(t, d.Count(`SELECT count(*) FROM pg_namespace WHERE nspname = 'pgrelay_bench'`))
	assert.Zero(t, d.Count(`SELECT count(*) FROM pgrelay.channels`))
	html, err := os.ReadFile(plot)
	require.NoError(t, err)
	assert.Contains(t, string(html), "Latency of the go kind beside the sql kind: enqueue commit to handler start (CDF)")
	assert.Contains(t, string(html), "pgrelay latency, Handle")
}
