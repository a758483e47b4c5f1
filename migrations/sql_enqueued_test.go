package migrations_test

// The enqueued event: a channel with publish_enqueued logs one 'enqueued'
// row per event in the transaction that enqueues it, so that the event's
// whole life reaches NATS; a channel without it logs none.

import (
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/events"
	"github.com/pgrelay/pgrelay/internal/testenv"
)

// enqueuedRow is an 'enqueued' row of pgrelay.log.
type enqueuedRow struct {
	ID, QueueID, OriginID int64
	Channel               string
	Attempt               int32
	Error                 *string
	Node                  int32
}

// enqueuedRows returns the 'enqueued' log rows q sees, in id order.
func enqueuedRows(t *testing.T, q querier) []enqueuedRow {
	t.Helper()
	rows, err := q.Query(bg, `SELECT id, queue_id, origin_id, channel, attempt, error, node
		FROM pgrelay.log WHERE event = 'enqueued' ORDER BY id`)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (enqueuedRow, error) {
		var e enqueuedRow
		err := r.Scan(&e.ID, &e.QueueID, &e.OriginID, &e.Channel, &e.Attempt, &e.Error, &e.Node)
		return e, err
	})
	require.NoError(t, err)
	return out
}

// requireEnqueuedOf requires that rows are the 'enqueued' rows of the
// events ids of channel, in that order: each names its event as queue and
// origin id, attempt 1, no error, this node.
func requireEnqueuedOf(t *testing.T, rows []enqueuedRow, channel string, ids ...int64) {
	t.Helper()
	require.Len(t, rows, len(ids), "one enqueued row per event")
	for i, id := range ids {
		r := rows[i]
		require.Equal(t, id, r.QueueID, "queue_id of %d", id)
		require.Equal(t, id, r.OriginID, "origin_id of %d", id)
		require.Equal(t, channel, r.Channel)
		require.Equal(t, int32(1), r.Attempt)
		require.Nil(t, r.Error)
		require.Equal(t, int32(0), r.Node)
		require.NotEqual(t, id, r.ID, "the log row has an id of its own")
	}
}

func TestPublishEnqueuedSetting(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	setting := func(ch string) bool {
		return testenv.One[bool](t, d.Pool, "SELECT publish_enqueued FROM pgrelay.channels WHERE channel = $1", ch)
	}
	d.register("off", "")
	require.False(t, setting("off"), "off by default")
	d.register("on", "p_publish_enqueued := true")
	require.True(t, setting("on"))
	d.emailChannel("mail", "p_publish_enqueued := true")
	require.True(t, setting("mail"), "create_channel passes it on")
	d.emailChannel("mail2", "")
	require.False(t, setting("mail2"))

	// register() of the same definition is a no-op; another value is a
	// different definition.
	d.register("on", "p_publish_enqueued := true")
	e := requireCode(t, d.Err("SELECT pgrelay.register('on', 'SELECT length($1)')"), "PR003")
	require.Contains(t, e.Message, "publish_enqueued (t registered, f given)")
	requireCode(t, d.Err("SELECT pgrelay.register('off', 'SELECT length($1)', p_publish_enqueued := true)"), "PR003")

	d.Exec("SELECT pgrelay.update('on', p_max_attempts := 9)")
	require.True(t, setting("on"), "update without p_publish_enqueued keeps it")
	d.Exec("SELECT pgrelay.update('on', p_publish_enqueued := false)")
	require.False(t, setting("on"))
	d.Exec("SELECT pgrelay.update('off', p_publish_enqueued := true)")
	require.True(t, setting("off"))
}

// notify(), notify_many() and a delayed notify() each log one 'enqueued'
// row per event in the enqueuing transaction: seen there, gone with a
// rollback. A channel without the setting logs none.
func TestEnqueuedLoggedInTheEnqueuingTransaction(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("on", "p_publish_enqueued := true")
	d.register("off", "")
	c := d.Conn(-1)

	inTx(t, c, func(tx pgx.Tx) {
		id := testenv.One[int64](t, tx, "SELECT pgrelay.notify('on', 'a')")
		requireEnqueuedOf(t, enqueuedRows(t, tx), "on", id)
	})
	require.Empty(t, enqueuedRows(t, d.Pool), "rolled back: no enqueued row")
	require.Zero(t, d.Count("SELECT count(*) FROM pgrelay.log"))

	id := d.notify("on", "a")
	requireEnqueuedOf(t, enqueuedRows(t, d.Pool), "on", id)
	d.Exec("DELETE FROM pgrelay.log")

	many := d.IDs("SELECT pgrelay.notify_many('on', ARRAY['b', 'c', 'd'])")
	requireEnqueuedOf(t, enqueuedRows(t, d.Pool), "on", many...)
	d.Exec("DELETE FROM pgrelay.log")
	require.Empty(t, d.IDs("SELECT pgrelay.notify_many('on', ARRAY[]::text[])"))
	require.Empty(t, enqueuedRows(t, d.Pool))

	delayed := testenv.One[int64](t, d.Pool, "SELECT pgrelay.notify('on', 'later', p_delay := '1 hour')")
	delayedMany := d.IDs("SELECT pgrelay.notify_many('on', ARRAY['x', 'y'], p_not_before := now() + interval '1 day')")
	requireEnqueuedOf(t, enqueuedRows(t, d.Pool), "on", append([]int64{delayed}, delayedMany...)...)
	d.Exec("DELETE FROM pgrelay.log")

	d.notify("off", "a")
	d.Exec("SELECT pgrelay.notify_many('off', ARRAY['b', 'c'])")
	d.Exec("SELECT pgrelay.notify('off', 'later', p_delay := '1 hour')")
	require.Zero(t, d.Count("SELECT count(*) FROM pgrelay.log"), "no setting, no log row")
}

// A deduplicated notify() logs 'deduplicated', never a second 'enqueued'.
func TestEnqueuedOnceWhenDeduplicated(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("dd", "p_deduplicate := true, p_publish_enqueued := true")
	first := d.notify("dd", "same")
	require.Equal(t, first, d.notify("dd", "same"))
	many := d.IDs("SELECT pgrelay.notify_many('dd', ARRAY['same', 'other', 'other'])")
	require.Equal(t, first, many[0])
	require.Equal(t, many[1], many[2])
	requireEnqueuedOf(t, enqueuedRows(t, d.Pool), "dd", first, many[1])
	require.Equal(t, 3, d.Count("SELECT count(*) FROM pgrelay.log WHERE event = 'deduplicated'"))
}

// What is not a new event logs no 'enqueued': a retry row after a failed
// attempt (its chain's enqueued row came first) and a dead letter retried by
// an admin (its 'retried' row is the new chain's start). A direct insert
// into pgrelay.queue is an event enqueued and logs one; the email a
// notifier send() enqueues too.
func TestEnqueuedOnlyForNewEvents(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("on", "p_publish_enqueued := true, p_max_attempts := 2, p_retry_delay := '0'")
	id := d.notify("on", "a")
	proc := startProcessor(t, d.Pool)
	rows := claim(t, d.Pool, proc, 10)
	require.Len(t, rows, 1)
	complete(t, d.Pool, proc, rows[0], "failed", "boom")
	rows = claim(t, d.Pool, proc, 10)
	require.Len(t, rows, 1)
	require.Equal(t, 2, rows[0].Attempt)
	complete(t, d.Pool, proc, rows[0], "failed", "boom again")
	require.Equal(t, []string{"enqueued", "failed", "gave_up"},
		testenv.Column[string](t, d.Pool, "SELECT event FROM pgrelay.log WHERE origin_id = $1 ORDER BY id", id),
		"the enqueued row first, none for the retry row")

	dl := testenv.One[int64](t, d.Pool, "SELECT id FROM pgrelay.dead_letters WHERE origin_id = $1", id)
	again := testenv.One[int64](t, d.Pool, "SELECT pgrelay.retry($1)", dl)
	require.Equal(t, []string{"enqueued", "failed", "gave_up", "retried"},
		testenv.Column[string](t, d.Pool, "SELECT event FROM pgrelay.log WHERE origin_id = $1 ORDER BY id", id))
	require.Equal(t, again, testenv.One[int64](t, d.Pool, "SELECT queue_id FROM pgrelay.log WHERE event = 'retried'"))

	d.Exec("DELETE FROM pgrelay.log")
	direct := d.IDs("INSERT INTO pgrelay.queue (channel, payload) VALUES ('on', 'd1'), ('on', 'd2') RETURNING id")
	requireEnqueuedOf(t, enqueuedRows(t, d.Pool), "on", direct...)

	d.Exec("DELETE FROM pgrelay.log")
	d.emailChannel("mail", "p_publish_enqueued := true")
	n := testenv.One[int64](t, d.Pool, "SELECT pgrelay_notifier.send('mail', ARRAY['bob@example.org'], 's', 'b')")
	q := testenv.One[int64](t, d.Pool, "SELECT id FROM pgrelay.queue WHERE channel = 'mail' AND payload = $1", itoa(n))
	requireEnqueuedOf(t, enqueuedRows(t, d.Pool), "mail", q)
}

// The log's event constraint and events.LogKinds name the same events.
func TestLogEventsAreEventsLogKinds(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	def := d.Text(`SELECT pg_get_constraintdef(oid) FROM pg_constraint
		WHERE conname = 'log_event' AND conrelid = 'pgrelay.log'::regclass`)
	want := "CHECK ((event = ANY (ARRAY["
	for i, k := range events.LogKinds() {
		if i > 0 {
			want += ", "
		}
		want += "'" + string(k) + "'::text"
	}
	require.Equal(t, want+"])))", def)
}
