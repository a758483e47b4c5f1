package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// testDatabaseURL is the database the scenarios run against; the main
// module's test harness provides it. River's tables are created there and
// river_job is emptied, so it must be a throwaway database.
const testDatabaseEnv = "RIVER_BENCH_DATABASE_URL"

func testDatabaseURL(t *testing.T) string {
	t.Helper()
	url := os.Getenv(testDatabaseEnv)
	if url == "" {
		t.Skipf("%s is not set: set it to a throwaway PostgreSQL database (River's tables are created there and river_job is emptied) to run the River benchmark scenarios", testDatabaseEnv)
	}
	return url
}

// runJSON parses args as the command line would, runs the scenario and
// decodes its --json output.
func runJSON(t *testing.T, args ...string) map[string]any {
	t.Helper()
	cfg, err := parseFlags(append(args, "--json", "--timeout", "2m"), io.Discard)
	if err != nil {
		t.Fatalf("parseFlags(%v): %v", args, err)
	}
	logger := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	res, err := run(context.Background(), cfg, logger)
	if err != nil {
		t.Fatalf("run %v: %v", args, err)
	}
	var out bytes.Buffer
	if err := report(&out, cfg, res); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(strings.TrimSpace(out.String()), "\n"); n != 0 {
		t.Fatalf("--json printed %d lines, want one object:\n%s", n+1, out.String())
	}
	var got map[string]any
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("decode %s: %v", out.String(), err)
	}
	if got["peer"] != "river" || got["version"] != "v0.51.2" || got["scenario"] != cfg.Scenario {
		t.Errorf("peer/version/scenario = %v/%v/%v", got["peer"], got["version"], got["scenario"])
	}
	// producers counts the jobs it committed.
	if cfg.Scenario != scenarioProducers && got["events"] != float64(cfg.Events) {
		t.Errorf("events = %v, want %d", got["events"], cfg.Events)
	}
	if _, ok := got["settings"].(map[string]any); !ok {
		t.Errorf("settings missing: %s", out.String())
	}
	var text bytes.Buffer
	cfg.JSON = false
	if err := report(&text, cfg, res); err != nil || !strings.Contains(text.String(), "River v0.51.2") {
		t.Errorf("text report (%v):\n%s", err, text.String())
	}
	return got
}

func positive(t *testing.T, got map[string]any, field string) {
	t.Helper()
	if v, ok := got[field].(float64); !ok || !(v > 0) {
		t.Errorf("%s = %v, want a positive number", field, got[field])
	}
}

func absent(t *testing.T, got map[string]any, fields ...string) {
	t.Helper()
	for _, f := range fields {
		if _, ok := got[f]; ok {
			t.Errorf("%s is present, want it omitted for scenario %v", f, got["scenario"])
		}
	}
}

// cost checks the phase's cost in got: some WAL, and between minXacts and
// maxXacts write transactions (the server's other writers may add a few).
func cost(t *testing.T, got map[string]any, phase string, events int, minXacts, maxXacts float64) {
	t.Helper()
	all, _ := got["cost"].(map[string]any)
	c, ok := all[phase].(map[string]any)
	if !ok {
		t.Fatalf("cost of %s missing: %v", phase, got["cost"])
	}
	if c["events"] != float64(events) {
		t.Errorf("cost of %s: events = %v, want %d", phase, c["events"], events)
	}
	if w, _ := c["wal_bytes"].(float64); !(w > 0) {
		t.Errorf("cost of %s: wal_bytes = %v, want a positive number", phase, c["wal_bytes"])
	}
	if x, _ := c["write_xacts"].(float64); x < minXacts || x > maxXacts {
		t.Errorf("cost of %s: write_xacts = %v, want %v..%v", phase, c["write_xacts"], minXacts, maxXacts)
	}
}

func TestScenarios(t *testing.T) {
	url := testDatabaseURL(t)
	t.Run("burn-down", func(t *testing.T) {
		got := runJSON(t, "--database-url", url, "--scenario", "burn-down", "--events", "500", "--insert-batch", "100", "--workers", "50")
		positive(t, got, "seconds")
		positive(t, got, "events_per_sec")
		positive(t, got, "insert_per_sec")
		absent(t, got, "single_insert_per_sec", "latency_ms", "latency_samples_ms")
		cost(t, got, costBurnDown, 500, 1, 500)
		series, ok := got["series"].([]any)
		if !ok || len(series) < 2 {
			t.Fatalf("series missing or short: %v", got["series"])
		}
		prevT, prevDone := -1.0, -1.0
		for _, s := range series {
			p, _ := s.(map[string]any)
			tt, _ := p["t"].(float64)
			done, _ := p["done"].(float64)
			if tt < prevT || done < prevDone {
				t.Fatalf("series goes backwards at %v: %v", p, series)
			}
			prevT, prevDone = tt, done
		}
		if prevDone != 500 || prevT != got["seconds"] {
			t.Errorf("series ends at t=%v done=%v, want t=seconds=%v done=500", prevT, prevDone, got["seconds"])
		}
	})
	t.Run("enqueue", func(t *testing.T) {
		got := runJSON(t, "--database-url", url, "--scenario", "enqueue", "--events", "300", "--insert-batch", "100")
		positive(t, got, "seconds")
		positive(t, got, "insert_per_sec")
		positive(t, got, "single_insert_per_sec")
		if got["single_inserts"] != float64(300) {
			t.Errorf("single_inserts = %v, want 300", got["single_inserts"])
		}
		absent(t, got, "events_per_sec", "latency_ms", "latency_samples_ms", "series")
		// One transaction per InsertMany of 100, one per Insert.
		cost(t, got, costInsertMany, 300, 3, 13)
		cost(t, got, costInsert, 300, 300, 310)
	})
	t.Run("latency", func(t *testing.T) {
		got := runJSON(t, "--database-url", url, "--scenario", "latency", "--events", "50", "--rate", "100", "--workers", "10")
		positive(t, got, "seconds")
		lat, ok := got["latency_ms"].(map[string]any)
		if !ok {
			t.Fatalf("latency_ms missing: %v", got)
		}
		p50, p95, p99, mx := lat["p50"].(float64), lat["p95"].(float64), lat["p99"].(float64), lat["max"].(float64)
		if !(p50 <= p95 && p95 <= p99 && p99 <= mx) || mx <= 0 || mx > 60000 {
			t.Errorf("latency_ms = %v, want 0 < p50 <= p95 <= p99 <= max < 60 s", lat)
		}
		positive(t, got, "insert_per_sec")
		absent(t, got, "events_per_sec", "single_insert_per_sec", "single_inserts", "series", "cost")
		samples, ok := got["latency_samples_ms"].([]any)
		if !ok || len(samples) != 50 {
			t.Fatalf("latency_samples_ms: want 50 samples, got %v", got["latency_samples_ms"])
		}
		if first, last := samples[0].(float64), samples[len(samples)-1].(float64); first > last || last != mx {
			t.Errorf("latency_samples_ms not sorted or not ending at max: first %v, last %v, max %v", first, last, mx)
		}
	})
	t.Run("latency behind a backlog", func(t *testing.T) {
		got := runJSON(t, "--database-url", url, "--scenario", "latency", "--events", "20", "--rate", "20", "--workers", "10",
			"--backlog", "3000", "--insert-batch", "500")
		lat, ok := got["latency_ms"].(map[string]any)
		if !ok || !(lat["max"].(float64) > 0) {
			t.Fatalf("latency_ms missing: %v", got)
		}
		positive(t, got, "backlog_insert_per_sec")
		// What was left of the backlog when the last measured job started.
		for _, f := range []string{"backlog_at_last_insert", "backlog_left"} {
			if left, ok := got[f].(float64); !ok || left < 0 || left > 3000 {
				t.Errorf("%s = %v, want 0..3000", f, got[f])
			}
		}
		if got["backlog_left"].(float64) > got["backlog_at_last_insert"].(float64) {
			t.Errorf("the backlog grew: %v after the last insert, %v at the end", got["backlog_at_last_insert"], got["backlog_left"])
		}
		settings := got["settings"].(map[string]any)
		if settings["backlog"] != float64(3000) || settings["backlog_queue"] != backlogQueue {
			t.Errorf("settings = %v", settings)
		}
		if samples, _ := got["latency_samples_ms"].([]any); len(samples) != 20 {
			t.Errorf("latency_samples_ms: want 20 samples (the backlog's jobs are not measured), got %d", len(samples))
		}
	})
	for _, work := range []bool{false, true} {
		t.Run(fmt.Sprintf("producers, work %v", work), func(t *testing.T) {
			args := []string{"--database-url", url, "--scenario", "producers", "--producers", "3", "--duration", "500ms", "--workers", "10"}
			if work {
				args = append(args, "--work")
			}
			got := runJSON(t, args...)
			positive(t, got, "events")
			positive(t, got, "insert_per_sec")
			if s, _ := got["seconds"].(float64); s < 0.5 {
				t.Errorf("seconds = %v, want at least --duration", got["seconds"])
			}
			lat, ok := got["commit_latency_ms"].(map[string]any)
			if !ok || !(lat["p50"].(float64) > 0) || lat["p50"].(float64) > lat["max"].(float64) {
				t.Errorf("commit_latency_ms = %v", got["commit_latency_ms"])
			}
			if work {
				positive(t, got, "events_per_sec")
			} else {
				absent(t, got, "events_per_sec")
			}
			// The rate is the committed jobs over the time (seconds are
			// rounded to the millisecond).
			events, secs, perSec := got["events"].(float64), got["seconds"].(float64), got["insert_per_sec"].(float64)
			if d := events/secs/perSec - 1; d > 0.01 || d < -0.01 {
				t.Errorf("insert_per_sec = %v, want events/seconds = %v", perSec, events/secs)
			}
			absent(t, got, "latency_ms", "series", "backlog_left")
		})
	}
	// Every scenario leaves river_job empty behind it.
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	var left int
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM river_job").Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Errorf("river_job holds %d rows after the scenarios, want 0", left)
	}
}

func TestParseFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		ok   bool
		want int
	}{
		{[]string{"--database-url", "x"}, true, 100000},
		{[]string{"--database-url", "x", "--scenario", "enqueue"}, true, 100000},
		{[]string{"--database-url", "x", "--scenario", "latency"}, true, 2000},
		{[]string{"--database-url", "x", "--scenario", "latency", "--events", "7"}, true, 7},
		{[]string{}, false, 0},
		{[]string{"--database-url", "x", "--scenario", "nope"}, false, 0},
		{[]string{"--database-url", "x", "--workers", "0"}, false, 0},
		{[]string{"--database-url", "x", "--fetch-cooldown", "10ms", "--fetch-poll-interval", "5ms"}, false, 0},
		{[]string{"--database-url", "x", "--rate", "0"}, false, 0},
		{[]string{"--database-url", "x", "--scenario", "producers"}, true, 1},
		{[]string{"--database-url", "x", "--scenario", "producers", "--producers", "0"}, false, 0},
		{[]string{"--database-url", "x", "--scenario", "producers", "--duration", "0s"}, false, 0},
		{[]string{"--database-url", "x", "--scenario", "latency", "--backlog", "-1"}, false, 0},
	} {
		cfg, err := parseFlags(tc.args, io.Discard)
		if (err == nil) != tc.ok {
			t.Errorf("parseFlags(%v) error = %v, want ok=%v", tc.args, err, tc.ok)
			continue
		}
		if tc.ok && cfg.Events != tc.want {
			t.Errorf("parseFlags(%v).Events = %d, want %d", tc.args, cfg.Events, tc.want)
		}
	}
	cfg, err := parseFlags([]string{"--database-url", "x"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Workers != 2000 || cfg.FetchCooldown != 2*time.Millisecond || cfg.FetchPollInterval != 20*time.Millisecond || cfg.InsertBatch != 1000 || cfg.Rate != 200 ||
		cfg.Producers != 16 || cfg.Duration != 10*time.Second || cfg.Work || cfg.Backlog != 0 {
		t.Errorf("defaults = %+v", cfg)
	}
	var help bytes.Buffer
	if _, err := parseFlags([]string{"-h"}, &help); err == nil || !strings.Contains(help.String(), "dedicated benchmark database") {
		t.Errorf("-h: err=%v, output:\n%s", err, help.String())
	}
}

func TestPercentile(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	for p, want := range map[float64]time.Duration{50: 50 * time.Millisecond, 95: 95 * time.Millisecond, 99: 99 * time.Millisecond, 100: 100 * time.Millisecond} {
		if got := percentile(d, p); got != want {
			t.Errorf("percentile(%g) = %s, want %s", p, got, want)
		}
	}
	if got := percentile(d[:1], 99); got != time.Millisecond {
		t.Errorf("percentile of one = %s", got)
	}
}

// testWriter sends River's warnings to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// The burn-down's mixed load: producers insert while the backlog drains,
// until the backlog's worth of jobs completed; the run counts and waits for
// every job, theirs too.
func TestBurnDownWithProducers(t *testing.T) {
	url := testDatabaseURL(t)
	cfg, err := parseFlags([]string{"--database-url", url, "--scenario", "burn-down", "--events", "2000",
		"--insert-batch", "500", "--workers", "50", "--mixed-producers", "4", "--mixed-rate", "400", "--json", "--timeout", "2m"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	res, err := run(context.Background(), cfg, logger)
	if err != nil {
		t.Fatal(err)
	}
	if res.Produced == nil || *res.Produced < 1 {
		t.Fatalf("produced = %v, want some jobs inserted while the backlog drained", res.Produced)
	}
	if res.Events != 2000+*res.Produced {
		t.Errorf("events = %d, want the 2000 pre-inserted and the %d produced", res.Events, *res.Produced)
	}
	if last := res.Series[len(res.Series)-1]; last.Done != int64(res.Events) || last.T != res.Seconds {
		t.Errorf("series ends at %+v, want t=%v done=%d", last, res.Seconds, res.Events)
	}
	if _, err := parseFlags([]string{"--database-url", url, "--scenario", "enqueue", "--mixed-producers", "2"}, io.Discard); err == nil {
		t.Error("--mixed-producers with enqueue: want a usage error")
	}
}
