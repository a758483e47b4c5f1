package migrations_test

// Status events on NATS: the channels' publish_payload, the
// payloads kept for them, the publisher's horizon, cursors and backlog.

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/events"
	"github.com/pgrelay/pgrelay/internal/testenv"
)

func TestRegisterPublishPayload(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("off", "")
	d.register("on", "p_publish_payload := true")
	publishes := func(ch string) bool {
		return testenv.One[bool](t, d.Pool, "SELECT publish_payload FROM pgrelay.channels WHERE channel = $1", ch)
	}
	require.False(t, publishes("off"), "payloads stay off NATS by default")
	require.True(t, publishes("on"))
	// Every other parameter still works positionally and by name.
	d.Exec(`SELECT pgrelay.register('pos', 'SELECT length($1)', 'sql', 'channel', true, false, 3,
		'2 seconds', NULL, '10 seconds', true)`)
	require.True(t, publishes("pos"))
	require.Equal(t, "channel", testenv.One[string](t, d.Pool, "SELECT concurrency_mode FROM pgrelay.channels WHERE channel = 'pos'"))

	d.Exec("SELECT pgrelay.update('on', p_max_attempts := 9)")
	require.True(t, publishes("on"), "update without p_publish_payload keeps it")
	d.Exec("SELECT pgrelay.update('on', p_publish_payload := false)")
	require.False(t, publishes("on"))
	d.Exec("SELECT pgrelay.update('off', p_publish_payload := true)")
	require.True(t, publishes("off"))
	requireCode(t, d.Err("SELECT pgrelay.update('nope', p_publish_payload := true)"), "PR001")
}

// A nats channel's handler must be a literal subject: tokens separated by
// dots, no wildcards, no whitespace or control characters (the rule of
// events.ValidSubject, which the SQL check follows), and not under
// "pgrelay.", where the events stream captures pgrelay's own events.
func TestRegisterNATSSubject(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	bads := []string{"orders.*", "orders.>", ">", "orders created", "orders..created", ".orders",
		"orders.", "orders\tcreated", "", "orders\x01created", "orders\x7f", "\x1f.orders", "orders.\x0b"}
	for i, bad := range bads {
		require.False(t, events.ValidSubject(bad), "Go refuses %q too", bad)
		err := d.Err("SELECT pgrelay.register($1, $2, p_kind := 'nats')", "bad"+string(rune('a'+i)), bad)
		requireCode(t, err, "PR017", "subject %q", bad)
	}
	// pgrelay's own subjects.
	for i, own := range []string{"pgrelay.events.c.succeeded", "pgrelay.notifier.x.sent", "pgrelay.x"} {
		err := d.Err("SELECT pgrelay.register($1, $2, p_kind := 'nats')", "own"+string(rune('a'+i)), own)
		e := requireCode(t, err, "PR017", "subject %q", own)
		require.Contains(t, e.Message, "pgrelay.", own)
	}
	goods := []string{"orders.created", "a.b-c.d_e.F1", "pgrelay", "app.pgrelay.x", "PGRELAY.x", "caf\u00e9.\u00a0"}
	for i, good := range goods {
		require.True(t, events.ValidSubject(good), "Go accepts %q too", good)
		d.Exec("SELECT pgrelay.register($1, $2, p_kind := 'nats')", "good"+string(rune('a'+i)), good)
	}
	d.Exec("SELECT pgrelay.register('orders_out', 'orders.created', p_kind := 'nats')")
	requireCode(t, d.Err("SELECT pgrelay.update('orders_out', p_handler := 'orders.*')"), "PR017")
	requireCode(t, d.Err("SELECT pgrelay.update('orders_out', p_handler := 'orders.\x02')"), "PR017")
	requireCode(t, d.Err("SELECT pgrelay.update('orders_out', p_handler := 'pgrelay.orders')"), "PR017")
	// A sql channel turned nats is checked as a subject too.
	d.register("was_sql", "")
	requireCode(t, d.Err("SELECT pgrelay.update('was_sql', p_kind := 'nats', p_handler := 'pgrelay.events.x')"), "PR017")
	require.Equal(t, len(goods)+1, d.Count("SELECT count(*) FROM pgrelay.channels WHERE kind = 'nats'"))
}

// register() and events.CheckChannelSubject agree on every subject of the
// table: both refuse the system namespaces of NATS ($JS.API., $KV., $O.,
// $SYS., any "$" subject, _INBOX.), pgrelay's own and invalid subjects, and
// accept the rest. A channel could otherwise publish into the JetStream API
// (delete a stream), a key-value bucket or another client's reply inbox.
func TestNATSSubjectRulesAgree(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	subjects := []string{
		"orders.created", "a", "pgrelay", "app.pgrelay.x", "PGRELAY.x", "app.$JS.x", "JS.API.x", "_INBOXES.x",
		"x._INBOX.y", "_inbox.x", "caf\u00e9.\u00a0",
		"", "orders.*", "orders.>", "a b", "a..b", "a\x01b",
		"pgrelay.x", "pgrelay.events.c.succeeded",
		"$JS.API.STREAM.DELETE.PGRELAY_EVENTS", "$JS.ACK.s.c.1.1.1.1.0", "$KV.config.key", "$O.bucket.C.x",
		"$SYS.REQ.SERVER.PING", "$SRV.PING", "$G", "$", "$js.api.x", "_INBOX.abc", "_INBOX",
	}
	for i, s := range subjects {
		goErr := events.CheckChannelSubject(s)
		sqlErr := d.Err("SELECT pgrelay.register($1, $2, p_kind := 'nats')", fmt.Sprintf("s%d", i), s)
		if goErr == nil {
			require.NoError(t, sqlErr, "Go accepts %q, register() must too", s)
			continue
		}
		requireCode(t, sqlErr, "PR017", "Go refuses %q (%v), register() must too", s, goErr)
	}
	// update() applies the rule as well, to a new subject or kind.
	d.Exec("SELECT pgrelay.register('out', 'orders.created', p_kind := 'nats')")
	requireCode(t, d.Err("SELECT pgrelay.update('out', p_handler := '$JS.API.STREAM.DELETE.X')"), "PR017")
	requireCode(t, d.Err("SELECT pgrelay.update('out', p_handler := '_INBOX.x')"), "PR017")
	d.register("was_sql", "")
	pgErr := requireCode(t, d.Err("SELECT pgrelay.update('was_sql', p_kind := 'nats', p_handler := '$KV.b.k')"), "PR017")
	require.Contains(t, pgErr.Message, "reserved")
}

// Payloads are kept (for the publisher) only for channels that publish
// them, for first attempts and retries, and trimmed with the log.
func TestEventPayloadsKept(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("secret", "")
	d.register("public", "p_publish_payload := true, p_retry_delay := '0'")
	d.notify("secret", "password=hunter2")
	id := d.notify("public", "order 1")
	d.Exec("SELECT pgrelay.notify_many('public', ARRAY['order 2', 'order 3'])")
	require.Equal(t, []string{"order 1", "order 2", "order 3"},
		testenv.Column[string](t, d.Pool, "SELECT payload FROM pgrelay.event_payloads ORDER BY queue_id"))
	require.Equal(t, "order 1", testenv.One[string](t, d.Pool, "SELECT payload FROM pgrelay.event_payloads WHERE queue_id = $1", id))

	// A failed attempt's retry row keeps its payload too.
	proc := startProcessor(t, d.Pool)
	rows := claim(t, d.Pool, proc, 10)
	var first claimedRow
	for _, r := range rows {
		if r.ID == id {
			first = r
		}
	}
	require.Equal(t, 1, complete(t, d.Pool, proc, first, "failed", "boom"))
	retry := testenv.One[int64](t, d.Pool, "SELECT id FROM pgrelay.queue WHERE origin_id = $1 AND attempt = 2", id)
	require.Equal(t, "order 1", testenv.One[string](t, d.Pool, "SELECT payload FROM pgrelay.event_payloads WHERE queue_id = $1", retry))
	require.Equal(t, 4, d.Count("SELECT count(*) FROM pgrelay.event_payloads"))

	// Trimming: only payloads past the retention whose queue row is gone.
	require.Equal(t, 0, int(testenv.One[int32](t, d.Pool, "SELECT pgrelay._trim_event_payloads('1 hour', 100)")))
	require.Equal(t, 1, int(testenv.One[int32](t, d.Pool, "SELECT pgrelay._trim_event_payloads('-1 hour', 100)")),
		"only the first attempt's row is gone from the queue")
	require.Equal(t, 0, d.Count("SELECT count(*) FROM pgrelay.event_payloads WHERE queue_id = $1", id))
}

// The horizon stays below every id a still-open writing transaction may
// have taken, and otherwise follows the clock 200 ms behind.
func TestPublishHorizon(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("c", "")
	h := testenv.One[int64](t, d.Pool, "SELECT pgrelay._publish_horizon()")
	require.InDelta(t, float64(nowMS()-200), float64(h>>22), 2000)

	writer := d.Conn(-1)
	tx, err := writer.Begin(bg)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(bg) }()
	held := testenv.One[int64](t, tx, "SELECT pgrelay.notify('c', 'x')")
	require.Eventually(t, func() bool {
		return testenv.One[bool](t, d.Pool, "SELECT pgrelay._id_floor(clock_timestamp() - interval '200 milliseconds') > $1", held)
	}, 10*time.Second, 10*time.Millisecond, "the clock to move 200 ms past the held id")
	later := d.notify("c", "y")
	h = testenv.One[int64](t, d.Pool, "SELECT pgrelay._publish_horizon()")
	require.Less(t, h, held, "the horizon is below the open transaction's id")
	require.Less(t, h, later)
	require.NoError(t, tx.Commit(bg))
	require.Eventually(t, func() bool {
		return testenv.One[int64](t, d.Pool, "SELECT pgrelay._publish_horizon()") > later
	}, 10*time.Second, 20*time.Millisecond, "the horizon moves on once the transaction ended")
}

// Cursors and the backlog per node, and who may see them.
func TestPublishCursorsAndBacklog(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	require.Zero(t, d.Count("SELECT count(*) FROM pgrelay.publish_backlog()"), "no publisher ran")
	n0, n1 := d.Conn(0), d.Conn(1)
	for i := range 5 {
		_, err := n0.Exec(bg, `INSERT INTO pgrelay.log (queue_id, origin_id, channel, attempt, event)
			VALUES ($1, $1, 'c', 1, 'succeeded')`, i+1)
		require.NoError(t, err)
	}
	_, err := n1.Exec(bg, `INSERT INTO pgrelay.log (queue_id, origin_id, channel, attempt, event)
		VALUES (9, 9, 'c', 1, 'succeeded')`)
	require.NoError(t, err)
	second := testenv.Column[int64](t, d.Pool, "SELECT id FROM pgrelay.log WHERE node = 0 ORDER BY id")[1]
	d.Exec("INSERT INTO pgrelay.publish_cursors (node_id, source, last_id) VALUES (0, 'log', $1), (1, 'log', 0)", second)
	require.Equal(t, []int64{3, 1}, testenv.Column[int64](t, d.Pool, "SELECT backlog FROM pgrelay.publish_backlog() ORDER BY node_id"))
	require.Equal(t, []int64{2}, testenv.Column[int64](t, d.Pool, "SELECT backlog FROM pgrelay.publish_backlog(1) WHERE node_id = 0"),
		"counted up to the cap plus one")
	requireCode(t, d.Err("INSERT INTO pgrelay.publish_cursors (node_id, source) VALUES (0, 'mail')"), "23514")

	proc := d.loginAs("proc", "pgrelay_processor")
	testenv.One[int64](t, proc, "SELECT pgrelay._publish_horizon()")
	_, err = proc.Exec(bg, "UPDATE pgrelay.publish_cursors SET last_id = last_id + 1 WHERE node_id = 1")
	require.NoError(t, err)
	admin := d.loginAs("admin", "pgrelay_admin")
	require.Equal(t, 2, len(testenv.Column[int64](t, admin, "SELECT backlog FROM pgrelay.publish_backlog()")))
	requireCode(t, execErr(admin, "UPDATE pgrelay.publish_cursors SET last_id = 0"), insufficientPrivilege)
	producer := d.loginAs("producer", "pgrelay_producer")
	requireCode(t, execErr(producer, "SELECT pgrelay.publish_backlog()"), insufficientPrivilege)
	requireCode(t, execErr(producer, "SELECT * FROM pgrelay.event_payloads"), insufficientPrivilege)
}
