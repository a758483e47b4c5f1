package cli

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

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
