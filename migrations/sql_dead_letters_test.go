package migrations_test

// Dead letters: an event that ends gave_up or expired keeps its payload in
// pgrelay.dead_letters; admins retry or discard it.

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/testenv"
)

// deadLetter is one row of pgrelay.dead_letters.
type deadLetter struct {
	ID, OriginID   int64
	Channel        string
	Payload        string
	Attempts       int32
	LastError      *string
	Outcome        string
	EndedAt        time.Time
	Node           int32
	RunInNode      *int32
	NotificationID *int64
}

func (d *sqlDB) deadLetters(where string, args ...any) []deadLetter {
	d.T.Helper()
	rows, err := d.Pool.Query(bg, `SELECT id, origin_id, channel, payload, attempts, last_error, outcome, ended_at,
		node, run_in_node, notification_id FROM pgrelay.dead_letters WHERE `+where+` ORDER BY id`, args...)
	require.NoError(d.T, err)
	defer rows.Close()
	var out []deadLetter
	for rows.Next() {
		var l deadLetter
		require.NoError(d.T, rows.Scan(&l.ID, &l.OriginID, &l.Channel, &l.Payload, &l.Attempts, &l.LastError,
			&l.Outcome, &l.EndedAt, &l.Node, &l.RunInNode, &l.NotificationID))
		out = append(out, l)
	}
	require.NoError(d.T, rows.Err())
	return out
}

// giveUp runs the one claimable event of channel to its end: failed with
// errText on every attempt (the channel's max_attempts being 1).
func giveUp(t *testing.T, q querier, proc int64, errText string, kinds ...string) claimedRow {
	t.Helper()
	got := claim(t, q, proc, 1, kinds...)
	require.Len(t, got, 1)
	require.Equal(t, 1, complete(t, q, proc, got[0], "failed", errText))
	return got[0]
}

// An event failing its last attempt lands in dead_letters with its payload and
// last error, in the transaction of its gave_up log row; an expired event too.
// A succeeding or retried one does not.
func TestDeadLetterOnGaveUpAndExpired(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("one", "p_max_attempts := 1")
	d.register("two", "p_max_attempts := 2, p_retry_delay := '0'")
	d.register("exp", "p_expire_after := '1 hour'")
	proc := startProcessor(t, d.Pool)

	id := d.notify("one", `{"order": 7}`)
	ended := giveUp(t, d.Pool, proc, "boom")
	got := d.deadLetters("true")
	require.Len(t, got, 1)
	l := got[0]
	require.Equal(t, ended.ID, l.ID)
	require.Equal(t, id, l.OriginID)
	require.Equal(t, "one", l.Channel)
	require.Equal(t, `{"order": 7}`, l.Payload)
	require.EqualValues(t, 1, l.Attempts)
	require.Equal(t, "boom", *l.LastError)
	require.Equal(t, "gave_up", l.Outcome)
	require.Zero(t, l.Node)
	require.Nil(t, l.RunInNode)
	require.Nil(t, l.NotificationID)
	require.WithinDuration(t, time.Now(), l.EndedAt, time.Minute)
	d.requireStatus(id, "gave_up")

	// A retry within max_attempts is no dead letter; its last attempt is.
	two := d.notify("two", "p2")
	first := claim(t, d.Pool, proc, 1)
	complete(t, d.Pool, proc, first[0], "failed", "first")
	require.Empty(t, d.deadLetters("channel = 'two'"))
	second := giveUp(t, d.Pool, proc, "second")
	got = d.deadLetters("channel = 'two'")
	require.Len(t, got, 1)
	require.Equal(t, second.ID, got[0].ID)
	require.Equal(t, two, got[0].OriginID)
	require.EqualValues(t, 2, got[0].Attempts)
	require.Equal(t, "second", *got[0].LastError)

	exp := d.notify("exp", "late")
	d.Exec("UPDATE pgrelay.queue SET expires_at = now() - interval '1 second' WHERE id = $1", exp)
	c := claim(t, d.Pool, proc, 1)
	require.True(t, c[0].Expired)
	complete(t, d.Pool, proc, c[0], "expired", "")
	got = d.deadLetters("channel = 'exp'")
	require.Len(t, got, 1)
	require.Equal(t, "expired", got[0].Outcome)
	require.Equal(t, "late", got[0].Payload)
	require.Nil(t, got[0].LastError)

	ok := d.notify("one", "fine")
	c = claim(t, d.Pool, proc, 1)
	complete(t, d.Pool, proc, c[0], "succeeded", "")
	require.Empty(t, d.deadLetters("origin_id = $1", ok))
	require.Equal(t, 3, d.Count("SELECT count(*) FROM pgrelay.dead_letters"))
}

// A direct batch (no claim, p_processor NULL) ends events through _complete
// too, and a rescue on the last attempt and a decommission give up theirs: each
// leaves a dead letter.
func TestDeadLetterFromDirectRescueAndDecommission(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("one", "p_max_attempts := 1")
	d.register("pin", "p_node_restricted := true")

	direct := d.notify("one", "direct")
	tx, err := d.Pool.Begin(bg)
	require.NoError(t, err)
	require.EqualValues(t, 1, testenv.One[int32](t, tx, `SELECT pgrelay._complete(NULL, ARRAY[$1::bigint], NULL,
		ARRAY['failed'], ARRAY['direct boom'])`, direct))
	require.NoError(t, tx.Commit(bg))
	require.Equal(t, "direct boom", *d.deadLetters("id = $1", direct)[0].LastError)

	rescued := d.notify("one", "rescued")
	dead := startProcessor(t, d.Pool)
	live := startProcessor(t, d.Pool)
	require.Len(t, claim(t, d.Pool, dead, 1), 1)
	d.Exec("UPDATE pgrelay.processors SET last_seen = now() - interval '1 minute' WHERE processor_id = $1", dead)
	require.EqualValues(t, 1, testenv.One[int32](t, d.Pool, "SELECT pgrelay._rescue($1, '30 seconds', '1 hour')", live))
	got := d.deadLetters("origin_id = $1", rescued)
	require.Len(t, got, 1)
	require.Equal(t, "rescued", got[0].Payload)
	require.Contains(t, *got[0].LastError, "stopped heartbeating")
	require.Equal(t, "gave_up", got[0].Outcome)

	n3 := d.Conn(3)
	pinned := testenv.One[int64](t, n3, "SELECT pgrelay.notify('pin', 'on three')")
	require.EqualValues(t, 1, testenv.One[int64](t, d.Pool, "SELECT pgrelay.decommission(3)"))
	got = d.deadLetters("origin_id = $1", pinned)
	require.Len(t, got, 1)
	require.Equal(t, "on three", got[0].Payload)
	require.EqualValues(t, 3, *got[0].RunInNode)
	require.Contains(t, *got[0].LastError, "node 3 was decommissioned")
}

// retry enqueues the dead event again: a new id, attempt 1, the same
// origin_id (status follows it), a 'retried' log row; the dead letter is
// gone. The retried event runs and succeeds.
func TestDeadLetterRetry(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("one", "p_max_attempts := 1, p_expire_after := '1 hour'")
	proc := startProcessor(t, d.Pool)
	id := d.notify("one", "again")
	ended := giveUp(t, d.Pool, proc, "boom")

	newID := testenv.One[int64](t, d.Pool, "SELECT pgrelay.retry($1)", ended.ID)
	require.NotEqual(t, ended.ID, newID)
	require.Empty(t, d.deadLetters("true"))
	type row struct {
		Origin, RetryOf int64
		Attempt         int32
		Payload         string
		Fresh           bool
	}
	var r row
	require.NoError(t, d.Pool.QueryRow(bg, `SELECT origin_id, retry_of, attempt, payload,
		  expires_at > now() + interval '59 minutes' AND not_before <= now()
		  FROM pgrelay.queue WHERE id = $1`, newID).Scan(&r.Origin, &r.RetryOf, &r.Attempt, &r.Payload, &r.Fresh))
	require.Equal(t, row{Origin: id, RetryOf: ended.ID, Attempt: 1, Payload: "again", Fresh: true}, r)
	d.requireStatus(id, "pending")
	require.Equal(t, []string{"gave_up", "retried"},
		testenv.Column[string](t, d.Pool, "SELECT event FROM pgrelay.log WHERE origin_id = $1 ORDER BY id", id))
	require.Equal(t, newID, testenv.One[int64](t, d.Pool,
		"SELECT queue_id FROM pgrelay.log WHERE origin_id = $1 AND event = 'retried'", id))

	c := claim(t, d.Pool, proc, 1)
	require.Len(t, c, 1)
	require.Equal(t, newID, c[0].ID)
	require.Equal(t, 1, complete(t, d.Pool, proc, c[0], "succeeded", ""))
	d.requireStatus(id, "succeeded")

	// Retried once: a second retry of the same dead letter finds none.
	requireCode(t, d.Err("SELECT pgrelay.retry($1)", ended.ID), "PR050")
	requireCode(t, d.Err("SELECT pgrelay.retry(12345)"), "PR050")
	requireCode(t, d.Err("SELECT pgrelay.discard(12345)"), "PR050")
}

// A dead letter of an unregistered channel cannot be retried (PR001) and stays.
func TestDeadLetterRetryOfUnregisteredChannel(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("one", "p_max_attempts := 1")
	proc := startProcessor(t, d.Pool)
	d.notify("one", "x")
	ended := giveUp(t, d.Pool, proc, "boom")
	d.Exec("SELECT pgrelay.unregister('one')")
	requireCode(t, d.Err("SELECT pgrelay.retry($1)", ended.ID), "PR001")
	require.Len(t, d.deadLetters("true"), 1)
}

// retry_all retries a channel's dead letters, those that ended since p_since
// when given, and returns how many; other channels' stay.
func TestDeadLetterRetryAll(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("a", "p_max_attempts := 1")
	d.register("b", "p_max_attempts := 1")
	proc := startProcessor(t, d.Pool)
	for _, ch := range []string{"a", "a", "a", "b"} {
		d.notify(ch, ch)
		giveUp(t, d.Pool, proc, "boom")
	}
	old := d.deadLetters("channel = 'a'")[0].ID
	d.Exec("UPDATE pgrelay.dead_letters SET ended_at = now() - interval '2 days' WHERE id = $1", old)

	require.EqualValues(t, 2, testenv.One[int64](t, d.Pool, "SELECT pgrelay.retry_all('a', now() - interval '1 day')"))
	require.Len(t, d.deadLetters("channel = 'a'"), 1)
	require.Equal(t, old, d.deadLetters("channel = 'a'")[0].ID)
	require.EqualValues(t, 1, testenv.One[int64](t, d.Pool, "SELECT pgrelay.retry_all('a')"))
	require.Empty(t, d.deadLetters("channel = 'a'"))
	require.Len(t, d.deadLetters("channel = 'b'"), 1)
	require.Zero(t, testenv.One[int64](t, d.Pool, "SELECT pgrelay.retry_all('a')"))
	require.Equal(t, 3, d.Count("SELECT count(*) FROM pgrelay.queue WHERE channel = 'a' AND attempt = 1"))
	require.Equal(t, 3, d.Count("SELECT count(*) FROM pgrelay.log WHERE event = 'retried'"))
	requireCode(t, d.Err("SELECT pgrelay.retry_all(NULL)"), "PR001")
}

// discard removes a dead letter for good and logs 'discarded'.
func TestDeadLetterDiscard(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("one", "p_max_attempts := 1")
	proc := startProcessor(t, d.Pool)
	id := d.notify("one", "x")
	ended := giveUp(t, d.Pool, proc, "boom")
	require.True(t, testenv.One[bool](t, d.Pool, "SELECT pgrelay.discard($1)", ended.ID))
	require.Empty(t, d.deadLetters("true"))
	require.Equal(t, []string{"gave_up", "discarded"},
		testenv.Column[string](t, d.Pool, "SELECT event FROM pgrelay.log WHERE origin_id = $1 ORDER BY id", id))
	require.Zero(t, d.Count("SELECT count(*) FROM pgrelay.queue"))
	d.requireStatus(id, "gave_up")
	requireCode(t, d.Err("SELECT pgrelay.discard($1)", ended.ID), "PR050")
	requireCode(t, d.Err("SELECT pgrelay.retry($1)", ended.ID), "PR050")
}

// discard_all discards a channel's dead letters (those that ended since
// p_since), each as discard() does: one 'discarded' log row per letter.
func TestDeadLetterDiscardAll(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("a", "p_max_attempts := 1")
	d.register("b", "p_max_attempts := 1")
	proc := startProcessor(t, d.Pool)
	var origins []int64
	for _, ch := range []string{"a", "a", "a", "b"} {
		origins = append(origins, d.notify(ch, ch))
		giveUp(t, d.Pool, proc, "boom")
	}
	old := d.deadLetters("channel = 'a'")[0]
	d.Exec("UPDATE pgrelay.dead_letters SET ended_at = now() - interval '2 days' WHERE id = $1", old.ID)

	require.EqualValues(t, 2, testenv.One[int64](t, d.Pool, "SELECT pgrelay.discard_all('a', now() - interval '1 day')"))
	require.Equal(t, []int64{old.ID}, testenv.Column[int64](t, d.Pool, "SELECT id FROM pgrelay.dead_letters WHERE channel = 'a'"))
	require.EqualValues(t, 1, testenv.One[int64](t, d.Pool, "SELECT pgrelay.discard_all('a')"))
	require.Empty(t, d.deadLetters("channel = 'a'"))
	require.Len(t, d.deadLetters("channel = 'b'"), 1)
	require.Zero(t, testenv.One[int64](t, d.Pool, "SELECT pgrelay.discard_all('a')"))
	for _, o := range origins[:3] {
		require.Equal(t, []string{"gave_up", "discarded"},
			testenv.Column[string](t, d.Pool, "SELECT event FROM pgrelay.log WHERE origin_id = $1 ORDER BY id", o))
		d.requireStatus(o, "gave_up")
	}
	require.Contains(t, testenv.One[string](t, d.Pool,
		"SELECT error FROM pgrelay.log WHERE event = 'discarded' AND queue_id = $1", old.ID), "discarded by ")
	require.Zero(t, d.Count("SELECT count(*) FROM pgrelay.queue"))
	requireCode(t, d.Err("SELECT pgrelay.discard_all(NULL)"), "PR001")
}

// Retention trims dead letters that ended before it, oldest first, in batches.
func TestDeadLetterRetention(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("one", "p_max_attempts := 1")
	proc := startProcessor(t, d.Pool)
	for range 4 {
		d.notify("one", "x")
		giveUp(t, d.Pool, proc, "boom")
	}
	all := d.deadLetters("true")
	d.Exec("UPDATE pgrelay.dead_letters SET ended_at = now() - interval '15 days' WHERE id = ANY ($1)",
		[]int64{all[0].ID, all[1].ID, all[2].ID})
	require.EqualValues(t, 2, testenv.One[int32](t, d.Pool, "SELECT pgrelay._trim_dead_letters('14 days', 2)"))
	require.EqualValues(t, 1, testenv.One[int32](t, d.Pool, "SELECT pgrelay._trim_dead_letters('14 days', 2)"))
	require.Zero(t, testenv.One[int32](t, d.Pool, "SELECT pgrelay._trim_dead_letters('14 days', 2)"))
	left := d.deadLetters("true")
	require.Len(t, left, 1)
	require.Equal(t, all[3].ID, left[0].ID)
}

// Only admins retry and discard; a producer and a processor cannot, nor
// delete one. The Processor writes dead letters and trims them by age
// (_trim_dead_letters, which runs as the schema's owner).
func TestDeadLetterRoles(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("one", "p_max_attempts := 1")
	proc := startProcessor(t, d.Pool)
	for range 3 {
		d.notify("one", "x")
		giveUp(t, d.Pool, proc, "boom")
	}
	all := d.deadLetters("true")
	producer := d.loginAs("producer", "pgrelay_producer")
	processor := d.loginAs("processor", "pgrelay_processor")
	admin := d.loginAs("admin", "pgrelay_admin")
	for _, c := range []struct {
		name string
		err  func(string, ...any) error
	}{{"producer", func(s string, a ...any) error { return execErr(producer, s, a...) }},
		{"processor", func(s string, a ...any) error { return execErr(processor, s, a...) }}} {
		for _, sql := range []string{"SELECT pgrelay.retry($1)", "SELECT pgrelay.discard($1)",
			"DELETE FROM pgrelay.dead_letters WHERE id = $1"} {
			requireCode(t, c.err(sql, all[0].ID), insufficientPrivilege, c.name+": "+sql)
		}
		requireCode(t, c.err("SELECT pgrelay.retry_all('one')"), insufficientPrivilege, c.name)
		requireCode(t, c.err("SELECT pgrelay.discard_all('one')"), insufficientPrivilege, c.name)
	}
	requireCode(t, execErr(producer, "SELECT * FROM pgrelay.dead_letters"), insufficientPrivilege)
	requireCode(t, execErr(admin, "DELETE FROM pgrelay.dead_letters"), insufficientPrivilege)
	requireCode(t, execErr(admin, "SELECT pgrelay._trim_dead_letters('1 day', 10)"), insufficientPrivilege)
	require.Len(t, d.deadLetters("true"), 3)

	require.EqualValues(t, 3, testenv.One[int64](t, admin, "SELECT count(*) FROM pgrelay.dead_letters"))
	testenv.One[int64](t, admin, "SELECT pgrelay.retry($1)", all[0].ID)
	require.True(t, testenv.One[bool](t, admin, "SELECT pgrelay.discard($1)", all[1].ID))
	require.EqualValues(t, 1, testenv.One[int64](t, admin, "SELECT pgrelay.retry_all('one')"))
	d.notify("one", "y")
	giveUp(t, d.Pool, proc, "boom")
	require.EqualValues(t, 1, testenv.One[int64](t, admin, "SELECT pgrelay.discard_all('one')"))
	d.notify("one", "z")
	giveUp(t, d.Pool, proc, "boom")
	d.Exec("UPDATE pgrelay.dead_letters SET ended_at = now() - interval '2 days'")
	require.EqualValues(t, 1, testenv.One[int32](t, processor, "SELECT pgrelay._trim_dead_letters('1 day', 10)"))
	require.Zero(t, testenv.One[int32](t, processor, "SELECT pgrelay._trim_dead_letters('1 day', 10)"))
}

// A node-restricted channel's retry goes back to the node the event was
// pinned to, whichever node the admin retries it from; a pin to a
// decommissioned node is refused (PR051).
func TestDeadLetterRetryKeepsThePin(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("pin", "p_node_restricted := true, p_max_attempts := 1")
	n3 := d.Conn(3)
	proc := startProcessor(t, n3)
	id := testenv.One[int64](t, n3, "SELECT pgrelay.notify('pin', 'x')")
	ended := giveUp(t, n3, proc, "boom")
	l := d.deadLetters("true")[0]
	require.EqualValues(t, 3, *l.RunInNode)
	require.EqualValues(t, 3, l.Node)

	admin := d.Conn(5)
	newID := testenv.One[int64](t, admin, "SELECT pgrelay.retry($1)", ended.ID)
	var runIn, owner int32
	require.NoError(t, d.Pool.QueryRow(bg, "SELECT run_in_node, owner_node FROM pgrelay.queue WHERE id = $1", newID).
		Scan(&runIn, &owner))
	require.EqualValues(t, 3, runIn)
	require.EqualValues(t, 3, owner)
	require.EqualValues(t, 5, testenv.One[int32](t, d.Pool, "SELECT node FROM pgrelay.log WHERE event = 'retried'"))
	// Node 5 does not run it; node 3 does.
	require.Empty(t, claim(t, admin, startProcessor(t, admin), 10))
	c := claim(t, n3, proc, 10)
	require.Len(t, c, 1)
	require.Equal(t, id, c[0].OriginID)

	// Pinned to a node that is gone: refused, the dead letter stays.
	giveUp2 := complete(t, n3, proc, c[0], "failed", "again")
	require.Equal(t, 1, giveUp2)
	d.Exec("UPDATE pgrelay.nodes SET last_seen = now() - interval '1 hour' WHERE node_id = 3")
	d.Exec("SELECT pgrelay.decommission(3)")
	requireCode(t, d.Err("SELECT pgrelay.retry($1)", c[0].ID), "PR051")
	require.Len(t, d.deadLetters("true"), 1)
}

// An email event's retry puts its failed notification back to 'queued',
// recorded as a status event and in its debug log; the retried event may send
// it. A sent notification never moves back.
func TestDeadLetterRetryRequeuesTheEmail(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.emailChannel("mail", "p_max_attempts := 1")
	send := func() int64 {
		return testenv.One[int64](t, d.Pool, `SELECT pgrelay_notifier.send('mail', ARRAY['to@example.org'], 'Hi', 'Body')`)
	}
	failed, sent := send(), send()
	proc := startProcessor(t, d.Pool)
	c := claim(t, d.Pool, proc, 10, "email")
	require.Len(t, c, 2)
	for _, r := range c {
		require.Equal(t, "send", testenv.One[string](t, d.Pool,
			"SELECT verdict FROM pgrelay_notifier.start_sending($1, 'mail', $2)", r.Payload, r.OriginID))
	}
	// The handler: one message refused for good, the other sent, but its
	// completion lost (the event gives up all the same).
	d.Exec("SELECT pgrelay_notifier.set_status($1, 'failed', '550 no such user')", failed)
	d.Exec("SELECT pgrelay_notifier.set_status($1, 'sent')", sent)
	for _, r := range c {
		require.Equal(t, 1, complete(t, d.Pool, proc, r, "failed", "550 no such user"))
	}
	dead := d.deadLetters("notification_id = $1", failed)
	require.Len(t, dead, 1)
	require.Len(t, d.deadLetters("notification_id = $1", sent), 1)

	testenv.One[int64](t, d.Pool, "SELECT pgrelay.retry($1)", dead[0].ID)
	require.Equal(t, "queued", testenv.One[string](t, d.Pool, "SELECT pgrelay_notifier.get_status($1)", failed))
	require.Equal(t, []string{"queued", "sending", "failed", "queued"}, testenv.Column[string](t, d.Pool,
		"SELECT status FROM pgrelay_notifier.status_events WHERE notification_id = $1 ORDER BY id", failed))
	require.Contains(t, testenv.One[string](t, d.Pool,
		"SELECT message FROM pgrelay_notifier.debug_log WHERE notification_id = $1 ORDER BY id DESC LIMIT 1", failed),
		"retried")
	c = claim(t, d.Pool, proc, 10, "email")
	require.Len(t, c, 1)
	require.Equal(t, "send", testenv.One[string](t, d.Pool,
		"SELECT verdict FROM pgrelay_notifier.start_sending($1, 'mail', $2)", c[0].Payload, c[0].OriginID))

	testenv.One[int64](t, d.Pool, "SELECT pgrelay.retry(id) FROM pgrelay.dead_letters WHERE notification_id = $1", sent)
	require.Equal(t, "sent", testenv.One[string](t, d.Pool, "SELECT pgrelay_notifier.get_status($1)", sent))
	require.Equal(t, []string{"queued", "sending", "sent"}, testenv.Column[string](t, d.Pool,
		"SELECT status FROM pgrelay_notifier.status_events WHERE notification_id = $1 ORDER BY id", sent))
}

// Retention, retry_all, the listing and an event's dead letters read their
// indexes on a large table (also with the generic plans PL/pgSQL caches),
// never the whole table.
func TestExplainDeadLetters(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.Exec(`INSERT INTO pgrelay.dead_letters (id, origin_id, channel, payload, attempts, outcome, ended_at, node)
		SELECT g, g, 'c' || (g % 20), 'p', 1, 'gave_up', now() - g * interval '1 second', 0
		  FROM generate_series(1, 50000) g`)
	d.Exec("ANALYZE pgrelay.dead_letters")
	c := d.Conn(-1)
	_, err := c.Exec(bg, "SET plan_cache_mode = force_generic_plan")
	require.NoError(t, err)
	for name, tc := range map[string]struct{ sql, args, index string }{
		"trim": {`SELECT x.id FROM pgrelay.dead_letters x WHERE x.ended_at < now() - $1::interval
			ORDER BY x.ended_at LIMIT $2`, "('1 hour', 5000)", "dead_letters_ended"},
		"retry_all": {`SELECT y.id FROM pgrelay.dead_letters y WHERE y.channel = $1 AND ($2::timestamptz IS NULL OR y.ended_at >= $2)
			ORDER BY y.ended_at, y.id FOR UPDATE SKIP LOCKED`, "('c3', now() - interval '1 hour')", "dead_letters_channel_ended"},
		"list": {`SELECT d.id FROM pgrelay.dead_letters d WHERE d.channel = $1 ORDER BY d.ended_at DESC LIMIT 100`,
			"('c3')", "dead_letters_channel_ended"},
		// The console's event page: an event's dead letters, newest first.
		"of_origin": {`SELECT d.id FROM pgrelay.dead_letters d WHERE d.origin_id = $1 ORDER BY d.id DESC LIMIT $2`,
			"(4242, 10)", "dead_letters_origin"},
	} {
		_, err := c.Exec(bg, "PREPARE "+name+" AS "+tc.sql)
		require.NoError(t, err, name)
		plan := strings.Join(testenv.Column[string](t, c, "EXPLAIN EXECUTE "+name+tc.args), "\n")
		require.Contains(t, plan, tc.index, name+"\n"+plan)
		require.NotContains(t, plan, "Seq Scan", name+"\n"+plan)
	}
}

// The dead letter interface's names and types are a contract (SPEC.md, and
// the console reads the table's columns).
func TestDeadLetterSignatures(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	for fn, want := range map[string]string{
		"pgrelay.retry":     "p_id bigint",
		"pgrelay.retry_all": "p_channel text, p_since timestamp with time zone",
		"pgrelay.discard":   "p_id bigint",
	} {
		require.Equal(t, want, identityArgs(t, d.Pool, fn), fn)
	}
	require.Equal(t, "timestamp with time zone DEFAULT NULL::timestamp with time zone",
		arguments(t, d.Pool, "pgrelay.retry_all")["p_since"])
	require.Equal(t, []string{"bigint", "bigint", "boolean"}, testenv.Column[string](t, d.Pool,
		`SELECT format_type(p.prorettype, NULL) FROM pg_proc p WHERE p.oid IN
		   ('pgrelay.retry(bigint)'::regprocedure, 'pgrelay.retry_all(text, timestamptz)'::regprocedure,
		    'pgrelay.discard(bigint)'::regprocedure) ORDER BY p.proname DESC`))
	require.Equal(t, []string{
		"id bigint NO", "origin_id bigint NO", "channel text NO", "payload text NO", "attempts integer NO",
		"last_error text YES", "outcome text NO", "ended_at timestamp with time zone NO", "node integer NO",
		"run_in_node integer YES", "notification_id bigint YES", "priority smallint YES",
	}, testenv.Column[string](t, d.Pool, `SELECT column_name || ' ' || data_type || ' ' || is_nullable
		FROM information_schema.columns WHERE table_schema = 'pgrelay' AND table_name = 'dead_letters'
		ORDER BY ordinal_position`))
}
