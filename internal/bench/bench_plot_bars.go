package bench

import (
	"fmt"
	"html/template"
	"math"
	"slices"
	"strings"
)

// Bar charts of the --plot report: what an event costs each system (item by
// item of the COST PER EVENT table) and cluster-load's per-node figures.

// barRow is one bar (stacked) or group of bars (grouped): a value per
// series of its chart.
type barRow struct {
	label  string
	values []float64
}

// barChart draws its rows as horizontal bars, a colour per series.
type barChart struct {
	unit    string
	series  []string
	rows    []barRow
	stacked bool
}

func (c barChart) svg() template.HTML {
	const (
		width          = 820
		left, right    = 330, 70
		top, bottom    = 10, 40
		plotW          = width - left - right
		legendRowH     = 16
		groupGap       = 6
		barH           = 12
		colorsPerChart = 8
	)
	colors := [colorsPerChart]string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"}
	per := len(c.series)
	if c.stacked {
		per = 1
	}
	rowH := per*barH + groupGap
	legendH := 0
	if len(c.series) > 1 {
		legendH = legendRowH
	}
	plotH := len(c.rows) * rowH
	height := top + legendH + plotH + bottom
	xMax := 0.0
	for _, r := range c.rows {
		sum := 0.0
		for _, v := range r.values {
			if c.stacked {
				sum += v
			} else {
				sum = math.Max(sum, v)
			}
		}
		xMax = math.Max(xMax, sum)
	}
	if xMax <= 0 {
		xMax = 1
	}
	xMax *= 1.05
	px := func(x float64) float64 { return left + x/xMax*plotW }
	y0 := top + legendH
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="%d" height="%d" font-family="sans-serif" font-size="11">`,
		width, height, width, height)
	if legendH > 0 {
		x := left
		for i, s := range c.series {
			fmt.Fprintf(&b, `<rect x="%d" y="%d" width="10" height="10" fill="%s"/><text x="%d" y="%d" dominant-baseline="middle">%s</text>`,
				x, top, colors[i%colorsPerChart], x+14, top+5, template.HTMLEscapeString(s))
			x += 24 + 7*len(s)
		}
	}
	for _, x := range ticks(0, xMax) {
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#eee"/>`, px(x), px(x), y0, y0+plotH)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`, px(x), y0+plotH+14, tickLabel(x))
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">%s</text>`, left+plotW/2, height-8, template.HTMLEscapeString(c.unit))
	for i, r := range c.rows {
		y := y0 + i*rowH + groupGap/2
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end" dominant-baseline="middle">%s</text>`, left-6, y+per*barH/2,
			template.HTMLEscapeString(r.label))
		x, sum := 0.0, 0.0
		for k, v := range r.values {
			if v <= 0 {
				continue
			}
			by := y
			if !c.stacked {
				by = y + k*barH
				x = 0
			}
			fmt.Fprintf(&b, `<rect class="bar" x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"><title>%s: %s</title></rect>`,
				px(x), by, px(x+v)-px(x), barH-1, colors[k%colorsPerChart], template.HTMLEscapeString(c.series[k]), valueText(v))
			if c.stacked {
				x += v
				sum += v
			} else {
				fmt.Fprintf(&b, `<text x="%.1f" y="%d" dominant-baseline="middle">%s</text>`, px(v)+4, by+barH/2, valueText(v))
			}
		}
		if c.stacked && sum > 0 {
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" dominant-baseline="middle">%s</text>`, px(sum)+4, y+barH/2, valueText(sum))
		}
	}
	fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="#888"/>`, left, left, y0, y0+plotH)
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // built here from numbers and escaped labels
}

func valueText(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.3g", v)
}

// costCharts are bar charts of the COST PER EVENT figures: server CPU,
// round trips and WAL per event of each measured phase that has them, a
// colour per system (cluster-load's nodes have charts of their own).
func costCharts(r *benchReport) []plotChart {
	var systems []string
	type costRow struct {
		label, system string
		c             *eventCost
	}
	var rows []costRow
	for _, s := range r.Scenarios {
		for _, m := range s.Measurements {
			if m.Cost == nil || m.Node != nil {
				continue
			}
			if !slices.Contains(systems, m.System) {
				systems = append(systems, m.System)
			}
			rows = append(rows, costRow{label: s.label() + ": " + m.Name + " (" + m.System + ")", system: m.System, c: m.Cost})
		}
	}
	var charts []plotChart
	for _, k := range []struct {
		title, unit string
		value       func(*eventCost) float64
		note        string
	}{
		{"Cost per event: server CPU", "server CPU µs per event", func(c *eventCost) float64 { return c.ServerCPUUSPerEvent },
			"The PostgreSQL server's processes' CPU time during the phase (/proc), server-wide, over its events."},
		{"Cost per event: round trips", "round trips per event (--round-trips)", func(c *eventCost) float64 { return c.RoundTripsPerEvent },
			"Counted by a proxy in front of the measured system: each time the client spoke after the server did."},
		{"Cost per event: WAL", "WAL bytes per event", func(c *eventCost) float64 { return c.WALBytesPerEvent },
			"pg_current_wal_insert_lsn() before and after the phase, server-wide, over its events."},
	} {
		var bars []barRow
		for _, row := range rows {
			v := k.value(row.c)
			if v <= 0 {
				continue
			}
			vals := make([]float64, len(systems))
			vals[slices.Index(systems, row.system)] = v
			bars = append(bars, barRow{label: row.label, values: vals})
		}
		if len(bars) == 0 {
			continue
		}
		charts = append(charts, plotChart{Title: k.title,
			SVG: barChart{unit: k.unit, series: systems, rows: bars, stacked: true}.svg(), Note: k.note})
	}
	return charts
}

// clusterCharts are bar charts of cluster-load's per-node figures.
func clusterCharts(r *benchReport) []plotChart {
	var done, cpu, wal, sent, lag []barRow
	for _, s := range r.Scenarios {
		for _, m := range s.Measurements {
			f := m.Node
			if f == nil {
				continue
			}
			label := m.Name
			done = append(done, barRow{label: label, values: []float64{float64(f.Produced) / f.Window, m.Rate}})
			if f.ClusterEvents == 0 {
				continue // idle: no cost per event
			}
			if f.CPU != nil {
				cpu = append(cpu, barRow{label: label, values: []float64{f.CPU.Backends, f.CPU.WALSenders, f.CPU.Apply, f.CPU.Other}})
			}
			wal = append(wal, barRow{label: label, values: []float64{f.WALBytesPerEvent}})
			for _, p := range f.Peers {
				sent = append(sent, barRow{label: fmt.Sprintf("%s → node %d", label, p.Peer), values: []float64{p.SentBytesPerEvent}})
			}
			for _, l := range f.Lag {
				lag = append(lag, barRow{label: fmt.Sprintf("%s, from node %d", label, l.Origin), values: []float64{l.P50, l.P99}})
			}
		}
	}
	if len(done) == 0 {
		return nil
	}
	charts := []plotChart{
		{Title: "Cluster: events per second by node",
			SVG:  barChart{unit: "events/s", series: []string{"produced here", "completed by its Processor"}, rows: done}.svg(),
			Note: "Each phase's measured window; producers commit one notify() per transaction on a fixed schedule."},
	}
	if len(cpu) > 0 {
		charts = append(charts, plotChart{Title: "Cluster: server CPU per event by node",
			SVG: barChart{unit: "server CPU µs per event produced in the cluster", series: []string{"client backends", "walsenders", "apply workers", "other"},
				rows: cpu, stacked: true}.svg(),
			Note: "Every node shares this machine's cores: the per-event costs hold, the rates are indicative."})
	}
	charts = append(charts, plotChart{Title: "Cluster: WAL per event by node",
		SVG: barChart{unit: "WAL bytes per event produced in the cluster", series: []string{"WAL"}, rows: wal}.svg()})
	if len(sent) > 0 {
		charts = append(charts, plotChart{Title: "Cluster: bytes sent to each peer per event",
			SVG:  barChart{unit: "bytes per event produced in the cluster", series: []string{"sent"}, rows: sent}.svg(),
			Note: "Changes decoded and sent through the peer's replication slot (pg_stat_replication_slots.total_bytes)."})
	}
	if len(lag) > 0 {
		charts = append(charts, plotChart{Title: "Cluster: apply lag",
			SVG:  barChart{unit: "milliseconds", series: []string{"p50", "p99"}, rows: lag}.svg(),
			Note: "Probes inserted every 100 ms on each producing node amid the load, stamped on arrival by a trigger that fires on apply only: from the insert to the apply."})
	}
	return charts
}
