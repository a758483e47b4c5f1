package actors

import (
	"context"
	"strconv"
	"time"

	"github.com/pgrelay/pgrelay/events"
)

// findStored reads the stream for the messages of src that are stored
// already although the publisher did not see them acknowledged, when they
// may be older than half the stream's duplicate window (sent again, they
// would be stored twice once the window has passed; within it the server
// drops the copies and nothing is read):
//   - a batch of src went unacknowledged that long ago: the stream is read
//     after src's floor;
//   - at the worker's first batch of src since it won the publish lease
//     (another Processor of the node may have been stopped with a batch
//     unacknowledged) whose first row is that old: the stream is read from
//     that row's time on, less clockSkew.
//
// first is the batch's first row: only this node's ids from it on are kept
// (what the batch and the ones after it may send again). The ids read are
// added to src.stored. The read has its own budget (storedReadBudget); when
// it fails or runs out, a warning is logged and the batch is published all
// the same: a copy stored twice is better than a publisher stuck for good
// (a stream too large to read in time, a NATS user without the permission
// to read it).
func (w *pubWorker) findStored(ctx context.Context, src *pubSource, first int64) {
	if w.stream == "" {
		return
	}
	keep := func(s string) bool {
		id, err := strconv.ParseInt(s, 10, 64)
		return err == nil && id >= first && events.ID(id).Node() == w.node
	}
	rctx, cancel := context.WithTimeout(ctx, storedReadBudget)
	defer cancel()
	var stored map[string]bool
	var err error
	var from string
	switch {
	case !src.unackedAt.IsZero() && time.Since(src.unackedAt) > w.dupWindow/2:
		from = "after sequence " + strconv.FormatUint(src.floor, 10)
		stored, err = w.d.bus.StoredIDs(rctx, w.stream, src.filter(), src.floor, keep)
	case !src.startChecked && time.Since(events.ID(first).Time()) > w.dupWindow/2:
		since := events.ID(first).Time().Add(-clockSkew)
		from = "since " + since.Format(time.RFC3339Nano)
		stored, err = w.d.bus.StoredIDsSince(rctx, w.stream, src.filter(), since, keep)
	default:
		src.startChecked = true
		return
	}
	src.startChecked = true
	if h := w.d.cfg.NATS.testStored; h != nil {
		stored, err = h(stored, err)
	}
	if err != nil {
		w.d.log.Warn("publisher: could not read the events stream for events stored without acknowledgement; "+
			"publishing them anyway (those past the duplicate window may be stored twice)",
			"source", src.name, "stream", w.stream, "from", from, "first_id", first, "err", err)
		return
	}
	if src.stored == nil {
		src.stored = map[int64]bool{}
	}
	for s := range stored {
		id, _ := strconv.ParseInt(s, 10, 64) // keep parsed it
		if _, ok := src.stored[id]; !ok {
			src.stored[id] = false
		}
	}
}

// filter is the subjects of src's messages.
func (src *pubSource) filter() string {
	if src.name == events.SourceNotifier {
		return events.NotifierPrefix + ".>"
	}
	return events.EventsPrefix + ".>"
}

// storedReadBudget is the most time findStored spends reading the stream.
const storedReadBudget = 20 * time.Second

// clockSkew is how far behind PostgreSQL's the NATS server's clock may run
// for the first batch's look into the stream (findStored) to find every copy.
const clockSkew = time.Minute
