package migrations_test

// The notifier's SQL interface (schema pgrelay_notifier):
// create_channel, send and its validation, the status that never moves
// back, the bounded debug log, the roles, and the ownership split (the
// notifier never touches pgrelay.queue or pgrelay.log).

import (
	"math/rand/v2"
	"net/mail"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/testenv"
)

// emailChannel creates an email channel whose From is app@example.com.
func (d *sqlDB) emailChannel(channel, extra string) {
	d.T.Helper()
	sql := "SELECT pgrelay_notifier.create_channel($1, 'App <app@example.com>'"
	if extra != "" {
		sql += ", " + extra
	}
	d.Exec(sql+")", channel)
}

func TestNotifierCreateChannelPassesRegisterParameters(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.Exec(`SELECT pgrelay_notifier.create_channel('mail', 'app@example.com',
		p_concurrency_mode := 'channel', p_deduplicate := true, p_node_restricted := true,
		p_max_attempts := 3, p_retry_delay := '2 seconds', p_expire_after := '1 hour',
		p_timeout := '7 seconds', p_publish_payload := true)`)
	type row struct {
		Handler, Kind, Mode    string
		Dedup, Restricted      bool
		Attempts               int32
		Retry, Expire, Timeout string
		Publish                bool
	}
	var r row
	require.NoError(t, d.Pool.QueryRow(bg, `SELECT handler, kind, concurrency_mode, deduplicate, node_restricted,
		max_attempts, retry_delay::text, expire_after::text, timeout::text, publish_payload
		FROM pgrelay.channels WHERE channel = 'mail'`).
		Scan(&r.Handler, &r.Kind, &r.Mode, &r.Dedup, &r.Restricted, &r.Attempts, &r.Retry, &r.Expire, &r.Timeout, &r.Publish))
	require.Equal(t, row{"app@example.com", "email", "channel", true, true, 3, "00:00:02", "01:00:00", "00:00:07", true}, r)

	// Defaults: an unrestricted channel, register()'s defaults.
	d.emailChannel("plain", "")
	require.False(t, testenv.One[bool](t, d.Pool, "SELECT node_restricted FROM pgrelay.channels WHERE channel = 'plain'"))
	require.False(t, testenv.One[bool](t, d.Pool, "SELECT publish_payload FROM pgrelay.channels WHERE channel = 'plain'"))
	require.Equal(t, "none", testenv.One[string](t, d.Pool, "SELECT concurrency_mode FROM pgrelay.channels WHERE channel = 'plain'"))

	// register()'s own checks still apply, and the From address is checked.
	// The same definition again is a no-op (register() is idempotent); another
	// From address is a different definition.
	d.Exec(`SELECT pgrelay_notifier.create_channel('mail', 'app@example.com',
		p_concurrency_mode := 'channel', p_deduplicate := true, p_node_restricted := true,
		p_max_attempts := 3, p_retry_delay := '2 seconds', p_expire_after := '1 hour',
		p_timeout := '7 seconds', p_publish_payload := true)`)
	e := requireCode(t, d.Err(`SELECT pgrelay_notifier.create_channel('mail', 'other@example.com',
		p_concurrency_mode := 'channel', p_deduplicate := true, p_node_restricted := true,
		p_max_attempts := 3, p_retry_delay := '2 seconds', p_expire_after := '1 hour',
		p_timeout := '7 seconds', p_publish_payload := true)`), "PR003")
	require.Contains(t, e.Message, "handler")
	requireCode(t, d.Err("SELECT pgrelay_notifier.create_channel('x', 'app@example.com', p_max_attempts := 0)"), "PR013")
	e = requireCode(t, d.Err("SELECT pgrelay_notifier.create_channel('y', 'not an address')"), "PR102")
	require.Contains(t, e.Message, "'not an address'")
}

// Email channels' defaults ride out an SMTP outage of an hour: with
// pgrelay._backoff (retry_delay x 2^(attempt-1), capped at an hour, jitter
// 0.8 to 1.2) the waits between the first and the last attempt add up to
// more than an hour even when every jitter is at its lowest. sql channels
// keep register()'s defaults.
func TestNotifierEmailDefaultsRideOutAnHour(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.Exec("SELECT pgrelay_notifier.create_channel('mail', 'app@example.com')")
	require.EqualValues(t, 10, testenv.One[int32](t, d.Pool, "SELECT max_attempts FROM pgrelay.channels WHERE channel = 'mail'"))
	require.Equal(t, "00:00:10", testenv.One[string](t, d.Pool, "SELECT retry_delay::text FROM pgrelay.channels WHERE channel = 'mail'"))
	// The shortest span of 1000 draws, and the floor no draw can go under.
	span := testenv.One[float64](t, d.Pool, `SELECT min(s) FROM (
		SELECT sum(extract(epoch FROM pgrelay._backoff(c.retry_delay, k))) AS s
		  FROM generate_series(1, 1000) g, pgrelay.channels c, generate_series(1, c.max_attempts - 1) k
		 WHERE c.channel = 'mail' GROUP BY g) x`)
	require.Greater(t, span, 3600.0, "the waits between the 10 attempts")
	floor := testenv.One[float64](t, d.Pool, `SELECT sum(0.8 * LEAST(10 * 2 ^ (k - 1), 3600)) FROM generate_series(1, 9) k`)
	require.InDelta(t, 4088, floor, 0.001, "docs/notifier.md's arithmetic")
	require.GreaterOrEqual(t, span, floor)

	d.register("plain", "")
	require.EqualValues(t, 5, testenv.One[int32](t, d.Pool, "SELECT max_attempts FROM pgrelay.channels WHERE channel = 'plain'"))
}

func TestNotifierSendStoresAndEnqueuesInTheCallersTransaction(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.emailChannel("mail", "")
	id := testenv.One[int64](t, d.Pool, `SELECT pgrelay_notifier.send('mail', ARRAY['Bob <bob@example.org>'], 'Hello',
		'text body', p_body_html := '<p>html</p>', p_cc := ARRAY['cc@example.org'], p_bcc := ARRAY['bcc@example.org'],
		p_headers := '{"Reply-To": "help@example.com", "X-Order": "42"}')`)
	require.InDelta(t, nowMS(), idMS(id), 5000, "notification_id comes from pgrelay._next_id()")

	var from, subject, text, html, status, headers string
	var to, cc, bcc []string
	var attempts int32
	require.NoError(t, d.Pool.QueryRow(bg, `SELECT from_addr, to_addrs, cc_addrs, bcc_addrs, subject, body_text,
		body_html, headers::text, status, attempts FROM pgrelay_notifier.notifications WHERE notification_id = $1`, id).
		Scan(&from, &to, &cc, &bcc, &subject, &text, &html, &headers, &status, &attempts))
	require.Equal(t, "App <app@example.com>", from)
	require.Equal(t, []string{"Bob <bob@example.org>"}, to)
	require.Equal(t, []string{"cc@example.org"}, cc)
	require.Equal(t, []string{"bcc@example.org"}, bcc)
	require.Equal(t, "Hello", subject)
	require.Equal(t, "text body", text)
	require.Equal(t, "<p>html</p>", html)
	require.JSONEq(t, `{"Reply-To": "help@example.com", "X-Order": "42"}`, headers)
	require.Equal(t, "queued", status)
	require.Zero(t, attempts)
	require.Equal(t, "queued", testenv.One[string](t, d.Pool, "SELECT pgrelay_notifier.get_status($1)", id))
	require.Nil(t, testenv.One[*string](t, d.Pool, "SELECT pgrelay_notifier.get_status(12345)"))

	// The queue row carries the id as its payload; the status change is an event.
	require.Equal(t, []string{"mail|" + itoa(id)}, testenv.Column[string](t, d.Pool, "SELECT channel || '|' || payload FROM pgrelay.queue"))
	require.Equal(t, []string{"queued"}, testenv.Column[string](t, d.Pool, "SELECT status FROM pgrelay_notifier.status_events WHERE notification_id = $1", id))

	// A rolled-back transaction leaves nothing behind.
	c := d.Conn(-1)
	inTx(t, c, func(tx pgx.Tx) {
		testenv.One[int64](t, tx, "SELECT pgrelay_notifier.send('mail', ARRAY['x@example.org'], 's', 'b')")
	})
	require.Equal(t, 1, d.Count("SELECT count(*) FROM pgrelay_notifier.notifications"))
	require.Equal(t, 1, d.Count("SELECT count(*) FROM pgrelay.queue"))
	require.Equal(t, 1, d.Count("SELECT count(*) FROM pgrelay_notifier.status_events"))
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// Every rejection of send() has its code and names the bad value; nothing is
// stored or enqueued.
func TestNotifierSendRejectsBadInput(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.emailChannel("mail", "")
	d.register("sqlchan", "")
	big := strings.Repeat("x", 1048577)
	cases := []struct {
		name, sql, code, mention string
		args                     []any
	}{
		{"unknown channel", "SELECT pgrelay_notifier.send('nope', ARRAY['a@b.c'], 's', 'b')", "PR100", "'nope'", nil},
		{"not an email channel", "SELECT pgrelay_notifier.send('sqlchan', ARRAY['a@b.c'], 's', 'b')", "PR100", "'sqlchan'", nil},
		{"NULL recipients", "SELECT pgrelay_notifier.send('mail', NULL, 's', 'b')", "PR101", "empty", nil},
		{"empty recipients", "SELECT pgrelay_notifier.send('mail', '{}', 's', 'b')", "PR101", "empty", nil},
		{"bad to", "SELECT pgrelay_notifier.send('mail', ARRAY['ok@example.org', 'bad@@example.org'], 's', 'b')", "PR102", "to address 'bad@@example.org'", nil},
		{"bad cc", "SELECT pgrelay_notifier.send('mail', ARRAY['ok@example.org'], 's', 'b', p_cc := ARRAY['no-at-sign'])", "PR102", "cc address 'no-at-sign'", nil},
		{"bad bcc", "SELECT pgrelay_notifier.send('mail', ARRAY['ok@example.org'], 's', 'b', p_bcc := ARRAY['a b@example.org'])", "PR102", "bcc address 'a b@example.org'", nil},
		{"NULL address", "SELECT pgrelay_notifier.send('mail', ARRAY[NULL::text], 's', 'b')", "PR102", "NULL", nil},
		{"header injection in address", "SELECT pgrelay_notifier.send('mail', ARRAY[E'a@example.org\\nBcc: x@evil.example'], 's', 'b')", "PR102", "a@example.org", nil},
		{"local part over 64", "SELECT pgrelay_notifier.send('mail', ARRAY[repeat('a', 65) || '@example.org'], 's', 'b')", "PR102", "too long", nil},
		{"too many recipients", "SELECT pgrelay_notifier.send('mail', (SELECT array_agg('r' || g || '@example.org') FROM generate_series(1, 101) g), 's', 'b')", "PR106", "101", nil},
		{"subject with LF", "SELECT pgrelay_notifier.send('mail', ARRAY['a@example.org'], E'hi\\nBcc: x@evil.example', 'b')", "PR103", "CR or LF", nil},
		{"subject with CR", "SELECT pgrelay_notifier.send('mail', ARRAY['a@example.org'], E'hi\\rthere', 'b')", "PR103", "CR or LF", nil},
		{"NULL subject", "SELECT pgrelay_notifier.send('mail', ARRAY['a@example.org'], NULL, 'b')", "PR103", "NULL", nil},
		{"NULL body", "SELECT pgrelay_notifier.send('mail', ARRAY['a@example.org'], 's', NULL)", "PR107", "NULL", nil},
		{"text body over 1 MiB", "SELECT pgrelay_notifier.send('mail', ARRAY['a@example.org'], 's', $1)", "PR104", "1048577 bytes", []any{big}},
		{"HTML body over 1 MiB", "SELECT pgrelay_notifier.send('mail', ARRAY['a@example.org'], 's', 'b', p_body_html := $1)", "PR104", "1048577 bytes", []any{big}},
		{"headers not an object", `SELECT pgrelay_notifier.send('mail', ARRAY['a@example.org'], 's', 'b', p_headers := '["X-A"]')`, "PR105", "array", nil},
		{"reserved header", `SELECT pgrelay_notifier.send('mail', ARRAY['a@example.org'], 's', 'b', p_headers := '{"bcc": "x@evil.example"}')`, "PR105", "'bcc'", nil},
		{"header value with CRLF", `SELECT pgrelay_notifier.send('mail', ARRAY['a@example.org'], 's', 'b', p_headers := '{"X-A": "1\r\nBcc: x@evil.example"}')`, "PR105", "'X-A'", nil},
		{"header value not a string", `SELECT pgrelay_notifier.send('mail', ARRAY['a@example.org'], 's', 'b', p_headers := '{"X-A": 1}')`, "PR105", "number", nil},
		{"header name with colon", `SELECT pgrelay_notifier.send('mail', ARRAY['a@example.org'], 's', 'b', p_headers := '{"X:A": "1"}')`, "PR105", "'X:A'", nil},
		// Domain literals net/mail.ParseAddress (hence the email handler) refuses.
		{"tagged IPv6 literal", "SELECT pgrelay_notifier.send('mail', ARRAY['x@[IPv6:::1]'], 's', 'b')", "PR102", "'x@[IPv6:::1]'", nil},
		{"tagged IPv6 literal in a name-addr", "SELECT pgrelay_notifier.send('mail', ARRAY['Bob <bob@[IPv6:2001:db8::1]>'], 's', 'b')", "PR102", "IPv6:2001:db8::1", nil},
		{"literal not an IP address", "SELECT pgrelay_notifier.send('mail', ARRAY['ok@example.org'], 's', 'b', p_cc := ARRAY['x@[mail.example.org]'])", "PR102", "cc address 'x@[mail.example.org]'", nil},
		{"IPv4 literal with a leading zero", "SELECT pgrelay_notifier.send('mail', ARRAY['x@[192.0.2.01]'], 's', 'b')", "PR102", "192.0.2.01", nil},
		{"IPv4 literal out of range", "SELECT pgrelay_notifier.send('mail', ARRAY['x@[192.0.2.256]'], 's', 'b')", "PR102", "192.0.2.256", nil},
		{"IPv6 literal with a zone", "SELECT pgrelay_notifier.send('mail', ARRAY['x@[fe80::1%eth0]'], 's', 'b')", "PR102", "fe80::1%eth0", nil},
		{"address over 254 octets", "SELECT pgrelay_notifier.send('mail', ARRAY['a@' || repeat('b', 253)], 's', 'b')", "PR102", "too long", nil},
		{"from over 254 octets", "SELECT pgrelay_notifier.create_channel('long', 'App <a@' || repeat('b', 253) || '>')", "PR102", "too long", nil},
	}
	for _, c := range cases {
		e := requireCode(t, d.Err(c.sql, c.args...), c.code, c.name)
		require.Contains(t, e.Message, c.mention, c.name)
	}
	require.Zero(t, d.Count("SELECT count(*) FROM pgrelay_notifier.notifications"))
	require.Zero(t, d.Count("SELECT count(*) FROM pgrelay.queue"))

	// The valid forms next to the invalid ones.
	for _, a := range []string{"a@example.org", "Bob Q. Public <bob@example.org>", `"quoted name" <q@example.org>`,
		`"odd local"@example.org`, "x+tag@[192.0.2.1]", "José <jose@example.org>", "x@[::1]", "x@[2001:db8::1]",
		"Bob <bob@[::ffff:192.0.2.1]>", "a@" + strings.Repeat("b", 252)} {
		_, err := mail.ParseAddress(a)
		require.NoError(t, err, "net/mail accepts %q", a)
		require.NoError(t, d.Err("SELECT pgrelay_notifier.send('mail', ARRAY[$1], '', '')", a), a)
	}
}

// set_status only moves forward: queued -> sending -> sent | failed. A late
// 'sending' after 'sent' changes nothing, and no event is recorded for it.
func TestNotifierStatusNeverMovesBackwards(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.emailChannel("mail", "")
	send := func() int64 {
		return testenv.One[int64](t, d.Pool, "SELECT pgrelay_notifier.send('mail', ARRAY['a@example.org'], 's', 'b')")
	}
	set := func(id int64, status string, errText any) bool {
		return testenv.One[bool](t, d.Pool, "SELECT pgrelay_notifier.set_status($1, $2, $3)", id, status, errText)
	}
	status := func(id int64) (string, int32) {
		var s string
		var n int32
		require.NoError(t, d.Pool.QueryRow(bg, "SELECT status, attempts FROM pgrelay_notifier.notifications WHERE notification_id = $1", id).Scan(&s, &n))
		return s, n
	}
	events := func(id int64) []string {
		return testenv.Column[string](t, d.Pool, "SELECT status || coalesce(':' || error, '') FROM pgrelay_notifier.status_events WHERE notification_id = $1 ORDER BY id", id)
	}

	a := send()
	require.True(t, set(a, "sending", nil))
	require.False(t, set(a, "sending", nil), "a second attempt is not a status change")
	s, n := status(a)
	require.Equal(t, "sending", s)
	require.EqualValues(t, 2, n, "each 'sending' is an attempt")
	require.True(t, set(a, "sent", nil))
	// Downgrade attempts change nothing.
	require.False(t, set(a, "sending", nil))
	require.False(t, set(a, "queued", nil))
	require.False(t, set(a, "failed", "late failure"))
	require.False(t, set(a, "sent", nil))
	s, n = status(a)
	require.Equal(t, "sent", s)
	require.EqualValues(t, 2, n)
	require.Equal(t, "sent", testenv.One[string](t, d.Pool, "SELECT pgrelay_notifier.get_status($1)", a))
	require.Nil(t, testenv.One[*string](t, d.Pool, "SELECT last_error FROM pgrelay_notifier.notifications WHERE notification_id = $1", a))
	require.NotNil(t, testenv.One[*string](t, d.Pool, "SELECT sent_at::text FROM pgrelay_notifier.notifications WHERE notification_id = $1", a))
	require.Equal(t, []string{"queued", "sending", "sent"}, events(a))
	require.Empty(t, testenv.Column[int64](t, d.Pool, "SELECT notification_id FROM pgrelay_notifier.fetch($1)", a), "a sent notification has nothing to send")

	b := send()
	require.True(t, set(b, "sending", nil))
	require.True(t, set(b, "failed", "550 5.1.1 no such user"))
	require.False(t, set(b, "sent", nil), "failed is final")
	s, _ = status(b)
	require.Equal(t, "failed", s)
	require.Equal(t, "550 5.1.1 no such user", testenv.One[string](t, d.Pool, "SELECT last_error FROM pgrelay_notifier.notifications WHERE notification_id = $1", b))
	require.Equal(t, []string{"queued", "sending", "failed:550 5.1.1 no such user"}, events(b))

	// Cancel: only while queued; fetch then has nothing to send.
	c := send()
	require.Len(t, testenv.Column[int64](t, d.Pool, "SELECT notification_id FROM pgrelay_notifier.fetch($1)", c), 1)
	require.True(t, testenv.One[bool](t, d.Pool, "SELECT pgrelay_notifier.cancel($1)", c))
	require.False(t, testenv.One[bool](t, d.Pool, "SELECT pgrelay_notifier.cancel($1)", c))
	require.False(t, set(c, "sending", nil))
	require.Equal(t, "cancelled", testenv.One[string](t, d.Pool, "SELECT pgrelay_notifier.get_status($1)", c))
	require.Empty(t, testenv.Column[int64](t, d.Pool, "SELECT notification_id FROM pgrelay_notifier.fetch($1)", c))
	require.False(t, testenv.One[bool](t, d.Pool, "SELECT pgrelay_notifier.cancel($1)", a), "a sent notification cannot be cancelled")
	require.Equal(t, []string{"queued", "cancelled"}, events(c))

	// Unknown statuses and ids.
	requireCode(t, d.Err("SELECT pgrelay_notifier.set_status($1, 'delivered')", a), "PR110")
	requireCode(t, d.Err("SELECT pgrelay_notifier.set_status($1, NULL)", a), "PR110")
	require.False(t, set(42, "sent", nil))
	require.Empty(t, testenv.Column[int64](t, d.Pool, "SELECT notification_id FROM pgrelay_notifier.fetch(42)"))
}

// debug_log keeps the 20 newest notes of each notification.
func TestNotifierDebugLogIsBounded(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.emailChannel("mail", "")
	a := testenv.One[int64](t, d.Pool, "SELECT pgrelay_notifier.send('mail', ARRAY['a@example.org'], 's', 'b')")
	b := testenv.One[int64](t, d.Pool, "SELECT pgrelay_notifier.send('mail', ARRAY['a@example.org'], 's', 'b')")
	for i := range 50 {
		d.Exec("SELECT pgrelay_notifier.debug_log($1, $2)", a, "note "+strconv.Itoa(i))
	}
	for i := range 3 {
		d.Exec("SELECT pgrelay_notifier.debug_log($1, $2)", b, "b "+strconv.Itoa(i))
	}
	d.Exec("SELECT pgrelay_notifier.debug_log(42, 'nobody')")
	got := testenv.Column[string](t, d.Pool, "SELECT message FROM pgrelay_notifier.debug_log WHERE notification_id = $1 ORDER BY id", a)
	require.Len(t, got, 20)
	require.Equal(t, "note 30", got[0])
	require.Equal(t, "note 49", got[19])
	require.Equal(t, 3, d.Count("SELECT count(*) FROM pgrelay_notifier.debug_log WHERE notification_id = $1", b))
	require.Zero(t, d.Count("SELECT count(*) FROM pgrelay_notifier.debug_log WHERE notification_id = 42"))
}

// The notifier never reads or writes pgrelay.queue or pgrelay.log: its
// functions run as pgrelay_notifier, which holds no privilege on them (the
// test revokes everything to be sure), and the whole flow still works for a
// producer and a processor.
func TestNotifierNeverTouchesQueueOrLog(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.Exec("REVOKE ALL ON pgrelay.queue, pgrelay.log FROM pgrelay_notifier")
	for _, tbl := range []string{"pgrelay.queue", "pgrelay.log"} {
		require.False(t, testenv.One[bool](t, d.Pool, "SELECT has_table_privilege('pgrelay_notifier', $1, 'SELECT, INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER')", tbl), tbl)
	}
	// Every function of the schema runs as pgrelay_notifier (definer) or as its
	// caller, and none names the two tables.
	require.Equal(t, []string{"pgrelay_notifier"},
		testenv.Column[string](t, d.Pool, "SELECT DISTINCT pg_get_userbyid(proowner)::text FROM pg_proc WHERE pronamespace = 'pgrelay_notifier'::regnamespace"))
	require.Empty(t, testenv.Column[string](t, d.Pool, `SELECT proname::text FROM pg_proc WHERE pronamespace = 'pgrelay_notifier'::regnamespace
		AND (prosrc ~* 'pgrelay\.(queue|log)\M')`))
	require.ElementsMatch(t, []string{"send", "get_status", "cancel", "fetch", "set_status", "debug_log",
		"start_sending", "start_sending_many", "fail_for_event", "not_sent", "set_status_many",
		"_cancel_for_events"}, // the completion (as the Processor) cancels a cancelled event's email
		testenv.Column[string](t, d.Pool, "SELECT proname::text FROM pg_proc WHERE pronamespace = 'pgrelay_notifier'::regnamespace AND prosecdef"),
		"SECURITY DEFINER only where a less privileged caller needs it")

	admin := d.loginAs("admin", "pgrelay_admin")
	require.NoError(t, execErr(admin, "SELECT pgrelay_notifier.create_channel('mail', 'app@example.com')"))
	producer := d.loginAs("producer", "pgrelay_producer")
	processor := d.loginAs("processor", "pgrelay_processor")

	id := testenv.One[int64](t, producer, "SELECT pgrelay_notifier.send('mail', ARRAY['a@example.org'], 's', 'b')")
	require.Equal(t, "queued", testenv.One[string](t, producer, "SELECT pgrelay_notifier.get_status($1)", id))
	require.Equal(t, 1, d.Count("SELECT count(*) FROM pgrelay.queue WHERE payload = $1", itoa(id)), "send() enqueued through pgrelay.notify()")
	require.Equal(t, id, testenv.One[int64](t, processor, "SELECT notification_id FROM pgrelay_notifier.fetch($1)", id))
	require.True(t, testenv.One[bool](t, processor, "SELECT pgrelay_notifier.set_status($1, 'sending')", id))
	require.NoError(t, execErr(processor, "SELECT pgrelay_notifier.debug_log($1, 'note')", id))
	require.True(t, testenv.One[bool](t, processor, "SELECT pgrelay_notifier.set_status($1, 'sent')", id))
	require.Equal(t, "sent", testenv.One[string](t, producer, "SELECT pgrelay_notifier.get_status($1)", id))
	require.EqualValues(t, 3, testenv.One[int64](t, processor, "SELECT count(*) FROM pgrelay_notifier.status_events WHERE notification_id = $1", id),
		"the processor (the NATS publisher) reads status events")
	id2 := testenv.One[int64](t, producer, "SELECT pgrelay_notifier.send('mail', ARRAY['a@example.org'], 's', 'b')")
	require.True(t, testenv.One[bool](t, producer, "SELECT pgrelay_notifier.cancel($1)", id2))

	// What each role may not do.
	for _, sql := range []string{
		"SELECT * FROM pgrelay_notifier.notifications",
		"UPDATE pgrelay_notifier.notifications SET status = 'queued'",
		"SELECT * FROM pgrelay_notifier.fetch(1)",
		"SELECT pgrelay_notifier.set_status(1, 'sent')",
		"SELECT pgrelay_notifier.debug_log(1, 'x')",
		"SELECT pgrelay_notifier.create_channel('mine', 'a@example.org')",
	} {
		requireCode(t, execErr(producer, sql), insufficientPrivilege, sql)
	}
	for _, sql := range []string{
		"SELECT * FROM pgrelay_notifier.notifications",
		"UPDATE pgrelay_notifier.notifications SET status = 'queued'",
		"DELETE FROM pgrelay_notifier.status_events",
		"SELECT pgrelay_notifier.create_channel('mine', 'a@example.org')",
	} {
		requireCode(t, execErr(processor, sql), insufficientPrivilege, sql)
	}
	nobody := d.loginAs("nobody", "")
	for _, sql := range []string{
		"SELECT pgrelay_notifier.send('mail', ARRAY['a@example.org'], 's', 'b')",
		"SELECT pgrelay_notifier.get_status(1)",
	} {
		requireCode(t, execErr(nobody, sql), insufficientPrivilege, sql)
	}
}

// A domain literal is accepted exactly when net/mail.ParseAddress, which the
// email handler's message builder uses, accepts it (an IP address as
// net.ParseIP reads it): otherwise the notification would be stored and then
// fail for good at send time. Checked on fixed forms and on random strings
// of the characters IP addresses are written with.
func TestNotifierDomainLiteralsAsNetMail(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	c := d.Conn(-1)
	_, err := c.Exec(bg, `CREATE FUNCTION pg_temp.accepted(a text) RETURNS bool LANGUAGE plpgsql AS $$
		BEGIN
		  PERFORM pgrelay_notifier._check_address('to', a);
		  RETURN true;
		EXCEPTION WHEN SQLSTATE 'PR102' THEN
		  RETURN false;
		END $$`)
	require.NoError(t, err)

	lits := []string{"192.0.2.1", "0.0.0.0", "255.255.255.255", "01.2.3.4", "1.2.3", "1.2.3.4.5", "256.1.1.1",
		"::", "::1", "IPv6:::1", "ipv6:::1", "1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7::", "::2:3:4:5:6:7:8",
		"1:2:3:4:5:6:7:8:9", "1::2::3", "1:2:3:4:5:6:1.2.3.4", "1:2:3:4:5:6:7:1.2.3.4", "::ffff:1.2.3.4",
		"::1.2.3.4", "1:2:3:4:5::1.2.3.4", "1:2:3:4:5:6::1.2.3.4", "0000::1", "00000::1", "fe80::1%eth0",
		"FFFF::ABCD", "example.org", "", " 1.2.3.4", "1.2.3.4 "}
	alphabet := []string{"0", "1", "2", "5", "9", "a", "F", ":", ":", ":", ".", ".", "25", "255", "256", "00",
		"ffff", "12345", "::", "1.2.3.4", "IPv6:", "%", "g"}
	rnd := rand.New(rand.NewPCG(7, 7))
	for range 5000 {
		var b strings.Builder
		for range 1 + rnd.IntN(12) {
			b.WriteString(alphabet[rnd.IntN(len(alphabet))])
		}
		lits = append(lits, b.String())
	}
	addrs := make([]string, 0, 2*len(lits))
	for _, l := range lits {
		addrs = append(addrs, "x@["+l+"]", "Bob <bob@["+l+"]>")
	}
	rows, err := c.Query(bg, "SELECT a, pg_temp.accepted(a) FROM unnest($1::text[]) a", addrs)
	require.NoError(t, err)
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (struct {
		Addr string
		OK   bool
	}, error) {
		var v struct {
			Addr string
			OK   bool
		}
		err := r.Scan(&v.Addr, &v.OK)
		return v, err
	})
	require.NoError(t, err)
	require.Len(t, got, len(addrs))
	accepted := 0
	for _, g := range got {
		_, err := mail.ParseAddress(g.Addr)
		require.Equal(t, err == nil, g.OK, "%q: net/mail says %v", g.Addr, err)
		if g.OK {
			accepted++
		}
	}
	require.Greater(t, accepted, 40, "the corpus holds valid literals too")
}

// send() bounds every field of a message and the whole of it: the
// subject (PR103), display names (PR102), the number and size of custom
// headers (PR105) and the message as stored (PR108); each limit itself is
// accepted.
func TestNotifierSendLimits(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.emailChannel("mail", "")
	mib := strings.Repeat("x", 1048576)
	headers := func(n, size int) string {
		var b strings.Builder
		b.WriteString("{")
		for i := range n {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(`"X-H` + strconv.Itoa(i) + `": "` + strings.Repeat("v", size) + `"`)
		}
		b.WriteString("}")
		return b.String()
	}
	name := func(n int) string { return strings.Repeat("N", n) + " <a@example.org>" }
	cases := []struct {
		name, sql, code, mention string
		args                     []any
	}{
		{"subject over 998 bytes", "SELECT pgrelay_notifier.send('mail', ARRAY['a@example.org'], repeat('é', 500), 'b')", "PR103", "1000 bytes", nil},
		{"display name over 256 bytes", "SELECT pgrelay_notifier.send('mail', ARRAY[$1], 's', 'b')", "PR102", "display name of to address <a@example.org> is 257 bytes", []any{name(257)}},
		{"cc display name over 256 bytes", "SELECT pgrelay_notifier.send('mail', ARRAY['a@example.org'], 's', 'b', p_cc := ARRAY[$1])", "PR102", "cc address", []any{name(300)}},
		{"from display name over 256 bytes", "SELECT pgrelay_notifier.create_channel('long', $1)", "PR102", "from address", []any{name(257)}},
		{"51 custom headers", "SELECT pgrelay_notifier.send('mail', ARRAY['a@example.org'], 's', 'b', p_headers := $1::jsonb)", "PR105", "51 custom headers", []any{headers(51, 1)}},
		{"custom headers over 16 KiB", "SELECT pgrelay_notifier.send('mail', ARRAY['a@example.org'], 's', 'b', p_headers := $1::jsonb)", "PR105", "over the limit of 16384", []any{headers(20, 900)}},
		{"message over 2 MiB", "SELECT pgrelay_notifier.send('mail', ARRAY['a@example.org'], 's', $1, p_body_html := $1)", "PR108", "over the 2 MiB", []any{mib}},
	}
	for _, c := range cases {
		e := requireCode(t, d.Err(c.sql, c.args...), c.code, c.name)
		require.Contains(t, e.Message, c.mention, c.name)
	}
	require.Zero(t, d.Count("SELECT count(*) FROM pgrelay_notifier.notifications"))

	// At the limits.
	for _, c := range []struct {
		sql  string
		args []any
	}{
		{"SELECT pgrelay_notifier.send('mail', ARRAY['a@example.org'], repeat('é', 499), 'b')", nil},
		{"SELECT pgrelay_notifier.send('mail', ARRAY[$1], 's', 'b')", []any{name(256)}},
		{"SELECT pgrelay_notifier.create_channel('named', $1)", []any{name(256)}},
		{"SELECT pgrelay_notifier.send('mail', ARRAY['a@example.org'], 's', 'b', p_headers := $1::jsonb)", []any{headers(50, 1)}},
		{"SELECT pgrelay_notifier.send('mail', ARRAY['a@example.org'], 's', 'b', p_headers := $1::jsonb)", []any{headers(18, 900)}},
		{"SELECT pgrelay_notifier.send('mail', ARRAY['a@example.org'], 's', $1, p_body_html := left($1, 1048576 - 100))", []any{mib}},
	} {
		require.NoError(t, d.Err(c.sql, c.args...), c.sql)
	}
}

// start_sending() is the gate: the move queued -> sending is won by
// one queue event, and only that event's attempts send; another event of the
// notification is refused with the reason, and so is an event of another
// channel. A missing notification is 'missing' and names itself.
// fail_for_event() never fails a notification another event holds.
func TestNotifierStartSendingIsTheGate(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.emailChannel("mail", "")
	d.emailChannel("other", "")
	send := func() int64 {
		return testenv.One[int64](t, d.Pool, "SELECT pgrelay_notifier.send('mail', ARRAY['a@example.org'], 's', 'b')")
	}
	type gate struct {
		Verdict string
		Reason  *string
		ID      *int64
		Status  *string
	}
	start := func(id int64, channel string, event int64) gate {
		var g gate
		require.NoError(t, d.Pool.QueryRow(bg, `SELECT verdict, reason, notification_id, status
			FROM pgrelay_notifier.start_sending($1, $2, $3)`, id, channel, event).Scan(&g.Verdict, &g.Reason, &g.ID, &g.Status))
		return g
	}
	fail := func(id int64, channel string, event int64) bool {
		return testenv.One[bool](t, d.Pool, "SELECT pgrelay_notifier.fail_for_event($1, $2, $3, 'boom')", id, channel, event)
	}
	status := func(id int64) string {
		return testenv.One[string](t, d.Pool, "SELECT pgrelay_notifier.get_status($1)", id)
	}

	a := send()
	g := start(a, "mail", 1)
	require.Equal(t, "send", g.Verdict)
	require.Equal(t, a, *g.ID)
	require.Equal(t, "sending", *g.Status)
	g = start(a, "mail", 2)
	require.Equal(t, "refused", g.Verdict, "a second event loses the gate")
	require.Contains(t, *g.Reason, "is already being sent by event 1; one send() is delivered at most once")
	require.Nil(t, g.ID, "no message for a refused event")
	require.False(t, fail(a, "mail", 2), "the loser cannot fail the holder's notification")
	// The holder's next attempt, while the first one's outcome is unknown
	// (it may have handed the message over): not sent again.
	g = start(a, "mail", 1)
	require.Equal(t, "in_doubt", g.Verdict, "the holder's next attempt, the first in doubt")
	require.Contains(t, *g.Reason, "not sent again, so that it is never delivered twice")
	require.Nil(t, g.ID)
	// Once the attempt is known to have handed nothing over, the next sends.
	require.False(t, testenv.One[bool](t, d.Pool, "SELECT pgrelay_notifier.not_sent($1, 2)", a), "only the holder clears it")
	require.True(t, testenv.One[bool](t, d.Pool, "SELECT pgrelay_notifier.not_sent($1, 1)", a))
	require.Equal(t, "send", start(a, "mail", 1).Verdict, "the holder's next attempt")
	require.Equal(t, 2, testenv.One[int](t, d.Pool, "SELECT attempts FROM pgrelay_notifier.notifications WHERE notification_id = $1", a))
	require.True(t, testenv.One[bool](t, d.Pool, "SELECT pgrelay_notifier.set_status($1, 'sent')", a))
	g = start(a, "mail", 1)
	require.Equal(t, "sent", g.Verdict, "a redelivery of the holder")
	g = start(a, "mail", 3)
	require.Equal(t, "refused", g.Verdict)
	require.Contains(t, *g.Reason, "was already sent by event 1")

	// Another channel's event: refused, and the notification stays queued.
	b := send()
	g = start(b, "other", 7)
	require.Equal(t, "refused", g.Verdict)
	require.Contains(t, *g.Reason, "was created for channel 'mail', not 'other'")
	require.False(t, fail(b, "other", 7))
	require.Equal(t, "queued", status(b))
	require.Equal(t, 0, testenv.One[int](t, d.Pool, "SELECT attempts FROM pgrelay_notifier.notifications WHERE notification_id = $1", b))
	// An event of its channel that never got to send may fail it.
	require.True(t, fail(b, "mail", 8))
	require.Equal(t, "failed", status(b))
	g = start(b, "mail", 9)
	require.Equal(t, "refused", g.Verdict)
	require.Contains(t, *g.Reason, "already failed: boom")

	// Missing and cancelled.
	g = start(424242424242, "mail", 1)
	require.Equal(t, "missing", g.Verdict)
	require.Contains(t, *g.Reason, "notification 424242424242 does not exist on node 0")
	c := send()
	require.True(t, testenv.One[bool](t, d.Pool, "SELECT pgrelay_notifier.cancel($1)", c))
	require.Equal(t, "cancelled", start(c, "mail", 1).Verdict)
	require.Equal(t, "cancelled", status(c))

	// Only the Processor's role may call the gate.
	prod := d.loginAs("producer", "pgrelay_producer")
	requireCode(t, execErr(prod, "SELECT * FROM pgrelay_notifier.start_sending(1, 'mail', 1)"), insufficientPrivilege)
	requireCode(t, execErr(prod, "SELECT pgrelay_notifier.fail_for_event(1, 'mail', 1, 'x')"), insufficientPrivilege)
	proc := d.loginAs("processor", "pgrelay_processor")
	require.NoError(t, execErr(proc, "SELECT * FROM pgrelay_notifier.start_sending(1, 'mail', 1)"))
}

// start_sending_many() is start_sending() for many events in one call and
// one transaction: each element gets the verdict calls one after the other
// would give it, in the order given (a notification named twice goes to its
// first event, the second is refused), the message with 'send', and one
// 'sending' status event per notification it moved. set_status_many()
// moves many notifications forward at once, never back, and returns those
// it moved.
func TestNotifierGateAndStatusForMany(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.emailChannel("mail", "")
	d.emailChannel("other", "")
	send := func() int64 {
		return testenv.One[int64](t, d.Pool, "SELECT pgrelay_notifier.send('mail', ARRAY['a@example.org'], 's', 'b')")
	}
	type gate struct {
		Ord     int32
		Verdict string
		Reason  *string
		ID      *int64
		Status  *string
		Att     *int32
	}
	startMany := func(ids []int64, channels []string, events []int64) []gate {
		rows, err := d.Pool.Query(bg, `SELECT ord, verdict, reason, notification_id, status, attempts
			FROM pgrelay_notifier.start_sending_many($1, $2, $3) ORDER BY ord`, ids, channels, events)
		require.NoError(t, err)
		defer rows.Close()
		var out []gate
		for rows.Next() {
			var g gate
			require.NoError(t, rows.Scan(&g.Ord, &g.Verdict, &g.Reason, &g.ID, &g.Status, &g.Att))
			out = append(out, g)
		}
		require.NoError(t, rows.Err())
		return out
	}
	events := func(id int64) []string {
		return testenv.Column[string](t, d.Pool, "SELECT status FROM pgrelay_notifier.status_events WHERE notification_id = $1 ORDER BY id", id)
	}

	a, b, c, cancelled, failed := send(), send(), send(), send(), send()
	require.True(t, testenv.One[bool](t, d.Pool, "SELECT pgrelay_notifier.cancel($1)", cancelled))
	require.True(t, testenv.One[bool](t, d.Pool, "SELECT pgrelay_notifier.fail_for_event($1, 'mail', 99, 'boom')", failed))
	got := startMany(
		[]int64{c, a, b, a, cancelled, failed, 424242424242, b},
		[]string{"mail", "mail", "other", "mail", "mail", "mail", "mail", "mail"},
		[]int64{3, 1, 2, 4, 5, 6, 7, 8})
	require.Len(t, got, 8)
	for i, g := range got {
		require.EqualValues(t, i+1, g.Ord, "one row per element")
	}
	require.Equal(t, "send", got[0].Verdict)
	require.Equal(t, c, *got[0].ID)
	require.Equal(t, "sending", *got[0].Status)
	require.EqualValues(t, 1, *got[0].Att)
	require.Equal(t, "send", got[1].Verdict)
	require.Equal(t, a, *got[1].ID)
	require.Equal(t, "refused", got[2].Verdict)
	require.Contains(t, *got[2].Reason, "was created for channel 'mail', not 'other'")
	require.Nil(t, got[2].ID)
	require.Equal(t, "refused", got[3].Verdict, "the second event naming a loses to the first")
	require.Contains(t, *got[3].Reason, "is already being sent by event 1; one send() is delivered at most once")
	require.Nil(t, got[3].ID)
	require.Equal(t, "cancelled", got[4].Verdict)
	require.Equal(t, "refused", got[5].Verdict)
	require.Contains(t, *got[5].Reason, "already failed: boom")
	require.Equal(t, "missing", got[6].Verdict)
	require.Contains(t, *got[6].Reason, "notification 424242424242 does not exist on node 0")
	require.Equal(t, "send", got[7].Verdict, "b's own channel's event after another channel's was refused")
	require.Equal(t, b, *got[7].ID)
	for _, id := range []int64{a, b, c} {
		require.Equal(t, []string{"queued", "sending"}, events(id), "one status event per notification moved")
	}
	require.Equal(t, []string{"queued", "cancelled"}, events(cancelled))

	// The same events again: each holder's earlier attempt is in doubt.
	got = startMany([]int64{a, b}, []string{"mail", "mail"}, []int64{1, 8})
	require.Equal(t, "in_doubt", got[0].Verdict)
	require.Equal(t, "in_doubt", got[1].Verdict)
	require.True(t, testenv.One[bool](t, d.Pool, "SELECT pgrelay_notifier.not_sent($1, 1)", a))
	got = startMany([]int64{a}, []string{"mail"}, []int64{1})
	require.Equal(t, "send", got[0].Verdict)
	require.EqualValues(t, 2, *got[0].Att, "a new attempt of the holder")

	// set_status_many: a and c move to sent, the cancelled one does not move,
	// nor does a second time.
	moved := testenv.Column[int64](t, d.Pool, "SELECT unnest(pgrelay_notifier.set_status_many($1, 'sent'))", []int64{c, cancelled, a})
	require.Equal(t, []int64{a, c}, moved)
	require.Empty(t, testenv.Column[int64](t, d.Pool, "SELECT unnest(pgrelay_notifier.set_status_many($1, 'sent'))", []int64{a, c}))
	require.Equal(t, []string{"queued", "sending", "sent"}, events(a))
	require.Equal(t, "sent", testenv.One[string](t, d.Pool, "SELECT pgrelay_notifier.get_status($1)", c))
	require.Equal(t, "sending", testenv.One[string](t, d.Pool, "SELECT pgrelay_notifier.get_status($1)", b))
	requireCode(t, d.Err("SELECT pgrelay_notifier.set_status_many($1, 'delivered')", []int64{b}), "PR110")
	requireCode(t, d.Err("SELECT * FROM pgrelay_notifier.start_sending_many($1, $2, $3)",
		[]int64{b}, []string{"mail", "mail"}, []int64{1}), "PR111")

	// Only the Processor's role may call them.
	prod := d.loginAs("producer", "pgrelay_producer")
	requireCode(t, execErr(prod, "SELECT * FROM pgrelay_notifier.start_sending_many('{1}', '{mail}', '{1}')"), insufficientPrivilege)
	requireCode(t, execErr(prod, "SELECT pgrelay_notifier.set_status_many('{1}', 'sent')"), insufficientPrivilege)
	proc := d.loginAs("processor", "pgrelay_processor")
	require.NoError(t, execErr(proc, "SELECT * FROM pgrelay_notifier.start_sending_many('{1}', '{mail}', '{1}')"))
	require.NoError(t, execErr(proc, "SELECT pgrelay_notifier.set_status_many('{1}', 'sent')"))
}

// A notification id is not a capability: a producer reads (get_status) and
// cancels only the notifications its own role sent, and any other id looks
// exactly like one that does not exist; an admin sees and cancels all. The
// sending role is the session's role (SET ROLE's, else the login), recorded
// in sent_by; a role also sees what a role it is a member of sent.
func TestNotifierProducersSeeOnlyTheirOwn(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.emailChannel("mail", "")
	p1 := d.loginAs("p1", "pgrelay_producer")
	p2 := d.loginAs("p2", "pgrelay_producer")
	admin := d.loginAs("admin", "pgrelay_admin")
	send := "SELECT pgrelay_notifier.send('mail', ARRAY['a@example.org'], 's', 'b')"
	status := "SELECT pgrelay_notifier.get_status($1)"
	cancel := "SELECT pgrelay_notifier.cancel($1)"

	id1 := testenv.One[int64](t, p1, send)
	id2 := testenv.One[int64](t, p2, send)
	id3 := testenv.One[int64](t, p1, send)
	require.Equal(t, d.Name()+"_p1", testenv.One[string](t, d.Pool, "SELECT sent_by FROM pgrelay_notifier.notifications WHERE notification_id = $1", id1))

	// Each producer sees its own; the other's id answers as an unknown one.
	require.Equal(t, "queued", *testenv.One[*string](t, p1, status, id1))
	require.Equal(t, "queued", *testenv.One[*string](t, p2, status, id2))
	require.Nil(t, testenv.One[*string](t, p1, status, id2))
	require.Nil(t, testenv.One[*string](t, p2, status, id1))
	require.Nil(t, testenv.One[*string](t, p2, status, int64(12345)))
	require.False(t, testenv.One[bool](t, p2, cancel, id1))
	require.False(t, testenv.One[bool](t, p1, cancel, id2))
	require.False(t, testenv.One[bool](t, p1, cancel, int64(12345)))
	require.Equal(t, 2, d.Count("SELECT count(*) FROM pgrelay_notifier.notifications WHERE notification_id IN ($1, $2) AND status = 'queued'", id1, id2),
		"a refused cancel changes nothing")
	require.Zero(t, d.Count("SELECT count(*) FROM pgrelay_notifier.status_events WHERE status = 'cancelled'"))

	// Each cancels its own.
	require.True(t, testenv.One[bool](t, p1, cancel, id1))
	require.Equal(t, "cancelled", *testenv.One[*string](t, p1, status, id1))
	require.Nil(t, testenv.One[*string](t, p2, status, id1))

	// An admin sees all and cancels any.
	require.Equal(t, "cancelled", *testenv.One[*string](t, admin, status, id1))
	require.Equal(t, "queued", *testenv.One[*string](t, admin, status, id2))
	require.True(t, testenv.One[bool](t, admin, cancel, id2))
	require.Equal(t, "cancelled", *testenv.One[*string](t, p2, status, id2))
	require.Equal(t, "queued", *testenv.One[*string](t, p1, status, id3))

	// One login for two applications (a shared connection pool) keeps them
	// apart with SET ROLE: the role set is the sender, not the login.
	d.Exec("CREATE ROLE " + quoteIdent(d.Name()+"_tenant_a") + " NOLOGIN IN ROLE pgrelay_producer")
	d.Exec("CREATE ROLE " + quoteIdent(d.Name()+"_tenant_b") + " NOLOGIN IN ROLE pgrelay_producer")
	gw := d.loginAs("gw", "")
	d.Exec("GRANT " + quoteIdent(d.Name()+"_tenant_a") + ", " + quoteIdent(d.Name()+"_tenant_b") + " TO " + quoteIdent(d.Name()+"_gw"))
	setRole := func(c *pgx.Conn, role string) {
		t.Helper()
		require.NoError(t, execErr(c, "SET ROLE "+quoteIdent(d.Name()+"_"+role)))
	}
	setRole(gw, "tenant_a")
	ida := testenv.One[int64](t, gw, send)
	require.Equal(t, d.Name()+"_tenant_a", testenv.One[string](t, d.Pool, "SELECT sent_by FROM pgrelay_notifier.notifications WHERE notification_id = $1", ida))
	require.Equal(t, "queued", *testenv.One[*string](t, gw, status, ida))
	setRole(gw, "tenant_b")
	require.Nil(t, testenv.One[*string](t, gw, status, ida))
	require.False(t, testenv.One[bool](t, gw, cancel, ida))
	require.Nil(t, testenv.One[*string](t, p1, status, ida))
	setRole(gw, "tenant_a")
	require.True(t, testenv.One[bool](t, gw, cancel, ida))
	// Inside a transaction, SET LOCAL ROLE (what a transaction-pooling proxy
	// leaves to the application) counts the same.
	require.NoError(t, execErr(gw, "RESET ROLE"))
	tx, err := gw.Begin(bg)
	require.NoError(t, err)
	_, err = tx.Exec(bg, "SET LOCAL ROLE "+quoteIdent(d.Name()+"_tenant_b"))
	require.NoError(t, err)
	idb := testenv.One[int64](t, tx, send)
	require.NoError(t, tx.Commit(bg))
	require.Equal(t, d.Name()+"_tenant_b", testenv.One[string](t, d.Pool, "SELECT sent_by FROM pgrelay_notifier.notifications WHERE notification_id = $1", idb))
	setRole(gw, "tenant_a")
	require.Nil(t, testenv.One[*string](t, gw, status, idb))
	setRole(gw, "tenant_b")
	require.Equal(t, "queued", *testenv.One[*string](t, gw, status, idb))
	require.Equal(t, "queued", *testenv.One[*string](t, admin, status, idb))
}
