package store

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/testenv"
)

var pg *testenv.Postgres

func TestMain(m *testing.M) { os.Exit(testenv.MainWithPostgres(m, &pg)) }

func prepared(t *testing.T, c *pgx.Conn) []string {
	t.Helper()
	rows, err := c.Query(context.Background(), `SELECT statement FROM pg_prepared_statements
	  WHERE name LIKE 'pgrelay_batch_%' ORDER BY statement`)
	require.NoError(t, err)
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return names
}

// Statements prepares each statement once per connection, inside the
// caller's transaction; a statement the server refuses leaves the
// transaction usable; a connection deallocates its statements, forgotten
// ones included, when it reaches its bound.
func TestStatementsPrepareOncePerConnection(t *testing.T) {
	ctx := context.Background()
	c, err := pgx.Connect(ctx, pg.DB(t))
	require.NoError(t, err)
	defer c.Close(ctx)
	pc := c.PgConn()
	st := &Statements{limit: 3}

	_, err = c.Exec(ctx, "BEGIN")
	require.NoError(t, err)
	a, ok, err := st.of(pc).name(ctx, pc, st.limit, "SELECT 1", nil, 100)
	require.NoError(t, err)
	require.True(t, ok)
	again, ok, err := st.of(pc).name(ctx, pc, st.limit, "SELECT 1", nil, 100)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, a, again, "prepared once")

	// A statement that does not parse: refused, and the transaction goes on.
	_, ok, err = st.of(pc).name(ctx, pc, st.limit, "SELECT * FROM no_such_table WHERE $1 IS NULL", textOID, 100)
	require.NoError(t, err)
	require.False(t, ok)
	var one int
	require.NoError(t, c.QueryRow(ctx, "SELECT 1").Scan(&one))

	_, _, err = st.of(pc).name(ctx, pc, st.limit, "SELECT 2", nil, 0)
	require.NoError(t, err)
	st.forget(pc, "SELECT 2", nil)
	_, _, err = st.of(pc).name(ctx, pc, st.limit, "SELECT 3", nil, 0)
	require.NoError(t, err)
	require.Equal(t, []string{"SELECT 1", "SELECT 2", "SELECT 3"}, prepared(t, c))
	// The bound is reached: all three go, the forgotten one too.
	_, _, err = st.of(pc).name(ctx, pc, st.limit, "SELECT 4", nil, 0)
	require.NoError(t, err)
	require.Equal(t, []string{"SELECT 4"}, prepared(t, c))
	var timeout string
	require.NoError(t, c.QueryRow(ctx, "SHOW statement_timeout").Scan(&timeout))
	require.Equal(t, "0", timeout, "a preparation's timeout does not outlast it")
	_, err = c.Exec(ctx, "COMMIT")
	require.NoError(t, err)
}

// Warm prepares the batch statements on a new connection; on a database
// without pgrelay's schema it leaves them for later without an error, and
// any other failure (a role that may not use the schema) fails it.
func TestStatementsWarm(t *testing.T) {
	ctx := context.Background()
	url := pg.DB(t)
	c, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer c.Close(ctx)
	require.NoError(t, (&Statements{}).Warm(ctx, c))
	require.Len(t, prepared(t, c), len(batchStatements))

	require.NoError(t, pg.Exec(ctx, "postgres", `DROP DATABASE IF EXISTS warm_empty`))
	require.NoError(t, pg.Exec(ctx, "postgres", `CREATE DATABASE warm_empty TEMPLATE template0`))
	empty, err := pgx.Connect(ctx, pg.URL("warm_empty"))
	require.NoError(t, err)
	defer empty.Close(ctx)
	require.NoError(t, (&Statements{}).Warm(ctx, empty), "no schema yet: nothing to warm")

	_, err = c.Exec(ctx, `DROP ROLE IF EXISTS warm_nobody; CREATE ROLE warm_nobody LOGIN`)
	require.NoError(t, err)
	cfg, err := pgx.ParseConfig(url)
	require.NoError(t, err)
	cfg.User = "warm_nobody"
	nobody, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(t, err)
	defer nobody.Close(ctx)
	require.ErrorContains(t, (&Statements{}).Warm(ctx, nobody), "permission denied")
}
