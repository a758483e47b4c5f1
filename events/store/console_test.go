package store

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
)

// explaining is a session that EXPLAINs each statement before it runs it,
// keeping the plans: the console's functions run as they are and the test
// reads how PostgreSQL runs their statements.
type explaining struct {
	t     *testing.T
	q     Querier
	plans []string
}

func (e *explaining) explain(ctx context.Context, sql string, args ...any) {
	e.t.Helper()
	rows, err := e.q.Query(ctx, "EXPLAIN "+sql, args...)
	require.NoError(e.t, err, sql)
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(e.t, err, sql)
	e.plans = append(e.plans, strings.Join(lines, "\n"))
}

func (e *explaining) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return e.q.Exec(ctx, sql, args...)
}

func (e *explaining) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	e.explain(ctx, sql, args...)
	return e.q.Query(ctx, sql, args...)
}

func (e *explaining) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	e.explain(ctx, sql, args...)
	return e.q.QueryRow(ctx, sql, args...)
}

// all returns the plans of the statements run since the last call.
func (e *explaining) all() string {
	p := strings.Join(e.plans, "\n")
	e.plans = nil
	return p
}

// plan returns the plan of the one statement run since the last call.
func (e *explaining) plan() string {
	e.t.Helper()
	require.Len(e.t, e.plans, 1)
	p := e.plans[0]
	e.plans = nil
	return p
}

// The statements the console sends read by index on a large log, many dead
// letters and many email status events: no sequential scan of those tables,
// however often the overview refreshes.
func TestConsoleStatementsUseIndexes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pg.Pool(t)
	exec := func(sql string) {
		t.Helper()
		_, err := pool.Exec(ctx, sql)
		require.NoError(t, err, sql)
	}
	exec("SELECT pgrelay.register('c' || g, 'SELECT length($1)') FROM generate_series(1, 5) g")
	// 150 000 log rows over the last three hours (ids carry their time, as
	// the log's own), 20 000 dead letters, 20 000 status events.
	exec(`INSERT INTO pgrelay.log (id, queue_id, origin_id, channel, attempt, event, error, node, at)
		SELECT pgrelay._id_floor(t) + g % 4096, g, g % 50000, 'c' || (g % 5 + 1), 1,
		       (ARRAY['succeeded', 'succeeded', 'succeeded', 'failed', 'gave_up'])[g % 5 + 1], 'boom', 0, t
		  FROM generate_series(1, 150000) g, LATERAL (SELECT now() - interval '3 hours' + g * interval '72 ms' AS t) x`)
	exec(`INSERT INTO pgrelay.dead_letters (id, origin_id, channel, payload, attempts, last_error, outcome, ended_at, node)
		SELECT g, g, 'c' || (g % 5 + 1), 'p', 5, 'boom', 'gave_up', now() - g * interval '1 s', 0
		  FROM generate_series(1, 20000) g`)
	exec(`INSERT INTO pgrelay_notifier.status_events (notification_id, channel, status, node, at)
		SELECT g % 7000, 'mail', 'queued', 0, now() FROM generate_series(1, 20000) g`)
	exec(`INSERT INTO pgrelay_notifier.debug_log (notification_id, message)
		SELECT g % 7000, 'note' FROM generate_series(1, 20000) g`)
	// A queue with a backlog: on an empty, never analysed one the planner
	// guesses its size from the row's width, and a seq scan of nothing
	// wins as soon as the row grows.
	exec("SELECT pgrelay.notify_many('c1', pg_catalog.array_agg(g::text)) FROM generate_series(1, 20000) g")
	exec("ANALYZE pgrelay.log, pgrelay.dead_letters, pgrelay_notifier.status_events, pgrelay_notifier.debug_log, pgrelay.queue")
	e := &explaining{t: t, q: pool}
	uses := func(plan string, indexes ...string) {
		t.Helper()
		for _, ix := range indexes {
			require.Contains(t, plan, ix, plan)
		}
		require.NotContains(t, plan, "Seq Scan on log", plan)
		require.NotContains(t, plan, "Seq Scan on dead_letters", plan)
		require.NotContains(t, plan, "Seq Scan on status_events", plan)
		require.NotContains(t, plan, "Seq Scan on debug_log", plan)
	}

	counts, err := LogPerMinute(ctx, e, time.Now().Add(-time.Hour))
	require.NoError(t, err)
	require.NotEmpty(t, counts)
	uses(e.plan(), "log_pkey")
	_, err = LogPerMinute(ctx, e, time.Now().Add(-2*time.Minute))
	require.NoError(t, err)
	uses(e.plan(), "log_pkey")

	failures, err := RecentSetbacks(ctx, e, "c4", time.Now().Add(-time.Hour), 20, 201)
	require.NoError(t, err)
	require.Len(t, failures, 20)
	uses(e.plan(), "log_pkey")

	history, total, err := EventHistory(ctx, e, 42, 50, 501)
	require.NoError(t, err)
	require.NotEmpty(t, history)
	require.EqualValues(t, 3, total)
	uses(e.all(), "log_origin")
	_, ok, err := EventLastError(ctx, e, 42, 65537)
	require.NoError(t, err)
	require.True(t, ok)
	uses(e.plan(), "log_origin")
	_, _, err = EventPayload(ctx, e, 42, 65537)
	require.NoError(t, err)
	plan := e.plan()
	uses(plan, "log_origin", "event_payloads_pkey", "queue_pkey", "queue_retry_origin", "dead_letters_origin")
	require.NotContains(t, plan, "Seq Scan on queue", plan)
	require.NotContains(t, plan, "Seq Scan on event_payloads", plan)
	of, err := DeadLettersOf(ctx, e, 42, 10, 201)
	require.NoError(t, err)
	require.Len(t, of, 1)
	uses(e.plan(), "dead_letters_origin")

	dead, err := DeadLetterCounts(ctx, e)
	require.NoError(t, err)
	require.EqualValues(t, 4000, dead["c1"])
	uses(e.plan(), "dead_letters_channel_ended")

	for _, f := range []DeadLetterFilter{{Channel: "c2"}, {Channel: "c2", Since: time.Now().Add(-time.Hour)}} {
		_, err = DeadLetters(ctx, e, f, 100)
		require.NoError(t, err)
		// Either index: by channel, or backwards by time while the
		// channel's rows are common.
		uses(e.plan(), "dead_letters_")
		_, err = CountDeadLetters(ctx, e, f)
		require.NoError(t, err)
		uses(e.plan(), "dead_letters_")
	}
	_, err = DeadLetters(ctx, e, DeadLetterFilter{}, 100)
	require.NoError(t, err)
	uses(e.plan(), "dead_letters_ended")
	_, err = ConsoleDeadLetters(ctx, e, DeadLetterFilter{}, 100, 201)
	require.NoError(t, err)
	uses(e.plan(), "dead_letters_ended")

	notes, _, err := NotificationHistory(ctx, e, 123, 100, 501)
	require.NoError(t, err)
	require.NotEmpty(t, notes)
	uses(e.all(), "status_events_notification", "debug_log_notification")
}
