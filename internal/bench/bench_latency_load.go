package bench

import (
	"context"
	"fmt"
	"strconv"
)

// The latency-load scenario: the latency of enqueue commit to handler start
// on an idle system, under a steady load, and for a fresh event on an idle
// channel while a backlog drains in another (head-of-line blocking).

// holBacklogChannel holds the head-of-line part's backlog.
const holBacklogChannel = "pgrelay_bench_hol_backlog"

// holTarget: a fresh event's latency under a backlog should be at most this
// many times its idle latency.
const holTarget = 2.0

// scenarioLatencyLoad: the latency measurement (see measureLatency) at
// --rate for --latency-events (idle), at --load-rate for --load-duration
// (steady load), then --hol-events at --hol-rate twice: alone, and while
// one Processor drains --hol-backlog events pending in another channel. With
// --peer river, River's harness follows each part (the backlog in a second
// queue of the same client).
func (b *bench) scenarioLatencyLoad(ctx context.Context) (*scenarioResult, error) {
	res := &scenarioResult{Name: "latency-load"}
	loadEvents := max(1, int(b.o.LoadRate*b.o.LoadDuration.Seconds()))
	parts := []struct {
		name  string
		label string
		n     int
		rate  float64
	}{
		{fmt.Sprintf("at %g/s, idle", b.o.Rate), "latency-load idle", b.o.LatencyEvents, b.o.Rate},
		{fmt.Sprintf("at %g/s, steady", b.o.LoadRate), "latency-load steady", loadEvents, b.o.LoadRate},
	}
	for _, part := range parts {
		run, err := b.measureLatency(ctx, latencySpec{label: part.label, n: part.n, rate: part.rate})
		if err != nil {
			return res, err
		}
		m := res.add(run.measurement(part.name))
		m.Detail = fmt.Sprintf("offered %g/s, enqueued at %.0f/s (pool of %d connections); handler start: clock_timestamp() in the handler; %s",
			part.rate, run.enqRate, latencyInsertConns, run.scheduleText())
		if b.o.Peer == "" {
			continue
		}
		rm, _, err := b.riverLatency(ctx, part.name, part.n, part.rate)
		if err != nil {
			return res, err
		}
		res.add(rm)
		res.ratio(fmt.Sprintf("p99 %s pgrelay/river", part.name), m.LatencyMS.P99, rm.LatencyMS.P99, 0)
	}

	// Head-of-line: the same fresh events alone, then behind a backlog.
	idleName := fmt.Sprintf("fresh channel at %g/s, idle", b.o.HOLRate)
	holName := fmt.Sprintf("fresh channel at %g/s, %d pending in another", b.o.HOLRate, b.o.HOLBacklog)
	idle, err := b.measureLatency(ctx, latencySpec{label: "latency-load hol idle", n: b.o.HOLEvents, rate: b.o.HOLRate})
	if err != nil {
		return res, err
	}
	im := res.add(idle.measurement(idleName))
	im.Detail = fmt.Sprintf("offered %g/s, enqueued at %.0f/s", b.o.HOLRate, idle.enqRate)
	hol, err := b.measureLatency(ctx, latencySpec{label: "latency-load hol backlog", n: b.o.HOLEvents, rate: b.o.HOLRate,
		backlog: b.o.HOLBacklog, backlogChannel: holBacklogChannel})
	if err != nil {
		return res, err
	}
	res.add(hol.backlogPre)
	hm := res.add(hol.measurement(holName))
	hm.Backlog = int64(b.o.HOLBacklog)
	hm.Detail = fmt.Sprintf("offered %g/s, enqueued at %.0f/s; one Processor draining %s (mode none) meanwhile; of the backlog %d left when the last event was enqueued, %d when it had started",
		b.o.HOLRate, hol.enqRate, holBacklogChannel, hol.backlogAtLastEnqueue, hol.backlogLeft)
	if hol.backlogAtLastEnqueue == 0 {
		hm.Detail += " (the backlog drained before the last event was enqueued: raise --hol-backlog)"
	}
	res.ratioAtMost("head-of-line p50 backlog/idle", hm.LatencyMS.P50, im.LatencyMS.P50, holTarget)
	res.ratioAtMost("head-of-line p99 backlog/idle", hm.LatencyMS.P99, im.LatencyMS.P99, holTarget)
	if b.o.Peer == "" {
		return res, nil
	}
	rIdle, _, err := b.riverLatency(ctx, idleName, b.o.HOLEvents, b.o.HOLRate)
	if err != nil {
		return res, err
	}
	res.add(rIdle)
	rHol, r, err := b.riverLatency(ctx, holName, b.o.HOLEvents, b.o.HOLRate, "--backlog", strconv.Itoa(b.o.HOLBacklog),
		"--insert-batch", strconv.Itoa(b.o.Batch))
	if err != nil {
		return res, err
	}
	pre := res.add(riverMeasurement(fmt.Sprintf("backlog pre-insert (InsertMany x %d)", b.o.Batch), b.o.HOLBacklog,
		r.BacklogInsertPerSec, 0, "jobs/s"))
	pre.Counted, pre.Backlog = false, int64(b.o.HOLBacklog)
	res.add(rHol)
	rHol.Backlog = int64(b.o.HOLBacklog)
	rHol.Detail += fmt.Sprintf("; the backlog in a second queue (%s) of the same client; of it %d left when the last job was inserted, %d when it had started",
		r.Settings["backlog_queue"], r.BacklogAtLastInsert, r.BacklogLeft)
	if r.BacklogAtLastInsert == 0 {
		rHol.Detail += " (the backlog drained before the last job was inserted: raise --hol-backlog)"
	}
	res.ratioAtMost("river head-of-line p50 backlog/idle", rHol.LatencyMS.P50, rIdle.LatencyMS.P50, holTarget)
	res.ratioAtMost("river head-of-line p99 backlog/idle", rHol.LatencyMS.P99, rIdle.LatencyMS.P99, holTarget)
	return res, nil
}
