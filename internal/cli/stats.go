package cli

import (
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/pgrelay/pgrelay/events"
	"github.com/pgrelay/pgrelay/events/store"
)

// writeStats prints queue_stats() rows as an aligned table.
func writeStats(w io.Writer, stats []store.ChannelStats) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "CHANNEL\tKIND\tMODE\tPRIORITY\tPENDING\tRESTRICTED\tIN FLIGHT\tRETRYING\tLIMIT\tRATE\tOLDEST PENDING\t")
	for _, s := range stats {
		name := s.Channel
		if s.Paused {
			name += " (paused)"
		}
		oldest := "-"
		if s.OldestPending != nil {
			oldest = time.Since(*s.OldestPending).Round(time.Second).String() + " ago"
		}
		pending := fmt.Sprint(s.Pending)
		if s.PendingEstimated {
			pending = "~" + pending
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%d\t%d\t%d\t%s\t%s\t%s\t\n", name, s.Kind, s.Mode, s.Priority, pending,
			s.PendingRestricted, s.InFlight, s.Retrying, maxInFlight(s), rate(s), oldest)
	}
	if len(stats) == 0 {
		fmt.Fprintln(tw, "(no channels registered)\t\t\t\t\t\t\t\t\t\t\t")
	}
	_ = tw.Flush()
}

// maxInFlight is the LIMIT column: the channel's max_in_flight, "-" for none.
func maxInFlight(s store.ChannelStats) string {
	if s.MaxInFlight == nil {
		return "-"
	}
	return strconv.Itoa(*s.MaxInFlight)
}

// rate is the RATE column: the channel's rate limit as starts/period
// ("50/1s"), "-" for none.
func rate(s store.ChannelStats) string {
	if s.RateLimit == nil || s.RatePeriod == nil {
		return "-"
	}
	return strconv.Itoa(*s.RateLimit) + "/" + s.RatePeriod.String()
}

// writeUnhandledGo prints, under the stats table, the go channels whose
// handler no running Processor of this node has: their events wait (pending,
// no attempt spent) until one that has it starts.
func writeUnhandledGo(w io.Writer, rows []store.UnhandledGo) {
	for _, r := range rows {
		fmt.Fprintf(w, "channel %s: no Processor of this node handles go handler '%s'; its %d pending events wait\n",
			r.Channel, r.Handler, r.Pending)
	}
}

// writeCancelsWaiting prints, under the stats table, the events being
// cancelled that have not ended yet: a running attempt finishes first (its
// failure ends the event cancelled), and on a cluster the node that runs
// the event applies the request once it arrives.
func writeCancelsWaiting(w io.Writer, rows []store.CancelsWaiting) {
	for _, r := range rows {
		fmt.Fprintf(w, "channel %s: %d events being cancelled (a running attempt finishes first)\n", r.Channel, r.Events)
	}
}

// writeBacklog prints, under the stats table, the events each node's
// publisher has not yet published on NATS, with the age of the oldest
// (nothing when no publisher ran), then the unpublished log rows that
// retention deleted past --log-retention-unpublished.
func writeBacklog(w io.Writer, rows []store.CursorBacklog, dropped []store.Dropped) {
	for _, r := range rows {
		n := strconv.FormatInt(r.Backlog, 10)
		if r.Backlog > store.BacklogCap {
			n = "more than " + strconv.Itoa(store.BacklogCap)
		}
		if r.OldestAt != nil && r.Backlog > 0 {
			n += ", the oldest " + time.Since(*r.OldestAt).Round(time.Second).String() + " old"
		}
		what := "unpublished events"
		if r.Source != events.SourceLog {
			what = "unpublished " + r.Source + " events"
		}
		fmt.Fprintf(w, "%s (node %d): %s\n", what, r.Node, n)
	}
	for _, d := range dropped {
		fmt.Fprintf(w, "unpublished events deleted by retention (node %d): %d, ids %d..%d, the last %s ago; "+
			"see pgrelay.log_dropped\n", d.Node, d.Rows, d.FirstID, d.LastID,
			time.Since(d.LastDroppedAt).Round(time.Second))
	}
}

// writeSchedules prints, under the stats table, each schedule of
// pgrelay.schedules: its timing, node, next and last fire, events enqueued
// and last error.
func writeSchedules(w io.Writer, rows []store.Schedule, now time.Time) {
	for _, s := range rows {
		timing := "every " + s.Timing
		if s.Cron {
			timing = fmt.Sprintf("cron '%s' %s", s.Timing, s.Timezone)
		}
		next := "next not computed yet"
		switch {
		case s.Never:
			next = "never fires"
		case s.NextFire != nil && s.NextFire.After(now):
			next = "next in " + s.NextFire.Sub(now).Round(time.Second).String()
		case s.NextFire != nil:
			next = "due " + now.Sub(*s.NextFire).Round(time.Second).String() + " ago"
		}
		last := "never fired"
		if s.LastFire != nil {
			last = "last fired " + now.Sub(*s.LastFire).Round(time.Second).String() + " ago"
		}
		fmt.Fprintf(w, "schedule %s (channel %s, %s, node %d): %s, %s, %d events", s.Name, s.Channel, timing, s.Node,
			next, last, s.Fires)
		if s.LastError != nil {
			fmt.Fprintf(w, "; last error: %s", *s.LastError)
		}
		fmt.Fprintln(w)
	}
}

// writeProcessors prints, under the stats table, each Processor of
// pgrelay.processors, `pgrelay run` and embedded ones alike: its node,
// mode, host and pid, the release it runs, whether it is alive, and its
// last heartbeat.
func writeProcessors(w io.Writer, rows []store.ProcessorRow, now time.Time) {
	if len(rows) == 0 {
		fmt.Fprintln(w, "no Processor is running")
	}
	for _, p := range rows {
		state, v := "dead", p.Version
		if p.Alive {
			state = "alive"
		}
		if v == "" {
			v = "unknown"
		}
		fmt.Fprintf(w, "processor %d on node %d (%s, host %s, pid %d): version %s, %s, last heartbeat %s ago\n",
			p.ID, p.Node, p.Mode, p.Hostname, p.PID, v, state, now.Sub(p.LastSeen).Round(time.Second))
	}
}
