package testenv

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// Querier is what the query helpers need: *pgx.Conn, pgx.Tx and
// *pgxpool.Pool all fit.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// DB is one test's fresh migrated database and a pool on it, closed when the
// test ends. Its helpers fail the test on any error, naming the statement.
type DB struct {
	T    testing.TB
	URL  string
	Pool *pgxpool.Pool
}

// NewDB creates a fresh migrated database for t with a pool on it.
func (p *Postgres) NewDB(t testing.TB) *DB {
	t.Helper()
	url := p.DB(t)
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatalf("connect to test database: %v", err)
	}
	t.Cleanup(pool.Close)
	return &DB{T: t, URL: url, Pool: pool}
}

// Name is the database's name (unique in the cluster).
func (d *DB) Name() string {
	d.T.Helper()
	cfg, err := pgx.ParseConfig(d.URL)
	require.NoError(d.T, err)
	return cfg.Database
}

// Exec runs sql.
func (d *DB) Exec(sql string, args ...any) {
	d.T.Helper()
	_, err := d.Pool.Exec(context.Background(), sql, args...)
	require.NoError(d.T, err, sql)
}

// Err runs sql and returns its error (nil when it succeeded).
func (d *DB) Err(sql string, args ...any) error {
	_, err := d.Pool.Exec(context.Background(), sql, args...)
	return err
}

// Count runs a query returning a single number.
func (d *DB) Count(sql string, args ...any) int {
	d.T.Helper()
	return One[int](d.T, d.Pool, sql, args...)
}

// Text runs a query returning a single text value ("" for NULL).
func (d *DB) Text(sql string, args ...any) string {
	d.T.Helper()
	if s := One[*string](d.T, d.Pool, sql, args...); s != nil {
		return *s
	}
	return ""
}

// IDs runs a query returning one bigint column (nil when it returns no row).
func (d *DB) IDs(sql string, args ...any) []int64 {
	d.T.Helper()
	rows, err := d.Pool.Query(context.Background(), sql, args...)
	require.NoError(d.T, err, sql)
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var id int64
		require.NoError(d.T, rows.Scan(&id))
		out = append(out, id)
	}
	require.NoError(d.T, rows.Err(), sql)
	return out
}

// Conn opens a dedicated connection as the URL's user, closed when the test
// ends; node >= 0 sets pg_relay.node_id on it.
func (d *DB) Conn(node int) *pgx.Conn {
	d.T.Helper()
	return ConnectAs(d.T, d.URL, "", node)
}

// ConnectAs opens a connection to url as user (the URL's user when empty),
// closed when t ends; node >= 0 sets pg_relay.node_id on it.
func ConnectAs(t testing.TB, url, user string, node int) *pgx.Conn {
	t.Helper()
	cfg, err := pgx.ParseConfig(url)
	require.NoError(t, err)
	if user != "" {
		cfg.User = user
	}
	c, err := pgx.ConnectConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	if node >= 0 {
		_, err := c.Exec(context.Background(), fmt.Sprintf("SET pg_relay.node_id = '%d'", node))
		require.NoError(t, err)
	}
	return c
}

// One runs a query returning a single value.
func One[T any](t testing.TB, q Querier, sql string, args ...any) T {
	t.Helper()
	var v T
	require.NoError(t, q.QueryRow(context.Background(), sql, args...).Scan(&v), sql)
	return v
}

// Column runs a query returning one column.
func Column[T any](t testing.TB, q Querier, sql string, args ...any) []T {
	t.Helper()
	rows, err := q.Query(context.Background(), sql, args...)
	require.NoError(t, err, sql)
	out, err := pgx.CollectRows(rows, pgx.RowTo[T])
	require.NoError(t, err, sql)
	return out
}

// Eventually waits until cond holds, polling every 20 ms; it fails t after
// timeout, naming what it waited for.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
