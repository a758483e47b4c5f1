package pgrelay

import (
	"context"
	"errors"
	"fmt"
	"math"
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
	notBefore any      // time.Time, or nil for NULL
	delay     any      // time.Duration, or nil for NULL
	priority  any      // int32, or nil for NULL (the channel's default)
	key       any      // string, or nil for NULL (Notify's p_key)
	keys      []string // NotifyMany's p_key; nil for NULL
	keysSet   bool
	uniqueFor any // time.Duration, or nil for NULL
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

// Priority sets the event's priority (notify()'s p_priority): within its
// channel a Processor takes higher priorities first. Without it the event
// takes the channel's default (0 unless the channel sets one). The range is
// -32768 to 32767; outside it the call fails with ErrInvalidPriority.
func Priority(p int) NotifyOption {
	return func(o *notifyOptions) {
		// Beyond int32 the server could not be told the value; it refuses
		// the nearest one, which is out of range too.
		o.priority = int32(max(math.MinInt32, min(math.MaxInt32, p)))
	}
}

// Key gives Notify's event a unique key (notify()'s p_key): while an event
// of the channel holds the key, Notify returns that event's id and enqueues
// nothing. An event holds its key until it has ended and, with UniqueFor,
// for that period from its call. NotifyMany takes Keys instead.
func Key(k string) NotifyOption {
	return func(o *notifyOptions) { o.key = k }
}

// Keys gives NotifyMany's events one unique key each (notify_many()'s
// p_key), in the order of the payloads: Key for each event, so a key twice
// in one call enqueues one event. Give as many keys as payloads
// (ErrArrayLengthsDiffer otherwise). Notify takes Key instead.
func Keys(keys []string) NotifyOption {
	return func(o *notifyOptions) { o.keys, o.keysSet = keys, true }
}

// UniqueFor holds the event's unique key for d from the call
// (notify()'s p_unique_for), even after the event succeeded: a call with
// the same channel and key within d returns the first event's id. An end
// as gave_up, expired or cancelled frees the key at once. Without Key (or
// Keys) the payload is the key. d must be more than zero and at most 3650
// days (ErrInvalidUniqueFor).
func UniqueFor(d time.Duration) NotifyOption {
	return func(o *notifyOptions) { o.uniqueFor = d }
}

// errOptionOfOther is the error of an option given to the function that
// does not take it (Key to NotifyMany, Keys to Notify).
var errOptionOfOther = errors.New("pgrelay: Key is an option of Notify, Keys of NotifyMany")

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
// may be that of an identical pending event, with Key or UniqueFor that of
// the event holding the key.
//
// Errors match, with errors.Is, ErrUnknownChannel, ErrPayloadTooLarge,
// ErrNotBeforeAndDelay, ErrInvalidDueTime, ErrInvalidPriority,
// ErrInvalidUniqueFor or ErrInvalidNodeID when pgrelay refuses the event.
func Notify(ctx context.Context, q Querier, channel, payload string, opts ...NotifyOption) (int64, error) {
	o := notifyOpts(opts)
	if o.keysSet {
		return 0, fmt.Errorf("pgrelay: notify on channel %q: %w", channel, errOptionOfOther)
	}
	ctx, tp, end := notifySpan(ctx, channel, 1)
	var id int64
	err := q.QueryRow(ctx,
		`SELECT pgrelay.notify(`+channelArg(tp, 8)+`, $2::pg_catalog.text,
			$3::pg_catalog.timestamptz, $4::pg_catalog.interval,
			$5::pg_catalog.int4, $6::pg_catalog.text, $7::pg_catalog.interval)`,
		traced([]any{channel, payload, o.notBefore, o.delay, o.priority, o.key, o.uniqueFor}, tp)...).Scan(&id)
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
	if o.key != nil {
		return nil, fmt.Errorf("pgrelay: notify %d events on channel %q: %w", len(payloads), channel, errOptionOfOther)
	}
	var keys any // NULL unless Keys was given
	if o.keysSet {
		keys = o.keys
		if o.keys == nil {
			keys = []string{}
		}
	}
	ctx, tp, end := notifySpan(ctx, channel, len(payloads))
	var ids []int64
	err := q.QueryRow(ctx,
		`SELECT pg_catalog.array_agg(n.id ORDER BY n.ord)
		   FROM pgrelay.notify_many(`+channelArg(tp, 8)+`, $2::pg_catalog.text[],
		          $3::pg_catalog.timestamptz, $4::pg_catalog.interval,
		          $5::pg_catalog.int4, $6::pg_catalog.text[], $7::pg_catalog.interval) WITH ORDINALITY AS n(id, ord)`,
		traced([]any{channel, payloads, o.notBefore, o.delay, o.priority, keys, o.uniqueFor}, tp)...).Scan(&ids)
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
	// StatusCancelled: ended by Cancel (or its email's cancel) before it
	// ran, or after a running attempt failed.
	StatusCancelled = events.StatusCancelled
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
