package bench_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/cli/clitest"
	"github.com/pgrelay/pgrelay/internal/testenv"
)

var pg *testenv.Postgres

// The bench's tests run `pgrelay bench` as the command line does; the soak
// starts its Processors as this test binary (clitest.RunMainEnv).
func TestMain(m *testing.M) { os.Exit(clitest.Main(m, &pg)) }

// cliMain runs the command line in this process.
var cliMain = clitest.Run

// db is one test's migrated database.
type db struct {
	t    *testing.T
	url  string
	pool *pgxpool.Pool
}

func newDB(t *testing.T) *db {
	t.Helper()
	pool := pg.Pool(t)
	return &db{t: t, url: pool.Config().ConnString(), pool: pool}
}

func (d *db) count(sql string, args ...any) int {
	d.t.Helper()
	var n int
	require.NoError(d.t, d.pool.QueryRow(context.Background(), sql, args...).Scan(&n), sql)
	return n
}

// emptyDB creates an empty, unmigrated database for t and returns its URL.
func emptyDB(t *testing.T) string {
	t.Helper()
	name := fmt.Sprintf("empty_%d", os.Getpid())
	require.NoError(t, pg.Exec(context.Background(), "postgres", "CREATE DATABASE "+name))
	return pg.URL(name)
}
