package migrations_test

// The Processor's housekeeping: _processor_start, _heartbeat, _rescue,
// _processor_stop, _trim_log.

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/testenv"
)

// Claims of a Processor that stopped heartbeating go back to pending with the
// attempt counted, logged 'rescued'; the dead instance's row is removed.
func TestRescueDeadProcessor(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("c", "")
	dead := startProcessor(t, d.Pool)
	live := startProcessor(t, d.Pool)
	require.NotEqual(t, dead, live)
	for _, p := range []string{"1", "2", "3"} {
		d.notify("c", p)
	}
	deadClaims := claim(t, d.Pool, dead, 2)
	require.Len(t, deadClaims, 2)
	liveClaims := claim(t, d.Pool, live, 10)
	require.Len(t, liveClaims, 1)

	// Not dead yet: nothing to rescue.
	require.Zero(t, testenv.One[int32](t, d.Pool, "SELECT pgrelay._rescue($1, '30 seconds', '1 hour')", live))
	d.Exec("UPDATE pgrelay.processors SET last_seen = now() - interval '1 minute' WHERE processor_id = $1", dead)
	// The rescuer never takes its own claims as a dead processor's.
	require.Zero(t, testenv.One[int32](t, d.Pool, "SELECT pgrelay._rescue($1, '30 seconds', '1 hour')", dead))
	require.Equal(t, 1, d.Count("SELECT count(*) FROM pgrelay.processors WHERE processor_id = $1", dead))

	require.EqualValues(t, 2, testenv.One[int32](t, d.Pool, "SELECT pgrelay._rescue($1, '30 seconds', '1 hour')", live))
	for _, c := range deadClaims {
		require.Equal(t, 1, d.Count("SELECT count(*) FROM pgrelay.queue WHERE id = $1 AND dispatched_at IS NULL AND dispatched_by IS NULL AND attempt = 2", c.ID))
		d.requireStatus(c.ID, "retrying")
	}
	require.Equal(t, 1, d.Count("SELECT count(*) FROM pgrelay.queue WHERE dispatched_by = $1", live), "the live processor's claim is untouched")
	require.Zero(t, d.Count("SELECT count(*) FROM pgrelay.processors WHERE processor_id = $1", dead))
	require.Equal(t, 1, d.Count("SELECT count(*) FROM pgrelay.processors WHERE processor_id = $1", live))
	rows := testenv.Column[int64](t, d.Pool, "SELECT queue_id FROM pgrelay.log WHERE event = 'rescued' ORDER BY queue_id")
	require.ElementsMatch(t, ids(deadClaims), rows)
	require.Equal(t, 2, d.Count("SELECT count(*) FROM pgrelay.log WHERE event = 'rescued' AND attempt = 1 AND error LIKE 'processor ' || $1::bigint || ' stopped heartbeating while running attempt 1'", dead))

	// The dead processor's late outcome does not apply; its heartbeat tells it.
	require.Zero(t, complete(t, d.Pool, dead, deadClaims[0], "succeeded", ""))
	require.False(t, testenv.One[bool](t, d.Pool, "SELECT pgrelay._heartbeat($1, 'single', 'host', 1, 'test')", dead))
	require.True(t, testenv.One[bool](t, d.Pool, "SELECT pgrelay._heartbeat($1, 'single', 'host', 1, 'test')", dead))

	// Rescued rows are claimed again.
	require.Len(t, claim(t, d.Pool, live, 10), 2)
	// A second rescue finds nothing.
	require.Zero(t, testenv.One[int32](t, d.Pool, "SELECT pgrelay._rescue($1, '30 seconds', '1 hour')", live))
}

// A dead processor of another node is that node's business; a claim held past
// its channel's timeout plus the grace is rescued whoever holds it on this
// node, or when its holder is unknown.
func TestRescueStuckClaims(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("c", "p_timeout := '30 seconds'")
	d.register("slow", "p_timeout := '10 minutes'")
	live := startProcessor(t, d.Pool)
	other := startProcessor(t, d.Conn(5)) // a live processor on node 5
	for _, p := range []string{"1", "2", "3", "4"} {
		d.notify("c", p)
	}
	d.notify("slow", "1")
	got := claim(t, d.Pool, live, 10)
	require.Len(t, got, 5)
	var fast []claimedRow
	var slow claimedRow
	for _, g := range got {
		if g.Channel == "slow" {
			slow = g
		} else {
			fast = append(fast, g)
		}
	}
	held := func(c claimedRow, proc int64, ago string) {
		d.Exec("UPDATE pgrelay.queue SET dispatched_by = $2, dispatched_at = now() - $3::interval WHERE id = $1", c.ID, proc, ago)
	}
	held(fast[0], live, "80 seconds")   // within 30 s + 60 s
	held(fast[1], live, "100 seconds")  // past it
	held(fast[2], 999, "100 seconds")   // holder unknown
	held(fast[3], other, "100 seconds") // held by a live processor of node 5
	held(slow, live, "5 minutes")       // within its channel's longer timeout

	require.EqualValues(t, 2, testenv.One[int32](t, d.Pool, "SELECT pgrelay._rescue($1, '30 seconds', '60 seconds')", live))
	pending := testenv.Column[int64](t, d.Pool, "SELECT id FROM pgrelay.queue WHERE dispatched_at IS NULL")
	require.ElementsMatch(t, []int64{fast[1].ID, fast[2].ID}, pending)
	require.Equal(t, 2, d.Count("SELECT count(*) FROM pgrelay.log WHERE event = 'rescued' AND error LIKE 'claim lease expired: processor % held attempt 1 past the channel timeout plus 00:01:00'"))
	require.Equal(t, 2, d.Count("SELECT count(*) FROM pgrelay.processors"), "live processors are kept")

	// Node 5 rescues its own processor's stuck claim.
	require.EqualValues(t, 1, testenv.One[int32](t, d.Conn(5), "SELECT pgrelay._rescue($1, '30 seconds', '60 seconds')", other))
	require.Equal(t, 1, d.Count("SELECT count(*) FROM pgrelay.queue WHERE id = $1 AND dispatched_at IS NULL", fast[3].ID))
	require.Equal(t, []int32{0, 0, 5}, testenv.Column[int32](t, d.Pool, "SELECT node FROM pgrelay.log ORDER BY node"))
}

// A rescue counts an attempt: an event whose Processor dies on its last
// attempt gives up instead of looping forever.
func TestRescueOnLastAttemptGivesUp(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("c", "p_max_attempts := 2")
	dead := startProcessor(t, d.Pool)
	live := startProcessor(t, d.Pool)
	id := d.notify("c", "poison")
	for attempt := 1; attempt <= 2; attempt++ {
		got := claim(t, d.Pool, dead, 1)
		require.Len(t, got, 1)
		require.Equal(t, attempt, got[0].Attempt)
		d.Exec("UPDATE pgrelay.processors SET last_seen = now() - interval '1 minute' WHERE processor_id = $1", dead)
		require.EqualValues(t, 1, testenv.One[int32](t, d.Pool, "SELECT pgrelay._rescue($1, '30 seconds', '1 hour')", live))
		require.True(t, testenv.One[bool](t, d.Pool, "SELECT NOT pgrelay._heartbeat($1, 'single', 'host', 1, 'test')", dead))
	}
	require.Zero(t, d.Count("SELECT count(*) FROM pgrelay.queue"))
	require.Equal(t, []string{"rescued", "gave_up"}, testenv.Column[string](t, d.Pool,
		"SELECT event FROM pgrelay.log WHERE origin_id = $1 ORDER BY id", id))
	require.Equal(t, 1, d.Count("SELECT count(*) FROM pgrelay.log WHERE event = 'gave_up' AND attempt = 2 AND error LIKE '%(its last attempt)'"))
	d.requireStatus(id, "gave_up")
}

// A clean stop releases the instance's claims (no log rows) and removes it.
func TestProcessorStop(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("c", "")
	p1 := startProcessor(t, d.Pool)
	p2 := startProcessor(t, d.Pool)
	require.Equal(t, 2, d.Count("SELECT count(*) FROM pgrelay.processors"))
	require.Equal(t, 1, d.Count("SELECT count(*) FROM pgrelay.nodes WHERE node_id = 0 AND mode = 'single' AND hostname = 'host'"))
	for _, p := range []string{"1", "2", "3", "4"} {
		d.notify("c", p)
	}
	mine := claim(t, d.Pool, p1, 3)
	require.Len(t, mine, 3)
	theirs := claim(t, d.Pool, p2, 3)
	require.Len(t, theirs, 1)

	require.EqualValues(t, 3, testenv.One[int32](t, d.Pool, "SELECT pgrelay._processor_stop($1)", p1))
	for _, c := range mine {
		d.requireStatus(c.ID, "pending")
	}
	require.Equal(t, 1, d.Count("SELECT count(*) FROM pgrelay.queue WHERE dispatched_by = $1", p2))
	require.Zero(t, d.Count("SELECT count(*) FROM pgrelay.log"))
	require.Equal(t, []int64{p2}, testenv.Column[int64](t, d.Pool, "SELECT processor_id FROM pgrelay.processors"))
	require.Zero(t, testenv.One[int32](t, d.Pool, "SELECT pgrelay._processor_stop($1)", p1), "stopping twice is harmless")
	require.Zero(t, complete(t, d.Pool, p1, mine[0], "succeeded", ""))
}

func TestHeartbeat(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	c := d.Conn(4)
	p := startProcessor(t, c)
	require.Equal(t, 1, d.Count("SELECT count(*) FROM pgrelay.processors WHERE processor_id = $1 AND node_id = 4", p))
	d.Exec("UPDATE pgrelay.processors SET last_seen = now() - interval '1 hour'")
	d.Exec("UPDATE pgrelay.nodes SET last_seen = now() - interval '1 hour'")
	require.True(t, testenv.One[bool](t, c, "SELECT pgrelay._heartbeat($1, 'multi-node', 'host2', 2, 'v2')", p))
	require.True(t, testenv.One[bool](t, d.Pool, "SELECT last_seen > now() - interval '1 minute' FROM pgrelay.processors WHERE processor_id = $1", p))
	require.True(t, testenv.One[bool](t, d.Pool, "SELECT last_seen > now() - interval '1 minute' AND mode = 'multi-node' AND hostname = 'host2' FROM pgrelay.nodes WHERE node_id = 4"))
}

// _trim_log deletes log rows older than the interval, oldest first, at most
// p_batch of them, by id.
func TestTrimLog(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	insertAt := func(age string, n int) []int64 {
		return testenv.Column[int64](t, d.Pool, `INSERT INTO pgrelay.log (id, queue_id, origin_id, channel, attempt, event)
			SELECT pgrelay._id_floor(now() - $1::interval) + g, 1, 1, 'c', 1, 'succeeded'
			  FROM generate_series(0, $2 - 1) g
			RETURNING id`, age, n)
	}
	old := insertAt("3 days", 5)
	older := insertAt("10 days", 3)
	recent := insertAt("12 hours", 2)
	d.Exec("INSERT INTO pgrelay.log (queue_id, origin_id, channel, attempt, event) VALUES (1, 1, 'c', 1, 'succeeded')")

	require.EqualValues(t, 2, testenv.One[int32](t, d.Pool, "SELECT deleted FROM pgrelay._trim_log('1 day', 2)"))
	left := testenv.Column[int64](t, d.Pool, "SELECT id FROM pgrelay.log ORDER BY id")
	require.NotContains(t, left, older[0], "oldest first")
	require.NotContains(t, left, older[1])
	require.Contains(t, left, older[2])

	require.EqualValues(t, 6, testenv.One[int32](t, d.Pool, "SELECT deleted FROM pgrelay._trim_log('1 day', 100)"))
	left = testenv.Column[int64](t, d.Pool, "SELECT id FROM pgrelay.log ORDER BY id")
	require.Len(t, left, 3)
	require.Equal(t, recent, left[:2])
	for _, id := range old {
		require.NotContains(t, left, id)
	}
	require.Zero(t, testenv.One[int32](t, d.Pool, "SELECT deleted FROM pgrelay._trim_log('1 day', 100)"))
	require.EqualValues(t, 2, testenv.One[int32](t, d.Pool, "SELECT deleted FROM pgrelay._trim_log('6 hours', 100)"))
	require.Len(t, testenv.Column[int64](t, d.Pool, "SELECT id FROM pgrelay.log"), 1)
}

// An email event whose claim rescue takes back on its last attempt ends
// gave_up without ever reaching the email handler again: its notification
// ends 'failed' with the reason, in the same transaction. A notification sent
// meanwhile stays 'sent'; one with attempts left is only rescued.
func TestRescueGivingUpFailsTheNotification(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.Exec(`SELECT pgrelay_notifier.create_channel('last', 'app@example.com', p_max_attempts := 1)`)
	d.Exec(`SELECT pgrelay_notifier.create_channel('more', 'app@example.com', p_max_attempts := 3)`)
	send := func(channel string) int64 {
		return testenv.One[int64](t, d.Pool, `SELECT pgrelay_notifier.send($1, ARRAY['to@example.org'], 'Hi', 'Body')`, channel)
	}
	lost, sent, retried := send("last"), send("last"), send("more")
	dead := startProcessor(t, d.Pool)
	live := startProcessor(t, d.Pool)
	require.Len(t, claim(t, d.Pool, dead, 10, "email"), 3)
	for _, id := range []int64{lost, sent, retried} {
		d.Exec(`SELECT pgrelay_notifier.set_status($1, 'sending')`, id)
	}
	d.Exec(`SELECT pgrelay_notifier.set_status($1, 'sent')`, sent)
	d.Exec("UPDATE pgrelay.processors SET last_seen = now() - interval '1 minute' WHERE processor_id = $1", dead)

	require.EqualValues(t, 3, testenv.One[int32](t, d.Pool, "SELECT pgrelay._rescue($1, '30 seconds', '1 hour')", live))
	require.Equal(t, "failed", testenv.One[string](t, d.Pool, "SELECT pgrelay_notifier.get_status($1)", lost))
	require.Equal(t, "gave up: processor "+strconv.FormatInt(dead, 10)+" stopped heartbeating while running attempt 1 (its last attempt)",
		testenv.One[string](t, d.Pool, "SELECT last_error FROM pgrelay_notifier.notifications WHERE notification_id = $1", lost))
	require.Equal(t, 1, d.Count(`SELECT count(*) FROM pgrelay_notifier.status_events
	  WHERE notification_id = $1 AND status = 'failed'`, lost), "the change is a status event too")
	require.Equal(t, "sent", testenv.One[string](t, d.Pool, "SELECT pgrelay_notifier.get_status($1)", sent))
	require.Equal(t, "sending", testenv.One[string](t, d.Pool, "SELECT pgrelay_notifier.get_status($1)", retried))
	require.Equal(t, 2, d.Count("SELECT count(*) FROM pgrelay.log WHERE event = 'gave_up'"))
	require.Equal(t, 1, d.Count("SELECT count(*) FROM pgrelay.log WHERE event = 'rescued'"))
}

// A rescue that gives up an email event fails its notification only if that
// event may send it: not when another event holds the send (a duplicate
// event pointing at the same notification), nor another channel's.
func TestRescueGivingUpLeavesOtherEventsNotification(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.Exec(`SELECT pgrelay_notifier.create_channel('a', 'app@example.com', p_max_attempts := 1)`)
	d.Exec(`SELECT pgrelay_notifier.create_channel('b', 'app@example.com', p_max_attempts := 1)`)
	held := testenv.One[int64](t, d.Pool, `SELECT pgrelay_notifier.send('a', ARRAY['to@example.org'], 'Hi', 'Body')`)
	other := testenv.One[int64](t, d.Pool, `SELECT pgrelay_notifier.send('a', ARRAY['to@example.org'], 'Hi', 'Body')`)
	// A second event for the held notification, and one of channel b that
	// names channel a's notification.
	d.Exec(`SELECT pgrelay.notify('a', $1::bigint::text)`, held)
	d.Exec(`SELECT pgrelay.notify('b', $1::bigint::text)`, other)
	dead := startProcessor(t, d.Pool)
	live := startProcessor(t, d.Pool)
	require.Len(t, claim(t, d.Pool, dead, 10, "email"), 4)
	// The first event of `held` wins its send gate.
	first := testenv.One[int64](t, d.Pool, `SELECT origin_id FROM pgrelay.queue WHERE payload = $1::bigint::text ORDER BY id LIMIT 1`, held)
	require.Equal(t, "send", testenv.One[string](t, d.Pool, `SELECT verdict FROM pgrelay_notifier.start_sending($1, 'a', $2)`, held, first))
	d.Exec("UPDATE pgrelay.queue SET dispatched_at = now() - interval '2 hours' WHERE origin_id <> $1", first)
	d.Exec("UPDATE pgrelay.processors SET last_seen = now() WHERE processor_id = $1", dead)

	// The claims but the first's run past their lease: rescued, given up.
	require.EqualValues(t, 3, testenv.One[int32](t, d.Pool, "SELECT pgrelay._rescue($1, '30 seconds', '1 minute')", live))
	require.Equal(t, "sending", testenv.One[string](t, d.Pool, "SELECT pgrelay_notifier.get_status($1)", held),
		"the event that holds the send goes on")
	require.Equal(t, "failed", testenv.One[string](t, d.Pool, "SELECT pgrelay_notifier.get_status($1)", other),
		"channel a's own event for it gave up")
	require.Equal(t, 1, d.Count(`SELECT count(*) FROM pgrelay_notifier.status_events WHERE notification_id = $1 AND status = 'failed'`, other),
		"failed once, by its own channel's event")
}

// A row pinned to a node is only ever changed by that node (or by an
// explicit decommission): when an adoption removed a dead node's Processor
// rows, another node's rescue leaves that node's pinned claims alone — even
// past the channel's timeout and on their last attempt (no 'gave_up', no
// failed email) — and the node takes them back itself when it returns.
func TestRescueLeavesOtherNodesPinnedClaims(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("pin", "p_node_restricted := true, p_max_attempts := 1, p_timeout := '1 second'")
	d.Exec(`SELECT pgrelay_notifier.create_channel('mail', 'app@example.com', p_node_restricted := true,
	  p_max_attempts := 1, p_timeout := '1 second')`)
	n5, n1 := d.Conn(5), d.Conn(1)
	p5 := testenv.One[int64](t, n5, "SELECT pgrelay._processor_start('multi-node', 'host5', 5, 'test')")
	pin := testenv.One[int64](t, n5, "SELECT pgrelay.notify('pin', 'x')")
	mail := testenv.One[int64](t, n5, `SELECT pgrelay_notifier.send('mail', ARRAY['to@example.org'], 'Hi', 'Body')`)
	require.Len(t, claimMode(t, n5, p5, "multi-node", false, 10, "sql", "email"), 2)
	d.Exec(`SELECT pgrelay_notifier.set_status($1, 'sending')`, mail)
	p1 := testenv.One[int64](t, n1, "SELECT pgrelay._processor_start('multi-node', 'host1', 1, 'test')")

	// Node 5 goes silent; node 1 adopts (and removes node 5's Processor rows).
	d.Exec("UPDATE pgrelay.processors SET last_seen = now() - interval '1 hour' WHERE node_id = 5")
	d.Exec("UPDATE pgrelay.nodes SET last_seen = now() - interval '1 hour' WHERE node_id = 5")
	require.Zero(t, testenv.One[int32](t, n1, "SELECT pgrelay._adopt('10 seconds')"), "pinned rows are not adopted")
	d.Exec("UPDATE pgrelay.queue SET dispatched_at = now() - interval '1 hour'")

	require.Zero(t, testenv.One[int32](t, n1, "SELECT pgrelay._rescue($1, '10 seconds', '1 second')", p1))
	require.Equal(t, 2, d.Count("SELECT count(*) FROM pgrelay.queue WHERE run_in_node = 5 AND dispatched_by IS NOT NULL AND attempt = 1"),
		"node 5's pinned claims are untouched")
	require.Zero(t, d.Count("SELECT count(*) FROM pgrelay.log"))
	require.Equal(t, "sending", testenv.One[string](t, d.Pool, "SELECT pgrelay_notifier.get_status($1)", mail))
	d.requireStatus(pin, "in_flight")

	// Node 5 comes back and takes its own claims back.
	p5b := testenv.One[int64](t, n5, "SELECT pgrelay._processor_start('multi-node', 'host5', 6, 'test')")
	require.EqualValues(t, 2, testenv.One[int32](t, n5, "SELECT pgrelay._rescue($1, '10 seconds', '1 second')", p5b))
	require.Equal(t, 2, d.Count("SELECT count(*) FROM pgrelay.log WHERE event = 'gave_up' AND node = 5"))
	require.Equal(t, "failed", testenv.One[string](t, d.Pool, "SELECT pgrelay_notifier.get_status($1)", mail))
}
