package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// riverResult is what the River harness (bench/river) prints with --json.
type riverResult struct {
	Version            string         `json:"version"`
	Scenario           string         `json:"scenario"`
	Events             int            `json:"events"`
	Seconds            float64        `json:"seconds"`
	EventsPerSec       float64        `json:"events_per_sec"`
	InsertPerSec       float64        `json:"insert_per_sec"`
	SingleInsertPerSec float64        `json:"single_insert_per_sec"`
	SingleInserts      int            `json:"single_inserts"`
	Produced           int            `json:"produced"`
	LatencyMS          *latencyStats  `json:"latency_ms"`
	LatencySamplesMS   []float64      `json:"latency_samples_ms"`
	Series             []seriesPoint  `json:"series"`
	Settings           map[string]any `json:"settings"`

	// CommitLatencyMS: producers, each transaction's duration.
	CommitLatencyMS *latencyStats `json:"commit_latency_ms"`
	// BacklogAtLastInsert, BacklogLeft and BacklogInsertPerSec: latency
	// with --backlog, the backlog's jobs not completed when the last
	// measured job was inserted and when it had started, and its
	// pre-insert rate.
	BacklogAtLastInsert int64   `json:"backlog_at_last_insert"`
	BacklogLeft         int64   `json:"backlog_left"`
	BacklogInsertPerSec float64 `json:"backlog_insert_per_sec"`
	// Cost is what each phase wrote (insert_many, insert, burn_down).
	Cost map[string]*riverPhaseCost `json:"cost"`
}

// workerSettings describes the River client's settings.
func (r *riverResult) workerSettings() string {
	s := r.Settings
	return fmt.Sprintf("River %s, %v workers, fetch cooldown %vms, fetch poll %vms, pool of %v connections",
		r.Version, s["workers"], s["fetch_cooldown_ms"], s["fetch_poll_interval_ms"], s["pool_max_conns"])
}

// riverMeasurement is a figure of the River harness: events at rate (0:
// none) over seconds (0: events/rate).
func riverMeasurement(name string, events int, rate, seconds float64, unit string) *measurement {
	if seconds == 0 && rate > 0 {
		seconds = round(float64(events)/rate, 3)
	}
	return &measurement{Name: name, System: "river", Events: int64(events), Seconds: seconds, Rate: rate, Unit: unit,
		Counted: true}
}

// riverHarness runs the River harness, a separate Go module (River stays
// out of pgrelay's dependencies): built once from its source with the go
// command, then run once per scenario on the bench database.
type riverHarness struct {
	dir string // the module's directory
	tmp string // holds the built binary
	bin string
}

// riverDir is where the River harness's module is, relative to the working
// directory (the repository root when run with make).
func riverDir(dir string) string {
	if dir != "" {
		return dir
	}
	return filepath.Join("bench", "river")
}

func (h *riverHarness) build(ctx context.Context, b *bench) error {
	if h.bin != "" {
		return nil
	}
	if _, err := os.Stat(filepath.Join(h.dir, "go.mod")); err != nil {
		return fmt.Errorf("the River harness is not in %s (run from the repository root, or set --peer-dir): %w", h.dir, err)
	}
	tmp, err := os.MkdirTemp("", "pgrelay-river-")
	if err != nil {
		return fmt.Errorf("build the River harness: %w", err)
	}
	bin := filepath.Join(tmp, "river-bench")
	cmd := exec.CommandContext(ctx, "go", "-C", h.dir, "build", "-o", bin, ".")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := b.runCmd("river: build the harness", cmd); err != nil {
		_ = os.RemoveAll(tmp)
		return fmt.Errorf("build the River harness in %s (needs the go command and its module proxy): %w: %s",
			h.dir, err, lastLine(out.String()))
	}
	h.tmp, h.bin = tmp, bin
	return nil
}

// run runs the harness's scenario on the bench database with args and
// returns its result.
func (h *riverHarness) run(ctx context.Context, b *bench, scenario string, args ...string) (*riverResult, error) {
	if err := h.build(ctx, b); err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, h.bin, append([]string{"--database-url", b.measuredURL(), "--scenario", scenario, "--json"}, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := b.runCmd("river: "+scenario, cmd); err != nil {
		return nil, fmt.Errorf("river harness %s: %w: %s", scenario, err, lastLine(errOut.String()))
	}
	var r riverResult
	if err := json.Unmarshal(bytes.TrimSpace(out.Bytes()), &r); err != nil {
		return nil, fmt.Errorf("river harness output: %w: %q", err, lastLine(out.String()))
	}
	if r.Scenario != scenario || r.Events < 1 {
		return nil, fmt.Errorf("river harness: unexpected result for %s: %s", scenario, lastLine(out.String()))
	}
	return &r, nil
}

func (h *riverHarness) close() {
	if h.tmp != "" {
		_ = os.RemoveAll(h.tmp)
		h.tmp, h.bin = "", ""
	}
}

// runCmd runs cmd to its end, showing the time elapsed as progress.
func (b *bench) runCmd(label string, cmd *exec.Cmd) error {
	if err := cmd.Start(); err != nil {
		return err
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	bar := b.prog.start(label, 0)
	defer bar.finish()
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case err := <-waited:
			return err
		case <-t.C:
			bar.set(0)
		}
	}
}

func lastLine(s string) string {
	b := bytes.TrimSpace([]byte(s))
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[i+1:]
	}
	return string(b)
}
