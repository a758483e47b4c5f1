package bench

import (
	"bytes"
	"cmp"
	"fmt"
	"html/template"
	"math"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// The --plot report: one self-contained HTML file, charts drawn here as
// inline SVG (no script, nothing fetched).

const plotPage = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>pgrelay bench</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 2em; color: #222; max-width: 1100px; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: left; vertical-align: top; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
.note { color: #666; font-size: 12px; }
svg { background: #fff; border: 1px solid #ddd; }
</style>
</head>
<body>
<h1>pgrelay {{.Version}} bench</h1>
<p>{{.Environment}}<br>Processor: {{.Processor}}</p>
{{if .Error}}<p><strong>Stopped early:</strong> {{.Error}}</p>{{end}}
<table>
<tr><th>Scenario</th><th>Measure</th><th>System</th><th>Events</th><th>Time</th><th>Result</th><th>Detail</th></tr>
{{range .Rows}}<tr><td>{{.Scenario}}</td><td>{{.Name}}</td><td>{{.System}}</td><td class="n">{{.Events}}</td><td class="n">{{printf "%.3f" .Seconds}} s</td><td>{{.Result}}</td><td>{{.Detail}}</td></tr>
{{end}}</table>
{{if .Ratios}}<table>
<tr><th>Ratio</th><th>Value</th><th>Target</th></tr>
{{range .Ratios}}<tr><td>{{.Name}}</td><td class="n">{{printf "%.2f" .Value}}</td><td>{{if .Target}}&ge; {{printf "%.2f" .Target}}{{else if .TargetMax}}&le; {{printf "%.2f" .TargetMax}}{{end}}</td></tr>
{{end}}</table>{{end}}
{{range .Charts}}<h2>{{.Title}}</h2>
{{.SVG}}
{{if .Note}}<p class="note">{{.Note}}</p>{{end}}
{{end}}</body>
</html>
`

type plotRow struct {
	Scenario, Name, System string
	Events                 int64
	Seconds                float64
	Result, Detail         string
}

type plotChart struct {
	Title string
	SVG   template.HTML
	Note  string
}

// writePlot writes the HTML report of r to path.
func writePlot(path string, r *benchReport) error {
	t, err := template.New("report").Parse(plotPage)
	if err != nil {
		return fmt.Errorf("the report's template: %w", err)
	}
	data := struct {
		Version, Environment, Processor, Error string
		Rows                                   []plotRow
		Ratios                                 []benchRatio
		Charts                                 []plotChart
	}{Version: r.Version, Environment: r.environment(), Processor: r.Processor.String(), Error: r.Error,
		Ratios: r.allRatios(), Charts: plotCharts(r)}
	for _, s := range r.Scenarios {
		for _, m := range s.Measurements {
			data.Rows = append(data.Rows, plotRow{Scenario: s.label(), Name: m.Name, System: m.System, Events: m.Events,
				Seconds: m.Seconds, Result: m.result(), Detail: m.detail()})
		}
	}
	var buf bytes.Buffer
	if err := t.Execute(&buf, data); err != nil {
		return fmt.Errorf("render the report: %w", err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write the report: %w", err)
	}
	return nil
}

// plotCharts are the report's charts: throughput over time (burn-down and
// ceiling together, then each other scenario with a series), the latency
// CDFs, the costs per event and cluster-load's figures per node.
func plotCharts(r *benchReport) []plotChart {
	var charts []plotChart
	var burn []chartLine
	var others []plotChart
	for _, s := range r.Scenarios {
		var lines []chartLine
		for _, m := range s.Measurements {
			if pts := throughput(m.Series); len(pts) > 0 {
				name := m.System + " " + m.Name
				if s.Name == "ceiling" {
					name = "bare loop (ceiling)"
				}
				if s.Round > 0 {
					name += " #" + strconv.Itoa(s.Round)
				}
				lines = append(lines, chartLine{name: name, points: pts})
			}
		}
		switch {
		case len(lines) == 0:
		case s.Name == "burn-down" || s.Name == "ceiling":
			burn = append(burn, lines...)
		default:
			others = append(others, plotChart{Title: "Throughput over time: " + s.label(),
				SVG: chart{xLabel: "seconds since the start", yLabel: "completions/s", lines: lines}.svg()})
		}
	}
	if len(burn) > 0 {
		note := "Completions per second, from the counts sampled every 100 ms, averaged over short windows."
		if slices.ContainsFunc(burn, func(l chartLine) bool { return strings.HasPrefix(l.name, "river") }) {
			note += " River's completions reach its event subscription in the batches of its completer, hence its bursts."
		}
		charts = append(charts, plotChart{Title: "Throughput over time: burn-down",
			SVG:  chart{xLabel: "seconds since the start", yLabel: "completions/s", lines: burn}.svg(),
			Note: note})
	}
	charts = append(charts, others...)
	if c, ok := latencyChart(r, "latency", "Latency: enqueue commit to handler start (CDF)", false); ok {
		charts = append(charts, c)
	}
	if c, ok := latencyChart(r, "go", "Latency of the go kind beside the sql kind: enqueue commit to handler start (CDF)", true); ok {
		charts = append(charts, c)
	}
	if c, ok := producersChart(r); ok {
		charts = append(charts, c)
	}
	if c, ok := latencyChart(r, "latency-load", "Latency under load: enqueue commit to handler start (CDF)", true); ok {
		charts = append(charts, c)
	}
	charts = append(charts, costCharts(r)...)
	return append(charts, clusterCharts(r)...)
}

// latencyChart is the CDF of the latencies of scenario's measurements, a
// line per measurement (named by its system, and by its name too with
// named).
func latencyChart(r *benchReport, scenario, title string, named bool) (plotChart, bool) {
	var lat []chartLine
	from := math.Inf(1) // a tenth of the smallest median
	for _, s := range r.Scenarios {
		if s.Name != scenario {
			continue
		}
		for _, m := range s.Measurements {
			if n := len(m.samplesMS); n > 0 {
				name := m.System
				if named {
					name += " " + m.Name
				}
				if s.Round > 0 {
					name += " #" + strconv.Itoa(s.Round)
				}
				lat = append(lat, chartLine{name: name, points: cdf(m.samplesMS)})
				from = math.Min(from, m.samplesMS[(n-1)/2]/10)
			}
		}
	}
	if len(lat) == 0 {
		return plotChart{}, false
	}
	return plotChart{Title: title,
		SVG: chart{xLabel: "milliseconds (log scale)", yLabel: "fraction of events", lines: lat, yMax: 1,
			logX: true, xFrom: math.Max(from, 0.001)}.svg(),
		Note: "The x axis starts a decade below the smallest median; lower latencies are drawn on its edge " +
			"(a handler can even start before the enqueueing goroutine, scheduled late, notes that its commit returned)."}, true
}

// producersChart is the producers' commit rate by the number of producer
// connections, a line per system and variant.
func producersChart(r *benchReport) (plotChart, bool) {
	var lines []chartLine
	for _, s := range r.Scenarios {
		if s.Name != "producers" {
			continue
		}
		for _, m := range s.Measurements {
			if m.Producers == 0 || m.Rate <= 0 {
				continue
			}
			name := m.System + " " + m.Name
			i := slices.IndexFunc(lines, func(l chartLine) bool { return l.name == name })
			if i < 0 {
				lines = append(lines, chartLine{name: name})
				i = len(lines) - 1
			}
			lines[i].points = append(lines[i].points, [2]float64{float64(m.Producers), m.Rate})
		}
	}
	if len(lines) == 0 {
		return plotChart{}, false
	}
	for _, l := range lines {
		slices.SortFunc(l.points, func(a, b [2]float64) int { return cmp.Compare(a[0], b[0]) })
	}
	return plotChart{Title: "Enqueue: producers committing one event per transaction",
		SVG:  chart{xLabel: "producer connections", yLabel: "events committed/s", lines: lines}.svg(),
		Note: "Each producer commits BEGIN; notify(); COMMIT (River: InsertTx) in a loop; the table gives each run's wait events."}, true
}

// throughput turns completions over time into completions per second,
// averaged over windows of 1/60 of the run (at least 100 ms).
func throughput(s []seriesPoint) [][2]float64 {
	if len(s) < 2 {
		return nil
	}
	end := s[len(s)-1].T
	if end <= 0 {
		return nil
	}
	at := func(t float64) float64 { // completions at t, linear between samples
		i := sort.Search(len(s), func(i int) bool { return s[i].T >= t })
		switch {
		case i == 0:
			return float64(s[0].Done)
		case i == len(s):
			return float64(s[len(s)-1].Done)
		}
		a, b := s[i-1], s[i]
		if b.T == a.T {
			return float64(b.Done)
		}
		return float64(a.Done) + float64(b.Done-a.Done)*(t-a.T)/(b.T-a.T)
	}
	win := max(0.1, end/60)
	var out [][2]float64
	for t0 := 0.0; t0 < end; t0 += win {
		t1 := min(t0+win, end)
		if t1-t0 < win/4 { // a sliver at the end is noise
			break
		}
		out = append(out, [2]float64{(t0 + t1) / 2, (at(t1) - at(t0)) / (t1 - t0)})
	}
	return out
}

// cdf is the empirical distribution of sorted samples, at most about 400
// points.
func cdf(sorted []float64) [][2]float64 {
	n := len(sorted)
	step := max(1, n/400)
	out := [][2]float64{{min(sorted[0], 0), 0}}
	for i := 0; i < n; i += step {
		out = append(out, [2]float64{sorted[i], float64(i+1) / float64(n)})
	}
	return append(out, [2]float64{sorted[n-1], 1})
}

type chartLine struct {
	name   string
	points [][2]float64
}

// chart is a line chart from 0 (or the smallest x); a zero yMax comes from
// the data. logX draws x on a log scale, from the decade of xFrom (default:
// of the smallest positive x) to the decade above the largest x.
type chart struct {
	xLabel, yLabel string
	lines          []chartLine
	yMax           float64
	logX           bool
	xFrom          float64
}

func (c chart) svg() template.HTML {
	const (
		width, height            = 820, 340
		left, right, top, bottom = 70, 20, 16, 46
		plotW, plotH             = width - left - right, height - top - bottom
	)
	colors := [...]string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"}
	xMin, xMax, yMax := 0.0, 0.0, c.yMax
	minPos := math.Inf(1)
	for _, l := range c.lines {
		for _, p := range l.points {
			xMin, xMax = math.Min(xMin, p[0]), math.Max(xMax, p[0])
			if p[0] > 0 {
				minPos = math.Min(minPos, p[0])
			}
			if c.yMax == 0 {
				yMax = math.Max(yMax, p[1]*1.05)
			}
		}
	}
	if yMax <= 0 {
		yMax = 1
	}
	var px func(x float64) float64
	var xTicks []float64
	if c.logX {
		if c.xFrom > 0 {
			minPos = c.xFrom
		}
		if math.IsInf(minPos, 1) {
			minPos = 1
		}
		xMin = math.Pow(10, math.Floor(math.Log10(minPos)))
		xMax = math.Max(math.Pow(10, math.Ceil(math.Log10(xMax))), xMin*10)
		lx := func(x float64) float64 { return math.Log10(math.Max(x, xMin)) }
		px = func(x float64) float64 { return left + (lx(x)-lx(xMin))/(lx(xMax)-lx(xMin))*plotW }
		for d := xMin; d <= xMax*(1+1e-9); d *= 10 {
			for _, m := range []float64{1, 2, 5} {
				if v := d * m; v <= xMax*(1+1e-9) {
					xTicks = append(xTicks, v)
				}
			}
		}
	} else {
		if xMax <= xMin {
			xMax = xMin + 1
		}
		px = func(x float64) float64 { return left + (x-xMin)/(xMax-xMin)*plotW }
		xTicks = ticks(xMin, xMax)
	}
	py := func(y float64) float64 { return top + plotH - y/yMax*plotH }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="%d" height="%d" font-family="sans-serif" font-size="11">`,
		width, height, width, height)
	for _, y := range ticks(0, yMax) {
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#eee"/>`, left, left+plotW, py(y), py(y))
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" dominant-baseline="middle">%s</text>`, left-6, py(y), tickLabel(y))
	}
	for _, x := range xTicks {
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#eee"/>`, px(x), px(x), top, top+plotH)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`, px(x), top+plotH+16, tickLabel(x))
	}
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#888"/>`, left, top, plotW, plotH)
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">%s</text>`, left+plotW/2, height-8, template.HTMLEscapeString(c.xLabel))
	fmt.Fprintf(&b, `<text transform="translate(14 %d) rotate(-90)" text-anchor="middle">%s</text>`, top+plotH/2, template.HTMLEscapeString(c.yLabel))
	for i, l := range c.lines {
		color := colors[i%len(colors)]
		var pts []string
		for _, p := range l.points {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(p[0]), py(p[1])))
		}
		if len(pts) == 1 {
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`, px(l.points[0][0]), py(l.points[0][1]), color)
		} else if len(pts) > 1 {
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.8" points="%s"/>`, color, strings.Join(pts, " "))
		}
		ly := top + 14 + 16*i
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="14" height="3" fill="%s"/>`, left+12, ly-2, color)
		fmt.Fprintf(&b, `<text x="%d" y="%d" dominant-baseline="middle">%s</text>`, left+32, ly, template.HTMLEscapeString(l.name))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // built here from numbers and escaped labels
}

// ticks are about six round values spanning lo..hi.
func ticks(lo, hi float64) []float64 {
	raw := (hi - lo) / 6
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 5, 10} {
		if step = m * mag; raw <= step {
			break
		}
	}
	var out []float64
	for k := math.Ceil(lo / step); k*step <= hi+step*1e-9; k++ {
		out = append(out, round(k*step, 9))
	}
	return out
}

func tickLabel(v float64) string {
	switch a := math.Abs(v); {
	case a < 1e-9:
		return "0"
	case a >= 1e6:
		return fmt.Sprintf("%gM", round(v/1e6, 2))
	case a >= 1e3:
		return fmt.Sprintf("%gk", round(v/1e3, 2))
	}
	return fmt.Sprintf("%g", round(v, 3))
}
