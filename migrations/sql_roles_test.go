package migrations_test

// The roles a DBA grants: pgrelay_producer, pgrelay_processor, pgrelay_admin.
// Each test creates LOGIN roles (cluster-wide, so named after the test's
// database) and connects as them.

import (
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/testenv"
	"github.com/pgrelay/pgrelay/migrations"
)

const insufficientPrivilege = "42501"

// loginAs creates a LOGIN role member of group (none when empty) and connects
// as it.
func (d *sqlDB) loginAs(suffix, group string) *pgx.Conn {
	d.T.Helper()
	role := d.Name() + "_" + suffix
	sql := "CREATE ROLE " + quoteIdent(role) + " LOGIN"
	if group != "" {
		sql += " IN ROLE " + group
	}
	d.Exec(sql)
	return testenv.ConnectAs(d.T, d.URL, role, -1)
}

func execErr(c *pgx.Conn, sql string, args ...any) error {
	_, err := c.Exec(bg, sql, args...)
	return err
}

func TestRoleProducer(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("c", "")
	d.Exec("CREATE TABLE public.app_side_effects (payload text)")
	d.Exec("GRANT ALL ON public.app_side_effects TO PUBLIC")
	d.Exec("SELECT pgrelay.register('h', 'INSERT INTO public.app_side_effects VALUES ($1)')")
	p := d.loginAs("producer", "pgrelay_producer")

	// What a producer may do. The first id of the database comes from here: the
	// counter moves to the clock under the producer's call.
	id := testenv.One[int64](t, p, "SELECT pgrelay.notify('c', 'x')")
	require.InDelta(t, nowMS(), idMS(id), 5000)
	ids := testenv.Column[int64](t, p, "SELECT pgrelay.notify_many('c', ARRAY['a', 'b'])")
	require.Len(t, ids, 2)
	require.Equal(t, "pending", testenv.One[string](t, p, "SELECT pgrelay.status($1)", id))
	require.Zero(t, testenv.One[int32](t, p, "SELECT pgrelay._this_node()"))
	// notify in the producer's own transaction, rolled back.
	tx, err := p.Begin(bg)
	require.NoError(t, err)
	testenv.One[int64](t, tx, "SELECT pgrelay.notify('c', 'gone')")
	require.NoError(t, tx.Rollback(bg))
	require.Equal(t, 3, d.Count("SELECT count(*) FROM pgrelay.queue"))

	// What it may not.
	denied := []string{
		"SELECT * FROM pgrelay.queue",
		"INSERT INTO pgrelay.queue (channel, payload) VALUES ('c', 'x')",
		"UPDATE pgrelay.queue SET not_before = now()",
		"DELETE FROM pgrelay.queue",
		"SELECT * FROM pgrelay.log",
		"INSERT INTO pgrelay.log (queue_id, origin_id, channel, attempt, event) VALUES (1, 1, 'c', 1, 'succeeded')",
		"SELECT * FROM pgrelay.channels",
		"UPDATE pgrelay.channels SET paused = true",
		"SELECT * FROM pgrelay.processors",
		"SELECT * FROM pgrelay.nodes",
		"SELECT pgrelay.register('mine', 'SELECT length($1)')",
		"SELECT pgrelay.update('c', p_paused := true)",
		"SELECT pgrelay.unregister('c', p_force := true)",
		"SELECT * FROM pgrelay._claim(1, 'single', false, 10, '{sql}')",
		"SELECT pgrelay._complete(1, ARRAY[1::bigint], ARRAY[now()], ARRAY['succeeded'], ARRAY[NULL::text])",
		"SELECT pgrelay._processor_start('single', 'h', 1, 'v')",
		"SELECT pgrelay._rescue(1, '1 s', '1 s')",
		"SELECT pgrelay._trim_log('1 s', 10)",
		"SELECT pgrelay._next_id()",
		"SELECT pgrelay._next_id_at(0)",
		"SELECT nextval('pgrelay._id_seq')",
		"SELECT pgrelay.queue_stats()",
		"SELECT pgrelay._enqueue_dedup(c, 'x', NULL) FROM pgrelay.channels c",
		"SELECT pgrelay._enqueue_unique(c, 'k', 'x', NULL, NULL) FROM pgrelay.channels c",
		"SELECT pgrelay._resolve_keys('1 second')",
		"SELECT pgrelay._due(now(), NULL)",
	}
	for _, sql := range denied {
		requireCode(t, execErr(p, sql), insufficientPrivilege, sql)
	}
	// Nothing changed, and the handler's SQL never ran for the producer.
	require.Equal(t, 3, d.Count("SELECT count(*) FROM pgrelay.queue WHERE dispatched_at IS NULL"))
	require.Zero(t, d.Count("SELECT count(*) FROM public.app_side_effects"))
	require.Equal(t, 2, d.Count("SELECT count(*) FROM pgrelay.channels"))
}

// A function of pgrelay's schemas that does not fix its search_path (but an
// inlined SQL one) runs only inside one that does: no role may execute it,
// so no login calls it with a search_path of its own choosing.
func TestUnpinnedFunctionsAreOwnersOnly(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	unpinned := testenv.Column[string](t, d.Pool, `SELECT p.oid::regprocedure::text FROM pg_proc p
		JOIN pg_language l ON l.oid = p.prolang
		WHERE p.pronamespace IN ('pgrelay'::regnamespace, 'pgrelay_notifier'::regnamespace) AND l.lanname <> 'sql'
		  AND NOT EXISTS (SELECT FROM unnest(p.proconfig) c WHERE c LIKE 'search\_path=%')
		ORDER BY 1`)
	require.Equal(t, []string{
		"pgrelay._check_notify(text)",
		"pgrelay._due(timestamp with time zone,interval)",
		"pgrelay._enqueue(pgrelay.channels,bigint[],text[],timestamp with time zone)",
		"pgrelay._enqueue_dedup(pgrelay.channels,text,timestamp with time zone)",
		"pgrelay._enqueue_unique(pgrelay.channels,text,text,timestamp with time zone,interval)",
		"pgrelay._lock_channel(text)",
	}, unpinned)
	for _, f := range unpinned {
		for _, role := range []string{"public", "pgrelay_producer", "pgrelay_processor", "pgrelay_admin", "pgrelay_viewer"} {
			require.False(t, testenv.One[bool](t, d.Pool, "SELECT has_function_privilege($1, $2, 'EXECUTE')", role, f),
				"%s may execute %s", role, f)
		}
	}
}

// A SQL function of pgrelay's schemas that fixes no search_path has its body
// bound when it was created (RETURN or BEGIN ATOMIC): what it names was
// resolved then, under the migrations' search_path, never under a caller's.
// Such a function can be inlined into its caller; one with a SET clause
// cannot, and runs as a function call of its own each time.
func TestSQLHelpersAreBoundOrPinned(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	require.Empty(t, testenv.Column[string](t, d.Pool, `SELECT p.oid::regprocedure::text FROM pg_proc p
		JOIN pg_language l ON l.oid = p.prolang
		WHERE p.pronamespace IN ('pgrelay'::regnamespace, 'pgrelay_notifier'::regnamespace) AND l.lanname = 'sql'
		  AND p.prosqlbody IS NULL
		  AND NOT EXISTS (SELECT FROM unnest(p.proconfig) c WHERE c LIKE 'search\_path=%')
		ORDER BY 1`))
	// notify() takes an id from _next_id(), inlined: the plan calls what
	// _next_id() calls.
	plan := strings.Join(testenv.Column[string](t, d.Pool, "EXPLAIN (VERBOSE, COSTS OFF) SELECT pgrelay._next_id()"), "\n")
	require.Contains(t, plan, "_next_id_at(")
	require.NotContains(t, plan, "_next_id()")
}

func TestRolePublicHasNoAccess(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("c", "")
	nobody := d.loginAs("nobody", "")
	for _, sql := range []string{
		"SELECT pgrelay.notify('c', 'x')",
		"SELECT pgrelay.status(1)",
		"SELECT pgrelay.queue_stats()",
		"SELECT * FROM pgrelay.queue",
		"SELECT pgrelay._this_node()",
	} {
		requireCode(t, execErr(nobody, sql), insufficientPrivilege, sql)
	}
	// No function of pgrelay's schemas is executable by PUBLIC (new
	// functions are, unless a migration revokes it).
	require.Empty(t, testenv.Column[string](t, d.Pool, `SELECT p.oid::regprocedure::text FROM pg_proc p
		WHERE p.pronamespace IN ('pgrelay'::regnamespace, 'pgrelay_notifier'::regnamespace)
		  AND has_function_privilege('public', p.oid, 'EXECUTE')`))
}

func TestRoleAdmin(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	a := d.loginAs("admin", "pgrelay_admin")

	require.NoError(t, execErr(a, "SELECT pgrelay.register('c', 'SELECT length($1)', p_concurrency_mode := 'channel')"))
	require.NoError(t, execErr(a, "SELECT pgrelay.register('gone', 'SELECT length($1)')"))
	require.NoError(t, execErr(a, "SELECT pgrelay.update('c', p_max_attempts := 2, p_concurrency_mode := 'payload')"))
	id := testenv.One[int64](t, a, "SELECT pgrelay.notify('c', 'x')")
	require.Equal(t, "pending", testenv.One[string](t, a, "SELECT pgrelay.status($1)", id))
	require.EqualValues(t, 1, testenv.One[int64](t, a, "SELECT pending FROM pgrelay.queue_stats() WHERE channel = 'c'"))
	require.EqualValues(t, 1, testenv.One[int64](t, a, "SELECT count(*) FROM pgrelay.queue"))
	require.EqualValues(t, 0, testenv.One[int64](t, a, "SELECT count(*) FROM pgrelay.log"))
	require.EqualValues(t, 2, testenv.One[int64](t, a, "SELECT count(*) FROM pgrelay.channels"))
	require.NoError(t, execErr(a, "SELECT count(*) FROM pgrelay.nodes"))
	require.NoError(t, execErr(a, "SELECT count(*) FROM pgrelay.processors"))
	require.NoError(t, execErr(a, "SELECT count(*) FROM pgrelay.schema_migrations"))
	requireCode(t, execErr(a, "SELECT pgrelay.unregister('c')"), "PR004")
	require.NoError(t, execErr(a, "SELECT pgrelay.unregister('gone')"))
	require.NoError(t, execErr(a, "SELECT pgrelay.unregister('c', p_force := true)"))

	// An admin manages channels; it does not dispatch or edit the queue by hand.
	for _, sql := range []string{
		"INSERT INTO pgrelay.queue (channel, payload) VALUES ('c', 'x')",
		"DELETE FROM pgrelay.log",
		"UPDATE pgrelay.channels SET paused = true",
		"SELECT * FROM pgrelay._claim(1, 'single', false, 10, '{sql}')",
		"SELECT pgrelay._complete(1, ARRAY[1::bigint], ARRAY[now()], ARRAY['succeeded'], ARRAY[NULL::text])",
	} {
		requireCode(t, execErr(a, sql), insufficientPrivilege, sql)
	}
	// Validation errors still come as PR codes, not as permission errors.
	requireCode(t, execErr(a, "SELECT pgrelay.register('bad', 'SELEC')"), "PR017")
}

// A processor claims, runs the handler and completes in one transaction (the
// handler runs as the processor's role: the DBA grants it the app's tables),
// retries, heartbeats, rescues and trims.
func TestRoleProcessor(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.Exec("CREATE SCHEMA app")
	d.Exec("CREATE TABLE app.done (payload text)")
	d.Exec("SELECT pgrelay.register('c', 'INSERT INTO app.done VALUES ($1)', p_retry_delay := '0')")
	d.register("pinned", "p_node_restricted := true")
	p := d.loginAs("processor", "pgrelay_processor")
	role := d.Name() + "_processor"

	// The first id of the database is made by the processor: the counter moves
	// to the clock under its privileges.
	proc := testenv.One[int64](t, p, "SELECT pgrelay._processor_start('single', 'host', 1, 'test')")
	require.InDelta(t, nowMS(), idMS(proc), 5000)
	require.True(t, testenv.One[bool](t, p, "SELECT pgrelay._heartbeat($1, 'single', 'host', 1, 'test')", proc))
	require.EqualValues(t, 2, testenv.One[int64](t, p, "SELECT count(*) FROM pgrelay.channels"))
	require.Len(t, testenv.Column[string](t, p, "SELECT channel FROM pgrelay.queue_stats()"), 2)
	require.EqualValues(t, migrations.Latest(), testenv.One[int32](t, p, "SELECT max(version) FROM pgrelay.schema_migrations"))

	id := d.notify("c", "x")
	d.notify("c", "y")

	// Without the DBA's grant on the app's table the handler fails...
	got := claim(t, p, proc, 10)
	require.Len(t, got, 2)
	tx, err := p.Begin(bg)
	require.NoError(t, err)
	_, err = tx.Exec(bg, "INSERT INTO app.done VALUES ($1)", got[0].Payload)
	requireCode(t, err, insufficientPrivilege)
	require.NoError(t, tx.Rollback(bg))
	// ... and the failure is recorded by the processor: a retry row, a log row.
	require.Equal(t, 1, complete(t, p, proc, got[0], "failed", "permission denied"))
	require.Equal(t, 1, complete(t, p, proc, got[1], "release", ""))

	// With it, handler and completion commit together.
	d.Exec(fmt.Sprintf("GRANT USAGE ON SCHEMA app TO %s; GRANT INSERT ON app.done TO %s", quoteIdent(role), quoteIdent(role)))
	got = claim(t, p, proc, 10)
	require.Len(t, got, 2)
	for _, g := range got {
		inTxCommit(t, p, func(tx pgx.Tx) {
			_, err := tx.Exec(bg, "INSERT INTO app.done VALUES ($1)", g.Payload)
			require.NoError(t, err)
			require.Equal(t, 1, complete(t, tx, proc, g, "succeeded", ""))
		})
	}
	require.Equal(t, []string{"x", "y"}, testenv.Column[string](t, d.Pool, "SELECT payload FROM app.done ORDER BY payload"))
	require.Equal(t, "succeeded", testenv.One[string](t, p, "SELECT pgrelay.status($1)", id))
	require.Equal(t, []string{"failed", "succeeded", "succeeded"}, testenv.Column[string](t, p, "SELECT event FROM pgrelay.log ORDER BY id"))

	// Background duties.
	require.NoError(t, execErr(p, "SELECT pgrelay._rescue($1, '1 minute', '1 minute')", proc))
	require.NoError(t, execErr(p, "SELECT pgrelay._trim_log('0 seconds', 100)"))
	require.NoError(t, execErr(p, "SELECT pgrelay._processor_stop($1)", proc))
	require.False(t, testenv.One[bool](t, p, "SELECT pgrelay._heartbeat($1, 'single', 'host', 1, 'test')", proc))

	// A processor does not manage channels.
	for _, sql := range []string{
		"SELECT pgrelay.register('mine', 'SELECT length($1)')",
		"SELECT pgrelay.update('c', p_paused := true)",
		"SELECT pgrelay.unregister('c', p_force := true)",
		"UPDATE pgrelay.channels SET paused = true",
		"INSERT INTO pgrelay.channels (channel, handler, kind) VALUES ('x', 'SELECT $1', 'sql')",
	} {
		requireCode(t, execErr(p, sql), insufficientPrivilege, sql)
	}
	require.False(t, testenv.One[bool](t, d.Pool, "SELECT paused FROM pgrelay.channels WHERE channel = 'c'"))
}

// queue_stats() and nodes_overview() run as their caller: every role
// granted EXECUTE on them can already read what they read, so each of those
// roles still gets the full answer, the estimate of a channel past 100 000
// pending rows (an EXPLAIN of the queue) included.
func TestRoleStatsRunAsCaller(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	for _, f := range []string{"pgrelay.queue_stats()", "pgrelay.nodes_overview(interval)"} {
		require.False(t, testenv.One[bool](t, d.Pool, "SELECT prosecdef FROM pg_proc WHERE oid = $1::regprocedure", f),
			"%s is SECURITY INVOKER", f)
		require.Equal(t, []string{"pgrelay_admin", "pgrelay_processor"}, testenv.Column[string](t, d.Pool, `
			SELECT r.rolname::text FROM pg_roles r
			 WHERE r.rolname IN ('pgrelay_producer', 'pgrelay_processor', 'pgrelay_admin', 'pgrelay_notifier')
			   AND has_function_privilege(r.oid, $1::regprocedure, 'EXECUTE')
			 ORDER BY 1`, f), "the roles that may call %s", f)
	}
	d.register("big", "")
	d.register("pinned", "p_node_restricted := true")
	d.Exec("INSERT INTO pgrelay.queue (channel, payload) SELECT 'big', g::text FROM generate_series(1, 100001) g")
	d.Exec("ANALYZE pgrelay.queue")
	d.notify("pinned", "x")
	startProcessor(t, d.Pool)

	for _, group := range []string{"pgrelay_admin", "pgrelay_processor"} {
		c := d.loginAs(group, group)
		var pending, restricted int64
		var estimated bool
		require.NoError(t, c.QueryRow(bg, `SELECT pending, pending_restricted, pending_estimated
			FROM pgrelay.queue_stats() WHERE channel = 'big'`).Scan(&pending, &restricted, &estimated), group)
		require.True(t, estimated, group)
		require.Greater(t, pending, int64(100000), group)
		require.Zero(t, restricted, group)
		require.EqualValues(t, 1, testenv.One[int64](t, c, "SELECT pending_restricted FROM pgrelay.queue_stats() WHERE channel = 'pinned'"), group)

		var procs, nodePending, pinned int64
		require.NoError(t, c.QueryRow(bg, "SELECT processors, pending, pinned FROM pgrelay.nodes_overview() WHERE node_id = 0").
			Scan(&procs, &nodePending, &pinned), group)
		require.EqualValues(t, 1, procs, group)
		require.EqualValues(t, 100001, nodePending, group)
		require.EqualValues(t, 1, pinned, group)
	}
}
