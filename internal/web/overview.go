package web

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/pgrelay/pgrelay/events/store"
	"github.com/pgrelay/pgrelay/internal/secret"
)

// chartMinutes is how far back the overview's charts go: an hour, a bar a
// minute.
const chartMinutes = 60

// settleMinutes: a minute this far in the past is counted once and kept.
// Rows written in it may still arrive later by replication from another
// node, or commit late: two minutes leave room for both on a healthy cluster.
const settleMinutes = 2

// overview is one reading of what the overview shows.
type overview struct {
	At         time.Time
	Channels   []channelRow
	Totals     channelRow
	Nodes      []store.ConsoleNode
	Processors []store.ProcessorRow
	DeadAfter  time.Duration
}

// channelRow is a channel's line of the overview.
type channelRow struct {
	store.ChannelStats
	// Succeeded and Failed are the last complete minute's.
	Succeeded, Failed int64
	// CancelledHour and SnoozedHour are the chart's hour's (the channel's
	// page shows them: both are rare beside the others).
	CancelledHour, SnoozedHour int64
	// Dead is how many of its events are dead letters.
	Dead  int64
	Chart chart
	// NoHandler names the Go handler of a go channel that no running
	// Processor of this node has (its events wait), else "".
	NoHandler string
}

// channel returns the reading's row of channel name.
func (o *overview) channel(name string) (channelRow, bool) {
	for _, c := range o.Channels {
		if c.Channel == name {
			return c, true
		}
	}
	return channelRow{}, false
}

// overviewCache shares one reading a second between every page that asks,
// and keeps the per-minute counts of minutes that have settled, so that a
// reading counts only the log's last few minutes.
type overviewCache struct {
	mu   sync.Mutex
	last *overview
	// minutes holds the settled minutes' counts by the minute's Unix time
	// (not time.Time keys: equal instants in two locations differ as keys).
	minutes map[int64]map[string]store.MinuteCounts
	settled time.Time // minutes before it are in minutes
}

// get returns a reading at most Refresh old, made now if need be (one at a
// time: the others wait for it and share it).
func (s *Server) getOverview(ctx context.Context) (*overview, error) {
	c := &s.over
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	if c.last != nil && now.Sub(c.last.At) < Refresh {
		return c.last, nil
	}
	// Whoever waits shares the reading: one request that goes away does not
	// cancel it for the others.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	o, err := s.readOverview(ctx, now)
	if err != nil {
		return nil, err
	}
	c.last = o
	return o, nil
}

func (s *Server) readOverview(ctx context.Context, now time.Time) (*overview, error) {
	c := &s.over
	stats, err := store.QueueStats(ctx, s.cfg.DB)
	if err != nil {
		return nil, err
	}
	nodes, err := store.ConsoleNodes(ctx, s.cfg.DB, s.cfg.DeadAfter)
	if err != nil {
		return nil, err
	}
	procs, err := store.Processors(ctx, s.cfg.DB, s.cfg.DeadAfter)
	if err != nil {
		return nil, err
	}
	dead, err := store.DeadLetterCounts(ctx, s.cfg.DB)
	if err != nil {
		return nil, err
	}
	unhandled, err := store.UnhandledGoChannels(ctx, s.cfg.DB)
	if err != nil {
		return nil, err
	}
	noHandler := map[string]string{}
	for _, u := range unhandled {
		noHandler[u.Channel] = u.Handler
	}
	cur := now.Truncate(time.Minute)
	first := cur.Add(-(chartMinutes - 1) * time.Minute)
	since := first
	if c.settled.After(since) {
		since = c.settled
	}
	counts, err := store.LogPerMinute(ctx, s.cfg.DB, since)
	if err != nil {
		return nil, err
	}
	// The minutes that settle now are kept; older ones than the chart
	// dropped.
	settle := cur.Add(-settleMinutes * time.Minute)
	if c.minutes == nil {
		c.minutes = map[int64]map[string]store.MinuteCounts{}
	}
	recent := map[int64]map[string]store.MinuteCounts{}
	for _, m := range counts {
		dst, k := recent, m.Minute.Unix()
		if m.Minute.Before(settle) {
			dst = c.minutes
		}
		if dst[k] == nil {
			dst[k] = map[string]store.MinuteCounts{}
		}
		dst[k][m.Channel] = m
	}
	if settle.After(c.settled) {
		c.settled = settle
	}
	for k := range c.minutes {
		if k < first.Unix() {
			delete(c.minutes, k)
		}
	}
	at := func(m time.Time) map[string]store.MinuteCounts {
		if m.Before(settle) {
			return c.minutes[m.Unix()]
		}
		return recent[m.Unix()]
	}

	o := &overview{At: now, Nodes: nodes, Processors: procs, DeadAfter: s.cfg.DeadAfter}
	o.Totals.Channel = "all channels"
	var totalSeries [chartMinutes][2]int64
	for _, st := range stats {
		row := channelRow{ChannelStats: st, Dead: dead[st.Channel], NoHandler: noHandler[st.Channel]}
		var series [chartMinutes][2]int64
		for i := range chartMinutes {
			mc := at(first.Add(time.Duration(i) * time.Minute))[st.Channel]
			series[i] = [2]int64{mc.Succeeded, mc.Failed}
			row.CancelledHour += mc.Cancelled
			row.SnoozedHour += mc.Snoozed
			totalSeries[i][0] += mc.Succeeded
			totalSeries[i][1] += mc.Failed
		}
		row.Succeeded, row.Failed = series[chartMinutes-2][0], series[chartMinutes-2][1]
		row.Chart = newChart(series[:], st.Channel)
		o.Channels = append(o.Channels, row)
		t := &o.Totals
		t.Pending += st.Pending
		t.PendingEstimated = t.PendingEstimated || st.PendingEstimated
		t.PendingRestricted += st.PendingRestricted
		t.InFlight += st.InFlight
		t.Retrying += st.Retrying
		t.Succeeded += row.Succeeded
		t.Failed += row.Failed
		t.Dead += row.Dead
		if st.OldestPending != nil && (t.OldestPending == nil || st.OldestPending.Before(*t.OldestPending)) {
			t.OldestPending = st.OldestPending
		}
	}
	o.Totals.Chart = newChart(totalSeries[:], "all channels")
	return o, nil
}

func (s *Server) overview(w http.ResponseWriter, r *http.Request) {
	o, err := s.getOverview(r.Context())
	if err != nil {
		s.dbFail(w, r, err)
		return
	}
	s.render(w, r, http.StatusOK, "overview", page{Title: "Overview", Data: o})
}

// live is the overview's live part alone, which the page's script fetches
// every Refresh.
func (s *Server) live(w http.ResponseWriter, r *http.Request) {
	o, err := s.getOverview(r.Context())
	if err != nil {
		s.cfg.Logger.Error("console: overview", "err", err)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusServiceUnavailable)
		_ = s.pages["overview"].ExecuteTemplate(w, "live-error", secret.String(err.Error()))
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err := s.pages["overview"].ExecuteTemplate(w, "live", page{Data: o, ReadOnly: s.cfg.ReadOnly}); err != nil {
		s.cfg.Logger.Error("console: render the live overview", "err", err)
	}
}
