package pgrelay_test

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay"
	"github.com/pgrelay/pgrelay/internal/testenv"
)

var pg *testenv.Postgres

// What applications hold are Queriers.
var (
	_ pgrelay.Querier = pgx.Tx(nil)
	_ pgrelay.Querier = (*pgx.Conn)(nil)
	_ pgrelay.Querier = (*pgxpool.Pool)(nil)
)

func TestMain(m *testing.M) {
	os.Exit(testenv.MainWithPostgresNoLeaks(m, &pg))
}

// db is a fresh migrated database for one test: admin is the superuser,
// producer a login in pgrelay_producer, the role an application has.
type db struct {
	admin    *pgxpool.Pool
	producer *pgxpool.Pool
}

func newDB(t *testing.T) db {
	t.Helper()
	d := pg.NewDB(t)
	return db{admin: d.Pool, producer: loginAs(t, d.Pool, d.URL, "producer")}
}

// loginAs creates a login in pgrelay_producer, named after the database and
// suffix (roles are cluster-wide), and returns a pool connected as it.
func loginAs(t *testing.T, admin *pgxpool.Pool, url, suffix string) *pgxpool.Pool {
	t.Helper()
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	role := cfg.ConnConfig.Database + "_" + suffix
	_, err = admin.Exec(ctx, "CREATE ROLE "+pgx.Identifier{role}.Sanitize()+" LOGIN IN ROLE pgrelay_producer")
	require.NoError(t, err)
	cfg.ConnConfig.User = role
	p, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(p.Close)
	return p
}

func (d db) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	_, err := d.admin.Exec(context.Background(), sql, args...)
	require.NoError(t, err, sql)
}
