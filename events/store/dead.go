package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// DeadLetter is one row of pgrelay.dead_letters: an event that ended
// gave_up or expired, with its payload.
type DeadLetter struct {
	// ID is the queue id of the attempt that ended; OriginID the id
	// notify() returned.
	ID       int64  `json:"id"`
	OriginID int64  `json:"origin_id"`
	Channel  string `json:"channel"`
	Payload  string `json:"payload"`
	Attempts int    `json:"attempts"`
	// LastError is the last attempt's error (NULL for an expired event).
	LastError *string `json:"last_error"`
	// Outcome is "gave_up" or "expired".
	Outcome string    `json:"outcome"`
	EndedAt time.Time `json:"ended_at"`
	// Node ended it; RunInNode is the node a node-restricted event was
	// pinned to.
	Node      int  `json:"node"`
	RunInNode *int `json:"run_in_node"`
	// NotificationID is the notification an email event carried.
	NotificationID *int64 `json:"notification_id"`
	// Priority is the event's, which a retry enqueues it at again (0, the
	// default, is left out of JSON).
	Priority int `json:"priority,omitempty"`
}

// DeadLetterFilter selects dead letters: of Channel ("" for every channel),
// that ended at or after Since (zero: any time).
type DeadLetterFilter struct {
	Channel string
	Since   time.Time
}

// args are the filter's two parameters: the channel (NULL for all) and the
// time (NULL for any).
func (f DeadLetterFilter) args() (channel *string, since *time.Time) {
	if f.Channel != "" {
		channel = &f.Channel
	}
	if !f.Since.IsZero() {
		since = &f.Since
	}
	return channel, since
}

const deadLetterColumns = `d.id, d.origin_id, d.channel, d.payload, d.attempts, d.last_error, d.outcome,
	d.ended_at, d.node, d.run_in_node, d.notification_id, COALESCE(d.priority, 0::pg_catalog.int2)`

func scanDeadLetter(r pgx.CollectableRow) (DeadLetter, error) {
	var l DeadLetter
	var attempts, node int32
	var runIn *int32
	var priority int16
	err := r.Scan(&l.ID, &l.OriginID, &l.Channel, &l.Payload, &attempts, &l.LastError, &l.Outcome,
		&l.EndedAt, &node, &runIn, &l.NotificationID, &priority)
	l.Attempts, l.Node, l.Priority = int(attempts), int(node), int(priority)
	if runIn != nil {
		n := int(*runIn)
		l.RunInNode = &n
	}
	return l, err
}

// DeadLetters lists up to limit dead letters that f selects, the most recent
// first (by the (channel, ended_at) index, or ended_at for every channel).
func DeadLetters(ctx context.Context, q Querier, f DeadLetterFilter, limit int) ([]DeadLetter, error) {
	channel, since := f.args()
	rows, err := q.Query(ctx, `SELECT `+deadLetterColumns+` FROM pgrelay.dead_letters d
		WHERE ($1::pg_catalog.text IS NULL OR d.channel OPERATOR(pg_catalog.=) $1::pg_catalog.text)
		  AND ($2::pg_catalog.timestamptz IS NULL OR d.ended_at OPERATOR(pg_catalog.>=) $2::pg_catalog.timestamptz)
		ORDER BY d.ended_at DESC, d.id DESC
		LIMIT $3::pg_catalog.int8`, channel, since, int64(limit))
	if err != nil {
		return nil, fmt.Errorf("list dead letters: %w", err)
	}
	out, err := pgx.CollectRows(rows, scanDeadLetter)
	if err != nil {
		return nil, fmt.Errorf("list dead letters: %w", err)
	}
	return out, nil
}

// CountDeadLetters counts the dead letters f selects.
func CountDeadLetters(ctx context.Context, q Querier, f DeadLetterFilter) (int64, error) {
	channel, since := f.args()
	var n int64
	if err := q.QueryRow(ctx, `SELECT pg_catalog.count(*) FROM pgrelay.dead_letters d
		WHERE ($1::pg_catalog.text IS NULL OR d.channel OPERATOR(pg_catalog.=) $1::pg_catalog.text)
		  AND ($2::pg_catalog.timestamptz IS NULL OR d.ended_at OPERATOR(pg_catalog.>=) $2::pg_catalog.timestamptz)`,
		channel, since).Scan(&n); err != nil {
		return 0, fmt.Errorf("count dead letters: %w", err)
	}
	return n, nil
}

// DeadLettersByID returns the dead letters among ids, in id order (an id
// that is none is left out).
func DeadLettersByID(ctx context.Context, q Querier, ids []int64) ([]DeadLetter, error) {
	rows, err := q.Query(ctx, `SELECT `+deadLetterColumns+` FROM pgrelay.dead_letters d
		WHERE d.id OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.int8[]) ORDER BY d.id`, ids)
	if err != nil {
		return nil, fmt.Errorf("read dead letters %v: %w", ids, err)
	}
	out, err := pgx.CollectRows(rows, scanDeadLetter)
	if err != nil {
		return nil, fmt.Errorf("read dead letters %v: %w", ids, err)
	}
	return out, nil
}

// ErrNoDeadLetter: DeadLetterByID found no dead letter of that id.
var ErrNoDeadLetter = errors.New("not a dead letter")

// DeadLetterByID returns dead letter id, or an error matching
// ErrNoDeadLetter.
func DeadLetterByID(ctx context.Context, q Querier, id int64) (DeadLetter, error) {
	got, err := DeadLettersByID(ctx, q, []int64{id})
	if err != nil {
		return DeadLetter{}, err
	}
	if len(got) == 0 {
		return DeadLetter{}, fmt.Errorf("dead letter %d: %w (never was, or was retried, discarded or trimmed)", id, ErrNoDeadLetter)
	}
	return got[0], nil
}

// RetryDeadLetter runs pgrelay.retry(id) and returns the new queue id.
func RetryDeadLetter(ctx context.Context, q Querier, id int64) (int64, error) {
	var n int64
	if err := q.QueryRow(ctx, "SELECT pgrelay.retry($1::pg_catalog.int8)", id).Scan(&n); err != nil {
		return 0, fmt.Errorf("retry dead letter %d: %w", id, err)
	}
	return n, nil
}

// RetryAllDeadLetters runs pgrelay.retry_all(channel, since) (since zero:
// NULL, every dead letter of the channel) and returns how many it retried.
func RetryAllDeadLetters(ctx context.Context, q Querier, f DeadLetterFilter) (int64, error) {
	channel, since := f.args()
	var n int64
	if err := q.QueryRow(ctx, "SELECT pgrelay.retry_all($1::pg_catalog.text, $2::pg_catalog.timestamptz)",
		channel, since).Scan(&n); err != nil {
		return 0, fmt.Errorf("retry the dead letters of channel %q: %w", f.Channel, err)
	}
	return n, nil
}

// DiscardAllDeadLetters runs pgrelay.discard_all(channel, since) (since
// zero: NULL, every dead letter of the channel) and returns how many it
// discarded.
func DiscardAllDeadLetters(ctx context.Context, q Querier, f DeadLetterFilter) (int64, error) {
	channel, since := f.args()
	var n int64
	if err := q.QueryRow(ctx, "SELECT pgrelay.discard_all($1::pg_catalog.text, $2::pg_catalog.timestamptz)",
		channel, since).Scan(&n); err != nil {
		return 0, fmt.Errorf("discard the dead letters of channel %q: %w", f.Channel, err)
	}
	return n, nil
}

// DiscardDeadLetter runs pgrelay.discard(id).
func DiscardDeadLetter(ctx context.Context, q Querier, id int64) error {
	var ok bool
	if err := q.QueryRow(ctx, "SELECT pgrelay.discard($1::pg_catalog.int8)", id).Scan(&ok); err != nil {
		return fmt.Errorf("discard dead letter %d: %w", id, err)
	}
	return nil
}

// TrimDeadLetters deletes up to batch dead letters that ended more than
// olderThan ago (pgrelay._trim_dead_letters) and returns how many.
func (s *Store) TrimDeadLetters(ctx context.Context, olderThan time.Duration, batch int) (int, error) {
	var n int32
	if err := s.bg.QueryRow(ctx, "SELECT pgrelay._trim_dead_letters($1::pg_catalog.interval, $2::pg_catalog.int4)",
		olderThan, batch).Scan(&n); err != nil {
		return 0, fmt.Errorf("trim dead letters older than %s: %w", olderThan, err)
	}
	return int(n), nil
}

// DeadLetterStat is one registered channel's dead letters.
type DeadLetterStat struct {
	Channel string
	// Count is counted up to DeadCountCap+1 (more than the cap).
	Count int64
	// Oldest is when the oldest dead letter's event ended (nil when none).
	Oldest *time.Time
}

// DeadLetterStats returns every registered channel's dead letters (zero
// when none), in channel order: two reads of the index on (channel,
// ended_at) per channel, the count capped as DeadLetterCounts'.
func DeadLetterStats(ctx context.Context, q Querier) ([]DeadLetterStat, error) {
	rows, err := q.Query(ctx, `SELECT c.channel, n.n,
		  (SELECT pg_catalog.min(d.ended_at) FROM pgrelay.dead_letters d
		    WHERE d.channel OPERATOR(pg_catalog.=) c.channel)
		FROM pgrelay.channels c,
		LATERAL (SELECT pg_catalog.count(*) AS n FROM (SELECT FROM pgrelay.dead_letters d
		          WHERE d.channel OPERATOR(pg_catalog.=) c.channel LIMIT $1::pg_catalog.int4) x) n
		ORDER BY c.channel`, DeadCountCap+1)
	if err != nil {
		return nil, fmt.Errorf("count the dead letters per channel: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (DeadLetterStat, error) {
		var s DeadLetterStat
		err := r.Scan(&s.Channel, &s.Count, &s.Oldest)
		return s, err
	})
	if err != nil {
		return nil, fmt.Errorf("count the dead letters per channel: %w", err)
	}
	return out, nil
}

// SweepCancels applies the cancel requests that meet their event pending
// here now (pgrelay._cancel_sweep: a claim released or rescued, a retry
// enqueued as the request came) and forgets the stale ones; it returns how
// many events it cancelled.
func (s *Store) SweepCancels(ctx context.Context) (int, error) {
	var n int32
	if err := s.bg.QueryRow(ctx, "SELECT pgrelay._cancel_sweep()").Scan(&n); err != nil {
		return 0, fmt.Errorf("sweep cancel requests: %w", err)
	}
	return int(n), nil
}

// CancelsWaiting is, per channel, the events a cancel was asked for that
// still have a row on this node: running ones finishing their attempt, or
// those another node runs that the request has not reached yet.
type CancelsWaiting struct {
	Channel string
	Events  int64
}

// CancelsWaitingOf reads CancelsWaiting from pgrelay.cancels (a handful of
// rows: a request goes once its event ends).
func CancelsWaitingOf(ctx context.Context, q Querier) ([]CancelsWaiting, error) {
	rows, err := q.Query(ctx, `SELECT q.channel, pg_catalog.count(DISTINCT q.origin_id)
		FROM pgrelay.cancels k JOIN pgrelay.queue q
		  ON (q.id OPERATOR(pg_catalog.=) k.origin_id AND q.origin_id OPERATOR(pg_catalog.=) k.origin_id)
		  OR (q.origin_id OPERATOR(pg_catalog.=) k.origin_id AND q.retry_of IS NOT NULL)
		GROUP BY q.channel ORDER BY q.channel`)
	if err != nil {
		return nil, fmt.Errorf("read the cancel requests: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (CancelsWaiting, error) {
		var c CancelsWaiting
		err := r.Scan(&c.Channel, &c.Events)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("read the cancel requests: %w", err)
	}
	return out, nil
}
