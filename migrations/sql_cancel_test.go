package migrations_test

// pgrelay.cancel in each state of an event, its roles, an email both ways,
// a request that reaches its node by replication; pgrelay._snooze.

import (
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/testenv"
)

func (d *sqlDB) cancel(id int64) bool {
	d.T.Helper()
	return testenv.One[bool](d.T, d.Pool, "SELECT pgrelay.cancel($1)", id)
}

// requireCancelled asserts that event id ended cancelled once: no row left,
// one 'cancelled' log row, no dead letter, no request.
func (d *sqlDB) requireCancelled(id int64) {
	d.T.Helper()
	d.requireStatus(id, "cancelled")
	require.Zero(d.T, d.Count("SELECT count(*) FROM pgrelay.queue WHERE origin_id = $1", id))
	require.Equal(d.T, 1, d.Count("SELECT count(*) FROM pgrelay.log WHERE origin_id = $1 AND event = 'cancelled'", id))
	require.Zero(d.T, d.Count("SELECT count(*) FROM pgrelay.dead_letters WHERE origin_id = $1", id))
	require.Zero(d.T, d.Count("SELECT count(*) FROM pgrelay.cancels WHERE origin_id = $1", id))
}

func TestCancelPendingDelayedRetrying(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("c", "p_max_attempts := 3, p_retry_delay := '1 hour'")
	proc := startProcessor(t, d.Pool)

	pending := d.notify("c", "p")
	delayed := testenv.One[int64](t, d.Pool, "SELECT pgrelay.notify('c', 'd', p_delay := '1 hour')")
	retrying := d.notify("c", "r")
	// Claim the first two due (pending and retrying), fail the latter's.
	got := claim(t, d.Pool, proc, 10)
	require.Len(t, got, 2)
	for _, c := range got {
		ev := "release"
		if c.ID == retrying {
			ev = "failed"
		}
		require.Equal(t, 1, complete(t, d.Pool, proc, c, ev, "boom"))
	}
	d.requireStatus(pending, "pending")
	d.requireStatus(retrying, "retrying")

	for _, id := range []int64{pending, delayed, retrying} {
		require.True(t, d.cancel(id), "event %d had not ended", id)
		d.requireCancelled(id)
		require.False(t, d.cancel(id), "event %d has ended", id)
	}
	e := d.Text("SELECT error FROM pgrelay.log WHERE origin_id = $1 AND event = 'cancelled'", pending)
	require.Equal(t, "cancelled by "+testenv.One[string](t, d.Pool, "SELECT session_user::text"), e)
	require.False(t, d.cancel(12345), "an unknown id")
}

func TestCancelRunningThenSucceeds(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("c", "")
	proc := startProcessor(t, d.Pool)
	id := d.notify("c", "x")
	got := claim(t, d.Pool, proc, 10)
	require.Len(t, got, 1)

	require.True(t, d.cancel(id), "a running event has not ended")
	d.requireStatus(id, "in_flight")
	require.Equal(t, 1, d.Count("SELECT count(*) FROM pgrelay.cancels WHERE origin_id = $1", id))
	require.Equal(t, 1, complete(t, d.Pool, proc, got[0], "succeeded", ""))
	d.requireStatus(id, "succeeded")
	require.Zero(t, d.Count("SELECT count(*) FROM pgrelay.log WHERE origin_id = $1 AND event = 'cancelled'", id))
	require.False(t, d.cancel(id))
	// The request is forgotten once old, its event gone.
	require.Zero(t, testenv.One[int32](t, d.Pool, "SELECT pgrelay._cancel_sweep()"))
	d.Exec("UPDATE pgrelay.cancels SET requested_at = now() - interval '2 hours'")
	require.Zero(t, testenv.One[int32](t, d.Pool, "SELECT pgrelay._cancel_sweep()"))
	require.Zero(t, d.Count("SELECT count(*) FROM pgrelay.cancels"))
}

func TestCancelRunningThenFails(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("c", "p_max_attempts := 5")
	proc := startProcessor(t, d.Pool)
	id := d.notify("c", "x")
	got := claim(t, d.Pool, proc, 10)
	require.Len(t, got, 1)
	require.True(t, d.cancel(id))
	require.Equal(t, 1, complete(t, d.Pool, proc, got[0], "failed", "boom"))
	d.requireCancelled(id)
	require.Equal(t, "boom", d.Text("SELECT error FROM pgrelay.log WHERE origin_id = $1 AND event = 'cancelled'", id))

	// A give-up (Permanent) ends cancelled too: no dead letter.
	id2 := d.notify("c", "y")
	got = claim(t, d.Pool, proc, 10)
	require.True(t, d.cancel(id2))
	require.Equal(t, 1, complete(t, d.Pool, proc, got[0], "gave_up", "permanent"))
	d.requireCancelled(id2)
}

// A direct batch holds its rows locked, unclaimed: a cancel leaves them to
// it, and the batch's failure ends the event cancelled; a retry the batch
// enqueued before the request came is cancelled by the sweep.
func TestCancelDirectBatchRow(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("c", "p_retry_delay := '0'")
	id := d.notify("c", "x")
	c := d.Conn(-1)
	inTxCommit(t, c, func(tx pgx.Tx) {
		_, err := tx.Exec(bg, "SELECT id FROM pgrelay.queue WHERE id = $1 FOR UPDATE", id)
		require.NoError(t, err)
		require.True(t, d.cancel(id), "the locked row is running")
		require.Equal(t, 1, d.Count("SELECT count(*) FROM pgrelay.queue WHERE origin_id = $1", id), "left to its batch")
		gaveUp := testenv.One[[]int64](t, tx, "SELECT gave_up FROM pgrelay._complete_outcomes(NULL, $1, NULL, '{failed}', '{boom}')", []int64{id})
		require.Empty(t, gaveUp)
	})
	d.requireCancelled(id)

	// The request comes after the batch's completion read: its retry is
	// pending, and the sweep ends it.
	id2 := d.notify("c", "y")
	inTxCommit(t, c, func(tx pgx.Tx) {
		_, err := tx.Exec(bg, "SELECT pgrelay._complete_outcomes(NULL, $1, NULL, '{failed}', '{boom}')", []int64{id2})
		require.NoError(t, err)
	})
	d.Exec("INSERT INTO pgrelay.cancels (origin_id, requested_by) VALUES ($1, 'late')", id2)
	d.requireStatus(id2, "retrying")
	require.Equal(t, int32(1), testenv.One[int32](t, d.Pool, "SELECT pgrelay._cancel_sweep()"))
	d.requireCancelled(id2)
}

func TestCancelRoles(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("c", "")
	p1 := d.loginAs("p1", "pgrelay_producer")
	p2 := d.loginAs("p2", "pgrelay_producer")
	admin := d.loginAs("admin", "pgrelay_admin")
	notify := "SELECT pgrelay.notify('c', 'x')"
	cancel := "SELECT pgrelay.cancel($1)"
	id1 := testenv.One[int64](t, p1, notify)
	id2 := testenv.One[int64](t, p2, notify)
	require.Equal(t, d.Name()+"_p1", d.Text("SELECT enqueued_by FROM pgrelay.queue WHERE id = $1", id1))

	require.False(t, testenv.One[bool](t, p2, cancel, id1), "another producer's event")
	d.requireStatus(id1, "pending")
	require.Zero(t, d.Count("SELECT count(*) FROM pgrelay.cancels"))
	require.True(t, testenv.One[bool](t, p1, cancel, id1))
	d.requireCancelled(id1)
	require.True(t, testenv.One[bool](t, admin, cancel, id2), "an admin cancels any event")
	d.requireCancelled(id2)
	require.Equal(t, "cancelled by "+d.Name()+"_admin",
		d.Text("SELECT error FROM pgrelay.log WHERE origin_id = $1 AND event = 'cancelled'", id2))

	// SET ROLE's role is the sender, as for emails.
	d.Exec("CREATE ROLE " + quoteIdent(d.Name()+"_tenant") + " NOLOGIN IN ROLE pgrelay_producer")
	gw := d.loginAs("gw", "")
	d.Exec("GRANT " + quoteIdent(d.Name()+"_tenant") + " TO " + quoteIdent(d.Name()+"_gw"))
	require.NoError(t, execErr(gw, "SET ROLE "+quoteIdent(d.Name()+"_tenant")))
	id3 := testenv.One[int64](t, gw, notify)
	require.Equal(t, d.Name()+"_tenant", d.Text("SELECT enqueued_by FROM pgrelay.queue WHERE id = $1", id3),
		"enqueued_by is the role set, as an email's sent_by")
	require.False(t, testenv.One[bool](t, p1, cancel, id3))
	require.True(t, testenv.One[bool](t, gw, cancel, id3))
}

func TestCancelEmailBothWays(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.emailChannel("mail", "")
	send := "SELECT pgrelay_notifier.send('mail', ARRAY['a@example.org'], 's', 'b')"
	eventOf := func(n int64) int64 {
		return testenv.One[int64](t, d.Pool, "SELECT origin_id FROM pgrelay.queue WHERE channel = 'mail' AND payload = $1",
			testenv.One[string](t, d.Pool, "SELECT $1::bigint::text", n))
	}

	// The event's cancel cancels its email.
	n1 := testenv.One[int64](t, d.Pool, send)
	e1 := eventOf(n1)
	require.True(t, d.cancel(e1))
	d.requireCancelled(e1)
	require.Equal(t, "cancelled", d.Text("SELECT pgrelay_notifier.get_status($1)", n1))
	require.Equal(t, 1, d.Count("SELECT count(*) FROM pgrelay_notifier.status_events WHERE notification_id = $1 AND status = 'cancelled'", n1))

	// The email's cancel cancels its event.
	n2 := testenv.One[int64](t, d.Pool, send)
	e2 := eventOf(n2)
	require.True(t, testenv.One[bool](t, d.Pool, "SELECT pgrelay_notifier.cancel($1)", n2))
	d.requireCancelled(e2)
	require.Equal(t, 1, d.Count("SELECT count(*) FROM pgrelay_notifier.status_events WHERE notification_id = $1 AND status = 'cancelled'", n2))

	// A running email event whose attempt fails (the handler finds its
	// email cancelled) ends cancelled with it.
	n3 := testenv.One[int64](t, d.Pool, send)
	e3 := eventOf(n3)
	proc := startProcessor(t, d.Pool)
	got := claim(t, d.Pool, proc, 10, "email")
	require.Len(t, got, 1)
	require.True(t, d.cancel(e3))
	require.Equal(t, "queued", d.Text("SELECT pgrelay_notifier.get_status($1)", n3), "not yet: it may still be sent")
	require.Equal(t, 1, complete(t, d.Pool, proc, got[0], "failed", "smtp down"))
	d.requireCancelled(e3)
	require.Equal(t, "cancelled", d.Text("SELECT pgrelay_notifier.get_status($1)", n3))
}

// On a cluster the node that runs the event applies the request: where it
// is issued when that is this node, else in its sweep once replication has
// brought the request (its own transaction, so that the outcome
// replicates). The node that issued it leaves the row alone.
func TestCancelReachesTheRunningNodeByReplication(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("c", "")
	here := int(testenv.One[int32](t, d.Pool, "SELECT pgrelay._this_node()"))
	other := here + 1
	d.Exec("INSERT INTO pgrelay.nodes (node_id, mode, last_seen) VALUES ($1, 'multi-node', now())", other)

	// A row owned by another node: this node only records the request.
	id := d.notify("c", "x")
	d.Exec("UPDATE pgrelay.queue SET owner_node = $1 WHERE id = $2", other, id)
	require.True(t, d.cancel(id))
	d.requireStatus(id, "pending")
	require.Equal(t, 1, d.Count("SELECT count(*) FROM pgrelay.cancels WHERE origin_id = $1", id))
	require.Zero(t, testenv.One[int32](t, d.Pool, "SELECT pgrelay._cancel_sweep()"), "not this node's to end")
	d.requireStatus(id, "pending")

	// A request from another node reaches this one, the owner: the
	// replication only inserts it; the sweep ends the event.
	id2 := d.notify("c", "y")
	c := d.Conn(-1)
	inTxCommit(t, c, func(tx pgx.Tx) {
		_, err := tx.Exec(bg, "SET LOCAL session_replication_role = replica")
		require.NoError(t, err)
		_, err = tx.Exec(bg, "INSERT INTO pgrelay.cancels (origin_id, requested_by, node) VALUES ($1, 'remote', $2)", id2, other)
		require.NoError(t, err)
	})
	d.requireStatus(id2, "pending")
	require.Equal(t, int32(1), testenv.One[int32](t, d.Pool, "SELECT pgrelay._cancel_sweep()"))
	d.requireCancelled(id2)
	require.Equal(t, "cancelled by remote", d.Text("SELECT error FROM pgrelay.log WHERE origin_id = $1 AND event = 'cancelled'", id2))

	// In leader mode the lease holder runs every unpinned row.
	id3 := d.notify("c", "z")
	d.bid(other, 1, "1 hour")
	require.True(t, d.cancel(id3))
	d.requireStatus(id3, "pending")
	d.bid(here, 2, "1 hour")
	require.Equal(t, int32(2), testenv.One[int32](t, d.Pool, "SELECT pgrelay._cancel_sweep()"),
		"the leader runs every unpinned row: id3, and id owned by the other node")
	d.requireCancelled(id)
	d.requireCancelled(id3)
}

func TestSnooze(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("c", "p_max_attempts := 2, p_concurrency_mode := 'channel'")
	proc := startProcessor(t, d.Pool)
	id := testenv.One[int64](t, d.Pool, "SELECT pgrelay.notify('c', 'x', p_priority := 7)")
	behind := d.notify("c", "y")
	snooze := func(c claimedRow, delay string) (int32, []int64) {
		t.Helper()
		var n int32
		var gaveUp []int64
		require.NoError(t, d.Pool.QueryRow(bg, "SELECT done, gave_up FROM pgrelay._snooze($1, $2, $3, $4::interval[])",
			proc, []int64{c.ID}, []time.Time{c.DispatchedAt}, []string{delay}).Scan(&n, &gaveUp))
		return n, gaveUp
	}

	got := claim(t, d.Pool, proc, 10)
	require.Len(t, got, 1)
	require.Equal(t, id, got[0].ID)
	n, gaveUp := snooze(got[0], "1 hour")
	require.EqualValues(t, 1, n)
	require.Empty(t, gaveUp)
	d.requireStatus(id, "pending")
	var attempt, snoozes int32
	var due float64
	require.NoError(t, d.Pool.QueryRow(bg, `SELECT attempt, snoozes, EXTRACT(epoch FROM not_before - now())::float8
		FROM pgrelay.queue WHERE id = $1`, id).Scan(&attempt, &snoozes, &due))
	require.EqualValues(t, 1, attempt, "no attempt spent")
	require.EqualValues(t, 1, snoozes)
	require.InDelta(t, 3600, due, 60)
	e := d.Text("SELECT error FROM pgrelay.log WHERE origin_id = $1 AND event = 'snoozed'", id)
	require.True(t, strings.HasPrefix(e, "snoozed until "), e)
	at, err := time.Parse(time.RFC3339Nano, strings.TrimPrefix(e, "snoozed until "))
	require.NoError(t, err)
	require.WithinDuration(t, time.Now().Add(time.Hour), at, time.Minute)
	// A snoozed head holds its lane.
	require.Empty(t, claim(t, d.Pool, proc, 10), "event %d waits behind its snoozed head", behind)

	// Past the bound a snooze is a failed attempt; the retry keeps the
	// event's priority and its snoozes.
	d.Exec("UPDATE pgrelay.queue SET not_before = now(), snoozes = pgrelay._max_snoozes() WHERE id = $1", id)
	got = claim(t, d.Pool, proc, 10)
	require.Len(t, got, 1)
	n, gaveUp = snooze(got[0], "1 hour")
	require.EqualValues(t, 1, n)
	require.Empty(t, gaveUp)
	d.requireStatus(id, "retrying")
	require.Equal(t, 1, d.Count(`SELECT count(*) FROM pgrelay.queue WHERE origin_id = $1 AND attempt = 2
		AND priority = 7 AND snoozes = pgrelay._max_snoozes()`, id))

	// A snooze of an event being cancelled ends it cancelled.
	d.Exec("UPDATE pgrelay.queue SET not_before = now(), snoozes = 0 WHERE origin_id = $1", id)
	got = claim(t, d.Pool, proc, 10)
	require.Len(t, got, 1)
	require.True(t, d.cancel(id))
	n, _ = snooze(got[0], "1 hour")
	require.EqualValues(t, 1, n)
	d.requireCancelled(id)
}
