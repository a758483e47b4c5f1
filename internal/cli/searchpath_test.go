package cli_test

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/cli"
	"github.com/pgrelay/pgrelay/internal/devenv"
	"github.com/pgrelay/pgrelay/internal/testenv"
)

// searchPathTraps are look-alikes of the built-ins pgrelay's statements use,
// planted in schema public by a role that may create objects there. Each one
// counts its call in public.sp_hits (a sequence: the count survives a
// rollback), notes it in public.sp_calls and then does what the built-in
// does, so that pgrelay keeps working and every look-alike it reaches is
// listed. Some have the built-in's own argument types (they win when public
// precedes pg_catalog on the search path); others take text or numeric,
// which an untyped parameter or a mixed-type expression resolves to whatever
// the path.
var searchPathTraps = []struct{ args, ret, body string }{
	// name(args) | returns | what the built-in returns
	{"now()", "timestamptz", "pg_catalog.now()"},
	{"clock_timestamp()", "timestamptz", "pg_catalog.clock_timestamp()"},
	{"statement_timestamp()", "timestamptz", "pg_catalog.statement_timestamp()"},
	{"random()", "float8", "pg_catalog.random()"},
	{"pg_postmaster_start_time()", "timestamptz", "pg_catalog.pg_postmaster_start_time()"},
	{"pg_advisory_xact_lock(a bigint)", "void", "pg_catalog.pg_advisory_xact_lock(a)"},
	{"pg_advisory_xact_lock(a integer, b integer)", "void", "pg_catalog.pg_advisory_xact_lock(a, b)"},
	{"pg_advisory_xact_lock(a text, b text)", "void", "pg_catalog.pg_advisory_xact_lock(a::int4, b::int4)"},
	{"pg_try_advisory_lock(a bigint)", "boolean", "pg_catalog.pg_try_advisory_lock(a)"},
	{"pg_try_advisory_lock(a integer, b integer)", "boolean", "pg_catalog.pg_try_advisory_lock(a, b)"},
	{"pg_try_advisory_lock(a text, b text)", "boolean", "pg_catalog.pg_try_advisory_lock(a::int4, b::int4)"},
	{"pg_advisory_unlock(a text, b text)", "boolean", "pg_catalog.pg_advisory_unlock(a::int4, b::int4)"},
	{"set_config(a text, b text, c boolean)", "text", "pg_catalog.set_config(a, b, c)"},
	{"current_setting(a text)", "text", "pg_catalog.current_setting(a)"},
	{"to_regclass(a text)", "regclass", "pg_catalog.to_regclass(a)"},
	{"length(a text)", "integer", "pg_catalog.length(a)"},
	{"format(a text, b text, c text)", "text", "pg_catalog.format(a, b, c)"},
	{"date_part(a text, b timestamptz)", "float8", "pg_catalog.date_part(a, b)"},
	{"extract(a text, b timestamptz)", "numeric", "pg_catalog.extract(a, b)"},
	{"generate_series(a integer, b integer)", "SETOF integer", ""},
	{"generate_series(a text, b text)", "SETOF integer", ""},
	{"unnest(a text[])", "SETOF text", ""},
	{"unnest(a bigint[])", "SETOF bigint", ""},
	{"array_length(a text, b integer)", "integer", "0"},
}

// searchPathOps are look-alike operators: (left, right, returns, what the
// built-in returns).
var searchPathOps = []struct{ op, left, right, ret, body string }{
	{"*", "numeric", "integer", "numeric", "a OPERATOR(pg_catalog.*) b"},
	{"*", "numeric", "numeric", "numeric", "a OPERATOR(pg_catalog.*) b"},
	{"+", "bigint", "integer", "bigint", "a OPERATOR(pg_catalog.+) b"},
	{"-", "timestamptz", "interval", "timestamptz", "a OPERATOR(pg_catalog.-) b"},
	{"-", "timestamptz", "text", "timestamptz", "a OPERATOR(pg_catalog.-) b::interval"},
	{"+", "timestamptz", "interval", "timestamptz", "a OPERATOR(pg_catalog.+) b"},
	{"-", "timestamptz", "timestamptz", "interval", "a OPERATOR(pg_catalog.-) b"},
	{"=", "bigint", "bigint", "boolean", "a OPERATOR(pg_catalog.=) b"},
	{"=", "bigint", "text", "boolean", "a OPERATOR(pg_catalog.=) b::int8"},
	{"=", "integer", "integer", "boolean", "a OPERATOR(pg_catalog.=) b"},
	{"=", "integer", "text", "boolean", "a OPERATOR(pg_catalog.=) b::int4"},
	{"=", "text", "text", "boolean", "a OPERATOR(pg_catalog.=) b"},
	{"=", "name", "text", "boolean", "a OPERATOR(pg_catalog.=) b"},
	{"<>", "text", "text", "boolean", "a OPERATOR(pg_catalog.<>) b"},
	{"<", "bigint", "bigint", "boolean", "a OPERATOR(pg_catalog.<) b"},
	{">", "bigint", "bigint", "boolean", "a OPERATOR(pg_catalog.>) b"},
	{"<=", "bigint", "bigint", "boolean", "a OPERATOR(pg_catalog.<=) b"},
	{">=", "bigint", "bigint", "boolean", "a OPERATOR(pg_catalog.>=) b"},
	{"<", "timestamptz", "timestamptz", "boolean", "a OPERATOR(pg_catalog.<) b"},
	{"<", "timestamptz", "text", "boolean", "a OPERATOR(pg_catalog.<) b::timestamptz"},
	{">=", "timestamptz", "timestamptz", "boolean", "a OPERATOR(pg_catalog.>=) b"},
	{"<=", "timestamptz", "timestamptz", "boolean", "a OPERATOR(pg_catalog.<=) b"},
	{">", "timestamptz", "timestamptz", "boolean", "a OPERATOR(pg_catalog.>) b"},
}

// searchPathAggs are look-alike aggregates: (signature, state type, what
// the state function returns).
var searchPathAggs = []struct{ sig, stype, body string }{
	{"count(*)", "bigint", "COALESCE(s, 0) OPERATOR(pg_catalog.+) 1"},
	{"count(bigint)", "bigint", "COALESCE(s, 0) OPERATOR(pg_catalog.+) 1"},
	{"count(text)", "bigint", "COALESCE(s, 0) OPERATOR(pg_catalog.+) 1"},
	{"sum(bigint)", "bigint", "COALESCE(s, 0) OPERATOR(pg_catalog.+) a"},
	{"sum(integer)", "bigint", "COALESCE(s, 0) OPERATOR(pg_catalog.+) a"},
	{"max(bigint)", "bigint", "pg_catalog.int8larger(COALESCE(s, a), a)"},
	{"min(bigint)", "bigint", "pg_catalog.int8smaller(COALESCE(s, a), a)"},
	{"max(integer)", "integer", "pg_catalog.int4larger(COALESCE(s, a), a)"},
	{"max(timestamptz)", "timestamptz", "pg_catalog.timestamptz_larger(COALESCE(s, a), a)"},
	{"min(timestamptz)", "timestamptz", "pg_catalog.timestamptz_smaller(COALESCE(s, a), a)"},
	{"bool_or(boolean)", "boolean", "COALESCE(s, false) OR a"},
	{"string_agg(text, text)", "text", "pg_catalog.concat(s, a)"},
}

// searchPathTypes are built-in types that a look-alike domain may shadow
// (the SQL standard's names, such as bigint or integer, always mean
// pg_catalog's).
var searchPathTypes = []string{"text", "int8", "int4", "bool", "timestamptz", "jsonb", "name", "regclass", "float8"}

// plantSearchPathTraps creates the look-alikes in public of the database
// pool is connected to (as a superuser, with a pinned search path).
func plantSearchPathTraps(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	var b strings.Builder
	b.WriteString(`CREATE SEQUENCE public.sp_hits;
CREATE TABLE public.sp_calls (what text NOT NULL);
GRANT USAGE ON SEQUENCE public.sp_hits TO PUBLIC;
GRANT INSERT ON public.sp_calls TO PUBLIC;
CREATE FUNCTION public.sp_hit(what text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_catalog.nextval('public.sp_hits'::pg_catalog.regclass);
  INSERT INTO public.sp_calls (what) VALUES (what);
END $$;
`)
	for _, f := range searchPathTraps {
		body := "RETURN " + f.body + ";"
		switch {
		case f.ret == "void":
			body = "PERFORM " + f.body + ";"
		case strings.HasPrefix(f.ret, "SETOF"):
			body = "RETURN;"
		}
		fmt.Fprintf(&b, `CREATE FUNCTION public.%s RETURNS %s LANGUAGE plpgsql AS $$
BEGIN PERFORM public.sp_hit(%s); %s END $$;
`, f.args, f.ret, quoteLit("function "+f.args), body)
	}
	for i, o := range searchPathOps {
		fmt.Fprintf(&b, `CREATE FUNCTION public.sp_op_%d(a %s, b %s) RETURNS %s LANGUAGE plpgsql AS $$
BEGIN PERFORM public.sp_hit(%s); RETURN %s; END $$;
CREATE OPERATOR public.%s (LEFTARG = %s, RIGHTARG = %s, FUNCTION = public.sp_op_%d);
`, i, o.left, o.right, o.ret, quoteLit(fmt.Sprintf("operator %s(%s, %s)", o.op, o.left, o.right)), o.body,
			o.op, o.left, o.right, i)
	}
	for i, a := range searchPathAggs {
		_, arg, _ := strings.Cut(strings.TrimSuffix(a.sig, ")"), "(")
		params := "s " + a.stype + ", a " + arg
		switch {
		case arg == "*":
			params = "s " + a.stype
		case strings.Contains(arg, ","):
			params = "s " + a.stype + ", a text, d text"
		}
		fmt.Fprintf(&b, `CREATE FUNCTION public.sp_agg_%d(%s) RETURNS %s LANGUAGE plpgsql AS $$
BEGIN PERFORM public.sp_hit(%s); RETURN %s; END $$;
CREATE AGGREGATE public.%s (SFUNC = public.sp_agg_%d, STYPE = %s);
`, i, params, a.stype, quoteLit("aggregate "+a.sig), a.body, a.sig, i, a.stype)
	}
	// Types: a domain named like a built-in type runs its check, as the
	// caller, on every value cast to it.
	b.WriteString(`CREATE FUNCTION public.sp_type(what text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN PERFORM public.sp_hit(what); RETURN true; END $$;
`)
	for _, typ := range searchPathTypes {
		fmt.Fprintf(&b, "CREATE DOMAIN public.%s AS pg_catalog.%s CHECK (public.sp_type(%s));\n",
			typ, typ, quoteLit("type "+typ))
	}
	_, err := pool.Exec(ctx, b.String())
	require.NoError(t, err, b.String())
}

// trappedDB creates an empty database whose search_path (ALTER DATABASE) is
// path, with the look-alikes planted in public, checks that a loose call
// from that path reaches them, and returns its URL, a handle whose sessions
// pin their own search_path, and what the look-alikes have counted since
// ("0 calls" when none ran).
func trappedDB(t *testing.T, path string) (string, *db, func() []string) {
	t.Helper()
	ctx := context.Background()
	url := pg.EmptyDB(t)
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	// The test's own statements are not the ones under test.
	cfg.ConnConfig.RuntimeParams["search_path"] = "pg_catalog, pg_temp"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	d := dbOn(t, url, pool)
	plantSearchPathTraps(t, pool)
	d.Exec(fmt.Sprintf("ALTER DATABASE %s SET search_path = %s", cfg.ConnConfig.Database, path))
	hits := func() []string {
		t.Helper()
		var n int64
		require.NoError(t, pool.QueryRow(ctx, `SELECT CASE WHEN is_called THEN last_value ELSE 0 END
			FROM public.sp_hits`).Scan(&n))
		out := []string{fmt.Sprintf("%d calls", n)}
		return append(out, testenv.Column[string](t, pool, `SELECT what || ' x' || pg_catalog.count(*) FROM public.sp_calls
			GROUP BY what ORDER BY what`)...)
	}
	// Planting works: a loose call from this database's path runs the
	// look-alike.
	probe, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	_, err = probe.Exec(ctx, "SELECT pg_advisory_xact_lock($1, $2)", "1", "2")
	require.NoError(t, err)
	require.NoError(t, probe.Close(ctx))
	require.NotEqual(t, []string{"0 calls"}, hits(), "the look-alikes are reachable")
	d.Exec(`SELECT pg_catalog.setval('public.sp_hits'::pg_catalog.regclass, 1, false)`)
	d.Exec(`TRUNCATE public.sp_calls`)
	return url, d, hits
}

// A login whose search_path reaches look-alikes planted in public (after
// pg_catalog, or before it) runs none of them when it runs pgrelay doctor
// on a migrated database: doctor reads the login's search_path (to check
// it) and then pins its own session's before any other statement.
func TestDoctorSearchPathHijack(t *testing.T) {
	for _, path := range []string{`"$user", public`, `public, pg_catalog`} {
		t.Run(path, func(t *testing.T) {
			url, _, hits := trappedDB(t, path)
			code, out, errOut := cliMain("migrate", "--database-url", url)
			require.Equal(t, 0, code, out+errOut)
			require.Equal(t, []string{"0 calls"}, hits(), "migrate")
			_, out, errOut = cliMain("doctor", "--database-url", url)
			require.Contains(t, out, "search_path", "doctor ran its checks: "+out+errOut)
			require.Equal(t, []string{"0 calls"}, hits(), "doctor")
		})
	}
}

func quoteLit(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// TestSearchPathHijack: a role that may create objects in a schema on the
// search path of pgrelay's login plants look-alikes of every built-in
// pgrelay's statements use; none of them ever runs during migrate, run (sql
// channels in batches and one by one, email, NATS), stats, nodes, watch, or
// the statements of dev, whether public follows pg_catalog (the default
// "$user", public) or precedes it.
func TestSearchPathHijack(t *testing.T) {
	for _, path := range []string{`"$user", public`, `public, pg_catalog`} {
		t.Run(path, func(t *testing.T) {
			ctx := context.Background()
			url, d, hits := trappedDB(t, path)
			noHits := []string{"0 calls"}
			code, out, errOut := cliMain("migrate", "--database-url", url)
			require.Equal(t, 0, code, out+errOut)
			require.Equal(t, noHits, hits(), "migrate")

			n, js := startNATS(t)
			smtp := smtpCatcher(t, devenv.SMTPConfig{})
			d.Exec(`CREATE SCHEMA sp`)
			d.Exec(`CREATE TABLE sp.done (payload text NOT NULL)`)
			d.Exec(`CREATE FUNCTION sp.fail(p text) RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog AS
				$$ BEGIN RAISE EXCEPTION 'no: %', p; END $$`)
			d.Exec(`SELECT pgrelay.register('sp_none', 'INSERT INTO sp.done (payload) VALUES ($1)')`)
			d.Exec(`SELECT pgrelay.register('sp_lanes', 'INSERT INTO sp.done (payload) VALUES ($1)',
				p_concurrency_mode := 'channel')`)
			d.Exec(`SELECT pgrelay.register('sp_fail', 'SELECT sp.fail($1)', p_max_attempts := 2,
				p_retry_delay := '10 milliseconds', p_publish_payload := true)`)
			d.Exec(`SELECT pgrelay.register('sp_nats', 'sp.outbox', p_kind := 'nats')`)
			d.Exec(`SELECT pgrelay_notifier.create_channel('sp_mail', 'app@shop.example')`)
			enqueue := func() {
				d.Exec(`SELECT pgrelay.notify_many('sp_none', ARRAY(SELECT 'n' || g FROM pg_catalog.generate_series(1, 20) g))`)
				d.Exec(`SELECT pgrelay.notify_many('sp_lanes', ARRAY(SELECT 'l' || g FROM pg_catalog.generate_series(1, 10) g))`)
				d.Exec(`SELECT pgrelay.notify('sp_fail', 'f')`)
				d.Exec(`SELECT pgrelay.notify_many('sp_nats', ARRAY['m1', 'm2', 'm3'])`)
				d.Exec(`SELECT pgrelay_notifier.send('sp_mail', ARRAY['a@example.org'], 'Hi', 'Hello')`)
			}
			// Every event ended (2 attempts for sp_fail), the emails were
			// sent, and the log and the notifier's status events are in the
			// stream.
			state := func() string {
				logRows := d.Count(`SELECT pg_catalog.count(*)::pg_catalog.int4 FROM pgrelay.log`)
				statusRows := d.Count(`SELECT pg_catalog.count(*)::pg_catalog.int4 FROM pgrelay_notifier.status_events`)
				return fmt.Sprintf("queue %d, sent %d, log %d, unpublished %d",
					d.Count(`SELECT pg_catalog.count(*)::pg_catalog.int4 FROM pgrelay.queue`),
					d.Count(`SELECT pg_catalog.count(*)::pg_catalog.int4 FROM pgrelay_notifier.notifications
						WHERE status OPERATOR(pg_catalog.=) 'sent'`),
					logRows, logRows+statusRows-streamMsgs(js, "PGRELAY_EVENTS"))
			}
			settled := func(rounds int) string {
				return fmt.Sprintf("queue 0, sent %d, log %d, unpublished 0", rounds, rounds*(20+10+2+3+1))
			}
			env := []string{"PGRELAY_SMTP_URL=" + smtp.URL()}
			for round, batch := range []string{"500", "1"} {
				enqueue()
				run := startCLI(t, env, "run", "--database-url", url, "--nats-url", n.URL(),
					"--nats-publish-interval", "50ms", "--heartbeat-interval", "200ms", "--sql-batch", batch)
				last := ""
				testenv.Eventually(t, 30*time.Second, "every event to end and be published", func() bool {
					last = state()
					return last == settled(round+1) || run.exited()
				})
				require.False(t, run.exited(), "run --sql-batch %s exited on its own", batch)
				run.signal(syscall.SIGTERM)
				require.Equal(t, 0, run.wait(30*time.Second))
				require.Equal(t, noHits, hits(), "run --sql-batch %s", batch)
			}
			require.Equal(t, 2, smtp.Count())

			code, out, errOut = cliMain("stats", "--database-url", url)
			require.Equal(t, 0, code, out+errOut)
			code, out, errOut = cliMain("nodes", "--database-url", url)
			require.Equal(t, 0, code, out+errOut)
			code, out, errOut = cliMain("nodes", "decommission", "7", "--database-url", url)
			require.NotEqual(t, 0, code, "without --yes: "+out+errOut)
			code, out, errOut = cliMain("nodes", "decommission", "7", "--yes", "--database-url", url)
			require.Equal(t, 0, code, "node 7 never ran: "+out+errOut)
			require.Equal(t, noHits, hits(), "stats, nodes")
			code, out, errOut = runCLI(t, nil, "watch", "--nats-url", n.URL(), "--since", "1h", "--limit", "3")
			require.Equal(t, 0, code, out+errOut)
			require.Equal(t, noHits, hits(), "watch")

			// dev starts a PostgreSQL of its own, where nothing is planted:
			// the statements it sends there (the demo set-up, the producer's,
			// the live view's; its migration and Processor are the ones
			// above) run here.
			dp, err := pgxpool.ParseConfig(url)
			require.NoError(t, err)
			dev, err := pgxpool.NewWithConfig(ctx, dp)
			require.NoError(t, err)
			t.Cleanup(dev.Close)
			require.NoError(t, cli.DevStatements(ctx, dev))
			require.Equal(t, noHits, hits(), "dev's statements")
		})
	}
}
