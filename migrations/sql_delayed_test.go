package migrations_test

// Delayed events: notify(…, p_not_before | p_delay) and notify_many
// enqueue rows that no claim path takes before their time; the expiry counts
// from the due time; deduplication joins only events due at the same time.

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/testenv"
)

// notifyAt notifies with p_not_before := at.
func (d *sqlDB) notifyAt(channel, payload string, at time.Time) int64 {
	d.T.Helper()
	return testenv.One[int64](d.T, d.Pool, "SELECT pgrelay.notify($1, $2, p_not_before := $3)", channel, payload, at)
}

func TestNotifyDelayed(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("c", "p_expire_after := '1 hour'")
	d.register("forever", "")
	// Every row is checked against its own enqueued_at (now() of its
	// transaction): due is how far its not_before lies after it.
	due := func(id int64) string {
		return testenv.One[string](t, d.Pool, "SELECT (not_before - enqueued_at)::text FROM pgrelay.queue WHERE id = $1", id)
	}
	expiry := func(id int64) *string {
		return testenv.One[*string](t, d.Pool, "SELECT (expires_at - not_before)::text FROM pgrelay.queue WHERE id = $1", id)
	}

	// Two-argument calls, positional and by name, are immediate.
	for _, id := range []int64{
		d.notify("c", "now"),
		testenv.One[int64](t, d.Pool, "SELECT pgrelay.notify(p_channel := 'c', p_payload := 'named')"),
		testenv.One[int64](t, d.Pool, "SELECT pgrelay.notify_many(p_channel := 'c', p_payloads := ARRAY['many'])"),
	} {
		require.Equal(t, "00:00:00", due(id))
		require.Equal(t, "01:00:00", *expiry(id))
	}

	// p_not_before: the row waits until then, and its expiry counts from then.
	at := testenv.One[int64](t, d.Pool, "SELECT pgrelay.notify('c', 'at', p_not_before := now() + interval '1 day')")
	require.Equal(t, "1 day", due(at))
	require.Equal(t, "01:00:00", *expiry(at), "a 1-hour expiry counts from the due time")
	d.requireStatus(at, "pending")
	// p_delay: from now.
	in := testenv.One[int64](t, d.Pool, "SELECT pgrelay.notify('c', 'in', p_delay := '2 hours')")
	require.Equal(t, "02:00:00", due(in))
	require.Equal(t, "01:00:00", *expiry(in))
	// From Go: a time.Duration is an interval, a time.Time a timestamptz.
	goDelay := testenv.One[int64](t, d.Pool, "SELECT pgrelay.notify('c', 'go', p_delay := $1)", 90*time.Minute)
	require.Equal(t, "01:30:00", due(goDelay))
	forever := testenv.One[int64](t, d.Pool, "SELECT pgrelay.notify('forever', 'in', p_delay := '2 hours')")
	require.Equal(t, "02:00:00", due(forever))
	require.Nil(t, expiry(forever), "a channel without expiry: none")
	// A time in the past, and a zero delay, mean now.
	for _, id := range []int64{
		testenv.One[int64](t, d.Pool, "SELECT pgrelay.notify('c', 'past', p_not_before := now() - interval '1 day')"),
		testenv.One[int64](t, d.Pool, "SELECT pgrelay.notify('c', 'zero', p_delay := '0')"),
		testenv.One[int64](t, d.Pool, "SELECT pgrelay.notify('c', 'nulls', NULL, NULL)"),
	} {
		require.Equal(t, "00:00:00", due(id))
		require.Equal(t, "01:00:00", *expiry(id))
	}

	// notify_many: every row alike.
	many := testenv.Column[int64](t, d.Pool, "SELECT pgrelay.notify_many('c', ARRAY['a', 'b'], p_delay := '1 day')")
	require.Len(t, many, 2)
	for _, id := range many {
		require.Equal(t, "1 day", due(id))
		require.Equal(t, "01:00:00", *expiry(id))
	}
	many = testenv.Column[int64](t, d.Pool, "SELECT pgrelay.notify_many('c', ARRAY['a', 'b'], p_not_before := now() + interval '3 hours')")
	for _, id := range many {
		require.Equal(t, "03:00:00", due(id))
	}

	// A direct insert that sets not_before: the trigger's expiry counts from it too.
	direct := testenv.One[int64](t, d.Pool, `INSERT INTO pgrelay.queue (channel, payload, not_before)
		VALUES ('c', 'direct', now() + interval '5 hours') RETURNING id`)
	require.Equal(t, "01:00:00", *expiry(direct))

	// Both a time and a delay, a negative delay, an infinite time: refused,
	// nothing inserted.
	n := d.Count("SELECT count(*) FROM pgrelay.queue")
	for sql, code := range map[string]string{
		"SELECT pgrelay.notify('c', 'x', now() + interval '1 hour', interval '1 hour')":              "PR007",
		"SELECT pgrelay.notify('c', 'x', p_not_before := now() - interval '1 hour', p_delay := '0')": "PR007",
		"SELECT pgrelay.notify_many('c', ARRAY['x'], p_not_before := now(), p_delay := '1 hour')":    "PR007",
		"SELECT pgrelay.notify('c', 'x', p_delay := '-1 second')":                                    "PR008",
		"SELECT pgrelay.notify_many('c', ARRAY['x'], p_delay := '-1 day')":                           "PR008",
		"SELECT pgrelay.notify('c', 'x', p_not_before := 'infinity')":                                "PR008",
		"SELECT pgrelay.notify('nope', 'x', p_delay := '1 hour')":                                    "PR001",
	} {
		requireCode(t, d.Err(sql), code, sql)
	}
	require.Equal(t, n, d.Count("SELECT count(*) FROM pgrelay.queue"), "nothing inserted by a refused call")
}

// A delayed notify joins an identical pending row only when both are due at
// the same time; an immediate one never waits for a delayed row.
func TestNotifyDelayedDeduplicates(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("c", "p_deduplicate := true")
	d.register("r", "p_deduplicate := true")
	d.register("d", "p_deduplicate := true")
	tomorrow := testenv.One[time.Time](t, d.Pool, "SELECT date_trunc('hour', now()) + interval '1 day'")

	imm := d.notify("c", "x")
	late := d.notifyAt("c", "x", tomorrow)
	require.NotEqual(t, imm, late, "a delayed notify is not absorbed by an immediate row (it would run early)")
	require.Equal(t, late, d.notifyAt("c", "x", tomorrow), "the same due time absorbs")
	later := d.notifyAt("c", "x", tomorrow.Add(time.Hour))
	require.NotEqual(t, late, later, "another due time does not")
	require.Equal(t, imm, d.notify("c", "x"), "an immediate notify: the immediate row, as before")
	require.Equal(t, 2, d.Count("SELECT count(*) FROM pgrelay.log WHERE event = 'deduplicated'"))

	// With no immediate row pending, an immediate notify gets a row of its
	// own: the delayed rows do not absorb it (it would wait).
	d.Exec("UPDATE pgrelay.queue SET dispatched_at = now(), dispatched_by = 1 WHERE id = $1", imm)
	imm2 := d.notify("c", "x")
	require.NotContains(t, []int64{imm, late, later}, imm2)
	got := testenv.Column[int64](t, d.Pool, "SELECT pgrelay.notify_many('c', ARRAY['x', 'x'], p_not_before := $1)", tomorrow)
	require.Equal(t, []int64{late, late}, got, "notify_many follows the same rule")
	got = testenv.Column[int64](t, d.Pool, "SELECT pgrelay.notify_many('c', ARRAY['y', 'y'], p_delay := '1 hour')")
	require.Equal(t, got[0], got[1], "within one call (one now()), p_delay gives the same time")

	// A retry row in its backoff absorbs an immediate notify, as before, but
	// never a delayed one, even for its own time.
	r0 := d.notify("r", "x")
	d.Exec("UPDATE pgrelay.queue SET dispatched_at = now(), dispatched_by = 1 WHERE id = $1", r0)
	d.Exec(`INSERT INTO pgrelay.queue (origin_id, channel, payload, attempt, retry_of, enqueued_at, not_before)
		SELECT id, channel, payload, 2, id, enqueued_at, $2 FROM pgrelay.queue WHERE id = $1`, r0, tomorrow)
	require.Equal(t, r0, d.notify("r", "x"))
	require.NotEqual(t, r0, d.notifyAt("r", "x", tomorrow))

	// A delayed row whose time has come (not yet claimed) is due like an
	// immediate one: it absorbs an immediate notify.
	dd := d.notifyAt("d", "x", tomorrow)
	d.Exec(`UPDATE pgrelay.queue SET enqueued_at = now() - interval '1 day', not_before = now() - interval '1 minute'
		WHERE id = $1`, dd)
	require.Equal(t, dd, d.notify("d", "x"))
}

// The classic claim: a delayed row is not taken before its time, in any
// concurrency mode; a delayed head holds its lane (the events notified after
// it wait), other lanes go on.
func TestClaimHonoursDelay(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("n", "")
	d.register("ch", "p_concurrency_mode := 'channel'")
	d.register("p", "p_concurrency_mode := 'payload'")
	delayed := func(channel, payload string) int64 {
		return testenv.One[int64](t, d.Pool, "SELECT pgrelay.notify($1, $2, p_delay := '1 hour')", channel, payload)
	}
	nLate := delayed("n", "late")
	nNow := d.notify("n", "now")
	chLate := delayed("ch", "late")
	chNow := d.notify("ch", "now")
	pLate := delayed("p", "k")
	pNow := d.notify("p", "k")
	pJ := d.notify("p", "j")

	proc := startProcessor(t, d.Pool)
	require.ElementsMatch(t, []int64{nNow, pJ}, ids(claim(t, d.Pool, proc, 100)),
		"only the ready rows; the delayed heads hold their lanes")
	require.Empty(t, claim(t, d.Pool, proc, 100))

	// Their time comes: the delayed rows are taken, each lane's head first.
	d.Exec("UPDATE pgrelay.queue SET not_before = now() WHERE id = ANY($1)", []int64{nLate, chLate, pLate})
	require.ElementsMatch(t, []int64{nLate, chLate, pLate}, ids(claim(t, d.Pool, proc, 100)))
	require.Equal(t, 2, d.Count("SELECT count(*) FROM pgrelay.queue WHERE id = ANY($1) AND dispatched_at IS NULL",
		[]int64{chNow, pNow}), "behind their lanes' heads")
}

// Direct and lane batches: neither _ready_direct, _claim_direct nor
// _claim_lanes_direct offers a delayed row before its time.
func TestDirectClaimHonoursDelay(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("n", "")
	d.register("ch", "p_concurrency_mode := 'channel'")
	d.register("p", "p_concurrency_mode := 'payload'")
	delayed := func(channel, payload string) int64 {
		return testenv.One[int64](t, d.Pool, "SELECT pgrelay.notify($1, $2, p_delay := '1 hour')", channel, payload)
	}
	ready := func() []string {
		return testenv.Column[string](t, d.Pool, "SELECT * FROM pgrelay._ready_direct('single', false)")
	}
	direct := func(q querier) []int64 {
		return testenv.Column[int64](t, q, "SELECT id FROM pgrelay._claim_direct('n', 'single', false, NULL, 100)")
	}
	lanes := func(q querier) []int64 {
		return testenv.Column[int64](t, q, "SELECT id FROM pgrelay._claim_lanes_direct('single', false, NULL, 100, NULL, NULL)")
	}
	nLate := delayed("n", "late")
	chLate := delayed("ch", "late")
	pLate := delayed("p", "k")
	require.Empty(t, ready(), "nothing is ready")
	require.Empty(t, direct(d.Pool))
	require.Empty(t, lanes(d.Pool))

	nNow := d.notify("n", "now")
	d.notify("ch", "now")
	d.notify("p", "k")
	pJ := d.notify("p", "j")
	require.Equal(t, []string{"n", ""}, ready())
	a := d.Conn(0)
	inTx(t, a, func(tx pgx.Tx) {
		require.Equal(t, []int64{nNow}, direct(tx))
		require.Equal(t, []int64{pJ}, lanes(tx), "the delayed heads hold their lanes")
	})

	d.Exec("UPDATE pgrelay.queue SET not_before = now() - interval '1 hour' WHERE id = ANY($1)", []int64{nLate, chLate, pLate})
	inTx(t, a, func(tx pgx.Tx) {
		require.Equal(t, []int64{nLate, nNow}, direct(tx), "oldest due first")
		require.ElementsMatch(t, []int64{chLate, pLate, pJ}, lanes(tx))
	})
}
