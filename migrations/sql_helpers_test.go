package migrations_test

// Helpers shared by the SQL contract tests (sql_*_test.go): each test gets a
// fresh migrated database, talks to it as the superuser unless it says
// otherwise, and branches on SQLSTATE codes, never on message text.

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/testenv"
)

var bg = context.Background()

// querier is what the helpers need: *pgx.Conn, pgx.Tx and *pgxpool.Pool all fit.
type querier = testenv.Querier

// sqlDB is a fresh migrated database for one test (testenv.DB) with the SQL
// contract helpers.
type sqlDB struct{ *testenv.DB }

func newSQLDB(t *testing.T) *sqlDB {
	t.Helper()
	d := pg.NewDB(t)
	return &sqlDB{DB: d}
}

// bid writes node's bid for the leader lease, of term, running for the
// interval until (as a node's take that reached this database).
func (d *sqlDB) bid(node int, term int64, until string) {
	d.T.Helper()
	d.Exec(`INSERT INTO pgrelay.leader_leases AS l (node_id, term, lease_until, taken_at)
	        VALUES ($1, $2, now() + $3::interval, now())
	        ON CONFLICT (node_id) DO UPDATE SET term = EXCLUDED.term, lease_until = EXCLUDED.lease_until`, node, term, until)
}

// requireCode asserts that err is a PostgreSQL error with SQLSTATE code.
func requireCode(t *testing.T, err error, code string, msgAndArgs ...any) *pgconn.PgError {
	t.Helper()
	require.Error(t, err, msgAndArgs...)
	var pgErr *pgconn.PgError
	require.True(t, errors.As(err, &pgErr), "want SQLSTATE %s, got a non-PostgreSQL error: %v", code, err)
	require.Equal(t, code, pgErr.Code, "want SQLSTATE %s, got %v", code, err)
	return pgErr
}

// register registers a sql channel whose handler does nothing with the payload
// but use it; extra is appended to the argument list (named arguments).
func (d *sqlDB) register(channel, extra string) {
	d.T.Helper()
	sql := "SELECT pgrelay.register($1, 'SELECT length($1)'"
	if extra != "" {
		sql += ", " + extra
	}
	d.Exec(sql+")", channel)
}

func (d *sqlDB) notify(channel, payload string) int64 {
	d.T.Helper()
	return testenv.One[int64](d.T, d.Pool, "SELECT pgrelay.notify($1, $2)", channel, payload)
}

func (d *sqlDB) status(id int64) *string {
	d.T.Helper()
	return testenv.One[*string](d.T, d.Pool, "SELECT pgrelay.status($1)", id)
}

func (d *sqlDB) requireStatus(id int64, want string) {
	d.T.Helper()
	got := d.status(id)
	require.NotNil(d.T, got, "status(%d) is NULL, want %s", id, want)
	require.Equal(d.T, want, *got, "status(%d)", id)
}

// startProcessor registers a Processor instance on the querier's node.
func startProcessor(t *testing.T, q querier) int64 {
	t.Helper()
	return testenv.One[int64](t, q, "SELECT pgrelay._processor_start('single', 'host', 1, 'test')")
}

// claimedRow is one row pgrelay._claim returned.
type claimedRow struct {
	ID           int64
	OriginID     int64
	Channel      string
	Payload      string
	Attempt      int
	DispatchedAt time.Time
	Expired      bool
}

// claimMode calls pgrelay._claim(proc, mode, leader, limit, kinds).
func claimMode(t *testing.T, q querier, proc int64, mode string, leader bool, limit int, kinds ...string) []claimedRow {
	t.Helper()
	if len(kinds) == 0 {
		kinds = []string{"sql"}
	}
	rows, err := q.Query(bg, `SELECT id, origin_id, channel, payload, attempt, dispatched_at, expired
		FROM pgrelay._claim($1, $2, $3, $4, $5) WHERE id IS NOT NULL`, proc, mode, leader, limit, kinds)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (claimedRow, error) {
		var c claimedRow
		err := r.Scan(&c.ID, &c.OriginID, &c.Channel, &c.Payload, &c.Attempt, &c.DispatchedAt, &c.Expired)
		return c, err
	})
	require.NoError(t, err)
	return out
}

// claim claims in 'single' mode.
func claim(t *testing.T, q querier, proc int64, limit int, kinds ...string) []claimedRow {
	t.Helper()
	return claimMode(t, q, proc, "single", false, limit, kinds...)
}

// outcome is one argument row of pgrelay._complete.
type outcome struct {
	c     claimedRow
	event string
	err   *string
}

func completeAll(t *testing.T, q querier, proc int64, outs ...outcome) int {
	t.Helper()
	ids := make([]int64, len(outs))
	at := make([]time.Time, len(outs))
	evs := make([]string, len(outs))
	errs := make([]*string, len(outs))
	for i, o := range outs {
		ids[i], at[i], evs[i], errs[i] = o.c.ID, o.c.DispatchedAt, o.event, o.err
	}
	return int(testenv.One[int32](t, q, "SELECT pgrelay._complete($1, $2, $3, $4, $5)", proc, ids, at, evs, errs))
}

// complete ends one claim with event (and error text when not empty).
func complete(t *testing.T, q querier, proc int64, c claimedRow, event, errText string) int {
	t.Helper()
	o := outcome{c: c, event: event}
	if errText != "" {
		o.err = &errText
	}
	return completeAll(t, q, proc, o)
}

func ids(rows []claimedRow) []int64 {
	out := make([]int64, len(rows))
	for i, r := range rows {
		out[i] = r.ID
	}
	return out
}

// inTx runs f in a transaction on c that is rolled back afterwards.
func inTx(t *testing.T, c *pgx.Conn, f func(tx pgx.Tx)) {
	t.Helper()
	tx, err := c.Begin(bg)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(bg) }()
	f(tx)
}

// waitUntilBlocked waits until the backend pid is waiting on a lock.
func waitUntilBlocked(t *testing.T, q querier, pid uint32) {
	t.Helper()
	require.Eventually(t, func() bool {
		var w *string
		if err := q.QueryRow(bg, "SELECT wait_event_type FROM pg_stat_activity WHERE pid = $1", int32(pid)).Scan(&w); err != nil {
			return false
		}
		return w != nil && *w == "Lock"
	}, 20*time.Second, 5*time.Millisecond, "backend %d never waited on a lock", pid)
}

// nowMS is the current time in the id layout's milliseconds (since 2026-01-01 UTC).
func nowMS() int64 {
	return time.Now().UnixMilli() - idEpochMS
}

const idEpochMS = 1767225600000 // 2026-01-01 00:00 UTC

func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }
