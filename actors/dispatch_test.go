package actors_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/actors"
	"github.com/pgrelay/pgrelay/internal/handlers"
	"github.com/pgrelay/pgrelay/internal/testenv"
)

// payloads returns n distinct payloads "prefix-0" ...
func payloads(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}

// At-least-once: 10 000 events through 3 channels of the three concurrency
// modes; every event ran, and none twice (no fault injected).
func TestActorAtLeastOnce10000(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Exec(`CREATE TABLE ran (channel text, payload text)`)
	e.Exec(`SELECT pgrelay.register('a', 'INSERT INTO public.ran VALUES (''a'', $1)')`)
	e.Exec(`SELECT pgrelay.register('b', 'INSERT INTO public.ran VALUES (''b'', $1)', p_concurrency_mode := 'payload')`)
	e.Exec(`SELECT pgrelay.register('c', 'INSERT INTO public.ran VALUES (''c'', $1)', p_concurrency_mode := 'channel')`)
	e.startProcessor(func(c *actors.Config) { c.Concurrency = 32 })
	// 'a' 6000, 'b' 3000 spread over 100 payload lanes, 'c' 1000 strictly serial.
	e.Exec(`SELECT pgrelay.notify_many('a', $1)`, payloads("a", 6000))
	var bs []string
	for i := range 3000 {
		bs = append(bs, fmt.Sprintf("lane-%d", i%100))
	}
	e.Exec(`SELECT pgrelay.notify_many('b', $1)`, bs)
	e.Exec(`SELECT pgrelay.notify_many('c', $1)`, payloads("c", 1000))
	testenv.Eventually(e.T, 3*time.Minute, "10 000 events to succeed", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'succeeded'`) == 10000
	})
	require.Equal(t, 10000, e.Count(`SELECT count(*) FROM ran`))
	require.Equal(t, 6000, e.Count(`SELECT count(DISTINCT payload) FROM ran WHERE channel = 'a'`))
	require.Equal(t, 1000, e.Count(`SELECT count(DISTINCT payload) FROM ran WHERE channel = 'c'`))
	require.Equal(t, 3000, e.Count(`SELECT count(*) FROM ran WHERE channel = 'b'`))
	require.Equal(t, 10000, e.Count(`SELECT count(DISTINCT origin_id) FROM pgrelay.log WHERE event = 'succeeded'`))
	require.Equal(t, 0, e.Count(`SELECT count(*) FROM pgrelay.log WHERE event <> 'succeeded'`))
	require.Equal(t, 0, e.Count(`SELECT count(*) FROM pgrelay.queue`))
}

// orderedSchema creates a handler that records the order events ran in and
// the span each ran for; overlapped lists the runs of one key (a channel, a
// payload) whose spans intersect: two handlers of the key that ran at once.
// Spans, not a lock the handler holds: a transaction's effects (the deleted
// row that lets the next event be claimed) are visible before its locks are
// released, so the next handler could find an advisory lock of one that had
// finished and committed still held.
const orderedSchema = `
CREATE TABLE runs (seq bigserial PRIMARY KEY, payload text, key text, origin_id bigint, started timestamptz, finished timestamptz);
CREATE VIEW overlapped AS
  SELECT b.payload FROM runs a JOIN runs b ON a.key = b.key AND a.seq < b.seq
   WHERE b.started < a.finished AND a.started < b.finished;
CREATE FUNCTION public.ordered(p text, key text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE s timestamptz := clock_timestamp();
BEGIN
  PERFORM pg_sleep(0.002);
  INSERT INTO runs (payload, key, started, finished) VALUES (p, key, s, clock_timestamp());
END $$;
`

// 'channel' mode with two Processors on one database: strictly in notify
// order, never two at once.
func TestActorChannelModeOrderedAcrossProcessors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Exec(orderedSchema)
	e.Exec(`SELECT pgrelay.register('serial', 'SELECT public.ordered($1, ''serial'')', p_concurrency_mode := 'channel')`)
	e.Exec(`SELECT pgrelay.notify_many('serial', $1)`, payloads("s", 300))
	// A Processor starved of CPU for a second on a loaded test machine would
	// be presumed dead and its claims rescued while its handler runs: that is
	// the rescue's contract, not the claim's, which this test is about.
	patient := func(c *actors.Config) { c.DeadAfter = 10 * time.Second }
	e.startProcessor(patient)
	e.startProcessor(patient)
	testenv.Eventually(e.T, 2*time.Minute, "300 serial events", func() bool {
		return e.Count(`SELECT count(*) FROM runs`) == 300
	})
	require.Equal(t, 0, e.Count(`SELECT count(*) FROM overlapped`), "two events of a 'channel' channel ran at once; log: %v",
		e.Count(`SELECT count(*) FROM pgrelay.log WHERE event <> 'succeeded'`))
	var got []string
	rows, err := e.Pool.Query(context.Background(), `SELECT payload FROM runs ORDER BY seq`)
	require.NoError(t, err)
	for rows.Next() {
		var p string
		require.NoError(t, rows.Scan(&p))
		got = append(got, p)
	}
	require.Equal(t, payloads("s", 300), got, "events ran out of notify order")
}

// 'payload' mode: serial per payload, parallel across payloads — in lane
// batches, and on the classic path (SQLBatch 1), where each payload's events
// go through a lane actor of their own.
func TestActorPayloadModeSerialPerPayloadParallelAcross(t *testing.T) {
	t.Parallel()
	t.Run("lane batches", func(t *testing.T) { t.Parallel(); payloadModeSerial(t, 0) })
	t.Run("classic", func(t *testing.T) { t.Parallel(); payloadModeSerial(t, 1) })
}

func payloadModeSerial(t *testing.T, sqlBatch int) {
	e := newEnv(t)
	e.Exec(orderedSchema)
	// The run's span is the whole handler's (ordered() alone records its own
	// 2 ms): two payloads' handlers overlap when they run at once, not only
	// when their last 2 ms happen to.
	e.Exec(`CREATE OR REPLACE FUNCTION public.slow(p text) RETURNS void LANGUAGE plpgsql AS $$
	DECLARE s timestamptz := clock_timestamp();
	BEGIN
	  PERFORM pg_sleep(0.05);
	  PERFORM public.ordered(p, 'payload:' || p);
	  UPDATE runs SET started = s WHERE seq = currval('runs_seq_seq');
	END $$`)
	e.Exec(`SELECT pgrelay.register('perkey', 'SELECT public.slow($1)', p_concurrency_mode := 'payload')`)
	var ps []string
	for i := range 40 {
		ps = append(ps, fmt.Sprintf("key-%d", i%5))
	}
	e.Exec(`SELECT pgrelay.notify_many('perkey', $1)`, ps)
	if sqlBatch > 0 {
		countUpdates(e)
	}
	patient := func(c *actors.Config) {
		c.DeadAfter = 10 * time.Second // as above
		if sqlBatch > 0 {
			c.SQLBatch = sqlBatch
		}
	}
	e.startProcessor(patient)
	e.startProcessor(patient)
	testenv.Eventually(e.T, 2*time.Minute, "40 payload-mode events", func() bool {
		return e.Count(`SELECT count(*) FROM runs`) == 40
	})
	require.Equal(t, 0, e.Count(`SELECT count(*) FROM overlapped`), "two events of one payload ran at once")
	// Within a payload, events ran one after the other...
	require.Equal(t, 0, e.Count(`SELECT count(*) FROM runs a JOIN runs b ON a.payload = b.payload AND a.seq < b.seq
		AND b.started < a.finished`))
	// ...and different payloads ran at the same time.
	require.Positive(t, e.Count(`SELECT count(*) FROM runs a JOIN runs b ON a.payload <> b.payload AND a.seq < b.seq
		AND b.started < a.finished AND a.started < b.finished`))
	if sqlBatch > 0 {
		require.Equal(t, 40, e.Count(`SELECT count(DISTINCT id) FROM updates WHERE claimed`), "each event was claimed")
	}
}

// Retries: a handler that fails twice then succeeds; one that always fails
// gives up after max_attempts with every attempt logged.
func TestActorRetriesAndGiveUp(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Exec(`CREATE SEQUENCE tries`)
	e.Exec(`CREATE FUNCTION public.third_time_lucky(p text) RETURNS void LANGUAGE plpgsql AS $$
	BEGIN IF nextval('tries') < 3 THEN RAISE EXCEPTION 'not yet: %', p; END IF; END $$`)
	e.Exec(`CREATE FUNCTION public.never(p text) RETURNS void LANGUAGE plpgsql AS $$
	BEGIN RAISE EXCEPTION 'never works: %', p; END $$`)
	e.Exec(`SELECT pgrelay.register('lucky', 'SELECT public.third_time_lucky($1)', p_retry_delay := '50 milliseconds')`)
	e.Exec(`SELECT pgrelay.register('doomed', 'SELECT public.never($1)', p_max_attempts := 3, p_retry_delay := '50 milliseconds')`)
	var lucky, doomed int64
	require.NoError(t, e.Pool.QueryRow(context.Background(), `SELECT pgrelay.notify('lucky', 'x')`).Scan(&lucky))
	require.NoError(t, e.Pool.QueryRow(context.Background(), `SELECT pgrelay.notify('doomed', 'y')`).Scan(&doomed))
	e.startProcessor(nil)
	status := func(id int64) string {
		var s *string
		require.NoError(t, e.Pool.QueryRow(context.Background(), `SELECT pgrelay.status($1)`, id).Scan(&s))
		if s == nil {
			return ""
		}
		return *s
	}
	testenv.Eventually(e.T, 30*time.Second, "lucky to succeed and doomed to give up", func() bool {
		return status(lucky) == "succeeded" && status(doomed) == "gave_up"
	})
	type ev struct {
		attempt int
		event   string
		err     *string
	}
	history := func(id int64) []ev {
		rows, err := e.Pool.Query(context.Background(),
			`SELECT attempt, event, error FROM pgrelay.log WHERE origin_id = $1 ORDER BY id`, id)
		require.NoError(t, err)
		var out []ev
		for rows.Next() {
			var x ev
			require.NoError(t, rows.Scan(&x.attempt, &x.event, &x.err))
			out = append(out, x)
		}
		return out
	}
	h := history(lucky)
	require.Len(t, h, 3)
	require.Equal(t, []string{"failed", "failed", "succeeded"}, []string{h[0].event, h[1].event, h[2].event})
	require.Equal(t, []int{1, 2, 3}, []int{h[0].attempt, h[1].attempt, h[2].attempt})
	require.Contains(t, *h[0].err, "not yet: x")
	h = history(doomed)
	require.Len(t, h, 3)
	require.Equal(t, []string{"failed", "failed", "gave_up"}, []string{h[0].event, h[1].event, h[2].event})
	require.Contains(t, *h[2].err, "never works: y")
	require.Equal(t, 0, e.Count(`SELECT count(*) FROM pgrelay.queue`))
}

// A handler past its channel's timeout is cancelled by the server
// (statement_timeout), its effects roll back, and the attempt fails — in a
// batch (only its savepoint rolls back) and on the classic path (SQLBatch 1,
// its own transaction).
func TestActorTimeout(t *testing.T) {
	t.Parallel()
	t.Run("batches", func(t *testing.T) { t.Parallel(); handlerTimeout(t, 0) })
	t.Run("classic", func(t *testing.T) { t.Parallel(); handlerTimeout(t, 1) })
}

func handlerTimeout(t *testing.T, sqlBatch int) {
	e := newEnv(t)
	e.Exec(`CREATE TABLE ran (payload text)`)
	e.Exec(`CREATE FUNCTION public.sleepy(p text) RETURNS void LANGUAGE plpgsql AS $$
	BEGIN INSERT INTO public.ran VALUES (p); IF p = 'slow' THEN PERFORM pg_sleep(30); END IF; END $$`)
	e.Exec(`SELECT pgrelay.register('t', 'SELECT public.sleepy($1)', p_timeout := '200 milliseconds', p_max_attempts := 2,
	  p_retry_delay := '10 milliseconds')`)
	var slow int64
	require.NoError(t, e.Pool.QueryRow(context.Background(), `SELECT pgrelay.notify('t', 'slow')`).Scan(&slow))
	e.Exec(`SELECT pgrelay.notify('t', 'fast')`)
	if sqlBatch > 0 {
		countUpdates(e)
	}
	e.startProcessor(func(c *actors.Config) {
		if sqlBatch > 0 {
			c.SQLBatch = sqlBatch
		}
	})
	testenv.Eventually(e.T, 30*time.Second, "slow to give up", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'gave_up'`) == 1
	})
	// Both attempts were cut by the server's statement_timeout (not the
	// Processor's backstop deadline), and each counted.
	require.Equal(t, 1, e.Count(`SELECT count(*) FROM pgrelay.log WHERE origin_id = $1 AND attempt = 1 AND event = 'failed'
	  AND error LIKE '%canceling statement due to statement timeout%'`, slow))
	require.Equal(t, 1, e.Count(`SELECT count(*) FROM pgrelay.log WHERE origin_id = $1 AND attempt = 2 AND event = 'gave_up'
	  AND error LIKE '%canceling statement due to statement timeout%'`, slow))
	testenv.Eventually(e.T, 10*time.Second, "fast to succeed", func() bool {
		return e.Count(`SELECT count(*) FROM ran WHERE payload = 'fast'`) == 1
	})
	require.Equal(t, 0, e.Count(`SELECT count(*) FROM ran WHERE payload = 'slow'`), "timed-out effects rolled back")
	if sqlBatch > 0 {
		require.Equal(t, 3, e.Count(`SELECT count(DISTINCT id) FROM updates WHERE claimed`), "each attempt was claimed")
	}
}

// Expired events are recorded, not run.
func TestActorExpiry(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Exec(`CREATE TABLE ran (payload text)`)
	e.Exec(`SELECT pgrelay.register('x', 'INSERT INTO public.ran VALUES ($1)', p_expire_after := '1 millisecond')`)
	e.Exec(`SELECT pgrelay.notify('x', 'late')`)
	time.Sleep(20 * time.Millisecond) // let the event pass its expiry before any Processor sees it
	e.startProcessor(nil)
	testenv.Eventually(e.T, 10*time.Second, "the event to expire", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'expired'`) == 1
	})
	require.Equal(t, 0, e.Count(`SELECT count(*) FROM ran`))
	require.Equal(t, 0, e.Count(`SELECT count(*) FROM pgrelay.queue`))
}

// A handler that panics costs one failed attempt, never the process or the
// event; other events go on.
func TestActorHandlerPanic(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Exec(`SELECT pgrelay.register('n', 'subject.ok', p_kind := 'nats', p_max_attempts := 2, p_retry_delay := '10 milliseconds')`)
	ran := make(chan string, 100)
	e.startProcessor(func(c *actors.Config) {
		c.Handlers = handlers.Registry{"nats": handlers.HandlerFunc(func(ctx context.Context, ev handlers.Event) (bool, error) {
			if ev.Payload == "boom" {
				panic("handler exploded")
			}
			ran <- ev.Payload
			return false, nil
		})}
	})
	e.Exec(`SELECT pgrelay.notify('n', 'boom')`)
	e.Exec(`SELECT pgrelay.notify('n', 'fine')`)
	testenv.Eventually(e.T, 10*time.Second, "boom to give up", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'gave_up'`) == 1
	})
	require.Equal(t, 1, e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'failed' AND error LIKE '%handler panicked: handler exploded%'`))
	testenv.Eventually(e.T, 10*time.Second, "fine to succeed", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'succeeded'`) == 1
	})
	require.Equal(t, "fine", <-ran)
}

// An actor that fails while holding an event is restarted by its supervisor;
// the event it failed on costs one failed attempt and runs again.
func TestActorSupervisorRestartsFailedActor(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Exec(`CREATE TABLE ran (payload text)`)
	// A 'channel' channel claimed event by event (SQLBatch 1): its events pass
	// through its channel actor one by one.
	e.Exec(`SELECT pgrelay.register('s', 'INSERT INTO public.ran VALUES ($1)', p_retry_delay := '10 milliseconds',
	        p_concurrency_mode := 'channel')`)
	crashed := make(chan struct{}, 1)
	e.startProcessor(func(c *actors.Config) {
		c.SQLBatch = 1
		actors.SetTestHook(c, func(name string, msg any) {
			if p, ok := actors.RunEventPayload(msg); ok && name == "channel" && p == "crash" {
				select {
				case crashed <- struct{}{}:
					panic("channel actor bug")
				default: // crash once only
				}
			}
		})
	})
	e.Exec(`SELECT pgrelay.notify_many('s', ARRAY['before', 'crash', 'after'])`)
	testenv.Eventually(e.T, 20*time.Second, "all three to succeed", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'succeeded'`) == 3
	})
	require.Equal(t, 1, e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'failed' AND error LIKE '%internal error: actor%channel actor bug%'`))
	require.Equal(t, 3, e.Count(`SELECT count(*) FROM ran`))
	// The restarted actor keeps working.
	e.Exec(`SELECT pgrelay.notify('s', 'later')`)
	testenv.Eventually(e.T, 10*time.Second, "a later event", func() bool {
		return e.Count(`SELECT count(*) FROM ran WHERE payload = 'later'`) == 1
	})
}

// Graceful stop: running handlers finish, unstarted claims are released (not
// failed), and the instance unregisters.
func TestActorGracefulStop(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Exec(`CREATE TABLE ran (payload text)`)
	e.Exec(`CREATE FUNCTION public.half_second(p text) RETURNS void LANGUAGE sql AS
	$$ SELECT pg_sleep(0.5); INSERT INTO public.ran VALUES (p) $$`)
	e.Exec(`SELECT pgrelay.register('g', 'SELECT public.half_second($1)', p_concurrency_mode := 'payload')`)
	// Four lanes with five events each: four run at a time, the rest wait.
	var ps []string
	for i := range 20 {
		ps = append(ps, fmt.Sprintf("k%d", i%4))
	}
	e.Exec(`SELECT pgrelay.notify_many('g', $1)`, ps)
	p := e.startProcessor(nil)
	testenv.Eventually(e.T, 10*time.Second, "handlers to start", func() bool {
		return e.Count(`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
		                 AND state = 'active' AND query LIKE 'SELECT public.half_second(%'`) > 0
	})
	require.NoError(t, p.Stop(context.Background()))
	done := e.Count(`SELECT count(*) FROM ran`)
	require.Positive(t, done)
	require.Equal(t, done, e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'succeeded'`))
	require.Equal(t, 0, e.Count(`SELECT count(*) FROM pgrelay.log WHERE event <> 'succeeded'`))
	require.Equal(t, 20-done, e.Count(`SELECT count(*) FROM pgrelay.queue WHERE dispatched_at IS NULL`))
	require.Equal(t, 0, e.Count(`SELECT count(*) FROM pgrelay.queue WHERE dispatched_at IS NOT NULL`))
	require.Equal(t, 0, e.Count(`SELECT count(*) FROM pgrelay.processors`))
}

// Graceful stop past the shutdown timeout: still-running handlers are
// cancelled and their events go back to pending without a failed attempt.
func TestActorStopCancelsAfterTimeout(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Exec(`SELECT pgrelay.register('h', 'SELECT pg_sleep(60) WHERE $1 IS NOT NULL')`)
	e.Exec(`SELECT pgrelay.notify_many('h', ARRAY['1', '2'])`)
	p := e.startProcessor(func(c *actors.Config) { c.ShutdownTimeout = 300 * time.Millisecond })
	// A batch runs its handlers one after the other: the first is running.
	testenv.Eventually(e.T, 10*time.Second, "a handler to start", func() bool {
		return e.Count(`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
		                 AND state = 'active' AND query LIKE 'SELECT pg_sleep(60)%'`) == 1
	})
	require.NoError(t, p.Stop(context.Background()))
	require.Equal(t, 2, e.Count(`SELECT count(*) FROM pgrelay.queue WHERE dispatched_at IS NULL AND attempt = 1`))
	require.Equal(t, 0, e.Count(`SELECT count(*) FROM pgrelay.log`))
}

// Config errors are reported before anything connects.
func TestActorConfigErrors(t *testing.T) {
	t.Parallel()
	_, err := actors.New(actors.Config{})
	require.ErrorContains(t, err, "database URL is required")
	_, err = actors.New(actors.Config{DatabaseURL: "postgres://x", Mode: "bogus"})
	require.ErrorContains(t, err, "unknown mode")
	n := 5000
	_, err = actors.New(actors.Config{DatabaseURL: "postgres://x", NodeID: &n})
	require.ErrorContains(t, err, "node-id 5000: expected 0..1023")
	p, err := actors.New(actors.Config{DatabaseURL: "postgres://nobody@127.0.0.1:1/none?connect_timeout=2"})
	require.NoError(t, err)
	err = p.Start(context.Background())
	require.Error(t, err)
	require.False(t, errors.Is(err, context.Canceled))
}

// A 'none' sql channel runs events in batches, one transaction each with a
// savepoint per event: a failing handler rolls back alone, the others commit
// once.
func TestActorSQLBatchIsolatesFailures(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Exec(`CREATE TABLE ran (payload text)`)
	e.Exec(`CREATE FUNCTION public.picky(p text) RETURNS void LANGUAGE plpgsql AS $$
	BEGIN
	  INSERT INTO public.ran VALUES (p);
	  IF p LIKE 'bad-%' THEN RAISE EXCEPTION 'refused %', p; END IF;
	END $$`)
	e.Exec(`SELECT pgrelay.register('b', 'SELECT public.picky($1)', p_max_attempts := 1)`)
	var ps []string
	for i := range 300 {
		if i%10 == 3 {
			ps = append(ps, fmt.Sprintf("bad-%d", i))
		} else {
			ps = append(ps, fmt.Sprintf("good-%d", i))
		}
	}
	e.Exec(`SELECT pgrelay.notify_many('b', $1)`, ps)
	e.startProcessor(func(c *actors.Config) { c.SQLBatch = 32 })
	testenv.Eventually(e.T, 60*time.Second, "300 outcomes", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.log`) == 300
	})
	require.Equal(t, 270, e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'succeeded'`))
	require.Equal(t, 30, e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'gave_up' AND error LIKE '%refused bad-%'`))
	require.Equal(t, 270, e.Count(`SELECT count(*) FROM ran`), "a failed handler's insert rolled back; others committed once")
	require.Equal(t, 0, e.Count(`SELECT count(*) FROM ran WHERE payload LIKE 'bad-%'`))
	require.Equal(t, 0, e.Count(`SELECT count(*) FROM pgrelay.queue`))
}

// Channel and lane actors (SQLBatch 1), and batchers (by default), are
// spawned on demand — the actor gauge reaches one per channel and per
// payload lane, or one per 'none' channel plus the lane batcher — and are
// all stopped once idle; a later event spawns a fresh one that runs it.
func TestActorIdleActorsSpawnAndStop(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		sqlBatch int
		actors   float64
	}{
		// i1's channel actor, i2's channel actor and its lanes x, y, z.
		{"classic", 1, 5},
		// i1's batcher and the lane batcher.
		{"batches", 0, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.Exec(`SELECT pgrelay.register('i1', 'SELECT $1')`)
			e.Exec(`SELECT pgrelay.register('i2', 'SELECT $1', p_concurrency_mode := 'payload')`)
			e.Exec(`SELECT pgrelay.notify_many('i1', ARRAY['a', 'b'])`)
			e.Exec(`SELECT pgrelay.notify_many('i2', ARRAY['x', 'y', 'z'])`)
			// An actor lives at least IdleTimeout after its last event: long
			// enough to see them all alive at once.
			p := e.startProcessor(func(c *actors.Config) {
				c.IdleTimeout = 2 * time.Second
				if tc.sqlBatch > 0 {
					c.SQLBatch = tc.sqlBatch
				}
			})
			gauge := func() float64 { return testutil.ToFloat64(p.Metrics().ChannelActors) }
			var most float64
			testenv.Eventually(e.T, 20*time.Second, "the actors to be spawned", func() bool {
				most = max(most, gauge())
				return most >= tc.actors
			})
			require.Equal(t, tc.actors, most)
			testenv.Eventually(e.T, 20*time.Second, "5 events", func() bool {
				return e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'succeeded'`) == 5
			})
			testenv.Eventually(e.T, 20*time.Second, "idle actors to stop", func() bool {
				require.LessOrEqual(t, gauge(), tc.actors)
				return gauge() == 0
			})
			e.Exec(`SELECT pgrelay.notify('i2', 'x')`)
			testenv.Eventually(e.T, 20*time.Second, "the later event", func() bool {
				return e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'succeeded'`) == 6
			})
		})
	}
}
