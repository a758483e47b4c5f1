package web

import "fmt"

// Chart geometry: a bar per minute, failures stacked on successes.
const (
	barWidth    = 3
	chartHeight = 28
)

// chart is a small bar chart drawn as inline SVG by the templates: numbers
// only, so nothing in it needs escaping beyond what html/template does.
type chart struct {
	Width, Height int
	Bars          []bar
	// Label says what the chart shows, for screen readers and as a tooltip.
	Label string
}

// bar is one minute: its succeeded part and its failed part above it.
type bar struct {
	X                 int
	OKY, OKH          float64
	FailY, FailH      float64
	Succeeded, Failed int64
}

// newChart draws series (per minute, oldest first: succeeded, failed),
// scaled to its busiest minute.
func newChart(series [][2]int64, what string) chart {
	var peak, ok, failed int64
	for _, m := range series {
		peak = max(peak, m[0]+m[1])
		ok += m[0]
		failed += m[1]
	}
	c := chart{Width: len(series) * barWidth, Height: chartHeight,
		Label: fmt.Sprintf("%s, last hour per minute: %d succeeded, %d failed, busiest minute %d", what, ok, failed, peak)}
	if peak == 0 {
		return c
	}
	scale := float64(chartHeight) / float64(peak)
	for i, m := range series {
		okH, failH := float64(m[0])*scale, float64(m[1])*scale
		c.Bars = append(c.Bars, bar{X: i * barWidth,
			OKY: chartHeight - okH, OKH: okH,
			FailY: chartHeight - okH - failH, FailH: failH,
			Succeeded: m[0], Failed: m[1]})
	}
	return c
}
