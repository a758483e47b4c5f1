package actors

import (
	"context"
	"fmt"
	"time"

	"github.com/pgrelay/pgrelay/events"
	"github.com/pgrelay/pgrelay/events/store"
	"github.com/pgrelay/pgrelay/internal/handlers"
)

// endedFailing is implemented by handlers that keep a status of their own
// beside pgrelay.log (the email handler: the notifier's status) and must
// hear of an event that ended for good without success even when core ended
// it without them: expired before it ran, given up after an actor failure or
// an error outside the handler's own bookkeeping.
type endedFailing interface {
	// EndedFailing records that ev ended for good, for reason. It must be
	// harmless when the handler already recorded an end.
	EndedFailing(ctx context.Context, ev handlers.Event, reason string) error
}

// endedFailingTimeout bounds one EndedFailing call.
const endedFailingTimeout = 10 * time.Second

// tellEndedFailing hands a final unsuccessful outcome to the event's handler
// when it wants to hear of it, in a goroutine (finish may run inside an
// actor's Receive) that Stop waits for. logged is what the log records of
// out: a failed attempt that gave up is known once the completer wrote it.
func tellEndedFailing(d *deps, ev handlers.Event, out store.Outcome, logged events.Kind) {
	var reason string
	switch {
	case out.Event == events.Expired:
		reason = fmt.Sprintf("expired: the channel's expire_after passed before attempt %d could run", ev.Attempt)
	case out.Event == events.GaveUp:
		reason = out.Error
	case logged == events.GaveUp:
		reason = fmt.Sprintf("gave up after %d attempts: %s", ev.Attempt, out.Error)
	default:
		return
	}
	h, err := d.handlers.Lookup(ev.Kind)
	if err != nil {
		return
	}
	ef, ok := h.(endedFailing)
	if !ok {
		return
	}
	d.work.Add(1)
	go func() {
		defer d.work.Done()
		ctx, cancel := context.WithTimeout(context.Background(), endedFailingTimeout)
		defer cancel()
		if err := ef.EndedFailing(ctx, ev, reason); err != nil {
			d.log.Warn("could not tell the handler its event ended", "channel", ev.Channel, "id", ev.ID,
				"err", err)
		}
	}()
}
