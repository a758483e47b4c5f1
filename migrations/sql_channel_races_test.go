package migrations_test

// notify() against a concurrent unregister() or update() of its channel: the
// two serialise in either order, so no queue row outlives its channel and no
// row is enqueued under settings an update() already replaced.

import (
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/testenv"
)

// producerCall is one way a producer enqueues on the channel named $1.
type producerCall struct {
	name    string
	channel string // register()'s extra arguments
	role    string // the producer's session_replication_role
	sql     string
	direct  bool // an insert into pgrelay.queue: no paused check
}

var producerCalls = []producerCall{
	{"notify", "", "origin", "SELECT pgrelay.notify($1, 'x')", false},
	{"notify_many", "", "origin", "SELECT pgrelay.notify_many($1, ARRAY['x', 'y'])", false},
	{"notify deduplicating", "p_deduplicate := true", "origin", "SELECT pgrelay.notify($1, 'x')", false},
	{"notify_many deduplicating", "p_deduplicate := true", "origin", "SELECT pgrelay.notify_many($1, ARRAY['x', 'y'])", false},
	{"notify, replica role", "", "replica", "SELECT pgrelay.notify($1, 'x')", false},
	{"notify_many, replica role, node-restricted", "p_node_restricted := true", "replica", "SELECT pgrelay.notify_many($1, ARRAY['x', 'y'])", false},
	// A companion application's insert, leaving origin_id to the trigger.
	{"direct insert", "p_concurrency_mode := 'payload'", "origin", "INSERT INTO pgrelay.queue (channel, payload) VALUES ($1, 'x')", true},
}

// orphans counts queue rows whose channel does not exist.
func (d *sqlDB) orphans() int {
	d.T.Helper()
	return d.Count(`SELECT count(*) FROM pgrelay.queue q
	                 WHERE NOT EXISTS (SELECT FROM pgrelay.channels c WHERE c.channel = q.channel)`)
}

// producer opens a connection in the call's replication role.
func (d *sqlDB) producer(pc producerCall) *pgx.Conn {
	d.T.Helper()
	c := d.Conn(2)
	_, err := c.Exec(bg, "SET session_replication_role = "+pc.role)
	require.NoError(d.T, err)
	return c
}

// background runs sql on c in a goroutine; the result arrives on the channel.
func background(c querier, sql string, args ...any) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := c.Exec(bg, sql, args...)
		done <- err
	}()
	return done
}

// requirePending fails when done already has a result.
func requirePending(t *testing.T, done <-chan error, what string) {
	t.Helper()
	select {
	case err := <-done:
		t.Fatalf("%s returned before the other transaction ended (err %v)", what, err)
	default:
	}
}

// notify() first, in an open transaction: unregister() waits for it, then
// refuses (the event is pending) or, forced, removes the event with the
// channel. Before, unregister() returned at once and the event committed
// after it, with no channel.
func TestUnregisterWaitsForAnOpenNotify(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	admin := d.Conn(-1)
	for i, pc := range producerCalls {
		ch := fmt.Sprintf("c%d", i)
		d.register(ch, pc.channel)
		p := d.producer(pc)

		for _, force := range []bool{false, true} {
			tx, err := p.Begin(bg)
			require.NoError(t, err)
			_, err = tx.Exec(bg, pc.sql, ch)
			require.NoError(t, err, pc.name)
			done := background(admin, "SELECT pgrelay.unregister($1, p_force := $2)", ch, force)
			waitUntilBlocked(t, d.Pool, admin.PgConn().PID())
			requirePending(t, done, "unregister")
			require.NoError(t, tx.Commit(bg))
			err = <-done
			if !force {
				requireCode(t, err, "PR004", "%s: the committed event keeps the channel", pc.name)
				require.Equal(t, 1, d.Count("SELECT count(*) FROM pgrelay.channels WHERE channel = $1", ch))
				require.NotZero(t, d.Count("SELECT count(*) FROM pgrelay.queue WHERE channel = $1", ch))
				continue
			}
			require.NoError(t, err, "%s: forced", pc.name)
			require.Zero(t, d.Count("SELECT count(*) FROM pgrelay.queue WHERE channel = $1", ch), pc.name)
			require.Zero(t, d.Count("SELECT count(*) FROM pgrelay.channels WHERE channel = $1", ch), pc.name)
		}
		require.Zero(t, d.orphans(), pc.name)
	}
}

// unregister() first, in an open transaction: notify() waits for it, then
// fails with "unknown channel". Before, notify() read the channel, returned
// at once and committed its event after the channel was gone.
func TestNotifyWaitsForAnOpenUnregister(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	admin := d.Conn(-1)
	for i, pc := range producerCalls {
		ch := fmt.Sprintf("c%d", i)
		d.register(ch, pc.channel)
		p := d.producer(pc)

		tx, err := admin.Begin(bg)
		require.NoError(t, err)
		_, err = tx.Exec(bg, "SELECT pgrelay.unregister($1)", ch)
		require.NoError(t, err)
		done := background(p, pc.sql, ch)
		waitUntilBlocked(t, d.Pool, p.PgConn().PID())
		requirePending(t, done, pc.name)
		require.NoError(t, tx.Commit(bg))
		requireCode(t, <-done, "PR001", pc.name)
		require.Zero(t, d.orphans(), pc.name)
	}
}

// update() against an open notify(): a pause waits for the producer's
// transaction (so no event is accepted after the pause returned), and a
// producer that comes after an open update() waits for it and enqueues under
// the new settings. Before, the producer enqueued under the settings it had
// read: a channel made serialised got a row with no lane, one paused got an
// event after the pause.
func TestUpdateAndNotifySerialise(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	admin := d.Conn(-1)
	for i, pc := range producerCalls {
		ch := fmt.Sprintf("c%d", i)
		d.register(ch, pc.channel)
		p := d.producer(pc)

		// Producer first: the pause waits.
		tx, err := p.Begin(bg)
		require.NoError(t, err)
		_, err = tx.Exec(bg, pc.sql, ch)
		require.NoError(t, err, pc.name)
		done := background(admin, "SELECT pgrelay.update($1, p_paused := true)", ch)
		waitUntilBlocked(t, d.Pool, admin.PgConn().PID())
		requirePending(t, done, "update")
		require.NoError(t, tx.Commit(bg))
		require.NoError(t, <-done)
		d.Exec("SELECT pgrelay.update($1, p_paused := false)", ch)

		// update() first: the producer waits and follows the new settings.
		d.Exec("DELETE FROM pgrelay.queue WHERE channel = $1", ch)
		tx, err = admin.Begin(bg)
		require.NoError(t, err)
		_, err = tx.Exec(bg, "SELECT pgrelay.update($1, p_concurrency_mode := 'channel')", ch)
		require.NoError(t, err)
		done = background(p, pc.sql, ch)
		waitUntilBlocked(t, d.Pool, p.PgConn().PID())
		requirePending(t, done, pc.name)
		require.NoError(t, tx.Commit(bg))
		require.NoError(t, <-done, pc.name)
		require.NotZero(t, d.Count("SELECT count(*) FROM pgrelay.queue WHERE channel = $1", ch))
		require.Zero(t, d.Count("SELECT count(*) FROM pgrelay.queue WHERE channel = $1 AND lane IS DISTINCT FROM 0", ch),
			"%s: every row in the channel's one lane", pc.name)
		if pc.direct {
			continue // a direct insert does not check the pause
		}

		// And a pause first: the producer waits, then enqueues into the
		// paused channel (a pause stops dispatch, never a producer).
		tx, err = admin.Begin(bg)
		require.NoError(t, err)
		_, err = tx.Exec(bg, "SELECT pgrelay.update($1, p_paused := true)", ch)
		require.NoError(t, err)
		done = background(p, pc.sql, ch)
		waitUntilBlocked(t, d.Pool, p.PgConn().PID())
		requirePending(t, done, pc.name)
		require.NoError(t, tx.Commit(bg))
		require.NoError(t, <-done, pc.name)
	}
}

// A producer in a REPEATABLE READ transaction whose snapshot predates an
// update() cannot enqueue under the settings it still sees: it fails with a
// serialisation failure, which the application retries.
func TestNotifyRepeatableReadAfterUpdate(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("c", "")
	p := d.Conn(-1)
	tx, err := p.BeginTx(bg, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(bg) }()
	require.Equal(t, 1, testenv.One[int](t, tx, "SELECT 1")) // takes the snapshot
	d.Exec("SELECT pgrelay.update('c', p_concurrency_mode := 'channel')")
	_, err = tx.Exec(bg, "SELECT pgrelay.notify('c', 'x')")
	requireCode(t, err, "40001")
}

// A forced unregister() that waits for a completion scheduling a retry
// removes the retry row too. Its DELETE waits for the completion's lock on
// the claimed row, and cannot see the retry row that the completion commits;
// left alone, that row would outlive its channel.
func TestForcedUnregisterRemovesARetryScheduledMeanwhile(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("c", "p_retry_delay := '0'")
	d.notify("c", "x")
	got := claim(t, d.Pool, 1, 10)
	require.Len(t, got, 1)

	p := d.Conn(-1)
	tx, err := p.Begin(bg)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(bg) }()
	require.Equal(t, 1, complete(t, tx, 1, got[0], "failed", "boom"))
	admin := d.Conn(-1)
	done := background(admin, "SELECT pgrelay.unregister('c', p_force := true)")
	waitUntilBlocked(t, d.Pool, admin.PgConn().PID())
	require.NoError(t, tx.Commit(bg))
	require.NoError(t, <-done)
	require.Zero(t, d.Count("SELECT count(*) FROM pgrelay.queue"), "the retry row went with its channel")
	require.Zero(t, d.orphans())
}

// An update() that changes what queue rows derive from their channel (mode,
// deduplication, restriction) re-derives the retry rows of completions it
// waited for, and completions that come after it wait for it and derive
// theirs from the new settings: no retry row keeps the old lane, hash or pin.
func TestUpdateRederivesRetriesScheduledMeanwhile(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	for i, change := range []string{
		"p_concurrency_mode := 'channel'",
		"p_deduplicate := true",
		"p_node_restricted := true",
	} {
		ch := fmt.Sprintf("c%d", i)
		d.register(ch, "p_retry_delay := '1 hour'")
		d.notify(ch, "a")
		d.notify(ch, "b")
		got := claim(t, d.Pool, 1, 10)
		require.Len(t, got, 2)
		stale := func() int {
			return d.Count(`SELECT count(*) FROM pgrelay.queue q JOIN pgrelay.channels c USING (channel)
			  WHERE q.channel = $1 AND (
			        q.lane IS DISTINCT FROM CASE c.concurrency_mode WHEN 'channel' THEN 0
			                                 WHEN 'payload' THEN hashtextextended(q.payload, 0) END
			     OR (q.dispatched_at IS NULL AND q.phash IS DISTINCT FROM
			           CASE WHEN c.deduplicate THEN hashtextextended(q.payload, 0) END)
			     OR (q.dispatched_at IS NULL AND (q.run_in_node IS NULL) = c.node_restricted))`, ch)
		}

		// A completion holds the first row when update() starts: update()
		// waits for it, then re-derives the retry row it committed.
		p := d.Conn(-1)
		tx, err := p.Begin(bg)
		require.NoError(t, err)
		require.Equal(t, 1, complete(t, tx, 1, got[0], "failed", "boom"))
		admin := d.Conn(-1)
		atx, err := admin.Begin(bg)
		require.NoError(t, err)
		done := background(atx, "SELECT pgrelay.update($1, "+change+")", ch)
		waitUntilBlocked(t, d.Pool, admin.PgConn().PID())
		require.NoError(t, tx.Commit(bg))
		require.NoError(t, <-done, change)

		// The second row completes while update()'s transaction is open: the
		// completion waits for it.
		done = background(p, "SELECT pgrelay._complete(1, $1, $2, '{failed}', '{boom}')",
			[]int64{got[1].ID}, []time.Time{got[1].DispatchedAt})
		waitUntilBlocked(t, d.Pool, p.PgConn().PID())
		require.NoError(t, atx.Commit(bg))
		require.NoError(t, <-done)

		require.Equal(t, 2, d.Count("SELECT count(*) FROM pgrelay.queue WHERE channel = $1 AND retry_of IS NOT NULL", ch), change)
		require.Zero(t, stale(), "%s: every row derived from the new settings", change)
	}
}
