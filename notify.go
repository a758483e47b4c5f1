package pgrelay

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgrelay/pgrelay/events"
)

// Querier runs a statement that returns one row. A pgx.Tx, a *pgx.Conn and a
// *pgxpool.Pool all are Queriers. Give Notify, NotifyMany and Send the
// transaction that writes your data, so that the event commits with it.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// NotifyOption sets an optional parameter of Notify and NotifyMany.
type NotifyOption func(*notifyOptions)

type notifyOptions struct {
	notBefore any // time.Time, or nil for NULL
	delay     any // time.Duration, or nil for NULL
}

// NotBefore makes the event due at t (notify()'s p_not_before): no Processor
// runs it earlier. A time not after the transaction's start means now.
func NotBefore(t time.Time) NotifyOption {
	return func(o *notifyOptions) { o.notBefore = t }
}

// Delay makes the event due d after the transaction's start (notify()'s
// p_delay). Zero means now; a negative d is refused (ErrInvalidDueTime).
// Give NotBefore or Delay, not both (ErrNotBeforeAndDelay).
func Delay(d time.Duration) NotifyOption {
	return func(o *notifyOptions) { o.delay = d }
}

func notifyOpts(opts []NotifyOption) notifyOptions {
	var o notifyOptions
	for _, f := range opts {
		f(&o)
	}
	return o
}

// Notify enqueues one event on channel with payload, in q's transaction
// (pgrelay.notify), and returns its id, the id Status takes. The event
// exists only if that transaction commits. On a deduplicating channel the id
// may be that of an identical pending event.
//
// Errors match, with errors.Is, ErrUnknownChannel, ErrPayloadTooLarge,
// ErrNotBeforeAndDelay, ErrInvalidDueTime or ErrInvalidNodeID when pgrelay
// refuses the event.
func Notify(ctx context.Context, q Querier, channel, payload string, opts ...NotifyOption) (int64, error) {
	o := notifyOpts(opts)
	ctx, tp, end := notifySpan(ctx, channel, 1)
	var id int64
	err := q.QueryRow(ctx,
		`SELECT pgrelay.notify(`+channelArg(tp, 5)+`, $2::pg_catalog.text,
			$3::pg_catalog.timestamptz, $4::pg_catalog.interval)`,
		traced([]any{channel, payload, o.notBefore, o.delay}, tp)...).Scan(&id)
	if err != nil {
		err = fmt.Errorf("pgrelay: notify on channel %q: %w", channel, Classify(err))
		end(nil, err)
		return 0, err
	}
	end([]int64{id}, nil)
	return id, nil
}

// NotifyMany enqueues one event per payload on channel in one call
// (pgrelay.notify_many) and returns their ids in the order of payloads. Every
// payload is checked before any is enqueued: one refused payload fails the
// whole call. The options apply to every event. No payloads, no ids.
func NotifyMany(ctx context.Context, q Querier, channel string, payloads []string, opts ...NotifyOption) ([]int64, error) {
	if payloads == nil {
		payloads = []string{} // NULL is notify_many's error (PR005), not an empty batch
	}
	o := notifyOpts(opts)
	ctx, tp, end := notifySpan(ctx, channel, len(payloads))
	var ids []int64
	err := q.QueryRow(ctx,
		`SELECT pg_catalog.array_agg(n.id ORDER BY n.ord)
		   FROM pgrelay.notify_many(`+channelArg(tp, 5)+`, $2::pg_catalog.text[],
		          $3::pg_catalog.timestamptz, $4::pg_catalog.interval) WITH ORDINALITY AS n(id, ord)`,
		traced([]any{channel, payloads, o.notBefore, o.delay}, tp)...).Scan(&ids)
	if err != nil {
		err = fmt.Errorf("pgrelay: notify %d events on channel %q: %w", len(payloads), channel, Classify(err))
		end(nil, err)
		return nil, err
	}
	end(ids, nil)
	return ids, nil
}

// EventStatus is where an event stands (pgrelay.status()).
type EventStatus = events.Status

// The statuses Status returns.
const (
	// StatusPending: queued, first attempt, not yet running.
	StatusPending = events.StatusPending
	// StatusInFlight: claimed by a Processor.
	StatusInFlight = events.StatusInFlight
	// StatusRetrying: an attempt failed; the next one is queued.
	StatusRetrying = events.StatusRetrying
	// StatusSucceeded: the handler succeeded.
	StatusSucceeded = events.StatusSucceeded
	// StatusGaveUp: the last attempt failed.
	StatusGaveUp = events.StatusGaveUp
	// StatusExpired: past its expiry when dispatched; not run.
	StatusExpired = events.StatusExpired
	// StatusDeduplicated: reserved for the id of an absorbed call, which
	// Notify never returns.
	StatusDeduplicated = events.StatusDeduplicated
)

// Status is the status of the event whose Notify id is id
// (pgrelay.status()). ErrNotFound when pgrelay knows none: an unknown id, an
// event discarded by a forced unregister(), or one whose log rows were
// trimmed (the Processor's --log-retention).
func Status(ctx context.Context, q Querier, id int64) (EventStatus, error) {
	var s *string
	if err := q.QueryRow(ctx, `SELECT pgrelay.status($1::pg_catalog.int8)`, id).Scan(&s); err != nil {
		return "", fmt.Errorf("pgrelay: status of event %d: %w", id, Classify(err))
	}
	if s == nil {
		return "", fmt.Errorf("pgrelay: status of event %d: %w", id, ErrNotFound)
	}
	return EventStatus(*s), nil
}
