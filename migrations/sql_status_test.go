package migrations_test

// pgrelay.status across a notification's lifecycle, the Processor's
// _complete (retries, backoff, give-up, release, stale claims) and
// pgrelay.queue_stats.

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/testenv"
)

func TestStatusLifecycle(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("c", "p_max_attempts := 3, p_retry_delay := '10 seconds'")
	proc := startProcessor(t, d.Pool)

	id := d.notify("c", "x")
	d.requireStatus(id, "pending")

	got := claim(t, d.Pool, proc, 10)
	require.Len(t, got, 1)
	require.Equal(t, id, got[0].ID)
	require.Equal(t, id, got[0].OriginID)
	require.Equal(t, 1, got[0].Attempt)
	require.False(t, got[0].Expired)
	d.requireStatus(id, "in_flight")
	require.Equal(t, proc, testenv.One[int64](t, d.Pool, "SELECT dispatched_by FROM pgrelay.queue WHERE id = $1", id))

	// A failure schedules a retry: a new row, attempt + 1, same origin, backoff
	// of retry_delay * 2^0 = 10 s with +-20% jitter.
	c := d.Conn(-1)
	var retryID int64
	inTxCommit(t, c, func(tx pgx.Tx) {
		require.Equal(t, 1, complete(t, tx, proc, got[0], "failed", "boom"))
		var attempt int32
		var retryOf, origin int64
		var delay float64
		var inFlight bool
		require.NoError(t, tx.QueryRow(bg, `SELECT id, attempt, retry_of, origin_id,
			EXTRACT(epoch FROM not_before - now())::float8, dispatched_at IS NOT NULL FROM pgrelay.queue`).
			Scan(&retryID, &attempt, &retryOf, &origin, &delay, &inFlight))
		require.NotEqual(t, id, retryID)
		require.EqualValues(t, 2, attempt)
		require.Equal(t, id, retryOf)
		require.Equal(t, id, origin)
		require.False(t, inFlight)
		require.GreaterOrEqual(t, delay, 8.0)
		require.LessOrEqual(t, delay, 12.0)
	})
	d.requireStatus(id, "retrying")
	var logQueueID, logOrigin int64
	var logAttempt int32
	var logEvent string
	var logErr *string
	require.NoError(t, d.Pool.QueryRow(bg, "SELECT queue_id, origin_id, attempt, event, error FROM pgrelay.log").
		Scan(&logQueueID, &logOrigin, &logAttempt, &logEvent, &logErr))
	require.Equal(t, id, logQueueID)
	require.Equal(t, id, logOrigin)
	require.EqualValues(t, 1, logAttempt)
	require.Equal(t, "failed", logEvent)
	require.Equal(t, "boom", *logErr)
	// The retry is not ready before its not_before.
	require.Empty(t, claim(t, d.Pool, proc, 10))
	d.requireStatus(id, "retrying")

	d.Exec("UPDATE pgrelay.queue SET not_before = now() - interval '1 second'")
	got = claim(t, d.Pool, proc, 10)
	require.Len(t, got, 1)
	require.Equal(t, retryID, got[0].ID)
	require.Equal(t, id, got[0].OriginID)
	require.Equal(t, 2, got[0].Attempt)
	d.requireStatus(id, "in_flight")

	require.Equal(t, 1, complete(t, d.Pool, proc, got[0], "succeeded", ""))
	d.requireStatus(id, "succeeded")
	require.Zero(t, d.Count("SELECT count(*) FROM pgrelay.queue"))
	require.Equal(t, []string{"failed", "succeeded"}, testenv.Column[string](t, d.Pool, "SELECT event FROM pgrelay.log ORDER BY id"))
	require.Equal(t, []int64{id, retryID}, testenv.Column[int64](t, d.Pool, "SELECT queue_id FROM pgrelay.log ORDER BY id"))
	require.Equal(t, []int32{1, 2}, testenv.Column[int32](t, d.Pool, "SELECT attempt FROM pgrelay.log ORDER BY id"))
}

func inTxCommit(t *testing.T, c *pgx.Conn, f func(tx pgx.Tx)) {
	t.Helper()
	tx, err := c.Begin(bg)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(bg) }()
	f(tx)
	require.NoError(t, tx.Commit(bg))
}

func TestStatusGaveUp(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("c", "p_max_attempts := 2, p_retry_delay := '0'")
	id := d.notify("c", "x")

	got := claim(t, d.Pool, 1, 10)
	require.Len(t, got, 1)
	require.Equal(t, 1, complete(t, d.Pool, 1, got[0], "failed", "one"))
	d.requireStatus(id, "retrying")
	got = claim(t, d.Pool, 1, 10) // retry_delay 0: ready at once
	require.Len(t, got, 1)
	require.Equal(t, 2, got[0].Attempt)
	require.Equal(t, 1, complete(t, d.Pool, 1, got[0], "failed", "two"))

	d.requireStatus(id, "gave_up")
	require.Zero(t, d.Count("SELECT count(*) FROM pgrelay.queue"), "no retry after max_attempts")
	require.Equal(t, []string{"failed", "gave_up"}, testenv.Column[string](t, d.Pool, "SELECT event FROM pgrelay.log ORDER BY id"))
	require.Equal(t, "two", testenv.One[string](t, d.Pool, "SELECT error FROM pgrelay.log WHERE event = 'gave_up'"))

	// max_attempts 1: the first failure gives up.
	d.register("once", "p_max_attempts := 1")
	id = d.notify("once", "x")
	got = claim(t, d.Pool, 1, 10)
	require.Len(t, got, 1)
	require.Equal(t, 1, complete(t, d.Pool, 1, got[0], "failed", ""))
	d.requireStatus(id, "gave_up")
	require.Zero(t, d.Count("SELECT count(*) FROM pgrelay.queue"))
}

func TestStatusExpired(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("c", "p_expire_after := '1 hour', p_retry_delay := '0'")
	id := d.notify("c", "x")
	fresh := d.notify("c", "y")
	d.Exec("UPDATE pgrelay.queue SET expires_at = now() - interval '1 second' WHERE id = $1", id)

	got := claim(t, d.Pool, 1, 10)
	require.Len(t, got, 2)
	byID := map[int64]claimedRow{got[0].ID: got[0], got[1].ID: got[1]}
	require.True(t, byID[id].Expired, "rows past expires_at are claimed flagged")
	require.False(t, byID[fresh].Expired)
	require.Equal(t, 1, complete(t, d.Pool, 1, byID[id], "expired", ""))
	d.requireStatus(id, "expired")
	require.Equal(t, "expired", testenv.One[string](t, d.Pool, "SELECT event FROM pgrelay.log WHERE origin_id = $1", id))

	// A retry keeps the notification's expiry.
	require.Equal(t, 1, complete(t, d.Pool, 1, byID[fresh], "failed", "x"))
	require.True(t, testenv.One[bool](t, d.Pool,
		"SELECT expires_at = enqueued_at + interval '1 hour' FROM pgrelay.queue WHERE origin_id = $1", fresh))
}

func TestStatusUnknown(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("c", "p_retry_delay := '0'")
	require.Nil(t, d.status(123456789))
	require.Nil(t, testenv.One[*string](t, d.Pool, "SELECT pgrelay.status(NULL)"))
	// A retry row's own id is not a notification id.
	d.notify("c", "x")
	got := claim(t, d.Pool, 1, 1)
	complete(t, d.Pool, 1, got[0], "failed", "")
	retryID := testenv.One[int64](t, d.Pool, "SELECT id FROM pgrelay.queue")
	require.Nil(t, d.status(retryID))
}

// _complete applies an outcome only while the claim is the one it was made
// for, and returns how many it applied.
func TestCompleteIgnoresStaleClaims(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("c", "")
	for _, p := range []string{"a", "b", "c"} {
		d.notify("c", p)
	}
	got := claim(t, d.Pool, 1, 10)
	require.Len(t, got, 3)

	require.Zero(t, complete(t, d.Pool, 2, got[0], "succeeded", ""), "another processor's claim")
	moved := got[0]
	moved.DispatchedAt = moved.DispatchedAt.Add(-time.Microsecond)
	require.Zero(t, complete(t, d.Pool, 1, moved, "succeeded", ""), "another claim time")
	require.Zero(t, complete(t, d.Pool, 1, moved, "release", ""))
	require.Zero(t, complete(t, d.Pool, 1, claimedRow{ID: 42, DispatchedAt: got[0].DispatchedAt}, "succeeded", ""), "unknown row")
	require.Equal(t, 3, d.Count("SELECT count(*) FROM pgrelay.queue WHERE dispatched_by = 1"))
	require.Zero(t, d.Count("SELECT count(*) FROM pgrelay.log"))

	// A batch: two of three apply.
	n := completeAll(t, d.Pool, 1,
		outcome{c: got[0], event: "succeeded"},
		outcome{c: moved, event: "failed"},
		outcome{c: got[1], event: "release"})
	require.Equal(t, 2, n)
	require.Equal(t, 1, d.Count("SELECT count(*) FROM pgrelay.log"))
	// Applying again does nothing: the claims are gone.
	require.Zero(t, completeAll(t, d.Pool, 1, outcome{c: got[0], event: "succeeded"}, outcome{c: got[1], event: "release"}))

	// A claim taken back and claimed again by the same processor is a new claim.
	d.Exec("UPDATE pgrelay.queue SET dispatched_at = NULL, dispatched_by = NULL WHERE id = $1", got[2].ID)
	again := claim(t, d.Pool, 1, 10)
	require.Len(t, again, 2) // got[1] (released) and got[2]
	require.Zero(t, complete(t, d.Pool, 1, got[2], "succeeded", ""))
	require.Equal(t, 2, completeAll(t, d.Pool, 1, outcome{c: again[0], event: "succeeded"}, outcome{c: again[1], event: "succeeded"}))
	require.Zero(t, d.Count("SELECT count(*) FROM pgrelay.queue"))
}

// 'release' puts the row back to pending without a log row or a new attempt.
func TestCompleteRelease(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("c", "")
	id := d.notify("c", "x")
	got := claim(t, d.Pool, 1, 10)
	require.Len(t, got, 1)
	require.Equal(t, 1, complete(t, d.Pool, 1, got[0], "release", ""))
	d.requireStatus(id, "pending")
	require.Zero(t, d.Count("SELECT count(*) FROM pgrelay.log"))
	require.Equal(t, 1, d.Count("SELECT count(*) FROM pgrelay.queue WHERE id = $1 AND attempt = 1 AND dispatched_at IS NULL AND dispatched_by IS NULL", id))
	again := claim(t, d.Pool, 2, 10)
	require.Equal(t, []int64{id}, ids(again))
	require.Equal(t, 1, again[0].Attempt)
}

// The backoff: retry_delay * 2^(attempt-1), capped at max(retry_delay, 1 hour),
// with +-20% jitter.
func TestCompleteBackoff(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	c := d.Conn(-1)

	// Through _complete: the retry's not_before is now() + backoff.
	cases := []struct {
		retryDelay string
		attempt    int
		want       time.Duration
	}{
		{"10 seconds", 1, 10 * time.Second},
		{"10 seconds", 4, 80 * time.Second},
		{"40 minutes", 2, time.Hour},        // 80 min, capped at 1 hour
		{"1 minute", 25, time.Hour},         // far past the cap
		{"2 hours", 3, 2 * time.Hour},       // retry_delay above 1 hour: the cap is retry_delay
		{"0", 3, 0},                         // no delay
		{"1 second", 999, time.Hour},        // no overflow at the largest attempt (max_attempts at most 1000)
		{"1.5 seconds", 2, 3 * time.Second}, // fractions
		{"500 milliseconds", 1, 500 * time.Millisecond},
	}
	for i, tc := range cases {
		ch := "c" + string(rune('a'+i))
		d.Exec("SELECT pgrelay.register($1, 'SELECT length($1)', p_retry_delay := $2::interval, p_max_attempts := 1000)", ch, tc.retryDelay)
		d.Exec("INSERT INTO pgrelay.queue (channel, payload, attempt) VALUES ($1, 'x', $2)", ch, tc.attempt)
	}
	got := claim(t, d.Pool, 1, 100)
	require.Len(t, got, len(cases))
	inTxCommit(t, c, func(tx pgx.Tx) {
		outs := make([]outcome, len(got))
		for i, g := range got {
			outs[i] = outcome{c: g, event: "failed"}
		}
		require.Equal(t, len(got), completeAll(t, tx, 1, outs...))
		for i, tc := range cases {
			ch := "c" + string(rune('a'+i))
			var attempt int32
			var delay float64
			require.NoError(t, tx.QueryRow(bg, "SELECT attempt, EXTRACT(epoch FROM not_before - now())::float8 FROM pgrelay.queue WHERE channel = $1", ch).
				Scan(&attempt, &delay))
			require.EqualValues(t, tc.attempt+1, attempt, tc.retryDelay)
			w := tc.want.Seconds()
			require.GreaterOrEqual(t, delay, 0.8*w-1e-6, "%s, attempt %d", tc.retryDelay, tc.attempt)
			require.LessOrEqual(t, delay, 1.2*w+1e-6, "%s, attempt %d", tc.retryDelay, tc.attempt)
		}
	})

	// The jitter spreads: many samples cover most of [0.8d, 1.2d].
	var lo, hi float64
	require.NoError(t, c.QueryRow(bg, `SELECT min(s), max(s) FROM (
		SELECT EXTRACT(epoch FROM pgrelay._backoff('100 seconds', 1))::float8 AS s FROM generate_series(1, 2000)) x`).Scan(&lo, &hi))
	require.GreaterOrEqual(t, lo, 80.0)
	require.LessOrEqual(t, hi, 120.0)
	require.Less(t, lo, 85.0)
	require.Greater(t, hi, 115.0)
}

func TestQueueStats(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("a", "p_retry_delay := '1 hour'")
	d.register("b", "p_node_restricted := true, p_concurrency_mode := 'channel'")
	d.register("empty", "")
	d.Exec("SELECT pgrelay.register('mail', 'default', p_kind := 'email')")
	d.Exec("SELECT pgrelay.update('mail', p_paused := true)")

	var a []int64
	for _, p := range []string{"1", "2", "3", "4", "5"} {
		a = append(a, d.notify("a", p)) // separate transactions: distinct enqueued_at
	}
	d.notify("b", "1")
	d.notify("b", "2")
	// a: the two oldest in flight, then one of them failed (a pending retry).
	d.Exec("UPDATE pgrelay.queue SET dispatched_at = now(), dispatched_by = 1 WHERE id = ANY($1)", a[:2])
	failed := claimedRow{ID: a[0], DispatchedAt: testenv.One[time.Time](t, d.Pool, "SELECT dispatched_at FROM pgrelay.queue WHERE id = $1", a[0])}
	require.Equal(t, 1, complete(t, d.Pool, 1, failed, "failed", "x"))

	type stat struct {
		Channel                                 string
		Pending, Restricted, InFlight, Retrying int64
		Oldest                                  *time.Time
		Kind, Mode                              string
		Paused                                  bool
	}
	rows, err := d.Pool.Query(bg, `SELECT channel, pending, pending_restricted, in_flight, retrying,
		oldest_pending, kind, concurrency_mode, paused FROM pgrelay.queue_stats()`)
	require.NoError(t, err)
	stats, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (stat, error) {
		var s stat
		err := r.Scan(&s.Channel, &s.Pending, &s.Restricted, &s.InFlight, &s.Retrying, &s.Oldest, &s.Kind, &s.Mode, &s.Paused)
		return s, err
	})
	require.NoError(t, err)
	require.Len(t, stats, 4, "one row per channel, empty ones included")

	// a: 3 fresh pending + 1 retry pending, 1 in flight; the oldest pending is the
	// retry, which keeps its notification's enqueued_at.
	oldestA := testenv.One[time.Time](t, d.Pool, "SELECT enqueued_at FROM pgrelay.queue WHERE origin_id = $1", a[0])
	oldestB := testenv.One[time.Time](t, d.Pool, "SELECT min(enqueued_at) FROM pgrelay.queue WHERE channel = 'b'")
	require.True(t, oldestA.Before(testenv.One[time.Time](t, d.Pool, "SELECT enqueued_at FROM pgrelay.queue WHERE id = $1", a[2])))
	want := []struct {
		s      stat
		oldest *time.Time
	}{
		{stat{"a", 4, 0, 1, 1, nil, "sql", "none", false}, &oldestA},
		{stat{"b", 2, 2, 0, 0, nil, "sql", "channel", false}, &oldestB},
		{stat{"empty", 0, 0, 0, 0, nil, "sql", "none", false}, nil},
		{stat{"mail", 0, 0, 0, 0, nil, "email", "none", true}, nil},
	}
	for i, w := range want {
		got := stats[i]
		oldest := got.Oldest
		got.Oldest = nil
		require.Equal(t, w.s, got)
		if w.oldest == nil {
			require.Nil(t, oldest, w.s.Channel)
		} else {
			require.NotNil(t, oldest, w.s.Channel)
			require.True(t, w.oldest.Equal(*oldest), "%s: oldest_pending %v, want %v", w.s.Channel, *oldest, *w.oldest)
		}
	}
}
