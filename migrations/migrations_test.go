package migrations_test

import (
	"context"
	"os"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

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
