package migrations_test

// The schema's files (docs/architecture.md, "The schema's files"): the
// v0.1.0 baseline, one upgrade migration, and a file per function that the
// runner applies whenever the files differ from the database's.

import (
	"fmt"
	"path"
	"regexp"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/testenv"
	"github.com/pgrelay/pgrelay/migrations"
)

// A database of release 0.1.0 with rows in every table upgrades to the
// schema a fresh install has (the snapshot), and keeps every row.
func TestUpgradeFromV010WithDataGivesTheSnapshot(t *testing.T) {
	t.Parallel()
	url, c := v010(t)
	for _, sql := range []string{
		"SELECT pgrelay.register('published', 'SELECT length($1)', p_publish_payload := true)",
		"SELECT pgrelay.notify('published', 'kept')",
		"SELECT pgrelay.register('unique', 'SELECT length($1)', p_deduplicate := true)",
		"SELECT pgrelay.notify('unique', 'once')",
		"SELECT pgrelay_notifier.create_channel('mail', 'from@example.com')",
		"SELECT pgrelay_notifier.send('mail', ARRAY['to@example.com'], 'subject', 'body')",
		`INSERT INTO pgrelay_notifier.debug_log (notification_id, message)
		   SELECT notification_id, 'a debug line' FROM pgrelay_notifier.notifications`,
		`INSERT INTO pgrelay.log (queue_id, origin_id, channel, attempt, event, error)
		   SELECT id, origin_id, channel, 1, e, CASE e WHEN 'succeeded' THEN NULL ELSE 'boom' END
		     FROM pgrelay.queue, unnest(ARRAY['succeeded', 'failed', 'gave_up', 'rescued']) e
		    WHERE channel = 'bulk' LIMIT 8`,
		`INSERT INTO pgrelay.log_dropped (node, rows, first_id, last_id, first_at, last_at)
		   VALUES (0, 10, 1, 10, now() - interval '1 day', now() - interval '1 day')`,
		"INSERT INTO pgrelay.nodes (node_id, mode, hostname, version) VALUES (0, 'single', 'relay-1', '0.1.0')",
		"SELECT pgrelay._processor_start('single', 'relay-1', 4242, '0.1.0')",
		"UPDATE pgrelay.processors SET last_seen = now() - interval '1 hour'",
		"INSERT INTO pgrelay.publish_cursors (node_id, source, last_id) VALUES (0, 'log', 0), (0, 'notifier', 0)",
		"INSERT INTO pgrelay.publish_leases (node_id, holder_pid, holder_start) VALUES (0, 1, now())",
	} {
		_, err := c.Exec(bg, sql)
		require.NoError(t, err, sql)
	}
	counts := func() map[string]int {
		rows, err := c.Query(bg, `SELECT format('%I.%I', schemaname, relname) FROM pg_stat_user_tables
			WHERE schemaname IN ('pgrelay', 'pgrelay_notifier') ORDER BY 1`)
		require.NoError(t, err)
		var tables []string
		for rows.Next() {
			var name string
			require.NoError(t, rows.Scan(&name))
			tables = append(tables, name)
		}
		require.NoError(t, rows.Err())
		out := map[string]int{}
		for _, tbl := range tables {
			out[tbl] = testenv.One[int](t, c, "SELECT count(*) FROM "+tbl)
		}
		return out
	}
	before := counts()
	var empty []string
	for tbl, n := range before {
		// schema_functions: created by this runner, empty until it applies
		// the function files (0.1.0's runner had none).
		if n == 0 && tbl != "pgrelay.schema_functions" {
			empty = append(empty, tbl)
		}
	}
	require.Empty(t, empty, "tables without rows before the upgrade")
	delete(before, "pgrelay.schema_functions")

	m := testenv.ConnectAs(t, url, "", -1)
	res, err := migrations.Up(bg, m)
	require.NoError(t, err)
	// v0.2.0's migration and every one after it.
	var later []int
	for v := 3; v <= migrations.Latest(); v++ {
		later = append(later, v)
	}
	require.Equal(t, later, versionsOf(res.Applied))
	require.True(t, res.Functions)
	after := counts()
	for tbl, n := range before {
		if tbl != "pgrelay.schema_migrations" {
			require.Equal(t, n, after[tbl], "%s keeps its rows", tbl)
		}
	}
	require.Equal(t, migrations.Latest(), after["pgrelay.schema_migrations"])
	require.Equal(t, 1, after["pgrelay.settings"], "an installation that has published keeps document schema 1")
	requireSnapshot(t, dumpSchema(t, url), "upgraded from v0.1.0")
	require.NoError(t, migrations.RequireLatest(bg, m))
}

func versionsOf(ms []migrations.Migration) []int {
	var out []int
	for _, m := range ms {
		out = append(out, m.Version)
	}
	return out
}

// embedded is the build's migrations and function files as a file system
// the test may change.
func embedded(t *testing.T) fstest.MapFS {
	t.Helper()
	fsys := fstest.MapFS{}
	all, err := migrations.All()
	require.NoError(t, err)
	for _, m := range all {
		fsys[fmt.Sprintf("%04d_%s.up.sql", m.Version, m.Name)] = &fstest.MapFile{Data: []byte(m.SQL)}
	}
	files, err := migrations.Functions()
	require.NoError(t, err)
	for _, f := range files {
		fsys[path.Join("functions", f[0])] = &fstest.MapFile{Data: []byte(f[1])}
	}
	return fsys
}

// A changed function file is applied by the next migrate, with no numbered
// migration; until then a Processor of the build refuses the database, and
// a build whose files the database already has applies nothing. Functions
// applied by a newer release are neither undone nor run on.
func TestFunctionFilesAppliedWhenChanged(t *testing.T) {
	t.Parallel()
	url := pg.EmptyDB(t)
	c := testenv.ConnectAs(t, url, "", -1)
	res, err := migrations.Up(bg, c)
	require.NoError(t, err)
	require.True(t, res.Functions)
	require.NoError(t, migrations.RequireLatest(bg, c))
	res, err = migrations.Up(bg, c)
	require.NoError(t, err)
	require.Empty(t, res.Applied)
	require.False(t, res.Functions, "the database has this build's functions")

	// Another build's file: the cluster name a database starts with.
	fsys := embedded(t)
	const file = "functions/log/_default_cluster_name.sql"
	f := fsys[file]
	require.NotNil(t, f, file)
	changed := strings.Replace(string(f.Data), "'pgrelay');", "'pgrelay-changed');", 1)
	changed = strings.Replace(changed, "pg_catalog.current_database()::pg_catalog.text", "''::pg_catalog.text", 1)
	require.NotEqual(t, string(f.Data), changed)
	fsys[file] = &fstest.MapFile{Data: []byte(changed)}
	res, err = migrations.UpFSFunctions(bg, c, fsys)
	require.NoError(t, err)
	require.Empty(t, res.Applied)
	require.True(t, res.Functions)
	require.Equal(t, "pgrelay-changed", testenv.One[string](t, c, "SELECT pgrelay._default_cluster_name()"))
	err = migrations.RequireLatest(bg, c)
	require.ErrorContains(t, err, "the database's pgrelay functions are not this pgrelay's: run 'pgrelay migrate' first")

	// This build's migrate puts its own back.
	res, err = migrations.Up(bg, c)
	require.NoError(t, err)
	require.True(t, res.Functions)
	require.NotEqual(t, "pgrelay-changed", testenv.One[string](t, c, "SELECT pgrelay._default_cluster_name()"))
	require.NoError(t, migrations.RequireLatest(bg, c))

	// A SQL-standard body is parsed when it is created: a file that calls a
	// function of a later file waits for it; one that calls a function no
	// file defines fails the migration, naming the file.
	fsys = embedded(t)
	fsys["functions/a/_test_first.sql"] = &fstest.MapFile{Data: []byte(
		"CREATE OR REPLACE FUNCTION pgrelay._test_first() RETURNS int LANGUAGE sql RETURN pgrelay._test_second() + 1;")}
	fsys["functions/z/_test_second.sql"] = &fstest.MapFile{Data: []byte(
		"CREATE OR REPLACE FUNCTION pgrelay._test_second() RETURNS int LANGUAGE sql RETURN 1;")}
	res, err = migrations.UpFSFunctions(bg, c, fsys)
	require.NoError(t, err)
	require.True(t, res.Functions)
	require.Equal(t, 2, testenv.One[int](t, c, "SELECT pgrelay._test_first()"))
	fsys["functions/b/_test_broken.sql"] = &fstest.MapFile{Data: []byte(
		"CREATE OR REPLACE FUNCTION pgrelay._test_broken() RETURNS int LANGUAGE sql RETURN pgrelay._test_nowhere();")}
	_, err = migrations.UpFSFunctions(bg, c, fsys)
	require.ErrorContains(t, err, "apply functions/b/_test_broken.sql")
	require.ErrorContains(t, err, "_test_nowhere")
	res, err = migrations.Up(bg, c)
	require.NoError(t, err)
	require.True(t, res.Functions)

	// A newer release's functions.
	_, err = c.Exec(bg, "UPDATE pgrelay.schema_functions SET checksum = 'other', release = 'v9.9.9'")
	require.NoError(t, err)
	err = migrations.RequireLatest(bg, c)
	require.ErrorContains(t, err, "applied by pgrelay v9.9.9, newer than this pgrelay's")
	_, err = migrations.Up(bg, c)
	require.ErrorContains(t, err, "applied by pgrelay v9.9.9, newer than this pgrelay's")
	require.ErrorContains(t, err, "nothing was changed")
	require.Equal(t, "other", testenv.One[string](t, c, "SELECT checksum FROM pgrelay.schema_functions"))
}

// createFunction finds the functions a file defines.
var createFunction = regexp.MustCompile(`(?m)^CREATE OR REPLACE (?:FUNCTION|PROCEDURE|VIEW) ([a-z_]+)\.("?[a-z_]+"?)[( ]`)

// Every function and view of pgrelay's schemas is defined by exactly one
// file, named after it, under its schema's group (pgrelay_notifier's in
// notifier/), and every file defines only what has its name: each can be
// read in one place.
func TestFunctionFilesOnePerFunction(t *testing.T) {
	t.Parallel()
	files, err := migrations.Functions()
	require.NoError(t, err)
	defined := map[string]string{}
	for _, f := range files {
		m := createFunction.FindAllStringSubmatch(f[1], -1)
		require.NotEmpty(t, m, "%s defines a function or a view", f[0])
		for _, d := range m {
			name := strings.Trim(d[2], `"`)
			require.Equal(t, name+".sql", path.Base(f[0]), "%s defines %s.%s", f[0], d[1], name)
			require.Equal(t, d[1] == "pgrelay_notifier", strings.HasPrefix(f[0], "notifier/"), "%s: schema %s", f[0], d[1])
			q := d[1] + "." + name
			if prev, ok := defined[q]; ok && prev != f[0] {
				t.Fatalf("%s is defined by %s and %s", q, prev, f[0])
			}
			defined[q] = f[0]
		}
	}
	c := testenv.ConnectAs(t, pg.DB(t), "", -1)
	rows, err := c.Query(bg, `SELECT DISTINCT n.nspname || '.' || p.proname FROM pg_proc p
		JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname IN ('pgrelay', 'pgrelay_notifier')
		UNION SELECT n.nspname || '.' || c.relname FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relkind = 'v' AND n.nspname IN ('pgrelay', 'pgrelay_notifier')`)
	require.NoError(t, err)
	var inDB []string
	for rows.Next() {
		var q string
		require.NoError(t, rows.Scan(&q))
		inDB = append(inDB, q)
	}
	require.NoError(t, rows.Err())
	require.Len(t, defined, len(inDB))
	for _, q := range inDB {
		require.Contains(t, defined, q, "the file of %s", q)
	}
}

// grantees is the role list of a GRANT ... TO or REVOKE ... FROM.
var grantees = regexp.MustCompile(`(?m)^(?:GRANT|REVOKE)\s.*?\s(?:TO|FROM)\s+([^;]+);`)

// The function files grant to and revoke from pgrelay's own roles, PUBLIC
// and CURRENT_USER (the migrating role) only: a role named after a test
// machine's superuser ("postgres") need not exist where a user migrates, and
// GRANT to a role that does not exist fails the migration.
func TestFunctionFilesNameOnlyPgrelayRoles(t *testing.T) {
	t.Parallel()
	files, err := migrations.Functions()
	require.NoError(t, err)
	seen := 0
	for _, f := range files {
		for _, m := range grantees.FindAllStringSubmatch(f[1], -1) {
			for _, role := range strings.Split(m[1], ",") {
				role = strings.TrimSpace(role)
				seen++
				require.True(t, role == "PUBLIC" || role == "CURRENT_USER" || strings.HasPrefix(role, "pgrelay_"),
					"%s grants to or revokes from %q", f[0], role)
			}
		}
	}
	require.Greater(t, seen, len(files), "the grants were read")
}

// A database migrated by a development build between v0.1.0 and v0.2.0
// records the names of that series. The whole series is v0.2.0's schema: its
// records become the folded migration's. Part of it is refused, with what to
// do, and nothing changes.
func TestDevelopmentSeriesRecords(t *testing.T) {
	t.Parallel()
	series := migrations.DevelopmentSeries()
	require.Equal(t, 3, series[0].Version)
	setRecords := func(t *testing.T, url string, n int) {
		t.Helper()
		c := testenv.ConnectAs(t, url, "", -1)
		_, err := c.Exec(bg, "DELETE FROM pgrelay.schema_migrations WHERE version >= 3")
		require.NoError(t, err)
		for _, r := range series[:n] {
			_, err := c.Exec(bg, "INSERT INTO pgrelay.schema_migrations (version, name) VALUES ($1, $2)", r.Version, r.Name)
			require.NoError(t, err)
		}
	}

	t.Run("whole", func(t *testing.T) {
		t.Parallel()
		// v0.2.0's schema: the migrations up to the folded one (this
		// build's function files, which a later migration's columns do not
		// hinder: their bodies are not checked against the tables).
		url := pg.EmptyDB(t)
		c := testenv.ConnectAs(t, url, "", -1)
		fsys := embedded(t)
		all, err := migrations.All()
		require.NoError(t, err)
		var later []int32
		for _, m := range all {
			if m.Version > 3 {
				delete(fsys, fmt.Sprintf("%04d_%s.up.sql", m.Version, m.Name))
				later = append(later, int32(m.Version))
			}
		}
		_, err = migrations.UpFSFunctions(bg, c, fsys)
		require.NoError(t, err)
		setRecords(t, url, len(series))
		res, err := migrations.Up(bg, c)
		require.NoError(t, err)
		var applied []int32
		for _, v := range versionsOf(res.Applied) {
			applied = append(applied, int32(v))
		}
		require.Equal(t, later, applied, "only the migrations after the folded one")
		require.Equal(t, migrations.Latest(), res.Version)
		require.Equal(t, append([]int32{1, 2, 3}, later...),
			testenv.Column[int32](t, c, "SELECT version FROM pgrelay.schema_migrations ORDER BY 1"))
		require.Equal(t, "v0_2_0", testenv.One[string](t, c, "SELECT name FROM pgrelay.schema_migrations WHERE version = 3"))
		require.NoError(t, migrations.RequireLatest(bg, c))
		requireSnapshot(t, dumpSchema(t, url), "a database of the whole development series")
	})
	t.Run("part", func(t *testing.T) {
		t.Parallel()
		url := pg.DB(t)
		setRecords(t, url, 5)
		c := testenv.ConnectAs(t, url, "", -1)
		_, err := migrations.Up(bg, c)
		require.ErrorContains(t, err, fmt.Sprintf("records migration %04d_%s of the development series between v0.1.0 and v0.2.0, but not the whole series",
			series[0].Version, series[0].Name))
		require.ErrorContains(t, err, "migrate it first with a pgrelay built at commit")
		require.ErrorContains(t, err, "nothing was changed")
		require.Equal(t, 7, testenv.One[int](t, c, "SELECT count(*) FROM pgrelay.schema_migrations"))
	})
}

// A database migrated between 0003_v0_2_0's first landing and the release:
// it records 0003_v0_2_0, and either the later migration folded into it
// since (0004_log_priority, whose record goes, making way for the 0004 after
// the release) or not (then it lacks the columns, which migrate adds).
// Either way it ends at the snapshot.
func TestFoldedLaterRecords(t *testing.T) {
	t.Parallel()
	versions := func(c *pgx.Conn) []string {
		return testenv.Column[string](t, c, "SELECT version || '_' || name FROM pgrelay.schema_migrations ORDER BY version")
	}
	// Such a database has 0003_v0_2_0 as the release has it (v020DB), and
	// then the migrations after the release.
	var after []int
	latest := []string{"1_pgrelay", "2_notifier", "3_v0_2_0"}
	all, err := migrations.All()
	require.NoError(t, err)
	for _, m := range all[3:] {
		after = append(after, m.Version)
		latest = append(latest, fmt.Sprintf("%d_%s", m.Version, m.Name))
	}
	t.Run("recorded", func(t *testing.T) {
		t.Parallel()
		url, c := v020DB(t)
		_, err := c.Exec(bg, "INSERT INTO pgrelay.schema_migrations (version, name) VALUES (4, 'log_priority')")
		require.NoError(t, err)
		res, err := migrations.Up(bg, c)
		require.NoError(t, err)
		require.Equal(t, after, versionsOf(res.Applied))
		require.Equal(t, latest, versions(c))
		require.NoError(t, migrations.RequireLatest(bg, c))
		requireSnapshot(t, dumpSchema(t, url), "a database that recorded 0004_log_priority")
	})
	t.Run("lacking", func(t *testing.T) {
		t.Parallel()
		url, c := v020DB(t)
		_, err := c.Exec(bg, "ALTER TABLE pgrelay.log DROP COLUMN priority; ALTER TABLE pgrelay.dead_letters DROP COLUMN priority")
		require.NoError(t, err)
		res, err := migrations.Up(bg, c)
		require.NoError(t, err)
		require.Equal(t, after, versionsOf(res.Applied))
		require.Equal(t, 1, testenv.One[int](t, c, `SELECT count(*) FROM pg_catalog.pg_attribute
			WHERE attrelid = 'pgrelay.dead_letters'::regclass AND attname = 'priority' AND NOT attisdropped`))
		require.Equal(t, latest, versions(c))
		requireSnapshot(t, dumpSchema(t, url), "a database of 0003_v0_2_0 without the priority columns")
	})
}
