package migrations_test

// An event's priority in its log rows and its dead letter (NULL for 0), and
// a retried dead letter back at its event's priority.

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/testenv"
)

// logPriorities is "event:priority" for each log row matching where, in id
// order; "-" stands for NULL.
// logPriorities lists the matching log rows as event:priority in the order
// they were written. Not ORDER BY id: an id puts its node between the
// counter's milliseconds and sequence, so of two rows drawn within one
// millisecond of the counter on nodes 5 and 1 (the decommission below), node
// 5's sorts last whatever came first. This database has one counter: its
// value, the id without the node, is the order of writing.
func (d *sqlDB) logPriorities(where string, args ...any) []string {
	d.T.Helper()
	return testenv.Column[string](d.T, d.Pool, `SELECT event || ':' || COALESCE(priority::text, '-')
		FROM pgrelay.log WHERE `+where+` ORDER BY id >> 22, id & 4095`, args...)
}

func (d *sqlDB) notifyPrio(channel, payload string, priority int) int64 {
	d.T.Helper()
	return testenv.One[int64](d.T, d.Pool, "SELECT pgrelay.notify($1, $2, p_priority := $3)", channel, payload, priority)
}

// Every function that logs an event writes the event's priority, NULL for
// priority 0: enqueued (notify, notify_many, a direct insert), deduplicated
// (the call's), failed, gave_up, retried, discarded, snoozed, cancelled,
// rescued, succeeded (claimed and in a direct batch), adopted, and a
// decommission's gave_up; and every dead letter.
func TestLogRowsCarryPriority(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("c", "p_max_attempts := 2, p_retry_delay := '0', p_publish_enqueued := true")
	d.register("dd", "p_deduplicate := true")
	d.register("pin", "p_node_restricted := true")
	proc := startProcessor(t, d.Pool)
	claimOne := func(id int64) claimedRow {
		t.Helper()
		got := claim(t, d.Pool, proc, 1)
		require.Len(t, got, 1)
		require.Equal(t, id, got[0].OriginID)
		return got[0]
	}

	// Failed, gave up, retried, snoozed, cancelled.
	hi := d.notifyPrio("c", "hi", 5)
	complete(t, d.Pool, proc, claimOne(hi), "failed", "one")
	complete(t, d.Pool, proc, claimOne(hi), "failed", "two")
	require.Equal(t, "5", d.Text("SELECT priority::text FROM pgrelay.dead_letters WHERE origin_id = $1", hi))
	d.Exec("SELECT pgrelay.retry(id) FROM pgrelay.dead_letters WHERE origin_id = $1", hi)
	c := claimOne(hi)
	var done int32
	var gaveUp []int64
	require.NoError(t, d.Pool.QueryRow(bg, "SELECT done, gave_up FROM pgrelay._snooze($1, $2, $3, $4::interval[])",
		proc, []int64{c.ID}, []time.Time{c.DispatchedAt}, []string{"0"}).Scan(&done, &gaveUp))
	require.EqualValues(t, 1, done)
	require.True(t, testenv.One[bool](t, d.Pool, "SELECT pgrelay.cancel($1)", hi))
	require.Equal(t, []string{"enqueued:5", "failed:5", "gave_up:5", "retried:5", "snoozed:5", "cancelled:5"},
		d.logPriorities("origin_id = $1", hi))

	// The same with priority 0: NULL everywhere; then discarded.
	lo := d.notify("c", "lo")
	complete(t, d.Pool, proc, claimOne(lo), "failed", "one")
	complete(t, d.Pool, proc, claimOne(lo), "failed", "two")
	require.Equal(t, "-", d.Text("SELECT COALESCE(priority::text, '-') FROM pgrelay.dead_letters WHERE origin_id = $1", lo))
	d.Exec("SELECT pgrelay.discard(id) FROM pgrelay.dead_letters WHERE origin_id = $1", lo)
	require.Equal(t, []string{"enqueued:-", "failed:-", "gave_up:-", "discarded:-"}, d.logPriorities("origin_id = $1", lo))

	// notify_many, a direct insert, and a discarded event of priority 5.
	many := testenv.Column[int64](t, d.Pool, "SELECT pgrelay.notify_many('c', ARRAY['m1', 'm2'], p_priority := -3)")
	direct := testenv.One[int64](t, d.Pool, "INSERT INTO pgrelay.queue (channel, payload, priority) VALUES ('c', 'direct', 4) RETURNING id")
	require.Equal(t, []string{"enqueued:-3", "enqueued:-3"}, d.logPriorities("origin_id = ANY ($1)", many))
	require.Equal(t, []string{"enqueued:4"}, d.logPriorities("origin_id = $1", direct))
	complete(t, d.Pool, proc, claimOne(direct), "failed", "one")
	complete(t, d.Pool, proc, claimOne(direct), "failed", "two")
	d.Exec("SELECT pgrelay.discard(id) FROM pgrelay.dead_letters WHERE origin_id = $1", direct)
	require.Equal(t, []string{"enqueued:4", "failed:4", "gave_up:4", "discarded:4"}, d.logPriorities("origin_id = $1", direct))

	// Succeeded: claimed, and in a direct batch (the successes' statement).
	complete(t, d.Pool, proc, claimOne(many[0]), "succeeded", "")
	tx, err := d.Pool.Begin(bg)
	require.NoError(t, err)
	require.EqualValues(t, 1, testenv.One[int32](t, tx, `SELECT pgrelay._complete(NULL, ARRAY[$1::bigint], NULL,
		ARRAY['succeeded'], NULL)`, many[1]))
	require.NoError(t, tx.Commit(bg))
	require.Equal(t, []string{"enqueued:-3", "enqueued:-3", "succeeded:-3", "succeeded:-3"},
		d.logPriorities("origin_id = ANY ($1)", many))

	// Deduplicated: the absorbed call's priority, on the row that absorbed it.
	tx, err = d.Pool.Begin(bg)
	require.NoError(t, err)
	kept := testenv.One[int64](t, tx, "SELECT pgrelay.notify('dd', 'x')")
	require.Equal(t, kept, testenv.One[int64](t, tx, "SELECT pgrelay.notify('dd', 'x', p_priority := 9)"))
	require.NoError(t, tx.Commit(bg))
	require.Equal(t, []string{"deduplicated:9"}, d.logPriorities("queue_id = $1 AND event = 'deduplicated'", kept))
	// A unique key held: the same.
	k1 := testenv.One[int64](t, d.Pool, "SELECT pgrelay.notify('c', 'k', p_priority := 2, p_key := 'k')")
	require.Equal(t, k1, testenv.One[int64](t, d.Pool, "SELECT pgrelay.notify('c', 'k', p_priority := 6, p_key := 'k')"))
	require.Equal(t, []string{"deduplicated:6"}, d.logPriorities("queue_id = $1 AND event = 'deduplicated'", k1))
	d.Exec("DELETE FROM pgrelay.queue")

	// Rescued, and given up by a rescue (with its dead letter).
	r := d.notifyPrio("c", "rescued", 7)
	dead := startProcessor(t, d.Pool)
	require.Len(t, claim(t, d.Pool, dead, 1), 1)
	d.Exec("UPDATE pgrelay.processors SET last_seen = now() - interval '1 minute' WHERE processor_id = $1", dead)
	require.EqualValues(t, 1, testenv.One[int32](t, d.Pool, "SELECT pgrelay._rescue($1, '30 seconds', '1 hour')", proc))
	dead = startProcessor(t, d.Pool)
	require.Len(t, claim(t, d.Pool, dead, 1), 1)
	d.Exec("UPDATE pgrelay.processors SET last_seen = now() - interval '1 minute' WHERE processor_id = $1", dead)
	require.EqualValues(t, 1, testenv.One[int32](t, d.Pool, "SELECT pgrelay._rescue($1, '30 seconds', '1 hour')", proc))
	require.Equal(t, []string{"enqueued:7", "rescued:7", "gave_up:7"}, d.logPriorities("origin_id = $1", r))
	require.Equal(t, "7", d.Text("SELECT priority::text FROM pgrelay.dead_letters WHERE origin_id = $1", r))

	// A decommission: the pinned row given up, the unrestricted one adopted.
	n5, n1 := d.Conn(5), d.Conn(1)
	testenv.One[int64](t, n5, "SELECT pgrelay._processor_start('multi-node', 'host5', 5, 'test')")
	pinned := testenv.One[int64](t, n5, "SELECT pgrelay.notify('pin', 'p', p_priority := 3)")
	adopted := testenv.One[int64](t, n5, "SELECT pgrelay.notify('c', 'u', p_priority := 8)")
	testenv.One[int64](t, n1, "SELECT pgrelay._processor_start('multi-node', 'host1', 1, 'test')")
	d.Exec("UPDATE pgrelay.processors SET last_seen = now() - interval '1 hour' WHERE node_id = 5")
	d.Exec("UPDATE pgrelay.nodes SET last_seen = now() - interval '1 hour' WHERE node_id = 5")
	require.EqualValues(t, 1, testenv.One[int64](t, d.Pool, "SELECT pgrelay.decommission(5, '10 seconds')"))
	require.Equal(t, []string{"gave_up:3"}, d.logPriorities("origin_id = $1", pinned))
	require.Equal(t, "3", d.Text("SELECT priority::text FROM pgrelay.dead_letters WHERE origin_id = $1", pinned))
	require.Equal(t, []string{"enqueued:8", "adopted:8"}, d.logPriorities("origin_id = $1", adopted))
}

// A retried dead letter starts again at its event's priority, not at its
// channel's default: retry and retry_all. One written before the column
// existed (NULL) starts at 0.
func TestDeadLetterRetryKeepsPriority(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("one", "p_max_attempts := 1, p_priority := 2")
	proc := startProcessor(t, d.Pool)
	first := d.notifyPrio("one", "a", 7)
	giveUp(t, d.Pool, proc, "boom")
	second := d.notifyPrio("one", "b", 7)
	giveUp(t, d.Pool, proc, "boom")
	third := d.notifyPrio("one", "c", 7)
	giveUp(t, d.Pool, proc, "boom")
	d.Exec("UPDATE pgrelay.dead_letters SET priority = NULL WHERE origin_id = $1", third)

	d.Exec("SELECT pgrelay.retry(id) FROM pgrelay.dead_letters WHERE origin_id = $1", first)
	d.Exec("UPDATE pgrelay.dead_letters SET ended_at = now() - interval '1 day' WHERE origin_id = $1", third)
	require.EqualValues(t, 1, testenv.One[int64](t, d.Pool, "SELECT pgrelay.retry_all('one', now() - interval '1 hour')"))
	d.Exec("SELECT pgrelay.retry(id) FROM pgrelay.dead_letters WHERE origin_id = $1", third)
	require.Equal(t, []string{"7", "7", "0"}, testenv.Column[string](t, d.Pool,
		"SELECT priority::text FROM pgrelay.queue WHERE origin_id = ANY ($1) ORDER BY origin_id", []int64{first, second, third}))
	require.Equal(t, []string{"gave_up:7", "retried:7"}, d.logPriorities("origin_id = $1", first))
	require.Equal(t, []string{"gave_up:7", "retried:7"}, d.logPriorities("origin_id = $1", second))
}
