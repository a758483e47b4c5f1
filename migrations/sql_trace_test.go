package migrations_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/testenv"
)

// An enqueue by a producer function (stamped) fires no row trigger of the
// queue outside a replica's apply: each that fires in an ordinary session
// is skipped by pgrelay.stamped. A row trigger's WHEN runs per row whether
// or not it calls its function: the trace context's trigger, whose WHEN
// every untraced event paid, cost notify_many(1 000) about a sixth of its
// server CPU.
func TestStampedEnqueueFiresNoRowTrigger(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	require.Empty(t, testenv.Column[string](t, d.Pool, `SELECT tgname::text FROM pg_trigger
		WHERE tgrelid = 'pgrelay.queue'::regclass AND NOT tgisinternal AND tgtype & 1 = 1
		  AND tgenabled IN ('O', 'A')
		  AND pg_get_triggerdef(oid) NOT LIKE '%WHEN ((current_setting(''pgrelay.stamped''::text, true) IS DISTINCT FROM ''on''::text))%'
		ORDER BY 1`))
}

// The trace context a producer sets is stored with the events it enqueues
// by every path: notify_many, and a direct insert by the owner or by the
// Processor's role (the statement trigger); with first attempts only, and
// only while it is set.
func TestTraceparentStoredByEveryEnqueue(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("c", "")
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	traceOf := func(ids []int64) []string {
		return testenv.Column[string](t, d.Pool, `SELECT COALESCE(t.traceparent, '-')
			FROM unnest($1::bigint[]) WITH ORDINALITY AS u(id, n)
			LEFT JOIN pgrelay.event_traces t ON t.origin_id = u.id ORDER BY u.n`, ids)
	}
	for _, c := range []struct {
		name string
		db   interface {
			Begin(context.Context) (pgx.Tx, error)
		}
	}{{"owner", d.Pool}, {"processor", d.loginAs("proc", "pgrelay_processor")}} {
		t.Run(c.name, func(t *testing.T) {
			tx, err := c.db.Begin(bg)
			require.NoError(t, err)
			defer func() { _ = tx.Rollback(bg) }()
			_, err = tx.Exec(bg, "SET LOCAL pgrelay.traceparent = '"+tp+"'")
			require.NoError(t, err)
			traced := testenv.Column[int64](t, tx, "INSERT INTO pgrelay.queue (channel, payload) VALUES ('c', 'a'), ('c', 'b') RETURNING id")
			// A retry row (not a first attempt) stores nothing of its own.
			retry := testenv.One[int64](t, tx, `INSERT INTO pgrelay.queue (origin_id, channel, payload, attempt, retry_of)
				VALUES ($1, 'c', 'a', 2, $1) RETURNING id`, traced[0])
			_, err = tx.Exec(bg, "SET LOCAL pgrelay.traceparent = ''")
			require.NoError(t, err)
			plain := testenv.One[int64](t, tx, "INSERT INTO pgrelay.queue (channel, payload) VALUES ('c', 'c') RETURNING id")
			require.NoError(t, tx.Commit(bg))
			require.Equal(t, []string{tp, tp, "-", "-"}, traceOf(append(traced, retry, plain)))
		})
	}
	tx, err := d.Pool.Begin(bg)
	require.NoError(t, err)
	_, err = tx.Exec(bg, "SET LOCAL pgrelay.traceparent = '"+tp+"'")
	require.NoError(t, err)
	many := testenv.Column[int64](t, tx, "SELECT pgrelay.notify_many('c', ARRAY['x', 'y', 'z'])")
	require.NoError(t, tx.Commit(bg))
	require.Equal(t, []string{tp, tp, tp}, traceOf(many))
}

// A channel registered with p_store_traces := false stores no trace
// context by any enqueue (notify, notify_many, a direct insert of rows of
// several channels at once), while another channel of the same statement
// stores its own; update() turns it back on; create_channel passes it on.
func TestTraceparentNotStoredForAChannelThatRefusesIt(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("on", "")
	d.register("off", "p_store_traces := false")
	d.Exec("SELECT pgrelay_notifier.create_channel('mail', 'shop@example.org', p_store_traces := false)")
	require.Equal(t, []bool{false, false, true},
		testenv.Column[bool](t, d.Pool, "SELECT store_traces FROM pgrelay.channels ORDER BY channel"))
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	traced := func(sql string) []int64 {
		tx, err := d.Pool.Begin(bg)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(bg) }()
		_, err = tx.Exec(bg, "SET LOCAL pgrelay.traceparent = '"+tp+"'")
		require.NoError(t, err)
		ids := testenv.Column[int64](t, tx, sql)
		require.NoError(t, tx.Commit(bg))
		return ids
	}
	stored := func(ids []int64) []bool {
		return testenv.Column[bool](t, d.Pool, `SELECT t.origin_id IS NOT NULL
			FROM unnest($1::bigint[]) WITH ORDINALITY AS u(id, n)
			LEFT JOIN pgrelay.event_traces t ON t.origin_id = u.id ORDER BY u.n`, ids)
	}
	require.Equal(t, []bool{false}, stored(traced("SELECT pgrelay.notify('off', 'a')")))
	require.Equal(t, []bool{false, false}, stored(traced("SELECT pgrelay.notify_many('off', ARRAY['a', 'b'])")))
	require.Equal(t, []bool{true, false, true, false}, stored(traced(`INSERT INTO pgrelay.queue (channel, payload)
		VALUES ('on', 'a'), ('off', 'b'), ('on', 'c'), ('off', 'd') RETURNING id`)))
	d.Exec("SELECT pgrelay.update('off', p_store_traces := true)")
	require.Equal(t, []bool{true}, stored(traced("SELECT pgrelay.notify('off', 'a')")))
	d.Exec("SELECT pgrelay.update('off', p_max_attempts := 3)")
	require.True(t, testenv.One[bool](t, d.Pool, "SELECT store_traces FROM pgrelay.channels WHERE channel = 'off'"),
		"update keeps the setting it is not given")
}
