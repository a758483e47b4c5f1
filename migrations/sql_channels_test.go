package migrations_test

// The admin API: pgrelay.register, pgrelay.update, pgrelay.unregister.

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/testenv"
)

func TestRegisterDefaults(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	before := testenv.One[time.Time](t, d.Pool, "SELECT now()")
	d.Exec("SELECT pgrelay.register('orders', 'SELECT length($1)')")

	var (
		handler, kind, mode       string
		dedup, restricted, paused bool
		maxAttempts               int32
		retryS, timeoutS          float64
		expireAfter               *string
		createdAt, updatedAt      time.Time
	)
	require.NoError(t, d.Pool.QueryRow(bg, `
		SELECT handler, kind, concurrency_mode, deduplicate, node_restricted, paused, max_attempts,
		       EXTRACT(epoch FROM retry_delay)::float8, EXTRACT(epoch FROM timeout)::float8,
		       expire_after::text, created_at, updated_at
		  FROM pgrelay.channels WHERE channel = 'orders'`).Scan(
		&handler, &kind, &mode, &dedup, &restricted, &paused, &maxAttempts,
		&retryS, &timeoutS, &expireAfter, &createdAt, &updatedAt))
	require.Equal(t, "SELECT length($1)", handler)
	require.Equal(t, "sql", kind)
	require.Equal(t, "none", mode)
	require.False(t, dedup)
	require.False(t, restricted)
	require.False(t, paused)
	require.EqualValues(t, 5, maxAttempts)
	require.Equal(t, 1.0, retryS)
	require.Equal(t, 30.0, timeoutS)
	require.Nil(t, expireAfter)
	require.False(t, createdAt.Before(before))
	require.Equal(t, createdAt, updatedAt)

	// Every parameter by name is stored as given.
	d.Exec(`SELECT pgrelay.register('full', 'SELECT length($1);', p_kind := 'sql',
		p_concurrency_mode := 'payload', p_deduplicate := true, p_node_restricted := true,
		p_max_attempts := 9, p_retry_delay := '3 seconds', p_expire_after := '2 hours',
		p_timeout := '5 seconds')`)
	var row []any
	rows, err := d.Pool.Query(bg, `SELECT concurrency_mode, deduplicate, node_restricted, max_attempts,
		retry_delay::text, expire_after::text, timeout::text FROM pgrelay.channels WHERE channel = 'full'`)
	require.NoError(t, err)
	require.True(t, rows.Next())
	row, err = rows.Values()
	require.NoError(t, err)
	rows.Close()
	require.Equal(t, []any{"payload", true, true, int32(9), "00:00:03", "02:00:00", "00:00:05"}, row)

	// Other kinds: email takes any non-empty handler, nats a subject.
	d.Exec("SELECT pgrelay.register('mail', 'smtp-default', p_kind := 'email')")
	d.Exec("SELECT pgrelay.register('pub', 'orders.created', p_kind := 'nats')")
	d.Exec("SELECT pgrelay.register('pub2', 'orders', p_kind := 'nats')")
	// The Processor binds $1 as text: handlers that need that type, or ignore
	// the payload, run.
	d.Exec("SELECT pgrelay.register('typed', 'SELECT 1 WHERE $1 IS NOT NULL')")
	d.Exec("SELECT pgrelay.register('ignores', 'SELECT 1')")
	d.Exec("SELECT pgrelay.register('cast', 'SELECT $1::int')")
	require.Equal(t, 8, d.Count("SELECT count(*) FROM pgrelay.channels"))
}

func TestRegisterRejects(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("dup", "")
	long := strings.Repeat("a", 101)
	d.Exec("SELECT pgrelay.register($1, 'SELECT length($1)')", long[:100]) // 100 is the maximum

	cases := []struct {
		name    string
		sql     string
		args    []any
		code    string
		mention string // the message names the bad value
	}{
		{"duplicate, other settings", "SELECT pgrelay.register('dup', 'SELECT $1', p_concurrency_mode := 'channel')", nil, "PR003", "dup"},
		{"unknown kind", "SELECT pgrelay.register('c', 'SELECT length($1)', p_kind := 'smtp')", nil, "PR011", "smtp"},
		{"NULL kind", "SELECT pgrelay.register('c', 'SELECT length($1)', p_kind := NULL)", nil, "PR011", ""},
		{"unknown mode", "SELECT pgrelay.register('c', 'SELECT length($1)', p_concurrency_mode := 'lane')", nil, "PR012", "lane"},
		{"NULL mode", "SELECT pgrelay.register('c', 'SELECT length($1)', p_concurrency_mode := NULL)", nil, "PR012", ""},
		{"zero attempts", "SELECT pgrelay.register('c', 'SELECT length($1)', p_max_attempts := 0)", nil, "PR013", ""},
		{"negative attempts", "SELECT pgrelay.register('c', 'SELECT length($1)', p_max_attempts := -3)", nil, "PR013", "-3"},
		{"NULL attempts", "SELECT pgrelay.register('c', 'SELECT length($1)', p_max_attempts := NULL)", nil, "PR013", ""},
		{"zero timeout", "SELECT pgrelay.register('c', 'SELECT length($1)', p_timeout := '0')", nil, "PR014", ""},
		{"negative timeout", "SELECT pgrelay.register('c', 'SELECT length($1)', p_timeout := '-1 second')", nil, "PR014", ""},
		{"negative retry delay", "SELECT pgrelay.register('c', 'SELECT length($1)', p_retry_delay := '-1 second')", nil, "PR015", ""},
		{"zero expiry", "SELECT pgrelay.register('c', 'SELECT length($1)', p_expire_after := '0')", nil, "PR016", ""},
		{"negative expiry", "SELECT pgrelay.register('c', 'SELECT length($1)', p_expire_after := '-1 hour')", nil, "PR016", ""},
		{"name with a dot", "SELECT pgrelay.register('a.b', 'SELECT length($1)')", nil, "PR010", "a.b"},
		{"name with a space", "SELECT pgrelay.register('a b', 'SELECT length($1)')", nil, "PR010", "a b"},
		{"empty name", "SELECT pgrelay.register('', 'SELECT length($1)')", nil, "PR010", ""},
		{"NULL name", "SELECT pgrelay.register(NULL, 'SELECT length($1)')", nil, "PR010", ""},
		{"name too long", "SELECT pgrelay.register($1, 'SELECT length($1)')", []any{long}, "PR010", ""},
		{"name with a quote", "SELECT pgrelay.register('a''b', 'SELECT length($1)')", nil, "PR010", ""},
		{"second parameter", "SELECT pgrelay.register('c', 'SELECT $2')", nil, "PR017", ""},
		{"typed second parameter", "SELECT pgrelay.register('c', 'SELECT length($1) + $2::int')", nil, "PR017", ""},
		{"syntax error", "SELECT pgrelay.register('c', 'SELEC 1')", nil, "PR017", ""},
		{"two statements", "SELECT pgrelay.register('c', 'SELECT length($1); SELECT 2')", nil, "PR017", ""},
		{"unknown table", "SELECT pgrelay.register('c', 'SELECT * FROM public.no_such_table WHERE x = $1')", nil, "PR017", ""},
		{"not preparable", "SELECT pgrelay.register('c', 'VACUUM')", nil, "PR017", ""},
		{"empty handler", "SELECT pgrelay.register('c', '  ')", nil, "PR017", ""},
		{"NULL handler", "SELECT pgrelay.register('c', NULL)", nil, "PR017", ""},
		{"email, empty handler", "SELECT pgrelay.register('c', '', p_kind := 'email')", nil, "PR017", ""},
		{"nats, empty token", "SELECT pgrelay.register('c', 'orders..created', p_kind := 'nats')", nil, "PR017", "orders..created"},
		{"nats, wildcard", "SELECT pgrelay.register('c', 'orders.*', p_kind := 'nats')", nil, "PR017", "orders.*"},
		{"nats, full wildcard", "SELECT pgrelay.register('c', 'orders.>', p_kind := 'nats')", nil, "PR017", "orders.>"},
		{"nats, space", "SELECT pgrelay.register('c', 'orders created', p_kind := 'nats')", nil, "PR017", "orders created"},
		{"nats, leading dot", "SELECT pgrelay.register('c', '.orders', p_kind := 'nats')", nil, "PR017", ".orders"},
		{"nats, trailing dot", "SELECT pgrelay.register('c', 'orders.', p_kind := 'nats')", nil, "PR017", "orders."},
	}
	for _, tc := range cases {
		pgErr := requireCode(t, d.Err(tc.sql, tc.args...), tc.code, tc.name)
		if tc.mention != "" {
			require.Contains(t, pgErr.Message, tc.mention, tc.name)
		}
	}
	require.Equal(t, []string{long[:100], "dup"}, testenv.Column[string](t, d.Pool, "SELECT channel FROM pgrelay.channels ORDER BY channel"),
		"no rejected call registered anything")
}

// register() of a channel that exists with the identical definition is a
// no-op (one deployment script registers the same channel on every node of a
// cluster); a different definition is refused with PR003, naming each field
// that differs, and leaves the channel as it was.
func TestRegisterIsIdempotent(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	const def = `'SELECT length($1)', p_concurrency_mode := 'payload', p_deduplicate := true,
		p_node_restricted := true, p_max_attempts := 3, p_retry_delay := '2 seconds',
		p_expire_after := '1 hour', p_timeout := '7 seconds', p_publish_payload := true, p_publish_errors := 'text'`
	d.Exec("SELECT pgrelay.register('c', " + def + ")")
	d.Exec("SELECT pgrelay.update('c', p_paused := true)")
	d.Exec("UPDATE pgrelay.channels SET created_at = created_at - interval '1 day', updated_at = updated_at - interval '1 day'")
	snapshot := func() string {
		return testenv.One[string](t, d.Pool, "SELECT row_to_json(c)::text FROM pgrelay.channels c WHERE channel = 'c'")
	}
	before := snapshot()

	// The same definition, also spelt differently (an interval's other form).
	d.Exec("SELECT pgrelay.register('c', " + def + ")")
	d.Exec(`SELECT pgrelay.register('c', 'SELECT length($1)', p_concurrency_mode := 'payload', p_deduplicate := true,
		p_node_restricted := true, p_max_attempts := 3, p_retry_delay := '00:00:02',
		p_expire_after := '60 minutes', p_timeout := '7000 milliseconds', p_publish_payload := true,
		p_publish_errors := 'text')`)
	require.Equal(t, before, snapshot(), "a no-op: not resumed, no timestamp moved")

	cases := []struct {
		name, sql string
		fields    []string
	}{
		{"defaults", "SELECT pgrelay.register('c', 'SELECT length($1)')",
			[]string{"concurrency_mode", "deduplicate", "node_restricted", "max_attempts", "retry_delay", "expire_after", "timeout", "publish_payload", "publish_errors"}},
		{"handler", "SELECT pgrelay.register('c', 'SELECT length($1) + 1', p_concurrency_mode := 'payload', p_deduplicate := true, p_node_restricted := true, p_max_attempts := 3, p_retry_delay := '2 seconds', p_expire_after := '1 hour', p_timeout := '7 seconds', p_publish_payload := true, p_publish_errors := 'text')",
			[]string{"handler"}},
		{"kind and attempts", "SELECT pgrelay.register('c', 'app.orders', p_kind := 'nats', p_concurrency_mode := 'payload', p_deduplicate := true, p_node_restricted := true, p_max_attempts := 4, p_retry_delay := '2 seconds', p_expire_after := '1 hour', p_timeout := '7 seconds', p_publish_payload := true, p_publish_errors := 'none')",
			[]string{"handler", "kind", "max_attempts", "publish_errors"}},
	}
	all := []string{"handler", "kind", "concurrency_mode", "deduplicate", "node_restricted", "max_attempts", "retry_delay", "expire_after", "timeout", "publish_payload", "publish_errors"}
	for _, tc := range cases {
		pgErr := requireCode(t, d.Err(tc.sql), "PR003", tc.name)
		require.Contains(t, pgErr.Message, "'c'", tc.name)
		for _, f := range all {
			if slices.Contains(tc.fields, f) {
				require.Contains(t, pgErr.Message, f+" ", "%s: names %s", tc.name, f)
			} else {
				require.NotContains(t, pgErr.Message, f+" ", "%s: %s is the same", tc.name, f)
			}
		}
		require.Equal(t, before, snapshot(), "%s: the channel is unchanged", tc.name)
	}

	// Two sessions registering the same definition at once: both succeed.
	c1, c2 := d.Conn(-1), d.Conn(-1)
	tx, err := c1.Begin(bg)
	require.NoError(t, err)
	_, err = tx.Exec(bg, "SELECT pgrelay.register('twice', 'SELECT length($1)')")
	require.NoError(t, err)
	done := background(c2, "SELECT pgrelay.register('twice', 'SELECT length($1)')")
	waitUntilBlocked(t, d.Pool, c2.PgConn().PID())
	require.NoError(t, tx.Commit(bg))
	require.NoError(t, <-done)
	require.Equal(t, 1, d.Count("SELECT count(*) FROM pgrelay.channels WHERE channel = 'twice'"))
}

// publish_errors: what of a channel's errors goes to NATS. 'class'
// by default (register() and the notifier's create_channel()), 'text' or
// 'none' as given; anything else is refused with PR018 by register() and
// update() alike.
func TestPublishErrorsSetting(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	setting := func(ch string) string {
		return testenv.One[string](t, d.Pool, "SELECT publish_errors FROM pgrelay.channels WHERE channel = $1", ch)
	}
	d.Exec("SELECT pgrelay.register('dflt', 'SELECT length($1)')")
	require.Equal(t, "class", setting("dflt"))
	d.Exec("SELECT pgrelay.register('txt', 'SELECT length($1)', p_publish_errors := 'text')")
	require.Equal(t, "text", setting("txt"))
	d.Exec("SELECT pgrelay_notifier.create_channel('mail', 'app@example.com')")
	require.Equal(t, "class", setting("mail"))
	d.Exec("SELECT pgrelay_notifier.create_channel('mail2', 'app@example.com', p_publish_errors := 'none')")
	require.Equal(t, "none", setting("mail2"))

	e := requireCode(t, d.Err("SELECT pgrelay.register('bad', 'SELECT length($1)', p_publish_errors := 'all')"), "PR018")
	require.Contains(t, e.Message, "'all'")
	requireCode(t, d.Err("SELECT pgrelay.register('bad', 'SELECT length($1)', p_publish_errors := NULL)"), "PR018")
	requireCode(t, d.Err("SELECT pgrelay_notifier.create_channel('bad', 'app@example.com', p_publish_errors := 'TEXT')"), "PR018")
	require.Zero(t, d.Count("SELECT count(*) FROM pgrelay.channels WHERE channel = 'bad'"))

	d.Exec("SELECT pgrelay.update('dflt', p_publish_errors := 'none')")
	require.Equal(t, "none", setting("dflt"))
	d.Exec("SELECT pgrelay.update('dflt', p_paused := true)")
	require.Equal(t, "none", setting("dflt"), "kept when not given")
	requireCode(t, d.Err("SELECT pgrelay.update('dflt', p_publish_errors := 'full')"), "PR018")
	require.Equal(t, "none", setting("dflt"))
	d.Exec("SELECT pgrelay.update('dflt', p_publish_errors := 'class')")
	require.Equal(t, "class", setting("dflt"))
}

// The handler is spliced into a PREPARE run by register(), a SECURITY DEFINER
// function: a second statement must be refused, not run as its owner.
func TestRegisterRunsNoSecondStatement(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	for _, h := range []string{
		"SELECT length($1); CREATE TABLE public.pwned (x int)",
		"SELECT length($1);CREATE TABLE public.pwned (x int);",
		"SELECT length($1) /* ; */ ; CREATE TABLE public.pwned (x int)",
	} {
		requireCode(t, d.Err("SELECT pgrelay.register('c', $1)", h), "PR017", h)
		require.Nil(t, testenv.One[*string](t, d.Pool, "SELECT to_regclass('public.pwned')::text"), h)
	}
	// A trailing semicolon is one statement.
	d.Exec("SELECT pgrelay.register('c', 'SELECT length($1); ')")
	// The check leaves no prepared statement behind in the caller's session.
	c := d.Conn(-1)
	_, err := c.Exec(bg, "SELECT pgrelay.register('c2', 'SELECT length($1)')")
	require.NoError(t, err)
	requireCode(t, func() error { _, err := c.Exec(bg, "SELECT pgrelay.register('c3', 'SELEC')"); return err }(), "PR017")
	require.Zero(t, testenv.One[int64](t, c, "SELECT count(*) FROM pg_prepared_statements WHERE name LIKE 'pgrelay%'"))
}

func TestUpdate(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.Exec(`SELECT pgrelay.register('c', 'SELECT length($1)', p_max_attempts := 7,
		p_retry_delay := '2 seconds', p_expire_after := '1 hour', p_timeout := '9 seconds')`)
	snapshot := func() []any {
		rows, err := d.Pool.Query(bg, `SELECT handler, kind, concurrency_mode, deduplicate, node_restricted,
			max_attempts, retry_delay::text, expire_after::text, timeout::text, paused
			FROM pgrelay.channels WHERE channel = 'c'`)
		require.NoError(t, err)
		defer rows.Close()
		require.True(t, rows.Next())
		v, err := rows.Values()
		require.NoError(t, err)
		return v
	}
	orig := snapshot()

	// Everything NULL (or left out): nothing changes but updated_at.
	d.Exec(`SELECT pgrelay.update('c', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)`)
	d.Exec(`SELECT pgrelay.update('c')`)
	require.Equal(t, orig, snapshot())
	require.True(t, testenv.One[bool](t, d.Pool, "SELECT updated_at > created_at FROM pgrelay.channels WHERE channel = 'c'"))

	// One parameter: only that column changes.
	d.Exec(`SELECT pgrelay.update('c', p_max_attempts := 3)`)
	want := append([]any(nil), orig...)
	want[5] = int32(3)
	require.Equal(t, want, snapshot())
	d.Exec(`SELECT pgrelay.update('c', p_handler := 'SELECT upper($1)', p_timeout := '1 minute')`)
	want[0], want[8] = "SELECT upper($1)", "00:01:00"
	require.Equal(t, want, snapshot())

	// p_expire_after := '0' removes the expiry; another value sets it.
	d.Exec(`SELECT pgrelay.update('c', p_expire_after := '0')`)
	require.Nil(t, testenv.One[*string](t, d.Pool, "SELECT expire_after::text FROM pgrelay.channels WHERE channel = 'c'"))
	d.Exec(`SELECT pgrelay.update('c', p_expire_after := '5 minutes')`)
	require.Equal(t, "00:05:00", testenv.One[string](t, d.Pool, "SELECT expire_after::text FROM pgrelay.channels WHERE channel = 'c'"))

	// p_paused: a paused channel still accepts events (they wait).
	d.Exec(`SELECT pgrelay.update('c', p_paused := true)`)
	require.True(t, testenv.One[bool](t, d.Pool, "SELECT paused FROM pgrelay.channels WHERE channel = 'c'"))
	d.notify("c", "x")
	d.Exec(`SELECT pgrelay.update('c', p_max_attempts := 4)`) // NULL p_paused keeps it paused
	require.True(t, testenv.One[bool](t, d.Pool, "SELECT paused FROM pgrelay.channels WHERE channel = 'c'"))
	d.Exec(`SELECT pgrelay.update('c', p_paused := false)`)
	d.notify("c", "x")

	// The same validation as register().
	requireCode(t, d.Err(`SELECT pgrelay.update('c', p_max_attempts := 0)`), "PR013")
	requireCode(t, d.Err(`SELECT pgrelay.update('c', p_timeout := '0')`), "PR014")
	requireCode(t, d.Err(`SELECT pgrelay.update('c', p_retry_delay := '-1 s')`), "PR015")
	requireCode(t, d.Err(`SELECT pgrelay.update('c', p_expire_after := '-1 s')`), "PR016")
	requireCode(t, d.Err(`SELECT pgrelay.update('c', p_kind := 'fax')`), "PR011")
	requireCode(t, d.Err(`SELECT pgrelay.update('c', p_concurrency_mode := 'fifo')`), "PR012")
	requireCode(t, d.Err(`SELECT pgrelay.update('c', p_handler := 'SELEC 1')`), "PR017")
	requireCode(t, d.Err(`SELECT pgrelay.update('c', p_handler := 'SELECT 1; SELECT 2')`), "PR017")
	requireCode(t, d.Err(`SELECT pgrelay.update('c', p_kind := 'nats')`), "PR017") // the SQL is no subject
	require.EqualValues(t, 4, testenv.One[int32](t, d.Pool, "SELECT max_attempts FROM pgrelay.channels WHERE channel = 'c'"))

	// Unknown channel.
	pgErr := requireCode(t, d.Err(`SELECT pgrelay.update('nope', p_max_attempts := 3)`), "PR001")
	require.Contains(t, pgErr.Message, "nope")
	requireCode(t, d.Err(`SELECT pgrelay.update(NULL, p_max_attempts := 3)`), "PR001")
}

// Changing concurrency_mode, deduplicate or node_restricted re-derives lane,
// phash and run_in_node on rows not yet dispatched.
func TestUpdateRederivesQueueRows(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("c", "")
	c := d.Conn(3)
	a1 := testenv.One[int64](t, c, "SELECT pgrelay.notify('c', 'a')")
	b := testenv.One[int64](t, c, "SELECT pgrelay.notify('c', 'b')")
	a2 := testenv.One[int64](t, c, "SELECT pgrelay.notify('c', 'a')")
	// One row in flight.
	got := claim(t, d.Pool, 1, 1)
	require.Equal(t, []int64{a1}, ids(got))

	type derived struct {
		Lane, Phash *int64
		Node        *int32
	}
	rowOf := func(id int64) derived {
		var r derived
		require.NoError(t, d.Pool.QueryRow(bg, "SELECT lane, phash, run_in_node FROM pgrelay.queue WHERE id = $1", id).
			Scan(&r.Lane, &r.Phash, &r.Node))
		return r
	}
	hash := func(s string) int64 { return testenv.One[int64](t, d.Pool, "SELECT hashtextextended($1, 0)", s) }
	for _, id := range []int64{a1, b, a2} {
		require.Equal(t, derived{}, rowOf(id))
	}

	d.Exec("SELECT pgrelay.update('c', p_concurrency_mode := 'channel')")
	for _, id := range []int64{b, a2} {
		require.Equal(t, int64(0), *rowOf(id).Lane)
	}
	d.Exec("SELECT pgrelay.update('c', p_concurrency_mode := 'payload')")
	require.Equal(t, hash("b"), *rowOf(b).Lane)
	require.Equal(t, hash("a"), *rowOf(a2).Lane)

	d.Exec("SELECT pgrelay.update('c', p_deduplicate := true)")
	require.Equal(t, hash("b"), *rowOf(b).Phash)
	require.Equal(t, hash("a"), *rowOf(a2).Phash)
	require.Nil(t, rowOf(a1).Phash, "an in-flight row is no dedup target")

	d.Exec("SELECT pgrelay.update('c', p_node_restricted := true)")
	require.EqualValues(t, 3, *rowOf(b).Node, "pinned to the row's owner node")
	require.EqualValues(t, 3, *rowOf(a2).Node)
	require.Nil(t, rowOf(a1).Node)

	d.Exec("SELECT pgrelay.update('c', p_concurrency_mode := 'none', p_deduplicate := false, p_node_restricted := false)")
	for _, id := range []int64{b, a2} {
		require.Equal(t, derived{}, rowOf(id))
	}
}

// A channel made serialised while one of its rows is in flight counts that row
// as its lane's in-flight row: no second row starts beside it.
func TestUpdateToSerialisedKeepsInFlightRow(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("c", "")
	first := d.notify("c", "1")
	d.notify("c", "2")
	got := claim(t, d.Pool, 1, 1)
	require.Equal(t, []int64{first}, ids(got))

	d.Exec("SELECT pgrelay.update('c', p_concurrency_mode := 'channel')")
	require.Empty(t, claim(t, d.Pool, 2, 10), "the row claimed before the change is still in flight")
	require.Equal(t, 1, complete(t, d.Pool, 1, got[0], "succeeded", ""))
	require.Len(t, claim(t, d.Pool, 2, 10), 1)
}

func TestUnregister(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("busy", "")
	d.register("other", "")
	d.register("empty", "")
	d.notify("busy", "1")
	d.notify("busy", "2")
	keep := d.notify("other", "1")

	pgErr := requireCode(t, d.Err("SELECT pgrelay.unregister('busy')"), "PR004")
	require.Contains(t, pgErr.Message, "busy")
	requireCode(t, d.Err("SELECT pgrelay.unregister('busy', p_force := false)"), "PR004")
	require.Equal(t, 2, d.Count("SELECT count(*) FROM pgrelay.queue WHERE channel = 'busy'"))
	require.Equal(t, 1, d.Count("SELECT count(*) FROM pgrelay.channels WHERE channel = 'busy'"))

	// In-flight rows count too.
	c := claim(t, d.Pool, 1, 10)
	require.Len(t, c, 3)
	requireCode(t, d.Err("SELECT pgrelay.unregister('busy')"), "PR004")

	d.Exec("SELECT pgrelay.unregister('busy', p_force := true)")
	require.Zero(t, d.Count("SELECT count(*) FROM pgrelay.queue WHERE channel = 'busy'"))
	require.Zero(t, d.Count("SELECT count(*) FROM pgrelay.channels WHERE channel = 'busy'"))
	require.Equal(t, 1, d.Count("SELECT count(*) FROM pgrelay.queue WHERE id = $1", keep), "other channels untouched")

	d.Exec("SELECT pgrelay.unregister('empty')")
	require.Equal(t, []string{"other"}, testenv.Column[string](t, d.Pool, "SELECT channel FROM pgrelay.channels"))

	pgErr = requireCode(t, d.Err("SELECT pgrelay.unregister('nope')"), "PR001")
	require.Contains(t, pgErr.Message, "nope")
	requireCode(t, d.Err("SELECT pgrelay.unregister('empty')"), "PR001")
	requireCode(t, d.Err("SELECT pgrelay.unregister(NULL)"), "PR001")
	requireCode(t, d.Err("SELECT pgrelay.notify('busy', 'x')"), "PR001")
}

// The settings have upper bounds: max_attempts 1000, timeout and
// retry_delay 24 hours, expire_after 365 days. A value over its bound is
// refused with the field's SQLSTATE and a message that names the bound, by
// register(), update() and the notifier's create_channel() alike; the bound
// itself is accepted.
func TestSettingsBounds(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	for _, tc := range []struct {
		name, args, code, bound string
	}{
		{"attempts", "p_max_attempts := 1001", "PR013", "at most 1000"},
		{"attempts, int max", "p_max_attempts := 2147483647", "PR013", "at most 1000"},
		{"timeout", "p_timeout := '24 hours 1 millisecond'", "PR014", "at most 24 hours"},
		{"timeout, a month", "p_timeout := '1 month'", "PR014", "at most 24 hours"},
		{"timeout, centuries", "p_timeout := '300 years'", "PR014", "at most 24 hours"},
		{"retry delay", "p_retry_delay := '25 hours'", "PR015", "at most 24 hours"},
		{"retry delay, millennia", "p_retry_delay := '10000 years'", "PR015", "at most 24 hours"},
		{"expiry", "p_expire_after := '366 days'", "PR016", "at most 365 days"},
		{"expiry, centuries", "p_expire_after := '300 years'", "PR016", "at most 365 days"},
	} {
		e := requireCode(t, d.Err("SELECT pgrelay.register('c', 'SELECT length($1)', "+tc.args+")"), tc.code, tc.name)
		require.Contains(t, e.Message, tc.bound, tc.name)
		e = requireCode(t, d.Err("SELECT pgrelay_notifier.create_channel('m', 'app@example.com', "+tc.args+")"), tc.code, tc.name)
		require.Contains(t, e.Message, tc.bound, tc.name)
	}
	require.Zero(t, d.Count("SELECT count(*) FROM pgrelay.channels"), "nothing over a bound was registered")

	// The bounds themselves (in any spelling PostgreSQL compares as equal).
	d.register("c", `p_max_attempts := 1000, p_timeout := '24 hours', p_retry_delay := '1 day',
		p_expire_after := '365 days'`)
	d.Exec(`SELECT pgrelay_notifier.create_channel('m', 'app@example.com', p_max_attempts := 1000,
		p_timeout := '1 day', p_retry_delay := '24 hours', p_expire_after := '1 year')`)

	// update() holds a new value to the same bounds.
	d.register("u", "")
	for arg, code := range map[string]string{"p_max_attempts := 1001": "PR013", "p_timeout := '2 days'": "PR014",
		"p_retry_delay := '1 mon'": "PR015", "p_expire_after := '2 years'": "PR016"} {
		requireCode(t, d.Err("SELECT pgrelay.update('u', "+arg+")"), code, arg)
	}
	d.Exec(`SELECT pgrelay.update('u', p_max_attempts := 1000, p_timeout := '86400 seconds',
		p_retry_delay := '1440 minutes', p_expire_after := '365 days')`)

	// At the bounds, the Processor's arithmetic holds: the claim's timeout_ms
	// (statement_timeout is an int of milliseconds, ~24.8 days at most) and
	// the backoff of the last attempt, capped at retry_delay and jittered by
	// +-20%, stay finite.
	require.EqualValues(t, 86_400_000, testenv.One[int64](t, d.Pool,
		"SELECT (EXTRACT(epoch FROM timeout) * 1000)::bigint FROM pgrelay.channels WHERE channel = 'u'"))
	for _, attempt := range []int{1, 20, 21, 1000} {
		b := testenv.One[time.Duration](t, d.Pool, "SELECT pgrelay._backoff('24 hours', $1)", attempt)
		require.GreaterOrEqual(t, b, 24*time.Hour*8/10, "attempt %d", attempt)
		require.LessOrEqual(t, b, 24*time.Hour*12/10, "attempt %d", attempt)
	}
}

// A channel stored outside the bounds (written by hand) keeps working: its
// settings are refused only when given anew (register() with another value,
// update() of that field), so it can still be paused, resumed and
// re-registered identically by a deployment script.
func TestSettingsBoundsSpareStoredValues(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("old", "")
	// Outside the bounds, as only a direct write can store it.
	d.Exec(`UPDATE pgrelay.channels SET max_attempts = 5000, timeout = '30 days', retry_delay = '2 days',
		expire_after = '10 years' WHERE channel = 'old'`)
	d.Exec("SELECT pgrelay.update('old', p_paused := true)")
	d.Exec("SELECT pgrelay.update('old', p_paused := false, p_handler := 'SELECT upper($1)')")
	d.Exec(`SELECT pgrelay.register('old', 'SELECT upper($1)', p_max_attempts := 5000, p_timeout := '30 days',
		p_retry_delay := '2 days', p_expire_after := '10 years')`) // identical: a no-op
	requireCode(t, d.Err("SELECT pgrelay.update('old', p_timeout := '31 days')"), "PR014")
	requireCode(t, d.Err("SELECT pgrelay.update('old', p_max_attempts := 5001)"), "PR013")
	d.Exec("SELECT pgrelay.update('old', p_timeout := '1 hour', p_max_attempts := 10)") // back within
	requireCode(t, d.Err("SELECT pgrelay.update('old', p_timeout := '30 days')"), "PR014")
	require.Equal(t, "01:00:00", testenv.One[string](t, d.Pool, "SELECT timeout::text FROM pgrelay.channels WHERE channel = 'old'"))
}
