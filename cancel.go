package pgrelay

import (
	"context"
	"fmt"
)

// Cancel cancels the event whose Notify id is id (pgrelay.cancel()) and
// reports whether it had not ended. A pending, delayed or retrying event
// ends cancelled (a log event, status StatusCancelled, a NATS document; no
// dead letter). A running one finishes its attempt: a success stays
// succeeded, a failure ends cancelled instead of being retried. An email
// channel's event takes its email with it, as CancelEmail takes the event.
// On a cluster the node that runs the event applies the cancel once the
// request reaches it (docs/multi-master.md). Admins cancel any event, a
// producer those its own role enqueued; false for an event that ended, an
// unknown id, or one that is not the caller's. Cancel in q's transaction
// takes effect when it commits.
func Cancel(ctx context.Context, q Querier, id int64) (bool, error) {
	var ok bool
	if err := q.QueryRow(ctx, `SELECT pgrelay.cancel($1::pg_catalog.int8)`, id).Scan(&ok); err != nil {
		return false, fmt.Errorf("pgrelay: cancel event %d: %w", id, Classify(err))
	}
	return ok, nil
}
