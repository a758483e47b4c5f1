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
	a, ok, err := st.name(ctx, pc, "SELECT 1", nil, 100)
	require.NoError(t, err)
	require.True(t, ok)
	again, ok, err := st.name(ctx, pc, "SELECT 1", nil, 100)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, a, again, "prepared once")

	// A statement that does not parse: refused, and the transaction goes on.
	_, ok, err = st.name(ctx, pc, "SELECT * FROM no_such_table WHERE $1 IS NULL", textOID, 100)
	require.NoError(t, err)
	require.False(t, ok)
	var one int
	require.NoError(t, c.QueryRow(ctx, "SELECT 1").Scan(&one))

	_, _, err = st.name(ctx, pc, "SELECT 2", nil, 0)
	require.NoError(t, err)
	st.forget(pc, "SELECT 2", nil)
	_, _, err = st.name(ctx, pc, "SELECT 3", nil, 0)
	require.NoError(t, err)
	require.Equal(t, []string{"SELECT 1", "SELECT 2", "SELECT 3"}, prepared(t, c))
	// The bound is reached: all three go, the forgotten one too.
	_, _, err = st.name(ctx, pc, "SELECT 4", nil, 0)
	require.NoError(t, err)
	require.Equal(t, []string{"SELECT 4"}, prepared(t, c))
	var timeout string
	require.NoError(t, c.QueryRow(ctx, "SHOW statement_timeout").Scan(&timeout))
	require.Equal(t, "0", timeout, "a preparation's timeout does not outlast it")
	_, err = c.Exec(ctx, "COMMIT")
	require.NoError(t, err)
}
