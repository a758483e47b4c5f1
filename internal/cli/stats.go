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
	fmt.Fprintln(tw, "CHANNEL\tKIND\tMODE\tPENDING\tRESTRICTED\tIN FLIGHT\tRETRYING\tOLDEST PENDING\t")
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\t\n", name, s.Kind, s.Mode, pending,
			s.PendingRestricted, s.InFlight, s.Retrying, oldest)
	}
	if len(stats) == 0 {
		fmt.Fprintln(tw, "(no channels registered)\t\t\t\t\t\t\t\t")
	}
	_ = tw.Flush()
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
