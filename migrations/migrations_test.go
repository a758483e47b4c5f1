package migrations_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/devenv"
	"github.com/pgrelay/pgrelay/internal/testenv"
	"github.com/pgrelay/pgrelay/migrations"
)

var pg *testenv.Postgres

func TestMain(m *testing.M) { os.Exit(testenv.MainWithPostgres(m, &pg)) }

func TestAllIsOrdered(t *testing.T) {
	all, err := migrations.All()
	require.NoError(t, err)
	require.NotEmpty(t, all)
	for i, m := range all {
		require.Equal(t, i+1, m.Version, "versions are 1, 2, 3, ... without gaps")
	}
	require.Equal(t, all[len(all)-1].Version, migrations.Latest())
}

// Several processes migrating one empty database at once: exactly one applies
// each migration, all end at the latest version, and a second run does nothing.
func TestUpConcurrentAndIdempotent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	require.NoError(t, pg.Exec(ctx, "postgres", "CREATE DATABASE migrate_concurrent"))
	url := pg.URL("migrate_concurrent")

	const n = 6
	var wg sync.WaitGroup
	results := make([]migrations.Result, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := pgx.Connect(ctx, url)
			if err != nil {
				errs[i] = err
				return
			}
			defer c.Close(ctx)
			results[i], errs[i] = migrations.Up(ctx, c)
		}()
	}
	wg.Wait()
	applied := 0
	for i := range n {
		require.NoError(t, errs[i])
		require.Equal(t, migrations.Latest(), results[i].Version)
		applied += len(results[i].Applied)
	}
	all, _ := migrations.All()
	require.Equal(t, len(all), applied, "each migration applied exactly once")

	c, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer c.Close(ctx)
	res, err := migrations.Up(ctx, c)
	require.NoError(t, err)
	require.Empty(t, res.Applied)
	var count int
	require.NoError(t, c.QueryRow(ctx, "SELECT count(*) FROM pgrelay.schema_migrations").Scan(&count))
	require.Equal(t, len(all), count)
}

// A migration that fails rolls back whole, with every migration applied in
// the same run: the schema and pgrelay.schema_migrations are as they were.
func TestUpRollsBackAFailingMigration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	all, err := migrations.All()
	require.NoError(t, err)
	latest := migrations.Latest()
	fsys := fstest.MapFS{}
	for _, m := range all {
		fsys[fmt.Sprintf("%04d_%s.up.sql", m.Version, m.Name)] = &fstest.MapFile{Data: []byte(m.SQL)}
	}
	// It creates a table and changes a function before it fails.
	broken := fmt.Sprintf("%04d_broken.up.sql", latest+1)
	fsys[broken] = &fstest.MapFile{Data: []byte(`
		CREATE TABLE pgrelay.half_done (x int);
		CREATE OR REPLACE FUNCTION pgrelay._this_node() RETURNS int LANGUAGE sql AS 'SELECT 42';
		SELECT 1 / 0;`)}

	// On a migrated database: the latest version stays, nothing of the
	// broken migration is left.
	require.NoError(t, pg.Exec(ctx, "postgres", "CREATE DATABASE migrate_rollback_upgrade"))
	c, err := pgx.Connect(ctx, pg.URL("migrate_rollback_upgrade"))
	require.NoError(t, err)
	defer c.Close(ctx)
	_, err = migrations.Up(ctx, c)
	require.NoError(t, err)
	recorded := func() []int32 {
		t.Helper()
		rows, err := c.Query(ctx, "SELECT version FROM pgrelay.schema_migrations ORDER BY version")
		require.NoError(t, err)
		vs, err := pgx.CollectRows(rows, pgx.RowTo[int32])
		require.NoError(t, err)
		return vs
	}
	before := recorded()
	require.Len(t, before, len(all))
	_, err = migrations.UpFS(ctx, c, fsys)
	require.ErrorContains(t, err, fmt.Sprintf("%04d_broken", latest+1))
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "22012", pgErr.Code, "division by zero")
	require.Equal(t, before, recorded())
	var table *string
	require.NoError(t, c.QueryRow(ctx, "SELECT to_regclass('pgrelay.half_done')::text").Scan(&table))
	require.Nil(t, table)
	var node int32
	require.NoError(t, c.QueryRow(ctx, "SELECT pgrelay._this_node()").Scan(&node))
	require.Zero(t, node, "the function is as it was")
	v, err := migrations.Current(ctx, c)
	require.NoError(t, err)
	require.Equal(t, latest, v)

	// On an empty database every migration of the run rolls back with it:
	// no schema, no record.
	require.NoError(t, pg.Exec(ctx, "postgres", "CREATE DATABASE migrate_rollback_empty"))
	e, err := pgx.Connect(ctx, pg.URL("migrate_rollback_empty"))
	require.NoError(t, err)
	defer e.Close(ctx)
	_, err = migrations.UpFS(ctx, e, fsys)
	require.ErrorContains(t, err, "broken")
	var schema *string
	require.NoError(t, e.QueryRow(ctx, "SELECT to_regnamespace('pgrelay')::text").Scan(&schema))
	require.Nil(t, schema)
	v, err = migrations.Current(ctx, e)
	require.NoError(t, err)
	require.Zero(t, v)

	// Without the broken file the same runner applies them all.
	delete(fsys, broken)
	res, err := migrations.UpFS(ctx, e, fsys)
	require.NoError(t, err)
	require.Len(t, res.Applied, len(all))
	require.Equal(t, latest, res.Version)
}

// Roles are cluster-wide and the migration lock is per database: databases of
// one fresh cluster migrated at once all create the roles, and none fails
// because another created one first. (The cluster is its own: the test runs
// beside the others.)
func TestUpDatabasesOfOneClusterAtOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fresh, err := devenv.StartPostgres(ctx, devenv.PostgresConfig{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = fresh.Stop() })

	const n = 6
	for i := range n {
		require.NoError(t, fresh.Exec(ctx, "postgres", fmt.Sprintf("CREATE DATABASE db%d", i)))
	}
	conns := make([]*pgx.Conn, n)
	for i := range n {
		c, err := pgx.Connect(ctx, fresh.URL(fmt.Sprintf("db%d", i)))
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close(ctx) })
		conns[i] = c
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { _, errs[i] = migrations.Up(ctx, conns[i]) })
	}
	wg.Wait()
	for i := range n {
		require.NoError(t, errs[i], "database db%d", i)
	}
	var roles int
	require.NoError(t, conns[0].QueryRow(ctx, `SELECT count(*) FROM pg_roles WHERE rolname IN
	  ('pgrelay_producer', 'pgrelay_processor', 'pgrelay_admin', 'pgrelay_notifier', 'pgrelay_viewer')`).Scan(&roles))
	require.Equal(t, 5, roles)
}

// A database whose record names migrations this pgrelay does not have (one
// migrated by the pre-release files that the baseline replaced, or by a
// newer pgrelay) is refused: applying the baseline's later migrations by
// number there would skip or repeat work. Nothing is changed.
func TestUpRefusesUnknownRecordedMigrations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct{ name, rows, want string }{
		{"prerelease", "(1, 'core'), (2, 'succeed'), (17, 'no_outside_locks')",
			"records migration 0001_core, which this pgrelay does not have"},
		{"newer", "(1, 'pgrelay'), (2, 'notifier'), (999, 'from_the_future')",
			"records migration 0999_from_the_future, which this pgrelay does not have"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := "migrate_unknown_" + tc.name
			require.NoError(t, pg.Exec(ctx, "postgres", "CREATE DATABASE "+db))
			c, err := pgx.Connect(ctx, pg.URL(db))
			require.NoError(t, err)
			defer c.Close(ctx)
			_, err = c.Exec(ctx, `CREATE SCHEMA pgrelay;
				CREATE TABLE pgrelay.schema_migrations (version int4 PRIMARY KEY, name text NOT NULL,
				  applied_at timestamptz NOT NULL DEFAULT now());
				INSERT INTO pgrelay.schema_migrations (version, name) VALUES `+tc.rows)
			require.NoError(t, err)
			_, err = migrations.Up(ctx, c)
			require.ErrorContains(t, err, tc.want)
			require.ErrorContains(t, err, "docs/upgrading.md")
			var tables int
			require.NoError(t, c.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE schemaname = 'pgrelay'").Scan(&tables))
			require.Equal(t, 1, tables, "nothing applied")
		})
	}
}
