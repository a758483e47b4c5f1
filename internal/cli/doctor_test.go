package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/devenv"
	"github.com/pgrelay/pgrelay/internal/testenv"
)

// doctorFinding is one element of `pgrelay doctor --json`.
type doctorFinding struct {
	ID       string `json:"id"`
	Severity string `json:"severity"`
	Database string `json:"database"`
	Message  string `json:"message"`
	Fix      string `json:"fix"`
}

// runDoctor runs `pgrelay doctor --json args...` in this process and returns
// its exit code, its findings and its stderr.
func runDoctor(t *testing.T, args ...string) (int, []doctorFinding, string) {
	t.Helper()
	code, out, errOut := cliMain(append([]string{"doctor", "--json"}, args...)...)
	var fs []doctorFinding
	require.NoError(t, json.Unmarshal([]byte(out), &fs), "stdout: %s\nstderr: %s", out, errOut)
	return code, fs, errOut
}

// findingKinds is "severity id" of every finding, sorted.
func findingKinds(fs []doctorFinding) []string {
	out := []string{}
	for _, f := range fs {
		out = append(out, f.Severity+" "+f.ID)
	}
	sort.Strings(out)
	return out
}

func findingOf(t *testing.T, fs []doctorFinding, sev, id string) doctorFinding {
	t.Helper()
	for _, f := range fs {
		if f.ID == id && f.Severity == sev {
			return f
		}
	}
	t.Fatalf("no %s %s among %v", sev, id, findingKinds(fs))
	return doctorFinding{}
}

// What a database freshly migrated by a superuser shows: PostgreSQL's
// defaults (PUBLIC may connect and create temporary objects, no idle in
// transaction timeout) and the superuser owner, all warnings.
var cleanByPostgres = []string{"warning idle-in-transaction-timeout", "warning owner-superuser",
	"warning public-connect", "warning public-temp"}

// On a server of its own (pgrelay's roles are cluster-wide, and these checks
// read every login): a freshly migrated database shows only the expected
// warnings and exits 0; each planted problem shows with its fix and exits 1;
// running the fixes given brings the clean result back.
func TestDoctor(t *testing.T) {
	ctx := context.Background()
	srv, err := devenv.StartPostgres(ctx, devenv.PostgresConfig{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Stop() })
	super := func(db, sql string) {
		t.Helper()
		require.NoError(t, srv.Exec(ctx, db, sql), sql)
	}
	newDatabase := func(name string) string {
		t.Helper()
		require.NoError(t, srv.CreateDatabase(ctx, name))
		return srv.URL(name)
	}

	// Clean: JSON and text.
	clean := newDatabase("doctor_clean")
	code, fs, errOut := runDoctor(t, "--database-url", clean)
	require.Equal(t, 0, code, "%s %+v", errOut, fs)
	require.Equal(t, cleanByPostgres, findingKinds(fs))
	require.Equal(t, "REVOKE CONNECT ON DATABASE \"doctor_clean\" FROM PUBLIC;\n"+
		"GRANT CONNECT ON DATABASE \"doctor_clean\" TO pgrelay_producer, pgrelay_processor, pgrelay_admin;  -- and to your application's other logins",
		findingOf(t, fs, "warning", "public-connect").Fix)
	code, out, errOut := cliMain("doctor", "--database-url", clean)
	require.Equal(t, 0, code, errOut)
	label := fmt.Sprintf("127.0.0.1:%d/doctor_clean", srv.Port())
	require.Contains(t, out, "WARNING  public-temp ("+label+")\n")
	require.Contains(t, out, "   fix:  REVOKE TEMPORARY ON DATABASE \"doctor_clean\" FROM PUBLIC;")
	require.True(t, strings.HasSuffix(out, "0 problems, 4 warnings\n"), out)

	t.Run("planted", func(t *testing.T) {
		url := newDatabase("doctor_planted")
		plant := func(sql string) { t.Helper(); super("doctor_planted", sql) }
		// The roles are the server's: undo what the other parts would see.
		t.Cleanup(func() {
			for _, sql := range []string{"DROP DATABASE doctor_planted WITH (FORCE)", "ALTER ROLE pgrelay_admin NOLOGIN",
				"DROP ROLE IF EXISTS doctor_mallory, doctor_app"} {
				require.NoError(t, srv.Exec(ctx, "postgres", sql), sql)
			}
		})
		// A look-alike of a built-in the Processor calls, and of an
		// operator, in public; public writable by every login.
		plant("CREATE FUNCTION public.pg_notify(text, text) RETURNS void LANGUAGE sql AS ''")
		plant("CREATE FUNCTION public.mul(numeric, integer) RETURNS numeric LANGUAGE sql AS 'SELECT $1 * $2::numeric'")
		plant("CREATE OPERATOR public.* (LEFTARG = numeric, RIGHTARG = integer, FUNCTION = public.mul)")
		plant("GRANT CREATE ON SCHEMA public TO PUBLIC")
		// PUBLIC on a table and a function of pgrelay.
		plant("GRANT SELECT ON pgrelay.queue TO PUBLIC")
		plant("GRANT EXECUTE ON FUNCTION pgrelay._next_id() TO PUBLIC")
		// A login in pgrelay_notifier; a role of pgrelay that can log in; a
		// notifier function handed to another owner; a producer that holds
		// the owner's rights.
		plant("CREATE ROLE doctor_mallory LOGIN")
		plant("GRANT pgrelay_notifier TO doctor_mallory")
		plant("ALTER ROLE pgrelay_admin LOGIN")
		plant("ALTER FUNCTION pgrelay_notifier.fetch(bigint) OWNER TO postgres")
		plant("CREATE ROLE doctor_app LOGIN IN ROLE pgrelay_producer")
		plant("GRANT postgres TO doctor_app")
		// The queue's vacuum settings changed, and a transaction left open.
		plant("ALTER TABLE pgrelay.queue RESET (autovacuum_vacuum_threshold)")
		tx, err := pgx.Connect(ctx, url)
		require.NoError(t, err)
		t.Cleanup(func() { _ = tx.Close(context.Background()) })
		_, err = tx.Exec(ctx, "BEGIN")
		require.NoError(t, err)
		var pid int
		require.NoError(t, tx.QueryRow(ctx, "SELECT pg_backend_pid() FROM (SELECT txid_current()) x").Scan(&pid))
		d := newDBHandle(t, url)
		testenv.Eventually(t, 10*time.Second, "the open transaction to be 50 ms old", func() bool {
			return d.Count(`SELECT count(*) FROM pg_stat_activity
				WHERE pid = $1 AND xact_start < clock_timestamp() - interval '50 milliseconds'`, pid) == 1
		})

		code, fs, errOut := runDoctor(t, "--database-url", url, "--max-transaction-age", "50ms")
		require.Equal(t, 1, code)
		require.Contains(t, errOut, "pgrelay doctor: 7 problems found")
		require.Equal(t, []string{
			"problem lookalike", "problem notifier-function-owner", "problem notifier-member",
			"problem owner-producer", "problem public-privileges", "problem role-login", "problem search-path-writable",
			"warning idle-in-transaction-timeout", "warning long-transaction", "warning owner-superuser",
			"warning public-connect", "warning public-temp", "warning queue-autovacuum",
		}, findingKinds(fs))
		require.Equal(t, "DROP FUNCTION public.pg_notify(text, text);\nDROP OPERATOR public.* (numeric, integer);",
			findingOf(t, fs, "problem", "lookalike").Fix)
		require.Equal(t, "REVOKE ALL ON TABLE pgrelay.queue FROM PUBLIC;\nREVOKE ALL ON FUNCTION pgrelay._next_id() FROM PUBLIC;",
			findingOf(t, fs, "problem", "public-privileges").Fix)
		require.Contains(t, findingOf(t, fs, "problem", "notifier-member").Fix, "REVOKE pgrelay_notifier FROM \"doctor_mallory\";")
		require.Contains(t, findingOf(t, fs, "problem", "notifier-function-owner").Fix, "ALTER FUNCTION pgrelay_notifier.\"fetch\"(p_notification_id bigint) OWNER TO \"pgrelay_notifier\";")
		require.Contains(t, findingOf(t, fs, "problem", "owner-producer").Fix, "REVOKE \"postgres\" FROM \"doctor_app\";")
		require.Equal(t, "ALTER ROLE \"pgrelay_admin\" NOLOGIN;", findingOf(t, fs, "problem", "role-login").Fix)
		// doctor_app, a member of the database's owner, owns public too.
		require.Contains(t, findingOf(t, fs, "problem", "search-path-writable").Message, "PUBLIC (schema public), doctor_app (schema public)")
		require.Contains(t, findingOf(t, fs, "problem", "search-path-writable").Fix, `REVOKE CREATE ON SCHEMA "public" FROM PUBLIC;`)
		require.Equal(t, "ALTER TABLE pgrelay.queue SET (autovacuum_vacuum_threshold = 5000);", findingOf(t, fs, "warning", "queue-autovacuum").Fix)
		require.Contains(t, findingOf(t, fs, "warning", "long-transaction").Fix, fmt.Sprintf("SELECT pg_catalog.pg_terminate_backend(%d);", pid))
		require.Contains(t, findingOf(t, fs, "warning", "idle-in-transaction-timeout").Message, "nor do the producer logins doctor_app")

		// The fixes, run as given, clear what they fix.
		_, err = tx.Exec(ctx, "ROLLBACK")
		require.NoError(t, err)
		for _, f := range fs {
			if f.Severity == "problem" || f.ID == "queue-autovacuum" {
				plant(f.Fix)
			}
		}
		plant("DROP FUNCTION public.mul(numeric, integer)")
		code, fs, errOut = runDoctor(t, "--database-url", url, "--max-transaction-age", "50ms")
		require.Equal(t, 0, code, errOut)
		require.Equal(t, cleanByPostgres, findingKinds(fs))
		require.Contains(t, findingOf(t, fs, "warning", "idle-in-transaction-timeout").Message, "nor do the producer logins doctor_app")
		plant("ALTER ROLE doctor_app SET idle_in_transaction_session_timeout = '1min'")
		_, fs, _ = runDoctor(t, "--database-url", url)
		require.NotContains(t, findingKinds(fs), "warning idle-in-transaction-timeout")
	})

	t.Run("search path of the Processor's login", func(t *testing.T) {
		url := newDatabase("doctor_path")
		plant := func(sql string) { t.Helper(); super("doctor_path", sql) }
		// A schema owned by another login, on the search_path the
		// Processor's login sets for itself, with a look-alike of now().
		plant("CREATE ROLE doctor_dev LOGIN")
		plant("CREATE ROLE doctor_relay LOGIN")
		plant("CREATE SCHEMA app AUTHORIZATION doctor_dev")
		plant("CREATE FUNCTION app.now() RETURNS timestamptz LANGUAGE sql AS 'SELECT ''2000-01-01''::timestamptz'")
		plant("ALTER ROLE doctor_relay SET search_path = app, public")
		t.Cleanup(func() {
			super("postgres", "DROP DATABASE doctor_path WITH (FORCE)")
			super("postgres", "DROP ROLE doctor_dev, doctor_relay")
		})

		// doctor_relay is not yet a member of pgrelay_processor: app is
		// off the Processor's path, the look-alike only a warning.
		code, fs, errOut := runDoctor(t, "--database-url", url)
		require.Equal(t, 0, code, errOut)
		require.Equal(t, []string{"warning idle-in-transaction-timeout", "warning lookalike", "warning owner-superuser",
			"warning public-connect", "warning public-temp"}, findingKinds(fs))
		require.Contains(t, findingOf(t, fs, "warning", "lookalike").Message, "function app.now()")
		// An extension's operators named like built-ins, in public: a
		// warning, whatever the search_path.
		plant("CREATE EXTENSION citext SCHEMA public")
		code, fs, errOut = runDoctor(t, "--database-url", url)
		require.Equal(t, 0, code, errOut)
		require.Contains(t, findingOf(t, fs, "warning", "lookalike").Message, "operator public.= (public.citext, public.citext) (of extension citext)")
		require.Contains(t, findingOf(t, fs, "warning", "lookalike").Fix, "belongs to extension citext")
		plant("DROP EXTENSION citext")

		// Named with --processor-role, and as a member of pgrelay_processor.
		for _, args := range [][]string{{"--processor-role", "doctor_relay"}, nil} {
			if args == nil {
				plant("GRANT pgrelay_processor TO doctor_relay")
			}
			code, fs, _ = runDoctor(t, append([]string{"--database-url", url}, args...)...)
			require.Equal(t, 1, code)
			require.Equal(t, append([]string{"problem lookalike", "problem search-path-writable"}, cleanByPostgres...), findingKinds(fs), args)
			require.Contains(t, findingOf(t, fs, "problem", "search-path-writable").Message, "doctor_dev (schema app)")
			require.Contains(t, findingOf(t, fs, "problem", "search-path-writable").Fix, "ALTER ROLE <processor login> SET search_path")
		}
	})

	t.Run("publisher", func(t *testing.T) {
		// Installed by a login that is no superuser (docs/dba-guide.md).
		super("postgres", "CREATE ROLE doctor_owner LOGIN")
		super("postgres", "GRANT pgrelay_notifier TO doctor_owner")
		super("postgres", "CREATE DATABASE doctor_pub")
		super("postgres", "GRANT CREATE ON DATABASE doctor_pub TO doctor_owner")
		t.Cleanup(func() {
			super("postgres", "DROP DATABASE doctor_pub WITH (FORCE)")
			super("postgres", "DROP ROLE doctor_owner")
		})
		url := srv.URL("doctor_pub")
		code, out, errOut := cliMain("migrate", "--database-url", strings.Replace(url, "postgres://postgres@", "postgres://doctor_owner@", 1))
		require.Equal(t, 0, code, out+errOut)
		clean := []string{"warning idle-in-transaction-timeout", "warning public-connect", "warning public-temp", "warning publisher-stats"}
		code, fs, errOut := runDoctor(t, "--database-url", url)
		require.Equal(t, 0, code, errOut)
		require.Equal(t, clean, findingKinds(fs))
		require.Equal(t, "GRANT pg_read_all_stats TO \"doctor_owner\";", findingOf(t, fs, "warning", "publisher-stats").Fix)
		// As the owner, who cannot see other roles' sessions: said, not
		// passed over.
		asOwner := strings.Replace(url, "postgres://postgres@", "postgres://doctor_owner@", 1)
		code, fs, errOut = runDoctor(t, "--database-url", asOwner)
		require.Equal(t, 0, code, errOut)
		require.Equal(t, []string{"warning idle-in-transaction-timeout", "warning long-transaction-unchecked",
			"warning public-connect", "warning public-temp", "warning publisher-stats"}, findingKinds(fs))

		// The publisher has run (a cursor) and left a row of two days ago.
		super("doctor_pub", "INSERT INTO pgrelay.publish_cursors (node_id, source, last_id) VALUES (0, 'log', 0)")
		super("doctor_pub", `INSERT INTO pgrelay.log (id, queue_id, origin_id, channel, attempt, event, node, at)
			VALUES (pgrelay._id_floor(now() - interval '2 days'), 1, 1, 'x', 1, 'succeeded', 0, now() - interval '2 days')`)
		code, fs, errOut = runDoctor(t, "--database-url", url)
		require.Equal(t, 1, code)
		require.Contains(t, errOut, "pgrelay doctor: 2 problems found")
		require.Equal(t, []string{"problem publish-lag", "problem publisher-stats",
			"warning idle-in-transaction-timeout", "warning public-connect", "warning public-temp"}, findingKinds(fs))
		require.Contains(t, findingOf(t, fs, "problem", "publish-lag").Message, "node 0's NATS publisher (source log) has 1 unpublished events, the oldest 48h")

		super("doctor_pub", findingOf(t, fs, "problem", "publisher-stats").Fix)
		_, fs, _ = runDoctor(t, "--database-url", url)
		require.Equal(t, []string{"problem publish-lag", "warning idle-in-transaction-timeout", "warning public-connect", "warning public-temp"}, findingKinds(fs))
		// Within --max-publish-age, and once published, no finding.
		_, fs, _ = runDoctor(t, "--database-url", url, "--max-publish-age", "72h")
		require.Equal(t, clean[:3], findingKinds(fs))
		super("doctor_pub", "UPDATE pgrelay.publish_cursors SET last_id = (SELECT max(id) FROM pgrelay.log)")
		code, fs, _ = runDoctor(t, "--database-url", url)
		require.Equal(t, 0, code)
		require.Equal(t, clean[:3], findingKinds(fs))
	})

	t.Run("two databases without replication", func(t *testing.T) {
		// Given twice, --database-url checks a cluster: neither database
		// replicates, sets its node id, or tracks commit timestamps.
		a, b := newDatabase("doctor_node_a"), newDatabase("doctor_node_b")
		code, fs, _ := runDoctor(t, "--database-url", a, "--database-url", b)
		require.Equal(t, 1, code)
		var problems []string
		for _, k := range findingKinds(fs) {
			if strings.HasPrefix(k, "problem") {
				problems = append(problems, k)
			}
		}
		require.Equal(t, []string{"problem node-id-duplicate", "problem node-id-unset", "problem node-id-unset",
			"problem replication-missing", "problem replication-missing",
			"problem track-commit-timestamp", "problem track-commit-timestamp"}, problems)
		require.Equal(t, "ALTER DATABASE \"doctor_node_b\" SET pg_relay.node_id = '<N>';  -- a different N (0-1023) on each node",
			func() string {
				for _, f := range fs {
					if f.ID == "node-id-unset" && strings.HasSuffix(f.Database, "/doctor_node_b") {
						return f.Fix
					}
				}
				return ""
			}())
		super("doctor_node_a", "ALTER DATABASE doctor_node_a SET pg_relay.node_id = '1'")
		super("doctor_node_b", "ALTER DATABASE \"doctor_node_b\" SET pg_relay.node_id = '2'")
		_, fs, _ = runDoctor(t, "--database-url", a, "--database-url", b)
		require.NotContains(t, findingKinds(fs), "problem node-id-duplicate")
		require.NotContains(t, findingKinds(fs), "problem node-id-unset")
		// Set in postgresql.conf instead: the server's, which pg_settings
		// does not show for a parameter no library defines.
		super("doctor_node_a", "ALTER DATABASE doctor_node_a RESET pg_relay.node_id")
		_, fs, _ = runDoctor(t, "--database-url", a, "--database-url", b)
		require.Contains(t, findingKinds(fs), "problem node-id-unset")
		f, err := os.OpenFile(filepath.Join(srv.DataDir(), "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
		require.NoError(t, err)
		_, err = f.WriteString("pg_relay.node_id = 7\n")
		require.NoError(t, err)
		require.NoError(t, f.Close())
		super("postgres", "SELECT pg_reload_conf()")
		_, fs, _ = runDoctor(t, "--database-url", a, "--database-url", b)
		require.NotContains(t, findingKinds(fs), "problem node-id-unset")
		require.NotContains(t, findingKinds(fs), "problem node-id-duplicate")
	})

	// Not installed; usage.
	code, _, errOut = cliMain("doctor", "--database-url", pg.EmptyDB(t))
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "pgrelay is not installed in this database: run 'pgrelay migrate' first")
	code, _, errOut = cliMain("doctor")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "--database-url (or PGRELAY_DATABASE_URL) is required")
}

// On a real pair set up as docs/multi-master.md says, on pglogical and on
// Spock, doctor finds nothing wrong with the cluster; with node 2's
// notifier tables out of replication, its record of migrations in a
// replication set, node 2 given node 1's id, its conflict resolution changed
// (pglogical: Spock knows only last_update_wins) and its subscriptions
// forwarding every origin, it names each.
func TestDoctorCluster(t *testing.T) {
	for _, engine := range []devenv.Engine{devenv.Pglogical, devenv.Spock} {
		t.Run(string(engine), func(t *testing.T) { doctorCluster(t, engine) })
	}
}

func doctorCluster(t *testing.T, engine devenv.Engine) {
	ctx := context.Background()
	cluster := testenv.ClusterT(t, devenv.ClusterConfig{Engine: engine})
	problems := func(fs []doctorFinding) []string {
		var out []string
		for _, f := range fs {
			if f.Severity == "problem" {
				out = append(out, f.ID+" "+f.Database[strings.Index(f.Database, ":")+1:])
			}
		}
		return out
	}
	code, fs, errOut := runDoctor(t, "--database-url", cluster.URL(1), "--database-url", cluster.URL(2))
	require.Equal(t, 0, code, errOut)
	var twice []string
	for _, k := range cleanByPostgres {
		twice = append(twice, k, k)
	}
	require.Equal(t, twice, findingKinds(fs))

	n2 := fmt.Sprintf("%d/relay", cluster.Node(2).Port())
	want := []string{"node-id-duplicate ", "replication-forwarding " + n2, "replication-missing " + n2, "replication-node-local " + n2}
	if engine == devenv.Pglogical {
		require.NoError(t, cluster.Node(2).Exec(ctx, devenv.ClusterDB, `SELECT pglogical.replication_set_remove_table('default', c.oid)
			FROM pg_class c WHERE c.relnamespace = 'pgrelay_notifier'::regnamespace AND c.relkind = 'r';
			SELECT pglogical.replication_set_add_table('default', 'pgrelay.channel_locks')`))
		require.NoError(t, cluster.Node(2).Exec(ctx, "postgres", "ALTER SYSTEM SET pglogical.conflict_resolution = 'apply_remote'"))
		require.NoError(t, cluster.Node(2).Exec(ctx, "postgres", "SELECT pg_reload_conf()"))
		require.NoError(t, cluster.Node(2).Exec(ctx, devenv.ClusterDB, "UPDATE pglogical.subscription SET sub_forward_origins = '{all}'"))
		want = append([]string{"conflict-resolution " + n2}, want...)
	} else {
		// A real apply error on node 2: a row from node 1 its own check
		// refuses, which Spock skips and records (node 2 runs Spock's default
		// exception_behaviour, transdiscard, which doctor reports); then
		// node 2's subscription disabled.
		require.NoError(t, cluster.Node(2).Exec(ctx, "postgres", "ALTER SYSTEM SET spock.exception_behaviour = 'transdiscard'"))
		// A restart, not a reload: the apply worker must run with it when
		// the row comes.
		require.NoError(t, cluster.StopNode(2))
		require.NoError(t, cluster.StartNode(ctx, 2))
		require.NoError(t, cluster.WaitReplicating(ctx))
		require.NoError(t, cluster.ExecBoth(ctx, `CREATE TABLE public.t (id int PRIMARY KEY, x int)`))
		require.NoError(t, cluster.Replicate(ctx, "public.t"))
		require.NoError(t, cluster.Node(2).Exec(ctx, devenv.ClusterDB, `ALTER TABLE public.t ADD CONSTRAINT small CHECK (x < 10)`))
		require.NoError(t, cluster.Node(1).Exec(ctx, devenv.ClusterDB, `INSERT INTO public.t VALUES (1, 20)`))
		d2 := newDBHandle(t, cluster.URL(2))
		testenv.Eventually(t, time.Minute, "the apply exception on node 2", func() bool {
			return d2.Count(`SELECT count(*) FROM spock.exception_log WHERE table_name = 't'`) > 0
		})
		require.NoError(t, cluster.Node(2).Exec(ctx, devenv.ClusterDB, `SELECT spock.sub_disable('sub_n2_n1', true)`))
		want = []string{"node-id-duplicate ", "replication-exception-behaviour " + n2, "replication-exceptions " + n2, "replication-forwarding " + n2,
			"replication-missing " + n2, "replication-node-local " + n2, "replication-subscription " + n2}
		require.NoError(t, cluster.Node(2).Exec(ctx, devenv.ClusterDB, `SELECT spock.repset_remove_table('default', c.oid)
			FROM pg_class c WHERE c.relnamespace = 'pgrelay_notifier'::regnamespace AND c.relkind = 'r';
			SELECT spock.repset_add_table('default', 'pgrelay.channel_locks')`))
		require.NoError(t, cluster.Node(2).Exec(ctx, devenv.ClusterDB, "UPDATE spock.subscription SET sub_forward_origins = '{all}'"))
	}
	require.NoError(t, cluster.Node(2).Exec(ctx, "postgres", "ALTER DATABASE relay SET pg_relay.node_id = '1'"))
	code, fs, _ = runDoctor(t, "--database-url", cluster.URL(1), "--database-url", cluster.URL(2))
	require.Equal(t, 1, code)
	require.Equal(t, want, problems(fs))
	if engine == devenv.Pglogical {
		require.Contains(t, findingOf(t, fs, "problem", "replication-missing").Fix,
			"SELECT pglogical.replication_set_add_table('default', 'pgrelay_notifier.debug_log', synchronize_data := false);")
		require.Equal(t, "SELECT pglogical.replication_set_remove_table('default', 'pgrelay.channel_locks');",
			findingOf(t, fs, "problem", "replication-node-local").Fix)
	} else {
		require.Contains(t, findingOf(t, fs, "problem", "replication-missing").Fix,
			"SELECT spock.repset_add_table('default', 'pgrelay_notifier.debug_log');")
		require.Equal(t, "SELECT spock.repset_remove_table('default', 'pgrelay.channel_locks');",
			findingOf(t, fs, "problem", "replication-node-local").Fix)
		require.Contains(t, findingOf(t, fs, "problem", "replication-exceptions").Message, "(0 on pgrelay's tables), the latest: public.t: [SQLSTATE 23514]")
		require.Contains(t, findingOf(t, fs, "problem", "replication-subscription").Message, "sub_n2_n1 (disabled)")
		require.Contains(t, findingOf(t, fs, "problem", "replication-exception-behaviour").Message,
			"spock.exception_behaviour is transdiscard")
		code, out, errOut := cliMain("nodes", "--database-url", cluster.URL(2))
		require.Equal(t, 0, code, errOut)
		require.Contains(t, out, "subscriptions (node 1, spock): sub_n2_n1 from n1 disabled") // node 2, given node 1's id
		require.Regexp(t, `apply exceptions \(node 1, spock\): [1-9]\d* in spock.exception_log, 0 on pgrelay's tables; the latest: public.t: `, out)
	}
	// Node 1 alone is a node of a cluster too (it has the extension).
	code, fs, errOut = runDoctor(t, "--database-url", cluster.URL(1))
	require.Equal(t, 0, code, errOut)
	require.Empty(t, problems(fs))
}

// newDBHandle wraps an existing database's URL in the db helpers.
func newDBHandle(t *testing.T, url string) *db {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return dbOn(t, url, pool)
}
