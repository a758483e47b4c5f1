package migrations_test

// The producer API: pgrelay.notify, pgrelay.notify_many, deduplication and
// node-restricted channels.

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/testenv"
)

func TestNotifyInsertsRow(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("c", "")
	id := d.notify("c", `{"order": 1}`)

	var (
		rowID, origin                  int64
		channel, payload               string
		owner                          int32
		runIn, retryOf                 *int64
		attempt                        int32
		ready, noExpiry, notDispatched bool
		enqueuedAt                     time.Time
	)
	require.NoError(t, d.Pool.QueryRow(bg, `
		SELECT id, origin_id, channel, payload, owner_node, run_in_node::int8, retry_of, attempt,
		       not_before <= now(), expires_at IS NULL, dispatched_at IS NULL AND dispatched_by IS NULL,
		       enqueued_at
		  FROM pgrelay.queue`).Scan(&rowID, &origin, &channel, &payload, &owner, &runIn, &retryOf, &attempt,
		&ready, &noExpiry, &notDispatched, &enqueuedAt))
	require.Equal(t, id, rowID)
	require.Equal(t, id, origin)
	require.Equal(t, "c", channel)
	require.Equal(t, `{"order": 1}`, payload)
	require.Zero(t, owner)
	require.Nil(t, runIn)
	require.Nil(t, retryOf)
	require.EqualValues(t, 1, attempt)
	require.True(t, ready)
	require.True(t, noExpiry)
	require.True(t, notDispatched)
	require.WithinDuration(t, time.Now(), enqueuedAt, time.Minute)

	// An empty payload is a payload.
	id2 := d.notify("c", "")
	require.Greater(t, id2, id)
	d.requireStatus(id2, "pending")
}

func TestNotifyRejects(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("c", "")

	pgErr := requireCode(t, d.Err("SELECT pgrelay.notify('nope', 'x')"), "PR001")
	require.Contains(t, pgErr.Message, "nope")
	requireCode(t, d.Err("SELECT pgrelay.notify(NULL, 'x')"), "PR001")
	requireCode(t, d.Err("SELECT pgrelay.notify('c', NULL)"), "PR005")
	requireCode(t, d.Err("SELECT pgrelay.notify('c', repeat('x', 1048577))"), "PR006")
	// The limit is in bytes, not characters: 524289 two-byte characters.
	requireCode(t, d.Err("SELECT pgrelay.notify('c', repeat('é', 524289))"), "PR006")
	require.Zero(t, d.Count("SELECT count(*) FROM pgrelay.queue"), "nothing inserted by a rejected call")

	// Exactly 1 MiB is accepted.
	id := testenv.One[int64](t, d.Pool, "SELECT pgrelay.notify('c', repeat('x', 1048576))")
	require.Equal(t, 1048576, d.Count("SELECT octet_length(payload) FROM pgrelay.queue WHERE id = $1", id))
	require.Equal(t, 1, d.Count("SELECT count(*) FROM pgrelay.queue"))
}

// The event exists only if the caller's transaction commits.
func TestNotifyIsTransactional(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("c", "")
	producer := d.Conn(-1)
	other := d.Conn(-1)

	tx, err := producer.Begin(bg)
	require.NoError(t, err)
	id := testenv.One[int64](t, tx, "SELECT pgrelay.notify('c', 'x')")
	require.Zero(t, testenv.One[int64](t, other, "SELECT count(*) FROM pgrelay.queue"), "invisible before commit")
	require.Nil(t, testenv.One[*string](t, other, "SELECT pgrelay.status($1)", id))
	require.NoError(t, tx.Rollback(bg))
	require.Zero(t, testenv.One[int64](t, other, "SELECT count(*) FROM pgrelay.queue"))
	require.Nil(t, testenv.One[*string](t, other, "SELECT pgrelay.status($1)", id))

	tx, err = producer.Begin(bg)
	require.NoError(t, err)
	id = testenv.One[int64](t, tx, "SELECT pgrelay.notify('c', 'y')")
	require.Zero(t, testenv.One[int64](t, other, "SELECT count(*) FROM pgrelay.queue"))
	require.NoError(t, tx.Commit(bg))
	require.Equal(t, id, testenv.One[int64](t, other, "SELECT id FROM pgrelay.queue"))
	require.Equal(t, "pending", testenv.One[string](t, other, "SELECT pgrelay.status($1)", id))
}

// listenWakes LISTENs on 'pgrelay' on a connection of its own; next
// returns the next wake-up's payload, none says that no wake-up came before
// a marker notification sent now.
type wakeListener struct {
	t    *testing.T
	d    *sqlDB
	conn *pgx.Conn
	ctx  context.Context
}

func listenWakes(t *testing.T, d *sqlDB) *wakeListener {
	t.Helper()
	l := &wakeListener{t: t, d: d, conn: d.Conn(-1)}
	_, err := l.conn.Exec(bg, "LISTEN pgrelay")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(bg, 30*time.Second)
	t.Cleanup(cancel)
	l.ctx = ctx
	return l
}

func (l *wakeListener) next() string {
	l.t.Helper()
	n, err := l.conn.WaitForNotification(l.ctx)
	require.NoError(l.t, err)
	require.Equal(l.t, "pgrelay", n.Channel)
	return n.Payload
}

// none asserts that no wake-up is waiting: the next notification is a
// marker sent after everything before it committed.
func (l *wakeListener) none(msg string) {
	l.t.Helper()
	l.d.Exec("SELECT pg_notify('pgrelay', 'marker')")
	require.Equal(l.t, "marker", l.next(), msg)
}

// arm arms the wake-up slots as a Processor does; it returns how many it armed.
func (d *sqlDB) arm() int {
	d.T.Helper()
	return testenv.One[int](d.T, d.Pool, "SELECT pgrelay._arm_wakes()")
}

// notify wakes a listening Processor on the 'pgrelay' channel, at commit,
// when a Processor armed the channel's slot.
func TestNotifyWakesListeners(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("c", "")
	l := listenWakes(t, d)
	d.arm()
	d.notify("c", "x")
	l.next()

	// notify_many wakes too (once per statement is enough).
	d.arm()
	_, err := d.Pool.Exec(bg, "SELECT pgrelay.notify_many('c', ARRAY['a', 'b'])")
	require.NoError(t, err)
	l.next()
	l.none("one wake-up for the statement")
}

// A producer sends a wake-up only when a Processor armed its channel's slot,
// and takes it: the producers after it send none until the slot is armed
// again, so their commits do not line up behind NOTIFY's commit lock.
// Producers that cannot be sure send one: a transaction that is not READ
// COMMITTED (its snapshot may predate the arming), and any producer while
// the slot is missing (an unlogged table after a crash).
func TestNotifyWakesOnlyWhenAsked(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("c", "")
	slot := testenv.One[int](t, d.Pool, "SELECT pgrelay._wake_slot('c')")
	armed := func() bool {
		return testenv.One[bool](t, d.Pool, "SELECT armed FROM pgrelay.wake_slots WHERE slot = $1", slot)
	}
	l := listenWakes(t, d)
	require.Equal(t, 1024, d.Count("SELECT count(*) FROM pgrelay.wake_slots WHERE armed"), "armed from the start")
	require.Zero(t, d.arm(), "nothing to arm")

	d.notify("c", "1")
	l.next()
	require.False(t, armed(), "the first producer took the slot")
	d.notify("c", "2")
	d.Exec("SELECT pgrelay.notify_many('c', ARRAY['3', '4'])")
	l.none("the slot is taken: no wake-up")

	require.Equal(t, 1, d.arm())
	d.notify("c", "5")
	l.next()
	l.none("one wake-up per arming")

	// A producer that rolls back gives the slot back.
	require.Equal(t, 1, d.arm())
	tx, err := d.Pool.Begin(bg)
	require.NoError(t, err)
	_, err = tx.Exec(bg, "SELECT pgrelay.notify('c', 'rolled back')")
	require.NoError(t, err)
	require.NoError(t, tx.Rollback(bg))
	require.True(t, armed())

	// Two producers at once: the second finds the slot being taken, neither
	// waits, one wake-up.
	p1, p2 := d.Conn(-1), d.Conn(-1)
	t1, err := p1.Begin(bg)
	require.NoError(t, err)
	_, err = t1.Exec(bg, "SELECT pgrelay.notify('c', 'first')")
	require.NoError(t, err)
	t2, err := p2.Begin(bg)
	require.NoError(t, err)
	_, err = t2.Exec(bg, "SET LOCAL lock_timeout = '5s'")
	require.NoError(t, err)
	_, err = t2.Exec(bg, "SELECT pgrelay.notify('c', 'second')")
	require.NoError(t, err, "the second producer does not wait for the first")
	require.NoError(t, t2.Commit(bg))
	l.none("the second producer sends nothing")
	require.NoError(t, t1.Commit(bg))
	l.next()
	l.none("one wake-up for both")

	// Not READ COMMITTED: always.
	require.False(t, armed())
	for _, iso := range []string{"REPEATABLE READ", "SERIALIZABLE"} {
		tx, err := d.Pool.BeginTx(bg, pgx.TxOptions{IsoLevel: pgx.TxIsoLevel(iso)})
		require.NoError(t, err)
		_, err = tx.Exec(bg, "SELECT pgrelay.notify('c', $1)", iso)
		require.NoError(t, err)
		require.NoError(t, tx.Commit(bg))
		l.next()
	}

	// Slots missing: always, until a Processor arms them again.
	d.Exec("DELETE FROM pgrelay.wake_slots")
	d.notify("c", "6")
	l.next()
	d.notify("c", "7")
	l.next()
	require.Equal(t, 1024, d.arm())
	d.notify("c", "8")
	l.next()
	d.notify("c", "9")
	l.none("armed again: the first takes it")

	// One slot missing (pgrelay's roles delete none; an owner could): its
	// producers notify every time; an arming that arms nothing else leaves
	// it missing (it counts the table only when it is empty).
	d.Exec("DELETE FROM pgrelay.wake_slots WHERE slot = pgrelay._wake_slot('c')")
	require.Equal(t, 0, d.arm(), "only the missing slot was taken")
	d.notify("c", "10")
	l.next()
	d.notify("c", "11")
	l.next()
}

// The wake-up names the channel by a digest with this node's wake-up key
// (_wake_hint):
// anyone may LISTEN, and a listener outside pgrelay's roles must not learn
// channel names. A statement or transaction enqueuing on several channels
// sends one per channel whose slot was armed.
func TestNotifyWakeNamesChannel(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("orders", "")
	d.register("signups", "")
	require.NotEqual(t, testenv.One[int](t, d.Pool, "SELECT pgrelay._wake_slot('orders')"),
		testenv.One[int](t, d.Pool, "SELECT pgrelay._wake_slot('signups')"), "the test needs two slots")
	// What the Processor asks for (store.WakeHints) is what a wake-up sends.
	hint := func(ch string) string {
		h := testenv.One[string](t, d.Pool, "SELECT pgrelay._wake_hint($1)", ch)
		require.Equal(t, testenv.One[string](t, d.Pool, "SELECT md5(wake_key || $1) FROM pgrelay.this_node", ch), h)
		return h
	}
	l := listenWakes(t, d)
	next := func() string {
		t.Helper()
		p := l.next()
		require.NotContains(t, p, "orders")
		require.NotContains(t, p, "signups")
		return p
	}
	d.notify("orders", "x")
	require.Equal(t, hint("orders"), next())
	d.Exec("SELECT pgrelay.notify_many('signups', ARRAY['a', 'b'])")
	require.Equal(t, hint("signups"), next())
	// One statement, two channels.
	d.arm()
	d.Exec("INSERT INTO pgrelay.queue (channel, payload) VALUES ('orders', 'y'), ('signups', 'z')")
	require.ElementsMatch(t, []string{hint("orders"), hint("signups")}, []string{next(), next()})
	// A transaction notifying two channels wakes once per channel.
	d.arm()
	tx, err := d.Pool.Begin(bg)
	require.NoError(t, err)
	for _, ch := range []string{"orders", "signups", "orders"} {
		_, err := tx.Exec(bg, "SELECT pgrelay.notify($1, 'p')", ch)
		require.NoError(t, err)
	}
	require.NoError(t, tx.Commit(bg))
	require.ElementsMatch(t, []string{hint("orders"), hint("signups")}, []string{next(), next()})
	l.none("nothing more")
}

// _wake_xids_ended: false while a transaction in progress at the snapshot
// runs, true once it ended. (The snapshot names only the producer: other
// tests share the server.)
func TestWakeXidsEnded(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("c", "")
	p := d.Conn(-1)
	tx, err := p.Begin(bg)
	require.NoError(t, err)
	_, err = tx.Exec(bg, "SELECT pgrelay.notify('c', 'x')")
	require.NoError(t, err)
	xid := testenv.One[int64](t, tx, "SELECT pg_current_xact_id()::text::bigint")
	snap := fmt.Sprintf("%d:%d:%d", xid, xid+1, xid)
	require.False(t, testenv.One[bool](t, d.Pool, "SELECT pgrelay._wake_xids_ended($1::pg_snapshot)", snap))
	require.NoError(t, tx.Commit(bg))
	require.True(t, testenv.One[bool](t, d.Pool, "SELECT pgrelay._wake_xids_ended($1::pg_snapshot)", snap))
}

func TestNotifyExpireAfter(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("c", "p_expire_after := '90 minutes'")
	d.register("forever", "")
	id := d.notify("c", "x")
	require.Equal(t, "01:30:00", testenv.One[string](t, d.Pool, "SELECT (expires_at - enqueued_at)::text FROM pgrelay.queue WHERE id = $1", id))
	id = d.notify("forever", "x")
	require.Nil(t, testenv.One[*time.Time](t, d.Pool, "SELECT expires_at FROM pgrelay.queue WHERE id = $1", id))
	ids := testenv.Column[int64](t, d.Pool, "SELECT pgrelay.notify_many('c', ARRAY['a', 'b'])")
	require.Equal(t, 2, d.Count("SELECT count(*) FROM pgrelay.queue WHERE id = ANY($1) AND expires_at = enqueued_at + interval '90 minutes'", ids))
}

func TestNotifyMany(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("c", "")
	d.register("paused", "")
	d.Exec("SELECT pgrelay.update('paused', p_paused := true)")

	// Ids come back in input order, one per payload, each its own origin.
	in := make([]string, 500)
	for i := range in {
		in[i] = fmt.Sprintf("p%03d", (i*37)%500) // not in sorted order
	}
	got := testenv.Column[int64](t, d.Pool, "SELECT pgrelay.notify_many('c', $1)", in)
	require.Len(t, got, len(in))
	for i, id := range got {
		var payload string
		var origin int64
		require.NoError(t, d.Pool.QueryRow(bg, "SELECT payload, origin_id FROM pgrelay.queue WHERE id = $1", id).Scan(&payload, &origin))
		require.Equal(t, in[i], payload, "id %d of the result is payload %d of the input", i, i)
		require.Equal(t, id, origin)
	}
	require.Equal(t, len(in), d.Count("SELECT count(*) FROM pgrelay.queue"))

	// Duplicates in the input without deduplicate: one row each.
	got = testenv.Column[int64](t, d.Pool, "SELECT pgrelay.notify_many('c', ARRAY['same', 'same'])")
	require.Len(t, got, 2)
	require.NotEqual(t, got[0], got[1])

	// An empty array inserts and returns nothing.
	require.Empty(t, testenv.Column[int64](t, d.Pool, "SELECT pgrelay.notify_many('c', ARRAY[]::text[])"))

	// Same rules as notify: one bad payload rejects the whole call.
	n := d.Count("SELECT count(*) FROM pgrelay.queue")
	requireCode(t, d.Err("SELECT pgrelay.notify_many('c', ARRAY['ok', NULL, 'ok'])"), "PR005")
	requireCode(t, d.Err("SELECT pgrelay.notify_many('c', ARRAY['ok', repeat('x', 1048577)])"), "PR006")
	requireCode(t, d.Err("SELECT pgrelay.notify_many('c', NULL)"), "PR005")
	requireCode(t, d.Err("SELECT pgrelay.notify_many('nope', ARRAY['ok'])"), "PR001")
	requireCode(t, d.Err("SELECT pgrelay.notify_many(NULL, ARRAY['ok'])"), "PR001")
	require.Equal(t, n, d.Count("SELECT count(*) FROM pgrelay.queue"), "nothing inserted by a rejected call")
	got = testenv.Column[int64](t, d.Pool, "SELECT pgrelay.notify_many('c', ARRAY[repeat('x', 1048576)])")
	require.Len(t, got, 1)
}

// With deduplicate, an identical payload still pending absorbs the call.
func TestNotifyDeduplicates(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("c", "p_deduplicate := true")
	d.register("c2", "p_deduplicate := true")
	d.register("plain", "")

	first := d.notify("c", "x")
	again := d.notify("c", "x")
	require.Equal(t, first, again, "the pending row's id is returned")
	require.Equal(t, 1, d.Count("SELECT count(*) FROM pgrelay.queue"), "nothing inserted")

	var queueID, origin int64
	var event, channel string
	var attempt int32
	require.NoError(t, d.Pool.QueryRow(bg, "SELECT queue_id, origin_id, event, channel, attempt FROM pgrelay.log").
		Scan(&queueID, &origin, &event, &channel, &attempt))
	require.Equal(t, "deduplicated", event)
	require.Equal(t, first, queueID, "queue_id names the absorbing row")
	require.Equal(t, "c", channel)
	require.EqualValues(t, 1, attempt)
	require.NotEqual(t, first, origin, "the suppressed call gets an id of its own")
	require.Greater(t, origin, first)
	d.requireStatus(origin, "deduplicated")
	d.requireStatus(first, "pending")

	// Other payloads, other channels and channels without deduplicate are not absorbed.
	require.NotEqual(t, first, d.notify("c", "y"))
	require.NotEqual(t, first, d.notify("c2", "x"))
	p1 := d.notify("plain", "x")
	require.NotEqual(t, p1, d.notify("plain", "x"))

	// Once dispatched, the row no longer absorbs: a new row is inserted.
	d.Exec("UPDATE pgrelay.queue SET dispatched_at = now(), dispatched_by = 1 WHERE id = $1", first)
	third := d.notify("c", "x")
	require.NotEqual(t, first, third)
	require.Equal(t, third, d.notify("c", "x"), "and the new pending row absorbs the next one")
	require.Equal(t, 2, d.Count("SELECT count(*) FROM pgrelay.queue WHERE channel = 'c' AND payload = 'x'"))
	require.Equal(t, 2, d.Count("SELECT count(*) FROM pgrelay.log WHERE event = 'deduplicated'"))

	// notify_many follows the same rule, within the call too.
	got := testenv.Column[int64](t, d.Pool, "SELECT pgrelay.notify_many('c', ARRAY['x', 'z', 'z'])")
	require.Len(t, got, 3)
	require.Equal(t, third, got[0])
	require.Equal(t, got[1], got[2])
	require.Equal(t, 1, d.Count("SELECT count(*) FROM pgrelay.queue WHERE channel = 'c' AND payload = 'z'"))
	require.Equal(t, 4, d.Count("SELECT count(*) FROM pgrelay.log WHERE event = 'deduplicated'"))
}

// Two producers notifying the same payload at once, each in an open
// transaction: the second waits for the first to commit and then returns its
// row; exactly one row is inserted.
func TestNotifyDeduplicatesConcurrently(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("c", "p_deduplicate := true")
	c1, c2 := d.Conn(-1), d.Conn(-1)

	tx1, err := c1.Begin(bg)
	require.NoError(t, err)
	id1 := testenv.One[int64](t, tx1, "SELECT pgrelay.notify('c', 'same')")

	tx2, err := c2.Begin(bg)
	require.NoError(t, err)
	type result struct {
		id  int64
		err error
	}
	done := make(chan result, 1)
	go func() {
		var id int64
		err := tx2.QueryRow(bg, "SELECT pgrelay.notify('c', 'same')").Scan(&id)
		done <- result{id, err}
	}()
	waitUntilBlocked(t, d.Pool, c2.PgConn().PID())
	select {
	case r := <-done:
		t.Fatalf("the second notify returned before the first committed: %+v", r)
	default:
	}
	require.NoError(t, tx1.Commit(bg))
	r := <-done
	require.NoError(t, r.err)
	require.Equal(t, id1, r.id)
	require.NoError(t, tx2.Commit(bg))
	require.Equal(t, 1, d.Count("SELECT count(*) FROM pgrelay.queue"))
	require.Equal(t, 1, d.Count("SELECT count(*) FROM pgrelay.log WHERE event = 'deduplicated' AND queue_id = $1", id1))

	// When the first rolls back instead, the second inserts its own row.
	tx1, err = c1.Begin(bg)
	require.NoError(t, err)
	testenv.One[int64](t, tx1, "SELECT pgrelay.notify('c', 'other')")
	tx2, err = c2.Begin(bg)
	require.NoError(t, err)
	go func() {
		var id int64
		err := tx2.QueryRow(bg, "SELECT pgrelay.notify('c', 'other')").Scan(&id)
		done <- result{id, err}
	}()
	waitUntilBlocked(t, d.Pool, c2.PgConn().PID())
	require.NoError(t, tx1.Rollback(bg))
	r = <-done
	require.NoError(t, r.err)
	require.NoError(t, tx2.Commit(bg))
	require.Equal(t, r.id, testenv.One[int64](t, d.Pool, "SELECT id FROM pgrelay.queue WHERE payload = 'other'"))
}

// Many producers racing on a few payloads: one pending row per payload.
func TestNotifyDeduplicatesUnderLoad(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("c", "p_deduplicate := true")
	const producers, rounds = 4, 50
	errs := make(chan error, producers)
	for p := range producers {
		c := d.Conn(-1)
		go func() {
			for i := range rounds {
				if _, err := c.Exec(bg, "SELECT pgrelay.notify('c', $1)", fmt.Sprint((i+p)%5)); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range producers {
		require.NoError(t, <-errs)
	}
	require.Equal(t, 5, d.Count("SELECT count(*) FROM pgrelay.queue"))
	require.Equal(t, producers*rounds-5, d.Count("SELECT count(*) FROM pgrelay.log WHERE event = 'deduplicated'"))
}

// Node-restricted channels: the pin comes from the session's node, never from
// the caller, and deduplication is per node.
func TestNotifyNodeRestricted(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("pinned", "p_node_restricted := true")
	d.register("pinned_dedup", "p_node_restricted := true, p_deduplicate := true")
	d.register("free", "")
	n1, n2 := d.Conn(1), d.Conn(2)

	node := func(id int64) (owner int32, runIn *int32) {
		require.NoError(t, d.Pool.QueryRow(bg, "SELECT owner_node, run_in_node FROM pgrelay.queue WHERE id = $1", id).Scan(&owner, &runIn))
		return
	}
	id := testenv.One[int64](t, n2, "SELECT pgrelay.notify('pinned', 'x')")
	owner, runIn := node(id)
	require.EqualValues(t, 2, owner)
	require.NotNil(t, runIn)
	require.EqualValues(t, 2, *runIn)

	id = testenv.One[int64](t, n1, "SELECT pgrelay.notify('free', 'x')")
	owner, runIn = node(id)
	require.EqualValues(t, 1, owner)
	require.Nil(t, runIn)

	for _, id := range testenv.Column[int64](t, n1, "SELECT pgrelay.notify_many('pinned', ARRAY['a', 'b'])") {
		_, runIn := node(id)
		require.NotNil(t, runIn)
		require.EqualValues(t, 1, *runIn)
	}

	// A caller-supplied pin in a direct insert is overwritten by the trigger.
	id = testenv.One[int64](t, n2, "INSERT INTO pgrelay.queue (channel, payload, run_in_node) VALUES ('pinned', 'y', 7) RETURNING id")
	_, runIn = node(id)
	require.EqualValues(t, 2, *runIn)
	id = testenv.One[int64](t, n2, "INSERT INTO pgrelay.queue (channel, payload, run_in_node) VALUES ('free', 'y', 7) RETURNING id")
	_, runIn = node(id)
	require.Nil(t, runIn)
	// The trigger also derives origin_id and rejects unknown channels.
	require.Equal(t, id, testenv.One[int64](t, n2, "SELECT origin_id FROM pgrelay.queue WHERE id = $1", id))
	_, err := n2.Exec(bg, "INSERT INTO pgrelay.queue (channel, payload) VALUES ('nope', 'y')")
	requireCode(t, err, "PR001")

	// Deduplication only against pending rows of the same node.
	a1 := testenv.One[int64](t, n1, "SELECT pgrelay.notify('pinned_dedup', 'p')")
	a2 := testenv.One[int64](t, n2, "SELECT pgrelay.notify('pinned_dedup', 'p')")
	require.NotEqual(t, a1, a2)
	require.Equal(t, a1, testenv.One[int64](t, n1, "SELECT pgrelay.notify('pinned_dedup', 'p')"))
	require.Equal(t, a2, testenv.One[int64](t, n2, "SELECT pgrelay.notify('pinned_dedup', 'p')"))
	require.Equal(t, 2, d.Count("SELECT count(*) FROM pgrelay.queue WHERE channel = 'pinned_dedup'"))
	require.Equal(t, []int32{1, 2}, testenv.Column[int32](t, d.Pool,
		"SELECT node FROM pgrelay.log WHERE event = 'deduplicated' ORDER BY node"))
}

// A node id the id generator cannot encode stops notify with PR020.
func TestNotifyBadNodeID(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("c", "")
	c := d.Conn(-1)
	_, err := c.Exec(bg, "SET pg_relay.node_id = '4096'")
	require.NoError(t, err)
	_, err = c.Exec(bg, "SELECT pgrelay.notify('c', 'x')")
	requireCode(t, err, "PR020")
	require.Zero(t, d.Count("SELECT count(*) FROM pgrelay.queue"))
}

// Under session_replication_role = replica (the apply worker of logical
// replication, or a companion's trigger running there) notify(),
// notify_many() and the deduplicating insert stamp every column with the
// values they get in the origin role (the stamping trigger fires there too),
// and keep opted-in payloads (no statement trigger fires there).
func TestNotifyUnderReplicaRoleStampsAsTheTrigger(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("pin", "p_node_restricted := true, p_concurrency_mode := 'payload', p_expire_after := '5 minutes', p_publish_payload := true")
	d.register("pin_dedup", "p_node_restricted := true, p_deduplicate := true, p_concurrency_mode := 'channel', p_expire_after := '1 hour'")
	d.register("free", "")
	d.register("free_dedup", "p_deduplicate := true, p_concurrency_mode := 'payload', p_publish_payload := true")
	origin, replica := d.Conn(3), d.Conn(3)
	_, err := replica.Exec(bg, "SET session_replication_role = replica")
	require.NoError(t, err)

	// What the row carries beyond its id, channel and payload; origin_id
	// relative to the id, the expiry to the due time (not_before).
	type stamps struct {
		OriginIsID bool
		Owner      int32
		RunIn      *int32
		Lane       *int64
		PHash      *int64
		Expiry     *string
		Kept       bool
	}
	read := func(id int64) stamps {
		t.Helper()
		var s stamps
		require.NoError(t, d.Pool.QueryRow(bg, `SELECT origin_id = id, owner_node, run_in_node, lane, phash,
			(expires_at - not_before)::text, EXISTS (SELECT FROM pgrelay.event_payloads e WHERE e.queue_id = q.id)
			  FROM pgrelay.queue q WHERE id = $1`, id).
			Scan(&s.OriginIsID, &s.Owner, &s.RunIn, &s.Lane, &s.PHash, &s.Expiry, &s.Kept))
		return s
	}
	// Each call is made in the origin role (where the trigger fires), its
	// rows read and removed, then made again in the replica role.
	calls := map[string]string{
		"notify":      "SELECT pgrelay.notify($1, 'p1')",
		"notify_many": "SELECT pgrelay.notify_many($1, ARRAY['p1', 'p2'])",
		// Delayed, at a fixed time so that the second call meets the first.
		"notify delayed":      "SELECT pgrelay.notify($1, 'p1', p_not_before := '2100-01-01 00:00+00')",
		"notify_many delayed": "SELECT pgrelay.notify_many($1, ARRAY['p1', 'p2'], p_not_before := '2100-01-01 00:00+00')",
	}
	for _, ch := range []string{"pin", "pin_dedup", "free", "free_dedup"} {
		for name, sql := range calls {
			want := []stamps{}
			for _, id := range testenv.Column[int64](t, origin, sql, ch) {
				want = append(want, read(id))
			}
			d.Exec("DELETE FROM pgrelay.queue")
			d.Exec("DELETE FROM pgrelay.event_payloads")
			got := []stamps{}
			ids := testenv.Column[int64](t, replica, sql, ch)
			for _, id := range ids {
				got = append(got, read(id))
			}
			require.Equal(t, want, got, "%s on channel %s", name, ch)
			for _, s := range got {
				require.True(t, s.OriginIsID, "%s on %s: origin_id = id", name, ch)
				require.EqualValues(t, 3, s.Owner)
				if ch == "pin" || ch == "pin_dedup" {
					require.NotNil(t, s.RunIn, "%s on %s: pinned", name, ch)
					require.EqualValues(t, 3, *s.RunIn, "%s on %s: pinned to this node", name, ch)
				} else {
					require.Nil(t, s.RunIn)
				}
			}
			// A deduplicating channel absorbs the same call again, under the
			// replica role too: the rows carry their hash.
			if ch == "pin_dedup" || ch == "free_dedup" {
				require.Equal(t, ids, testenv.Column[int64](t, replica, sql, ch), "%s on %s: deduplicated", name, ch)
				require.Equal(t, len(ids), d.Count("SELECT count(*) FROM pgrelay.queue"))
				require.Equal(t, len(ids), d.Count("SELECT count(*) FROM pgrelay.log WHERE event = 'deduplicated' AND node = 3"))
				d.Exec("DELETE FROM pgrelay.log")
			}
			d.Exec("DELETE FROM pgrelay.queue")
			d.Exec("DELETE FROM pgrelay.event_payloads")
		}
	}
	// The values themselves, for one row: what the trigger derives.
	id := testenv.One[int64](t, replica, "SELECT pgrelay.notify('pin', 'p1')")
	s := read(id)
	require.Equal(t, testenv.One[int64](t, d.Pool, "SELECT hashtextextended('p1', 0)"), *s.Lane)
	require.Nil(t, s.PHash)
	require.Equal(t, "00:05:00", *s.Expiry)
	require.True(t, s.Kept)
	// A delayed one expires that long after its due time.
	id = testenv.One[int64](t, replica, "SELECT pgrelay.notify('pin', 'p2', p_delay := '2 hours')")
	require.Equal(t, "00:05:00", *read(id).Expiry)
	require.Equal(t, "02:00:00", testenv.One[string](t, d.Pool, "SELECT (not_before - enqueued_at)::text FROM pgrelay.queue WHERE id = $1", id))
}

// The stamping trigger fires in the replica role too (ENABLE ALWAYS): a row
// enqueued there, a direct insert included, is stamped as in the origin
// role, and a row that arrives by replication (it names its origin and its id
// was drawn on another node) is kept exactly as it came: its pin, its lane,
// its expiry, on a channel this node may not know yet.
func TestQueueTriggerUnderReplicaRole(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("pin", "p_node_restricted := true, p_concurrency_mode := 'payload', p_expire_after := '5 minutes', p_publish_payload := true")
	replica := d.Conn(3)
	_, err := replica.Exec(bg, "SET session_replication_role = replica")
	require.NoError(t, err)
	type row struct {
		Origin int64
		RunIn  *int32
		Lane   *int64
		Expiry *string
		Kept   bool
	}
	read := func(id int64) row {
		t.Helper()
		var r row
		require.NoError(t, d.Pool.QueryRow(bg, `SELECT origin_id, run_in_node, lane, (expires_at - not_before)::text,
			EXISTS (SELECT FROM pgrelay.event_payloads e WHERE e.queue_id = q.id)
			  FROM pgrelay.queue q WHERE id = $1`, id).Scan(&r.Origin, &r.RunIn, &r.Lane, &r.Expiry, &r.Kept))
		return r
	}
	hash := func(p string) *int64 {
		h := testenv.One[int64](t, d.Pool, "SELECT hashtextextended($1, 0)", p)
		return &h
	}
	pinned := func(n int32) *int32 { return &n }
	expiry := "00:05:00"

	// A direct insert in the replica role.
	id := testenv.One[int64](t, replica, "INSERT INTO pgrelay.queue (channel, payload) VALUES ('pin', 'd') RETURNING id")
	require.Equal(t, row{Origin: id, RunIn: pinned(3), Lane: hash("d"), Expiry: &expiry, Kept: true}, read(id))

	// A row this node enqueues names its origin, with an id of this node:
	// stamped, whatever it says.
	id = testenv.One[int64](t, replica, "SELECT pgrelay._next_id()")
	_, err = replica.Exec(bg, "INSERT INTO pgrelay.queue (id, origin_id, channel, payload, run_in_node, lane) VALUES ($1, $1, 'pin', 'l', 7, 42)", id)
	require.NoError(t, err)
	require.Equal(t, row{Origin: id, RunIn: pinned(3), Lane: hash("l"), Expiry: &expiry, Kept: true}, read(id))

	// Rows replicated from node 7 (an id it drew): as they came, a retry and
	// a row of a channel not here yet included, their payloads not kept here
	// (they replicate on their own).
	remote := d.Conn(7)
	first, retry, unknown := testenv.One[int64](t, remote, "SELECT pgrelay._next_id()"),
		testenv.One[int64](t, remote, "SELECT pgrelay._next_id()"), testenv.One[int64](t, remote, "SELECT pgrelay._next_id()")
	_, err = replica.Exec(bg, `INSERT INTO pgrelay.queue (id, origin_id, channel, payload, owner_node, run_in_node, lane, retry_of, attempt)
		VALUES ($1, $1, 'pin', 'r', 7, 7, 42, NULL, 1), ($2, $1, 'pin', 'r', 7, 7, 42, $1, 2),
		       ($3, $3, 'elsewhere', 'u', 7, NULL, NULL, NULL, 1)`, first, retry, unknown)
	require.NoError(t, err)
	lane := int64(42)
	require.Equal(t, row{Origin: first, RunIn: pinned(7), Lane: &lane}, read(first))
	require.Equal(t, row{Origin: first, RunIn: pinned(7), Lane: &lane}, read(retry))
	require.Equal(t, row{Origin: unknown}, read(unknown))
}

// A pause stops dispatch, never a producer: notify() and notify_many() on a
// paused channel enqueue (the application's transaction commits), the events
// stay pending — no claim, classic or direct, takes them — and queue_stats()
// shows them pending on a paused channel; once resumed they are claimed.
func TestPausedChannelAcceptsEvents(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("p", "")
	d.register("lane", "p_concurrency_mode := 'channel'")
	d.Exec("SELECT pgrelay.update('p', p_paused := true)")
	d.Exec("SELECT pgrelay.update('lane', p_paused := true)")

	id := d.notify("p", "x")
	require.Len(t, testenv.Column[int64](t, d.Pool, "SELECT pgrelay.notify_many('p', ARRAY['y', 'z'])"), 2)
	d.notify("lane", "l")
	require.Equal(t, "pending", testenv.One[string](t, d.Pool, "SELECT pgrelay.status($1)", id))
	require.Equal(t, 3, d.Count("SELECT pending FROM pgrelay.queue_stats() WHERE channel = 'p' AND paused"))

	proc := startProcessor(t, d.Pool)
	require.Empty(t, claim(t, d.Pool, proc, 10, "sql"), "a classic claim passes over paused channels")
	require.Empty(t, testenv.Column[int64](t, d.Pool, "SELECT id FROM pgrelay._claim_direct('p', 'single', false, NULL, 10)"),
		"so does a direct batch")

	d.Exec("SELECT pgrelay.update('p', p_paused := false)")
	d.Exec("SELECT pgrelay.update('lane', p_paused := false)")
	// (A direct claim outside a transaction holds its row locks no longer
	// than the statement: the rows stay for the classic claim below.)
	require.Len(t, testenv.Column[int64](t, d.Pool, "SELECT id FROM pgrelay._claim_direct('p', 'single', false, NULL, 10)"), 3)
	require.Len(t, claim(t, d.Pool, proc, 10, "sql"), 4)
}

// The producer functions stamp their rows in one statement: the row trigger
// (a function call and a read of the channel per row) does not run for
// them, and notify() reads this node's id once, where it draws the event's
// id (owner_node and run_in_node come from the id's node bits). A direct
// insert still goes through the trigger. Counted with track_functions, in
// the transaction's own statistics.
func TestProducerFunctionsStampWithoutTheRowTrigger(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("pin", "p_node_restricted := true, p_concurrency_mode := 'payload', p_expire_after := '5 minutes'")
	c := d.Conn(3)
	_, err := c.Exec(bg, "SET track_functions = 'pl'")
	require.NoError(t, err)
	// Calls of fn in this session since the last mark (the session's pending
	// counts may hold an earlier transaction's).
	base := map[string]int64{}
	read := func(tx pgx.Tx, fn string) int64 {
		t.Helper()
		return testenv.One[int64](t, tx, `SELECT COALESCE((SELECT calls FROM pg_stat_xact_user_functions
			WHERE funcid = $1::regprocedure), 0)`, fn)
	}
	fns := []string{"pgrelay._queue_before_insert()", "pgrelay._this_node()", "pgrelay._queue_after_insert()",
		"pgrelay._wake(text)"}
	mark := func(tx pgx.Tx) {
		for _, fn := range fns {
			base[fn] = read(tx, fn)
		}
	}
	calls := func(tx pgx.Tx, fn string) int64 { return read(tx, fn) - base[fn] }
	inTx(t, c, func(tx pgx.Tx) {
		mark(tx)
		id := testenv.One[int64](t, tx, "SELECT pgrelay.notify('pin', 'a')")
		require.Zero(t, calls(tx, "pgrelay._queue_before_insert()"), "notify(): no row trigger")
		require.EqualValues(t, 1, calls(tx, "pgrelay._this_node()"), "notify(): the node is read once, for the id")
		require.Equal(t, "3/3/3", testenv.One[string](t, tx,
			"SELECT concat_ws('/', (id >> 12) & 1023, owner_node, run_in_node) FROM pgrelay.queue WHERE id = $1", id))

		require.Len(t, testenv.Column[int64](t, tx, "SELECT pgrelay.notify_many('pin', ARRAY['b', 'c', 'd', 'e'])"), 4)
		require.Zero(t, calls(tx, "pgrelay._queue_before_insert()"), "notify_many(): no row trigger")
		require.Zero(t, calls(tx, "pgrelay._queue_after_insert()"), "the producer functions wake without the statement trigger")
		require.EqualValues(t, 2, calls(tx, "pgrelay._wake(text)"), "one wake-up per call")
		require.LessOrEqual(t, calls(tx, "pgrelay._this_node()"), int64(3), "notify_many(): the node is read per call, not per row")

		// A direct insert is stamped by the trigger.
		id = testenv.One[int64](t, tx, "INSERT INTO pgrelay.queue (channel, payload, run_in_node) VALUES ('pin', 'f', 7) RETURNING id")
		require.EqualValues(t, 1, calls(tx, "pgrelay._queue_before_insert()"))
		require.EqualValues(t, 1, calls(tx, "pgrelay._queue_after_insert()"), "a direct insert wakes by the trigger")
		require.Equal(t, "3/3/3", testenv.One[string](t, tx,
			"SELECT concat_ws('/', (id >> 12) & 1023, owner_node, run_in_node) FROM pgrelay.queue WHERE id = $1", id))
		// Every row carries the same derived columns, however it came in.
		require.Equal(t, 6, testenv.One[int](t, tx, `SELECT count(*) FROM pgrelay.queue
			WHERE origin_id = id AND lane = hashtextextended(payload, 0) AND phash IS NULL
			  AND expires_at = not_before + interval '5 minutes' AND run_in_node = 3 AND owner_node = 3`))
	})
	// The payloads of a publish_payload channel are kept without the
	// statement trigger for the producer functions' rows, with it for a
	// direct insert.
	d.register("kept", "p_publish_payload := true")
	inTx(t, c, func(tx pgx.Tx) {
		mark(tx)
		testenv.One[int64](t, tx, "SELECT pgrelay.notify('kept', 'a')")
		require.Len(t, testenv.Column[int64](t, tx, "SELECT pgrelay.notify_many('kept', ARRAY['b', 'c'])"), 2)
		require.Zero(t, calls(tx, "pgrelay._queue_after_insert()"))
		testenv.One[int64](t, tx, "INSERT INTO pgrelay.queue (channel, payload) VALUES ('kept', 'd') RETURNING id")
		require.EqualValues(t, 1, calls(tx, "pgrelay._queue_after_insert()"))
		require.Equal(t, "a,b,c,d", testenv.One[string](t, tx, `SELECT string_agg(e.payload, ',' ORDER BY e.payload)
			FROM pgrelay.event_payloads e JOIN pgrelay.queue q ON q.id = e.queue_id`))
	})
}

// Every insert into the queue reads the WHEN clause of each of its statement
// triggers again, also when (the producer functions' inserts) none fires:
// the queue has one, which both keeps payloads and wakes.
func TestQueueHasOneStatementTrigger(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	require.Equal(t, []string{"queue_after_insert"}, testenv.Column[string](t, d.Pool, `SELECT tgname::text FROM pg_trigger
		WHERE tgrelid = 'pgrelay.queue'::regclass AND NOT tgisinternal AND tgtype & 1 = 0 ORDER BY 1`))
}

// The setting that lets the producer functions' rows pass the row trigger
// gives a producer nothing: it may not insert into the queue at all, and
// notify() stamps its rows whatever the session set.
func TestProducerCannotSkipStampingWithTheSetting(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("pinned", "p_node_restricted := true, p_concurrency_mode := 'channel'")
	producer := d.loginAs("producer", "pgrelay_producer")
	_, err := producer.Exec(bg, "SET pgrelay.stamped = 'on'")
	require.NoError(t, err)
	requireCode(t, execErr(producer, "INSERT INTO pgrelay.queue (channel, payload) VALUES ('pinned', 'x')"), insufficientPrivilege)
	id := testenv.One[int64](t, producer, "SELECT pgrelay.notify('pinned', 'a')")
	require.Equal(t, "0/0/0", testenv.One[string](t, d.Pool,
		"SELECT concat_ws('/', owner_node, run_in_node, lane) FROM pgrelay.queue WHERE id = $1", id))
	// The function's SET clause ends with the call: the session's own value
	// is back.
	require.Equal(t, "on", testenv.One[string](t, producer, "SELECT current_setting('pgrelay.stamped')"))
	// Unknown channels are refused by the functions themselves.
	requireCode(t, execErr(producer, "SELECT pgrelay.notify_many('nope', ARRAY['a'])"), "PR001")
}

// _enqueue turns pgrelay.stamped on for its own insert only: a direct insert
// later in the same transaction (a companion application's, as the owner) is
// stamped by the row trigger as ever.
func TestDirectInsertAfterNotifyIsStamped(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("lanes", "p_concurrency_mode := 'channel'")
	tx, err := d.Pool.Begin(bg)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(bg) }()
	testenv.One[int64](t, tx, "SELECT pgrelay.notify('lanes', 'a')")
	testenv.One[int64](t, tx, "SELECT id FROM pgrelay.notify_many('lanes', ARRAY['b']) AS n(id)")
	require.NotEqual(t, "on", testenv.One[string](t, tx, "SELECT current_setting('pgrelay.stamped', true)"))
	id := testenv.One[int64](t, tx, "INSERT INTO pgrelay.queue (channel, payload) VALUES ('lanes', 'c') RETURNING id")
	require.Equal(t, "0", testenv.One[string](t, tx, "SELECT coalesce(lane::text, 'unstamped') FROM pgrelay.queue WHERE id = $1", id))
}
