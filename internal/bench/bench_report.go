package bench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/pgrelay/pgrelay/actors"
)

// benchReport is everything `pgrelay bench` measured: the table, the JSON
// document (--json) and the HTML report (--plot) are views of it.
type benchReport struct {
	Version           string            `json:"pgrelay_version"`
	Postgres          string            `json:"postgres_version,omitempty"`
	Fsync             string            `json:"postgres_fsync,omitempty"`
	SynchronousCommit string            `json:"postgres_synchronous_commit,omitempty"`
	Database          string            `json:"database,omitempty"`
	CPUs              int               `json:"cpus"`
	GOMAXPROCS        int               `json:"gomaxprocs"`
	Go                string            `json:"go"`
	Processor         processorSettings `json:"processor"`
	Scenarios         []*scenarioResult `json:"scenarios"`
	// Ratios across scenarios (burn-down/ceiling).
	Ratios []benchRatio `json:"ratios,omitempty"`
	// Error is why the run stopped early (the results before it stand).
	Error string `json:"error,omitempty"`
}

// processorSettings are the measured Processors' main settings.
type processorSettings struct {
	Mode           string  `json:"mode"`
	Concurrency    int     `json:"concurrency"`
	BatchSize      int     `json:"batch_size"`
	SQLBatch       int     `json:"sql_batch"`
	SQLBatchConc   int     `json:"sql_batch_concurrency"`
	PollIntervalMS float64 `json:"poll_interval_ms"`
}

func processorSettingsOf(c *actors.Config) processorSettings {
	return processorSettings{Mode: c.Mode, Concurrency: c.Concurrency, BatchSize: c.BatchSize, SQLBatch: c.SQLBatch,
		SQLBatchConc: c.SQLBatchConcurrency, PollIntervalMS: ms(c.PollInterval)}
}

func (p processorSettings) String() string {
	return fmt.Sprintf("mode %s, concurrency %d, batch size %d, sql batch %d, sql batch concurrency %d, poll interval %s",
		p.Mode, p.Concurrency, p.BatchSize, p.SQLBatch, p.SQLBatchConc, time.Duration(p.PollIntervalMS*float64(time.Millisecond)))
}

// scenarioResult is one scenario's measurements and ratios.
type scenarioResult struct {
	Name string `json:"name"`
	// Round is the run's round with --rounds above 1, else 0.
	Round        int            `json:"round,omitempty"`
	Measurements []*measurement `json:"measurements"`
	Ratios       []benchRatio   `json:"ratios,omitempty"`
}

// measurement is one figure of a scenario.
type measurement struct {
	Name   string `json:"name"`
	System string `json:"system"` // pgrelay, river or "bare loop"
	Events int64  `json:"events"`
	// Seconds is the measured time; Rate is Events per second over it, in
	// Unit.
	Seconds float64 `json:"seconds"`
	Rate    float64 `json:"rate,omitempty"`
	Unit    string  `json:"unit,omitempty"`
	// Counted is false for a preparation step reported for information
	// (the pre-insert before a burn-down).
	Counted      bool          `json:"counted"`
	Backlog      int64         `json:"backlog,omitempty"`
	PeakRSSBytes int64         `json:"peak_rss_bytes,omitempty"`
	LatencyMS    *latencyStats `json:"latency_ms,omitempty"`
	Series       []seriesPoint `json:"series,omitempty"`
	Detail       string        `json:"detail,omitempty"`
	// Cost is what the measured phase wrote (bench_wal.go), when measured.
	Cost *eventCost `json:"cost,omitempty"`
	// samplesMS are the sorted latencies, for the report's CDF.
	samplesMS []float64

	// Producers is the number of producer connections (producers).
	Producers int `json:"producers,omitempty"`
	// WaitEvents are the producers' backends per wait event, averaged over
	// samples of pg_stat_activity taken during the run, largest first.
	WaitEvents []waitShare `json:"wait_events,omitempty"`
	// Node is a node's figures in a phase of cluster-load.
	Node *clusterNodeFigures `json:"cluster_node,omitempty"`

	// StartupSeconds is, for a process timed from its exec, the time to its
	// first completion.
	StartupSeconds float64 `json:"startup_seconds,omitempty"`
}

// latencyStats are latency percentiles (nearest rank) in milliseconds.
type latencyStats struct {
	P50 float64 `json:"p50"`
	P95 float64 `json:"p95"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// benchRatio is a ratio of two measurements; with a Target, the ratio
// should be at least that; with a TargetMax, at most that.
type benchRatio struct {
	Name      string  `json:"name"`
	Value     float64 `json:"value"`
	Target    float64 `json:"target,omitempty"`
	TargetMax float64 `json:"target_max,omitempty"`
}

// targetText is the ratio's target and whether it is met ("-": none).
func (x benchRatio) targetText() string {
	switch {
	case x.Target > 0:
		return fmt.Sprintf(">= %.2f (%s)", x.Target, metText(x.Value >= x.Target))
	case x.TargetMax > 0:
		return fmt.Sprintf("<= %.2f (%s)", x.TargetMax, metText(x.Value <= x.TargetMax))
	}
	return "-"
}

func metText(met bool) string {
	if met {
		return "met"
	}
	return "not met"
}

func newMeasurement(name, system string, events int64, took time.Duration, unit string) *measurement {
	m := &measurement{Name: name, System: system, Events: events, Seconds: secs(took), Unit: unit, Counted: true}
	if took > 0 {
		m.Rate = round(float64(events)/took.Seconds(), 1)
	}
	return m
}

func (s *scenarioResult) add(m *measurement) *measurement {
	s.Measurements = append(s.Measurements, m)
	return m
}

// ratio records num/den (when both are positive).
func (s *scenarioResult) ratio(name string, num, den, target float64) {
	if num > 0 && den > 0 {
		s.Ratios = append(s.Ratios, benchRatio{Name: name, Value: round(num/den, 3), Target: target})
	}
}

// ratioAtMost records num/den (when both are positive), which should be at
// most targetMax.
func (s *scenarioResult) ratioAtMost(name string, num, den, targetMax float64) {
	if num > 0 && den > 0 {
		s.Ratios = append(s.Ratios, benchRatio{Name: name, Value: round(num/den, 3), TargetMax: targetMax})
	}
}

// label is the scenario's name, with its round when it has one.
func (s *scenarioResult) label() string {
	if s.Round > 0 {
		return s.Name + " #" + strconv.Itoa(s.Round)
	}
	return s.Name
}

// find returns the scenario's measurement name of system in round (0:
// without rounds), or nil.
func (r *benchReport) find(scenario string, round int, name, system string) *measurement {
	for _, s := range r.Scenarios {
		if s.Name != scenario || s.Round != round {
			continue
		}
		for _, m := range s.Measurements {
			if m.Name == name && m.System == system {
				return m
			}
		}
	}
	return nil
}

// crossRatios adds the ratios between scenarios that ran: with rounds, one
// a round, then their median.
func (r *benchReport) crossRatios() {
	const name = "burn-down/ceiling (pgrelay/bare loop)"
	rounds := 0
	for _, s := range r.Scenarios {
		rounds = max(rounds, s.Round)
	}
	var values []float64
	for k := min(rounds, 1); k <= rounds; k++ { // k is 0 without rounds
		bd, ce := r.find("burn-down", k, "burn-down", "pgrelay"), r.find("ceiling", k, "burn-down", "bare loop")
		if bd == nil || ce == nil || bd.Rate <= 0 || ce.Rate <= 0 {
			continue
		}
		x := benchRatio{Name: name, Value: round(bd.Rate/ce.Rate, 3), Target: 0.9}
		if k > 0 {
			x.Name += ", round " + strconv.Itoa(k)
		}
		r.Ratios = append(r.Ratios, x)
		values = append(values, x.Value)
	}
	if len(values) > 1 {
		r.Ratios = append(r.Ratios, benchRatio{Name: fmt.Sprintf("%s, median of %d rounds", name, len(values)),
			Value: round(median(values), 3), Target: 0.9})
	}
}

// median is the middle value of v (the mean of the two middle ones).
func median(v []float64) float64 {
	v = slices.Sorted(slices.Values(v))
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

// allRatios are the scenarios' ratios, then the cross ones, with their
// scenario's name in front.
func (r *benchReport) allRatios() []benchRatio {
	var out []benchRatio
	for _, s := range r.Scenarios {
		for _, x := range s.Ratios {
			x.Name = s.label() + " " + x.Name
			out = append(out, x)
		}
	}
	return append(out, r.Ratios...)
}

// environment is one line on what ran where.
func (r *benchReport) environment() string {
	var parts []string
	if r.Postgres != "" {
		parts = append(parts, fmt.Sprintf("PostgreSQL %s (fsync %s, synchronous_commit %s; %s)",
			r.Postgres, r.Fsync, r.SynchronousCommit, r.Database))
	}
	parts = append(parts, fmt.Sprintf("%d CPUs (GOMAXPROCS %d), %s", r.CPUs, r.GOMAXPROCS, r.Go))
	return strings.Join(parts, ", ")
}

// result is the table's RESULT cell.
func (m *measurement) result() string {
	switch {
	case m.LatencyMS != nil:
		l := m.LatencyMS
		return fmt.Sprintf("p50 %.2fms p95 %.2fms p99 %.2fms max %.2fms", l.P50, l.P95, l.P99, l.Max)
	case m.Rate > 0:
		return fmt.Sprintf("%.0f %s", m.Rate, m.Unit)
	}
	return "-"
}

// detail is the table's DETAIL cell.
func (m *measurement) detail() string {
	var parts []string
	if !m.Counted {
		parts = append(parts, "preparation, not counted")
	}
	if m.PeakRSSBytes > 0 {
		parts = append(parts, fmt.Sprintf("peak RSS %.1f MiB", float64(m.PeakRSSBytes)/(1<<20)))
	}
	if m.Detail != "" {
		parts = append(parts, m.Detail)
	}
	return strings.Join(parts, "; ")
}

func (r *benchReport) writeText(w io.Writer) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "pgrelay %s bench: %s\n", r.Version, r.environment())
	fmt.Fprintf(&b, "Processor: %s\n\n", r.Processor)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SCENARIO\tMEASURE\tSYSTEM\tEVENTS\tTIME\tRESULT\tDETAIL")
	for _, s := range r.Scenarios {
		for _, m := range s.Measurements {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%.3fs\t%s\t%s\n", s.label(), m.Name, m.System, m.Events, m.Seconds,
				m.result(), m.detail())
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := r.writeCosts(&b); err != nil {
		return err
	}
	if err := r.writeCluster(&b); err != nil {
		return err
	}
	if ratios := r.allRatios(); len(ratios) > 0 {
		fmt.Fprintln(&b)
		tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "RATIO\tVALUE\tTARGET")
		for _, x := range ratios {
			fmt.Fprintf(tw, "%s\t%.2f\t%s\n", x.Name, x.Value, x.targetText())
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	_, err := w.Write(b.Bytes())
	return err
}

func (r *benchReport) writeJSON(w io.Writer) error {
	return json.NewEncoder(w).Encode(r)
}

// latencyOf are the percentiles of sorted latencies.
func latencyOf(sorted []time.Duration) *latencyStats {
	if len(sorted) == 0 {
		return nil
	}
	return &latencyStats{P50: ms(percentile(sorted, 50)), P95: ms(percentile(sorted, 95)),
		P99: ms(percentile(sorted, 99)), Max: ms(sorted[len(sorted)-1])}
}

// percentile is the nearest-rank percentile of sorted durations (as the
// River harness computes it).
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// ms is d in milliseconds, rounded to the microsecond.
func ms(d time.Duration) float64 { return round(float64(d)/float64(time.Millisecond), 3) }

func round(x float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(x*p) / p
}

// progress draws progress bars on stderr: redrawn in place on a terminal,
// one line a second with --progress (force) elsewhere, nothing otherwise.
type progress struct {
	w   io.Writer
	on  bool
	tty bool
}

func newProgress(w io.Writer, tty, force bool) *progress {
	return &progress{w: w, on: tty || force, tty: tty}
}

// bar is one step's progress: done of total (total 0: unknown, the elapsed
// time only). A bar is used from one goroutine.
type bar struct {
	p            *progress
	label        string
	total, cur   int64
	start, drawn time.Time
	ended        bool
}

func (p *progress) start(label string, total int64) *bar { return p.startAt(label, total, time.Now()) }

// startAt starts a bar whose clock started at start.
func (p *progress) startAt(label string, total int64, start time.Time) *bar {
	b := &bar{p: p, label: label, total: total, start: start}
	if p.tty {
		b.draw(time.Now())
	}
	return b
}

func (b *bar) set(n int64) {
	b.cur = n
	if !b.p.on || b.ended {
		return
	}
	every := time.Second
	if b.p.tty {
		every = 100 * time.Millisecond
	}
	if now := time.Now(); now.Sub(b.drawn) >= every {
		b.draw(now)
	}
}

// finish draws the final state and ends the bar's line.
func (b *bar) finish() {
	if b.ended {
		return
	}
	b.ended = true
	if !b.p.on {
		return
	}
	b.draw(time.Now())
	if b.p.tty {
		fmt.Fprintln(b.p.w)
	}
}

func (b *bar) draw(now time.Time) {
	b.drawn = now
	el := now.Sub(b.start)
	line := fmt.Sprintf("%-34s %7.1fs", b.label, el.Seconds())
	if b.total > 0 {
		const width = 24
		frac := min(float64(b.cur)/float64(b.total), 1)
		fill := int(frac * width)
		rate := 0.0
		if el > 0 {
			rate = float64(b.cur) / el.Seconds()
		}
		line = fmt.Sprintf("%-34s [%s%s] %3.0f%% %d/%d %.0f/s %.1fs", b.label, strings.Repeat("#", fill),
			strings.Repeat(".", width-fill), 100*frac, b.cur, b.total, rate, el.Seconds())
	}
	if b.p.tty {
		fmt.Fprintf(b.p.w, "\r%s\x1b[K", line)
	} else {
		fmt.Fprintln(b.p.w, line)
	}
}

// cpuProfiler keeps a CPU profile of each measured part (--cpuprofile).
type cpuProfiler struct {
	path  string
	parts []cpuPart
	// suffix goes after each part's name (the round, with --rounds).
	suffix string
}

type cpuPart struct {
	name string
	data *bytes.Buffer
}

// start profiles the part name until stop (which may be called more than
// once). Without --cpuprofile both do nothing.
func (p *cpuProfiler) start(name string) (stop func(), err error) {
	if p.path == "" {
		return func() {}, nil
	}
	buf := &bytes.Buffer{}
	if err := pprof.StartCPUProfile(buf); err != nil {
		return nil, fmt.Errorf("start the CPU profile: %w", err)
	}
	stopped := false
	return func() {
		if !stopped {
			stopped = true
			pprof.StopCPUProfile()
			p.parts = append(p.parts, cpuPart{name: name + p.suffix, data: buf})
		}
	}, nil
}

// write writes the profiles: one part to --cpuprofile itself, several to
// one file each, named with the part before the extension (cpu.pprof:
// cpu.burn-down.pprof, cpu.ceiling.pprof). It returns the files written.
func (p *cpuProfiler) write() ([]string, error) {
	var files []string
	for _, part := range p.parts {
		name := p.path
		if len(p.parts) > 1 {
			ext := filepath.Ext(name)
			name = strings.TrimSuffix(name, ext) + "." + part.name + ext
		}
		if err := os.WriteFile(name, part.data.Bytes(), 0o644); err != nil {
			return files, fmt.Errorf("write the CPU profile: %w", err)
		}
		files = append(files, name)
	}
	return files, nil
}

// resetPeakRSS resets this process's peak resident set size (Linux).
func resetPeakRSS() error {
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		return fmt.Errorf("reset the peak RSS: %w", err)
	}
	return nil
}

// peakRSS is this process's peak resident set size since the last reset
// (VmHWM, Linux).
func peakRSS() (int64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, fmt.Errorf("read the peak RSS: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("read the peak RSS: %q: %w", v, err)
			}
			return kb << 10, nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("read the peak RSS: %w", err)
	}
	return 0, fmt.Errorf("read the peak RSS: no VmHWM in /proc/self/status")
}

// writeCosts is the table of what each measured phase cost per event (the
// server's CPU, round trips, WAL, write transactions), and how close it ran
// to the WAL flush.
func (r *benchReport) writeCosts(w io.Writer) error {
	var rows []string
	for _, s := range r.Scenarios {
		for _, m := range s.Measurements {
			c := m.Cost
			if c == nil {
				continue
			}
			flush := "-"
			if c.FlushLimit > 0 && m.Rate > 0 {
				flush = fmt.Sprintf("%.0f/s (commit %.2fms): ran at %.0f%%", c.FlushLimit, c.CommitMS, 100*m.Rate/c.FlushLimit)
			}
			cpu, rt := "-", "-"
			if c.ServerCPUUSPerEvent > 0 {
				cpu = fmt.Sprintf("%.1f", c.ServerCPUUSPerEvent)
			}
			if c.RoundTripsPerEvent > 0 {
				rt = fmt.Sprintf("%.3f", c.RoundTripsPerEvent)
			}
			rows = append(rows, fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%.0f\t%.4f\t%s\n", s.label(), m.Name, m.System,
				cpu, rt, c.WALBytesPerEvent, c.WriteXactsPerEvent, flush))
		}
	}
	if len(rows) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "COST PER EVENT\tMEASURE\tSYSTEM\tSERVER CPU µs\tROUND TRIPS\tWAL BYTES\tWRITE XACTS\tFLUSH-BOUND AT (ONE CONNECTION, ONE FLUSH PER WRITE XACT)")
	for _, row := range rows {
		fmt.Fprint(tw, row)
	}
	return tw.Flush()
}
