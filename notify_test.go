package pgrelay_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay"
)

var bg = context.Background()

// Notify enqueues in the caller's transaction: the event exists once it
// commits, and never after a rollback.
func TestNotifyInTransaction(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	d.exec(t, "SELECT pgrelay.register('orders', 'SELECT pg_catalog.length($1)')")

	tx, err := d.producer.Begin(bg)
	require.NoError(t, err)
	id, err := pgrelay.Notify(bg, tx, "orders", `{"order": 42}`)
	require.NoError(t, err)
	require.NotZero(t, id)
	_, err = pgrelay.Status(bg, d.producer, id)
	require.ErrorIs(t, err, pgrelay.ErrNotFound, "not visible before commit")
	require.NoError(t, tx.Commit(bg))

	st, err := pgrelay.Status(bg, d.producer, id)
	require.NoError(t, err)
	require.Equal(t, pgrelay.StatusPending, st)
	var payload string
	require.NoError(t, d.admin.QueryRow(bg, "SELECT payload FROM pgrelay.queue WHERE origin_id = $1", id).Scan(&payload))
	require.Equal(t, `{"order": 42}`, payload)

	tx, err = d.producer.Begin(bg)
	require.NoError(t, err)
	gone, err := pgrelay.Notify(bg, tx, "orders", "rolled back")
	require.NoError(t, err)
	require.NoError(t, tx.Rollback(bg))
	_, err = pgrelay.Status(bg, d.producer, gone)
	require.ErrorIs(t, err, pgrelay.ErrNotFound)

	// A pool (autocommit) is a Querier too.
	id2, err := pgrelay.Notify(bg, d.producer, "orders", "")
	require.NoError(t, err)
	require.Greater(t, id2, id)
}

// NotBefore and Delay set the due time; pgrelay's own checks refuse both at
// once and a negative delay, with their sentinels.
func TestNotifyDueTime(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	d.exec(t, "SELECT pgrelay.register('later', 'SELECT pg_catalog.length($1)')")

	due := func(id int64) (notBefore, enqueued time.Time) {
		t.Helper()
		require.NoError(t, d.admin.QueryRow(bg,
			"SELECT not_before, enqueued_at FROM pgrelay.queue WHERE origin_id = $1", id).Scan(&notBefore, &enqueued))
		return notBefore, enqueued
	}

	id, err := pgrelay.Notify(bg, d.producer, "later", "a", pgrelay.Delay(90*time.Minute))
	require.NoError(t, err)
	nb, enq := due(id)
	require.Equal(t, 90*time.Minute, nb.Sub(enq))

	at := time.Now().Add(48 * time.Hour).Truncate(time.Microsecond)
	id, err = pgrelay.Notify(bg, d.producer, "later", "b", pgrelay.NotBefore(at))
	require.NoError(t, err)
	nb, _ = due(id)
	require.True(t, at.Equal(nb), "not_before %v, want %v", nb, at)

	ids, err := pgrelay.NotifyMany(bg, d.producer, "later", []string{"c", "d"}, pgrelay.Delay(time.Hour))
	require.NoError(t, err)
	for _, id := range ids {
		nb, enq := due(id)
		require.Equal(t, time.Hour, nb.Sub(enq))
	}

	_, err = pgrelay.Notify(bg, d.producer, "later", "e", pgrelay.Delay(time.Hour), pgrelay.NotBefore(at))
	require.ErrorIs(t, err, pgrelay.ErrNotBeforeAndDelay)
	_, err = pgrelay.Notify(bg, d.producer, "later", "f", pgrelay.Delay(-time.Second))
	require.ErrorIs(t, err, pgrelay.ErrInvalidDueTime)
	_, err = pgrelay.NotifyMany(bg, d.producer, "later", []string{"g"}, pgrelay.Delay(-time.Second))
	require.ErrorIs(t, err, pgrelay.ErrInvalidDueTime)
}

// A refusal matches its sentinel and no other, keeps the server's error, and
// names the operation and the channel.
func TestNotifyErrors(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	d.exec(t, "SELECT pgrelay.register('orders', 'SELECT pg_catalog.length($1)')")

	_, err := pgrelay.Notify(bg, d.producer, "ordres", "x")
	require.ErrorIs(t, err, pgrelay.ErrUnknownChannel)
	require.NotErrorIs(t, err, pgrelay.ErrPayloadTooLarge)
	var pgErr *pgconn.PgError
	require.True(t, errors.As(err, &pgErr))
	require.Equal(t, "PR001", pgErr.Code)
	require.Contains(t, pgErr.Hint, "pgrelay.register()")
	require.Contains(t, err.Error(), `pgrelay: notify on channel "ordres": `)

	_, err = pgrelay.Notify(bg, d.producer, "orders", strings.Repeat("x", 1<<20+1))
	require.ErrorIs(t, err, pgrelay.ErrPayloadTooLarge)

	_, err = pgrelay.NotifyMany(bg, d.producer, "ordres", []string{"x"})
	require.ErrorIs(t, err, pgrelay.ErrUnknownChannel)
	_, err = pgrelay.NotifyMany(bg, d.producer, "orders", []string{"ok", strings.Repeat("x", 1<<20+1)})
	require.ErrorIs(t, err, pgrelay.ErrPayloadTooLarge)
	var n int
	require.NoError(t, d.admin.QueryRow(bg, "SELECT count(*) FROM pgrelay.queue").Scan(&n))
	require.Zero(t, n, "a refused batch enqueues nothing")

	// A failed statement aborts the caller's transaction, as any error does.
	tx, err := d.producer.Begin(bg)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(bg) }()
	_, err = pgrelay.Notify(bg, tx, "ordres", "x")
	require.ErrorIs(t, err, pgrelay.ErrUnknownChannel)
	_, err = pgrelay.Notify(bg, tx, "orders", "x")
	require.Error(t, err)
	require.NotErrorIs(t, err, pgrelay.ErrUnknownChannel)
	require.True(t, errors.As(err, &pgErr))
	require.Equal(t, "25P02", pgErr.Code) // in_failed_sql_transaction
}

// NotifyMany returns one id per payload, in order; an empty batch is no ids.
func TestNotifyMany(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	d.exec(t, "SELECT pgrelay.register('reindex', 'SELECT pg_catalog.length($1)')")

	payloads := []string{"doc-3", "doc-1", "doc-2", "doc-1"}
	tx, err := d.producer.Begin(bg)
	require.NoError(t, err)
	ids, err := pgrelay.NotifyMany(bg, tx, "reindex", payloads)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(bg))
	require.Len(t, ids, len(payloads))
	for i, id := range ids {
		var p string
		require.NoError(t, d.admin.QueryRow(bg, "SELECT payload FROM pgrelay.queue WHERE origin_id = $1", id).Scan(&p))
		require.Equal(t, payloads[i], p, "id %d is payload %d's", id, i)
		st, err := pgrelay.Status(bg, d.producer, id)
		require.NoError(t, err)
		require.Equal(t, pgrelay.StatusPending, st)
	}

	for _, empty := range [][]string{nil, {}} {
		ids, err := pgrelay.NotifyMany(bg, d.producer, "reindex", empty)
		require.NoError(t, err)
		require.Empty(t, ids)
	}
}

// Status follows an event to its end, and knows nothing of an unknown id.
func TestStatus(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	d.exec(t, "SELECT pgrelay.register('orders', 'SELECT pg_catalog.length($1)')")
	id, err := pgrelay.Notify(bg, d.producer, "orders", "x")
	require.NoError(t, err)

	// Run it as a Processor does: claim, then record the success.
	var proc int64
	require.NoError(t, d.admin.QueryRow(bg, "SELECT pgrelay._processor_start('single', 'host', 1, 'test')").Scan(&proc))
	var qid int64
	var claimedAt time.Time
	require.NoError(t, d.admin.QueryRow(bg,
		"SELECT id, dispatched_at FROM pgrelay._claim($1, 'single', false, 10, ARRAY['sql'])", proc).Scan(&qid, &claimedAt))
	st, err := pgrelay.Status(bg, d.producer, id)
	require.NoError(t, err)
	require.Equal(t, pgrelay.StatusInFlight, st)
	d.exec(t, "SELECT pgrelay._complete($1, ARRAY[$2::bigint], ARRAY[$3::timestamptz], ARRAY['succeeded'], ARRAY[NULL::text])", proc, qid, claimedAt)
	st, err = pgrelay.Status(bg, d.producer, id)
	require.NoError(t, err)
	require.Equal(t, pgrelay.StatusSucceeded, st)

	_, err = pgrelay.Status(bg, d.producer, 42)
	require.ErrorIs(t, err, pgrelay.ErrNotFound)
	require.Equal(t, "pgrelay: status of event 42: not found", err.Error())
}

// Priority, Key, Keys and UniqueFor reach notify() and notify_many(); out of
// range values fail with their sentinels; Key and Keys belong to one
// function each.
func TestNotifyProducerOptions(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	d.exec(t, "SELECT pgrelay.register('jobs', 'SELECT pg_catalog.length($1)')")
	priority := func(id int64) int {
		var p int
		require.NoError(t, d.admin.QueryRow(bg, "SELECT priority FROM pgrelay.queue WHERE id = $1", id).Scan(&p))
		return p
	}

	id, err := pgrelay.Notify(bg, d.producer, "jobs", "a", pgrelay.Priority(5))
	require.NoError(t, err)
	require.Equal(t, 5, priority(id))
	plain, err := pgrelay.Notify(bg, d.producer, "jobs", "a")
	require.NoError(t, err)
	require.Zero(t, priority(plain), "the channel's default")

	k1, err := pgrelay.Notify(bg, d.producer, "jobs", "b", pgrelay.Key("user:1"))
	require.NoError(t, err)
	k2, err := pgrelay.Notify(bg, d.producer, "jobs", "c", pgrelay.Key("user:1"))
	require.NoError(t, err)
	require.Equal(t, k1, k2, "the key's holder")
	w1, err := pgrelay.NotifyJSON(bg, d.producer, "jobs", map[string]int{"n": 1}, pgrelay.UniqueFor(time.Hour))
	require.NoError(t, err)
	w2, err := pgrelay.NotifyJSON(bg, d.producer, "jobs", map[string]int{"n": 1}, pgrelay.UniqueFor(time.Hour))
	require.NoError(t, err)
	require.Equal(t, w1, w2, "the payload is the key")

	ids, err := pgrelay.NotifyMany(bg, d.producer, "jobs", []string{"x", "y", "z"},
		pgrelay.Keys([]string{"k", "k", "other"}), pgrelay.Priority(-1))
	require.NoError(t, err)
	require.Len(t, ids, 3)
	require.Equal(t, ids[0], ids[1])
	require.NotEqual(t, ids[0], ids[2])
	require.Equal(t, -1, priority(ids[2]))
	more, err := pgrelay.NotifyMany(bg, d.producer, "jobs", []string{"x", "x"}, pgrelay.UniqueFor(time.Minute))
	require.NoError(t, err)
	require.Equal(t, more[0], more[1])

	_, err = pgrelay.Notify(bg, d.producer, "jobs", "a", pgrelay.Priority(40000))
	require.ErrorIs(t, err, pgrelay.ErrInvalidPriority)
	_, err = pgrelay.Notify(bg, d.producer, "jobs", "a", pgrelay.Priority(1<<40))
	require.ErrorIs(t, err, pgrelay.ErrInvalidPriority)
	_, err = pgrelay.NotifyMany(bg, d.producer, "jobs", []string{"a"}, pgrelay.Priority(-40000))
	require.ErrorIs(t, err, pgrelay.ErrInvalidPriority)
	_, err = pgrelay.Notify(bg, d.producer, "jobs", "a", pgrelay.UniqueFor(0))
	require.ErrorIs(t, err, pgrelay.ErrInvalidUniqueFor)
	_, err = pgrelay.Notify(bg, d.producer, "jobs", "a", pgrelay.UniqueFor(-time.Second))
	require.ErrorIs(t, err, pgrelay.ErrInvalidUniqueFor)
	_, err = pgrelay.NotifyMany(bg, d.producer, "jobs", []string{"a", "b"}, pgrelay.Keys([]string{"k"}))
	require.ErrorIs(t, err, pgrelay.ErrArrayLengthsDiffer)
	_, err = pgrelay.NotifyMany(bg, d.producer, "jobs", []string{"a"}, pgrelay.Keys(nil))
	require.ErrorIs(t, err, pgrelay.ErrArrayLengthsDiffer, "nil keys are no keys, not NULL")

	_, err = pgrelay.Notify(bg, d.producer, "jobs", "a", pgrelay.Keys([]string{"k"}))
	require.ErrorContains(t, err, "Keys of NotifyMany")
	_, err = pgrelay.NotifyMany(bg, d.producer, "jobs", []string{"a"}, pgrelay.Key("k"))
	require.ErrorContains(t, err, "Key is an option of Notify")
}
