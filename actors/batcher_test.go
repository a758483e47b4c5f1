package actors_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/actors"
	"github.com/pgrelay/pgrelay/events/store"
	"github.com/pgrelay/pgrelay/internal/handlers"
	"github.com/pgrelay/pgrelay/internal/testenv"
)

// A 'none' sql channel runs in direct batches: many events share a
// transaction, and no claim is ever written to the queue (the rows are only
// locked, then deleted).
func TestActorDirectBatches(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Exec(`CREATE TABLE ran (payload text, tx bigint)`)
	e.Exec(`SELECT pgrelay.register('d', 'INSERT INTO public.ran VALUES ($1, txid_current())')`)
	countUpdates(e)
	var ps []string
	for i := range 2000 {
		ps = append(ps, fmt.Sprintf("p%d", i))
	}
	e.Exec(`SELECT pgrelay.notify_many('d', $1)`, ps)
	e.startProcessor(func(c *actors.Config) { c.SQLBatchConcurrency, c.SQLBatch = 200, 50 })
	testenv.Eventually(e.T, 60*time.Second, "2000 successes", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'succeeded'`) == 2000
	})
	require.Equal(t, 2000, e.Count(`SELECT count(DISTINCT payload) FROM ran`))
	txs := e.Count(`SELECT count(DISTINCT tx) FROM ran`)
	require.Less(t, txs, 2000/5, "events share transactions")
	require.LessOrEqual(t, e.Count(`SELECT max(n) FROM (SELECT count(*) AS n FROM ran GROUP BY tx) x`), 50,
		"no batch is larger than SQLBatch")
	// Nothing was claimed by an update: the queue's rows were only inserted
	// and deleted.
	require.Zero(t, e.Count(`SELECT count(*) FROM updates`))
	require.Zero(t, e.Count(`SELECT count(*) FROM pgrelay.queue`))
}

// Failing handlers in a direct batch: each fails alone (its savepoint rolls
// back, the others' effects commit) and no handler runs twice for an attempt
// — a sequence, which no rollback undoes, counts every run.
func TestActorDirectBatchFailures(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Exec(`CREATE TABLE ran (payload int, tx bigint)`)
	e.Exec(`CREATE SEQUENCE runs`)
	// Every third payload fails on its first attempt.
	e.Exec(`CREATE FUNCTION public.work(p text) RETURNS void LANGUAGE plpgsql AS $$
	BEGIN
	  PERFORM nextval('runs');
	  INSERT INTO public.ran VALUES (p::int, txid_current());
	  IF p::int % 3 = 0 AND NOT EXISTS (SELECT FROM pgrelay.log WHERE event = 'failed' AND error LIKE '%bad <' || p || '>%') THEN
	    RAISE EXCEPTION 'bad <%>', p;
	  END IF;
	END $$`)
	e.Exec(`SELECT pgrelay.register('f', 'SELECT public.work($1)', p_retry_delay := '10 milliseconds')`)
	e.Exec(`SELECT pgrelay.notify_many('f', ARRAY(SELECT g::text FROM generate_series(1, 300) g))`)
	e.startProcessor(func(c *actors.Config) { c.SQLBatchConcurrency, c.SQLBatch = 32, 32 })
	testenv.Eventually(e.T, 60*time.Second, "300 successes", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'succeeded'`) == 300
	})
	require.Equal(t, 100, e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'failed'`))
	require.Equal(t, 300, e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'succeeded' AND attempt = 1 + (
	  SELECT count(*) FROM pgrelay.log f WHERE f.origin_id = log.origin_id AND f.event = 'failed')`))
	// 300 successful runs and 100 failed ones, each exactly once.
	require.Equal(t, 400, e.Count(`SELECT last_value FROM runs`))
	require.Equal(t, 300, e.Count(`SELECT count(*) FROM ran`), "the failed runs' effects rolled back")
	require.Equal(t, 300, e.Count(`SELECT count(DISTINCT payload) FROM ran`))
	require.Less(t, e.Count(`SELECT count(DISTINCT tx) FROM ran WHERE payload % 3 <> 0`), 200/2,
		"events that succeeded first time shared transactions")
	require.Zero(t, e.Count(`SELECT count(*) FROM pgrelay.queue`))
}

// Serialised sql channels run in lane batches: the heads of many lanes share
// a transaction, no claim is written, and every lane still runs in notify
// order, one event at a time.
func TestActorLaneBatches(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Exec(`CREATE TABLE ran (channel text, seq int, tx bigint, at timestamptz DEFAULT clock_timestamp())`)
	countUpdates(e)
	for c := range 50 {
		e.Exec(fmt.Sprintf(`SELECT pgrelay.register('ch%d', 'INSERT INTO public.ran (channel, seq, tx) VALUES (''ch%d'', $1::int, txid_current())',
		        p_concurrency_mode := 'channel')`, c, c))
		e.Exec(fmt.Sprintf(`SELECT pgrelay.notify_many('ch%d', ARRAY(SELECT g::text FROM generate_series(1, 20) g))`, c))
	}
	e.startProcessor(nil)
	testenv.Eventually(e.T, 60*time.Second, "1000 successes", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'succeeded'`) == 1000
	})
	require.Equal(t, 1000, e.Count(`SELECT count(*) FROM ran`))
	require.Less(t, e.Count(`SELECT count(DISTINCT tx) FROM ran`), 1000/4, "lane heads share transactions")
	require.Zero(t, e.Count(`SELECT count(*) FROM ran a JOIN ran b ON a.channel = b.channel AND a.seq < b.seq
	                          AND (b.at < a.at OR b.tx = a.tx)`), "a channel's events ran in order, one per transaction")
	require.Zero(t, e.Count(`SELECT count(*) FROM updates`), "no claim was written")
	require.Zero(t, e.Count(`SELECT count(*) FROM pgrelay.queue`))
}

// With SQLBatch 1 a 'none' sql channel is claimed and run one event per
// transaction, like the other kinds.
func TestActorSQLBatchOneClaims(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Exec(`CREATE TABLE ran (payload text, tx bigint)`)
	e.Exec(`SELECT pgrelay.register('d', 'INSERT INTO public.ran VALUES ($1, txid_current())')`)
	countUpdates(e)
	e.Exec(`SELECT pgrelay.notify_many('d', ARRAY(SELECT g::text FROM generate_series(1, 50) g))`)
	e.startProcessor(func(c *actors.Config) { c.SQLBatch = 1 })
	testenv.Eventually(e.T, 30*time.Second, "50 successes", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'succeeded'`) == 50
	})
	require.Equal(t, 50, e.Count(`SELECT count(DISTINCT tx) FROM ran`))
	require.Equal(t, 50, e.Count(`SELECT count(*) FROM updates WHERE claimed`), "each event was claimed")
}

// A batcher that fails is restarted by its supervisor and the channel's
// events still all run once.
func TestActorBatcherRestarts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Exec(`CREATE TABLE ran (payload text)`)
	e.Exec(`SELECT pgrelay.register('r', 'INSERT INTO public.ran VALUES ($1)')`)
	crashed := make(chan struct{}, 1)
	e.startProcessor(func(c *actors.Config) {
		actors.SetTestHook(c, func(name string, msg any) {
			if name == "batcher" && actors.IsBatchDone(msg) {
				select {
				case crashed <- struct{}{}:
					panic("batcher bug")
				default: // crash once only
				}
			}
		})
	})
	e.Exec(`SELECT pgrelay.notify_many('r', ARRAY(SELECT g::text FROM generate_series(1, 300) g))`)
	testenv.Eventually(e.T, 30*time.Second, "300 successes", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'succeeded'`) == 300
	})
	require.Len(t, crashed, 1)
	require.Equal(t, 300, e.Count(`SELECT count(DISTINCT payload) FROM ran`))
	require.Equal(t, 300, e.Count(`SELECT count(*) FROM ran`))
	e.Exec(`SELECT pgrelay.notify('r', 'later')`)
	testenv.Eventually(e.T, 10*time.Second, "a later event", func() bool {
		return e.Count(`SELECT count(*) FROM ran WHERE payload = 'later'`) == 1
	})
}

// countUpdates records every update of a queue row in the table updates.
func countUpdates(e *env) {
	e.Exec(`CREATE TABLE updates (id bigint, claimed bool)`)
	e.Exec(`CREATE FUNCTION public.count_update() RETURNS trigger LANGUAGE plpgsql AS $$
	BEGIN
	  INSERT INTO public.updates VALUES (NEW.id, NEW.dispatched_at IS NOT NULL);
	  RETURN NEW;
	END $$`)
	e.Exec(`CREATE TRIGGER count_update AFTER UPDATE ON pgrelay.queue FOR EACH ROW EXECUTE FUNCTION public.count_update()`)
}

// Batches that commit while the Processor stops are counted too: the
// succeeded counter matches the log once Stop returns.
func TestActorBatchesCountedAtStop(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Exec(`CREATE FUNCTION public.slowish(p text) RETURNS void LANGUAGE sql AS $$ SELECT pg_sleep(0.002) $$`)
	e.Exec(`SELECT pgrelay.register('c', 'SELECT public.slowish($1)')`)
	e.Exec(`SELECT pgrelay.notify_many('c', ARRAY(SELECT g::text FROM generate_series(1, 5000) g))`)
	p := e.startProcessor(func(c *actors.Config) { c.SQLBatchConcurrency, c.SQLBatch = 400, 100 })
	testenv.Eventually(e.T, 30*time.Second, "some events to succeed", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'succeeded'`) > 300
	})
	require.NoError(t, p.Stop(context.Background()))
	logged := e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'succeeded'`)
	require.Less(t, logged, 5000, "stopped mid-backlog")
	require.Equal(t, logged, int(testutil.ToFloat64(p.Metrics().Succeeded.WithLabelValues("c"))))
}

// A batch runs its handlers as statements prepared on its connection (parsed
// and planned once per connection, not once per event): the handler sees its
// own statement among the session's prepared ones.
func TestActorBatchPreparesHandlers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Exec(`CREATE TABLE ran (payload text, prepared int)`)
	e.Exec(`SELECT pgrelay.register('p', 'INSERT INTO public.ran SELECT $1, (SELECT count(*) FROM pg_prepared_statements
	  WHERE statement LIKE ''INSERT INTO public.ran%'')')`)
	e.Exec(`SELECT pgrelay.notify_many('p', ARRAY(SELECT g::text FROM generate_series(1, 100) g))`)
	e.startProcessor(func(c *actors.Config) { c.SQLBatch = 10 })
	testenv.Eventually(e.T, 30*time.Second, "100 successes", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'succeeded'`) == 100
	})
	require.Equal(t, 100, e.Count(`SELECT count(*) FROM ran WHERE prepared = 1`))
}

// A handler that no longer parses (its function was dropped) cannot be
// prepared: it runs unprepared and fails as its event's own error, and the
// batch goes on and records it. Once the function is back, events succeed.
func TestActorBatchHandlerThatNoLongerParses(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Exec(`CREATE TABLE ran (payload text)`)
	e.Exec(`CREATE FUNCTION public.work(p text) RETURNS void LANGUAGE sql AS 'INSERT INTO public.ran VALUES (p)'`)
	e.Exec(`SELECT pgrelay.register('g', 'SELECT public.work($1)', p_max_attempts := 1)`)
	e.Exec(`DROP FUNCTION public.work(text)`)
	e.Exec(`SELECT pgrelay.notify_many('g', ARRAY['1', '2', '3'])`)
	e.startProcessor(func(c *actors.Config) { c.SQLBatch = 10 })
	testenv.Eventually(e.T, 30*time.Second, "3 events given up", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'gave_up' AND error LIKE '%does not exist%'`) == 3
	})
	e.Exec(`CREATE FUNCTION public.work(p text) RETURNS void LANGUAGE sql AS 'INSERT INTO public.ran VALUES (p)'`)
	e.Exec(`SELECT pgrelay.notify_many('g', ARRAY['4', '5'])`)
	testenv.Eventually(e.T, 30*time.Second, "2 successes", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'succeeded'`) == 2
	})
	require.Equal(t, 2, e.Count(`SELECT count(*) FROM ran`))
}

// A handler whose result type changes under it (a column added to the table
// it selects *) costs its events no attempt: on each hot connection that had
// it prepared, the batch prepares it again and runs the event again in the
// same attempt, so with max_attempts 1 every event succeeds. Each hot
// connection in turn is the only one the Processor can take (the test holds
// the others), before the change, where the handler is prepared on it, and
// after it, where it meets the stale statement and prepares the handler
// again: both read from the connection's own pg_prepared_statements. In a
// direct batch, a lane batch and on the classic path (SQLBatch 1, a
// transaction per event).
func TestActorBatchHandlerResultTypeChanges(t *testing.T) {
	t.Parallel()
	const handler = `SELECT * FROM public.t WHERE k <> $1`
	for _, tc := range []struct {
		name, mode string
		sqlBatch   int
		prepared   int // the handler's statements on a connection after its first event
	}{
		{"direct batch", "none", 10, 1},
		{"lane batch", "payload", 10, 1},
		{"classic", "none", 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.Exec(`CREATE TABLE t (k text)`)
			e.Exec(`INSERT INTO t VALUES ('x')`)
			e.Exec(`SELECT pgrelay.register('r', $1, p_concurrency_mode := $2, p_max_attempts := 1)`, handler, tc.mode)
			p := e.startProcessor(func(c *actors.Config) { c.Concurrency, c.SQLBatchConcurrency, c.SQLBatch = 4, 4, tc.sqlBatch })
			sent := 0
			// run runs n events (in one batch, or several) on the
			// connection the Processor has.
			run := func(n int) func() {
				return func() {
					var ps []string
					for range n {
						ps = append(ps, fmt.Sprint(sent))
						sent++
					}
					e.Exec(`SELECT pgrelay.notify_many('r', $1)`, ps)
					testenv.Eventually(e.T, 30*time.Second, "the events' ends", func() bool {
						return e.Count(`SELECT count(*) FROM pgrelay.log WHERE event IN ('succeeded', 'failed', 'gave_up')`) == sent
					})
				}
			}
			conns := int(actors.HotPool(p).Config().MaxConns)
			before, after := onEachHotConn(t, p, handler, run(1))
			require.Equal(t, slices.Repeat([]int{0}, conns), before)
			require.Equal(t, slices.Repeat([]int{tc.prepared}, conns), after, "each connection ran the handler")

			e.Exec(`ALTER TABLE t ADD COLUMN extra int`)
			// Three events a connection: the first meets the stale
			// statement, the others come after it in the batch.
			before, after = onEachHotConn(t, p, handler, run(3))
			require.Equal(t, slices.Repeat([]int{tc.prepared}, conns), before, "each connection had the handler prepared before the change")
			require.Equal(t, slices.Repeat([]int{2 * tc.prepared}, conns), after, "each connection met its stale statement and prepared the handler again")

			require.Equal(t, sent, e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'succeeded' AND attempt = 1`))
			require.Zero(t, e.Count(`SELECT count(*) FROM pgrelay.log WHERE event <> 'succeeded'`), "no attempt failed")
			require.Zero(t, e.Count(`SELECT count(*) FROM pgrelay.queue`))
		})
	}
}

// onEachHotConn calls run once per connection of p's hot pool, while the
// test holds all the others: what the Processor does in run, it does on that
// connection. before and after are, per connection, how many of its prepared
// statements are sql, before and after run.
func onEachHotConn(t *testing.T, p *actors.Processor, sql string, run func()) (before, after []int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool := actors.HotPool(p)
	held := make([]*pgxpool.Conn, pool.Config().MaxConns)
	defer func() {
		for _, c := range held {
			if c != nil {
				c.Release()
			}
		}
	}()
	for i := range held {
		c, err := pool.Acquire(ctx)
		require.NoError(t, err)
		held[i] = c
	}
	prepared := func(c *pgxpool.Conn) int {
		var n int
		require.NoError(t, c.QueryRow(ctx, `SELECT count(*) FROM pg_prepared_statements WHERE statement = $1`,
			pgx.QueryExecModeSimpleProtocol, sql).Scan(&n))
		return n
	}
	for i, c := range held {
		pid := c.Conn().PgConn().PID()
		before = append(before, prepared(c))
		held[i] = nil
		c.Release()
		run()
		c, err := pool.Acquire(ctx)
		require.NoError(t, err)
		held[i] = c
		require.Equal(t, pid, c.Conn().PgConn().PID(), "the connection the Processor had alone")
		after = append(after, prepared(c))
	}
	return before, after
}

// Batchers that run out of batch slots are started again when they free up,
// without waiting for the poll: a 'none' channel's batches and the lanes of
// a serialised channel share four batch slots, and the poll never comes.
func TestActorBatchersShareFewSlots(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Exec(`CREATE TABLE ran (channel text, payload text)`)
	e.Exec(`SELECT pgrelay.register('many', 'INSERT INTO public.ran VALUES (''many'', $1)')`)
	e.Exec(`SELECT pgrelay.register('lane', 'INSERT INTO public.ran VALUES (''lane'', $1)', p_concurrency_mode := 'channel')`)
	e.Exec(`SELECT pgrelay.notify_many('many', ARRAY(SELECT g::text FROM generate_series(1, 400) g))`)
	e.Exec(`SELECT pgrelay.notify_many('lane', ARRAY(SELECT g::text FROM generate_series(1, 40) g))`)
	e.startProcessor(func(c *actors.Config) { c.SQLBatchConcurrency, c.SQLBatch, c.PollInterval = 4, 4, time.Hour })
	testenv.Eventually(e.T, 60*time.Second, "440 successes", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'succeeded'`) == 440
	})
	require.Equal(t, 40, e.Count(`SELECT count(*) FROM ran WHERE channel = 'lane'`))
}

// A notification names its channel, and the channel's running batcher hears
// of it straight from the listener, besides the claim: the batcher gets more
// batchReady messages than the dispatcher got from the claims.
func TestActorNotificationHintsBatcher(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Exec(`SELECT pgrelay.register('h', 'SELECT $1')`)
	var mu sync.Mutex
	fromClaims, atBatcher := 0, 0
	e.startProcessor(func(c *actors.Config) {
		// The batcher must outlive the gaps between the events, however
		// slowly the machine runs them.
		c.IdleTimeout = time.Minute
		actors.SetTestHook(c, func(actor string, msg any) {
			if fmt.Sprintf("%T", msg) != "*actors.batchReady" {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			switch actor {
			case "dispatcher":
				fromClaims++
			case "batcher":
				atBatcher++
			}
		})
	})
	// Notifications sent before the listener's LISTEN are not heard.
	testenv.Eventually(e.T, 30*time.Second, "the listener to listen", func() bool {
		return e.Count(`SELECT count(*) FROM pg_stat_activity
		  WHERE datname = current_database() AND query = 'LISTEN pgrelay'`) > 0
	})
	for i := range 3 {
		e.Exec(`SELECT pgrelay.notify('h', $1)`, fmt.Sprint(i))
		testenv.Eventually(e.T, 30*time.Second, "the event's success", func() bool {
			return e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'succeeded'`) == i+1
		})
	}
	mu.Lock()
	defer mu.Unlock()
	require.GreaterOrEqual(t, atBatcher-fromClaims, 2, "the notifications after the batcher started reached it")
}

// A new hot connection is warmed before its first batch: the batches' own
// statements are prepared on it, and the completion function has run once.
func TestStatementsWarmNewConnections(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg, err := pgxpool.ParseConfig(e.URL)
	require.NoError(t, err)
	cfg.AfterConnect = (&store.Statements{}).Warm
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	defer pool.Close()
	var prepared int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_prepared_statements
	  WHERE name LIKE 'pgrelay_batch_%' AND statement IN ('COMMIT', 'SAVEPOINT pgrelay_event',
	    'SELECT gave_up FROM pgrelay._complete_outcomes(NULL, $1, NULL, $2, $3)')`).Scan(&prepared))
	require.Equal(t, 3, prepared)
	require.Zero(t, e.Count(`SELECT count(*) FROM pgrelay.log`), "warming records nothing")
}

// A batch's events are timed by their handlers' time on the server, not by
// the batch's: a commit that takes half a second (a deferred trigger) is not
// the handler's.
func TestActorBatchHandlerDurationIsTheHandlers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Exec(`CREATE TABLE t (payload text)`)
	e.Exec(`CREATE FUNCTION public.slow_commit() RETURNS trigger LANGUAGE plpgsql AS $$
	BEGIN PERFORM pg_sleep(0.5); RETURN NULL; END $$`)
	e.Exec(`CREATE CONSTRAINT TRIGGER slow AFTER INSERT ON t DEFERRABLE INITIALLY DEFERRED
	  FOR EACH ROW EXECUTE FUNCTION public.slow_commit()`)
	e.Exec(`SELECT pgrelay.register('d', 'INSERT INTO public.t VALUES ($1)')`)
	p := e.startProcessor(nil)
	e.Exec(`SELECT pgrelay.notify('d', 'x')`)
	// The batch's metrics are recorded once its commit has returned, after
	// the log row became visible: wait for the sample, not the row.
	var m dto.Metric
	testenv.Eventually(e.T, 30*time.Second, "the success and its handler's time", func() bool {
		require.NoError(t, p.Metrics().HandlerDuration.WithLabelValues("d").(prometheus.Histogram).Write(&m))
		return e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'succeeded'`) == 1 &&
			m.GetHistogram().GetSampleCount() > 0
	})
	require.Equal(t, uint64(1), m.GetHistogram().GetSampleCount())
	require.Less(t, m.GetHistogram().GetSampleSum(), 0.25, "the commit's half second is not the handler's")
}

// A handler that ends its own database session (pg_terminate_backend) costs
// its event one failed attempt per run, never the others' events: they
// succeed once each, the killer gives up after max_attempts, each attempt
// logged as a lost connection, and nothing stays queued. In a direct batch (an event before the killer in the batch
// too), in lane batches (one lane per payload, and one lane for a whole
// 'channel' channel, which the killer holds up until it gives up) and on the
// classic path (SQLBatch 1).
func TestActorHandlerKillsItsConnection(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, mode string
		sqlBatch   int
	}{
		{"direct batch", "none", 0},
		{"lane batch payload", "payload", 0},
		{"lane batch channel", "channel", 0},
		{"classic", "none", 1},
		{"classic channel", "channel", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.Exec(`CREATE TABLE ran (payload text)`)
			e.Exec(`CREATE FUNCTION public.work(p text) RETURNS void LANGUAGE plpgsql AS $$
			BEGIN
			  INSERT INTO public.ran VALUES (p);
			  IF p = 'poison' THEN PERFORM pg_terminate_backend(pg_backend_pid()); END IF;
			END $$`)
			e.Exec(`SELECT pgrelay.register('k', 'SELECT public.work($1)', p_max_attempts := 2,
			  p_retry_delay := '10 milliseconds', p_concurrency_mode := $1)`, tc.mode)
			var poison int64
			e.Exec(`SELECT pgrelay.notify('k', 'ok0')`)
			require.NoError(t, e.Pool.QueryRow(context.Background(), `SELECT pgrelay.notify('k', 'poison')`).Scan(&poison))
			e.Exec(`SELECT pgrelay.notify_many('k', ARRAY['ok1', 'ok2', 'ok3'])`)
			e.startProcessor(func(c *actors.Config) {
				if tc.sqlBatch > 0 {
					c.SQLBatch = tc.sqlBatch
				}
			})
			testenv.Eventually(e.T, 60*time.Second, "the ok events to succeed and the killer to give up", func() bool {
				return e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'succeeded'`) == 4 &&
					e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'gave_up'`) == 1
			})
			require.Equal(t, 4, e.Count(`SELECT count(*) FROM ran WHERE payload <> 'poison'`), "each ok event's effects once")
			require.Equal(t, 4, e.Count(`SELECT count(DISTINCT payload) FROM ran`))
			require.Zero(t, e.Count(`SELECT count(*) FROM ran WHERE payload = 'poison'`), "the killer's effects rolled back")
			require.Zero(t, e.Count(`SELECT count(*) FROM pgrelay.log WHERE origin_id <> $1 AND event <> 'succeeded'`, poison),
				"no attempt of another event was counted")
			require.Equal(t, 1, e.Count(`SELECT count(*) FROM pgrelay.log WHERE origin_id = $1 AND attempt = 1 AND event = 'failed'
			  AND error LIKE '%connection lost%'`, poison))
			require.Equal(t, 1, e.Count(`SELECT count(*) FROM pgrelay.log WHERE origin_id = $1 AND attempt = 2 AND event = 'gave_up'
			  AND error LIKE '%connection lost%'`, poison))
			require.Zero(t, e.Count(`SELECT count(*) FROM pgrelay.queue`))
		})
	}
}

// An event whose failure shows only at COMMIT (a deferred constraint trigger
// that rejects its payload) is charged its attempts, alone, until it gives
// up: the batch it was in is run again one event per transaction, so the
// other events of its channel, and those of a healthy channel batched
// alongside (in lane batches), succeed once each — in direct batches, lane
// batches ('payload' and 'channel' mode) and on the classic path.
func TestActorPoisonAtCommit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, mode string
		sqlBatch   int
	}{
		{"direct batch", "none", 0},
		{"lane batch payload", "payload", 0},
		{"lane batch channel", "channel", 0},
		{"classic", "none", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.Exec(`CREATE TABLE ran (channel text, payload text)`)
			e.Exec(`CREATE FUNCTION public.check_ran() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN
			  IF NEW.payload = 'poison' THEN RAISE EXCEPTION 'rejected at commit: <%>', NEW.payload; END IF;
			  RETURN NULL;
			END $$`)
			e.Exec(`CREATE CONSTRAINT TRIGGER check_ran AFTER INSERT ON ran DEFERRABLE INITIALLY DEFERRED
			  FOR EACH ROW EXECUTE FUNCTION public.check_ran()`)
			e.Exec(`SELECT pgrelay.register('p', 'INSERT INTO public.ran VALUES (''p'', $1)', p_max_attempts := 2,
			  p_retry_delay := '10 milliseconds', p_concurrency_mode := $1)`, tc.mode)
			e.Exec(`SELECT pgrelay.register('h', 'INSERT INTO public.ran VALUES (''h'', $1)', p_concurrency_mode := $1)`, tc.mode)
			var poison int64
			e.Exec(`SELECT pgrelay.notify('p', 'ok0')`)
			require.NoError(t, e.Pool.QueryRow(context.Background(), `SELECT pgrelay.notify('p', 'poison')`).Scan(&poison))
			e.Exec(`SELECT pgrelay.notify_many('p', ARRAY['ok1', 'ok2', 'ok3'])`)
			e.Exec(`SELECT pgrelay.notify_many('h', ARRAY(SELECT 'h' || g FROM generate_series(1, 20) g))`)
			e.startProcessor(func(c *actors.Config) {
				if tc.sqlBatch > 0 {
					c.SQLBatch = tc.sqlBatch
				}
			})
			testenv.Eventually(e.T, 60*time.Second, "the other events to succeed and the poison to give up", func() bool {
				return e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'succeeded'`) == 24 &&
					e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'gave_up'`) == 1
			})
			require.Equal(t, 24, e.Count(`SELECT count(*) FROM ran`), "each other event's effects once")
			require.Equal(t, 20, e.Count(`SELECT count(DISTINCT payload) FROM ran WHERE channel = 'h'`))
			require.Zero(t, e.Count(`SELECT count(*) FROM ran WHERE payload = 'poison'`))
			require.Zero(t, e.Count(`SELECT count(*) FROM pgrelay.log WHERE origin_id <> $1 AND event <> 'succeeded'`, poison),
				"no attempt of another event was counted")
			require.Equal(t, 1, e.Count(`SELECT count(*) FROM pgrelay.log WHERE origin_id = $1 AND attempt = 1 AND event = 'failed'
			  AND error LIKE '%rejected at commit: <poison>%'`, poison))
			require.Equal(t, 1, e.Count(`SELECT count(*) FROM pgrelay.log WHERE origin_id = $1 AND attempt = 2 AND event = 'gave_up'
			  AND error LIKE '%rejected at commit: <poison>%'`, poison))
			require.Zero(t, e.Count(`SELECT count(*) FROM pgrelay.queue`))
		})
	}
}

// No handler's settings or role reach another channel's handler or
// pgrelay's own statements: what a handler of channel a sets — a session
// setting (set_config(…, false)), a transaction-local one (set_config(…,
// true)), its search_path, its role and session authorization — is never seen
// by a handler of channel b, run in the same lane batch, the next batch on
// the same pooled connection or the classic path; and a role without any
// right on pgrelay's schema, which a's handlers leave set, never reaches the
// claim or the completion (every event succeeds, each recorded once).
func TestActorHandlerSessionIsClean(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, mode string
		sqlBatch   int
	}{
		{"direct batch", "none", 0},
		{"lane batch", "payload", 0},
		// One lane a channel: a lane batch holds the heads of both.
		{"lane batch across channels", "channel", 0},
		{"classic", "none", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.Exec(`CREATE TABLE seen (channel text, payload text, app text, app_local text, search_path text, usr text,
			  timeout text, work_mem text)`)
			// A role of this test's own (roles are the cluster's), with no
			// right on pgrelay's schema or functions.
			var role string
			require.NoError(t, e.Pool.QueryRow(context.Background(), `SELECT current_database() || '_handler'`).Scan(&role))
			e.Exec(`CREATE ROLE ` + role)
			e.Exec(`GRANT INSERT ON public.seen TO ` + role)
			e.Exec(`CREATE FUNCTION public.look(c text, p text) RETURNS void LANGUAGE sql AS $$
			  INSERT INTO public.seen VALUES (c, p, current_setting('app.leak', true), current_setting('app.local', true),
			    current_setting('search_path'), current_user::text, current_setting('statement_timeout'),
			    current_setting('work_mem'))
			$$`)
			e.Exec(`CREATE FUNCTION public.work(p text, r text) RETURNS void LANGUAGE plpgsql AS $$
			BEGIN
			  PERFORM public.look('a', p);
			  PERFORM set_config('app.leak', p, false);
			  PERFORM set_config('app.local', p, true);
			  PERFORM set_config('search_path', 'pg_temp, public', false);
			  PERFORM set_config('work_mem', '77MB', true);
			  PERFORM set_config('statement_timeout', '0', false);
			  -- (The tests log in as a superuser, who may change this too.)
			  PERFORM set_config('session_authorization', r, false);
			  PERFORM set_config('role', r, false);
			END $$`)
			e.Exec(`SELECT pgrelay.register('a', 'SELECT public.work($1, ''`+role+`'')', p_timeout := '7 seconds',
			  p_concurrency_mode := $1)`, tc.mode)
			e.Exec(`SELECT pgrelay.register('b', 'SELECT public.look(''b'', $1)', p_timeout := '9 seconds',
			  p_concurrency_mode := $1)`, tc.mode)
			// The two channels' events interleaved, so that lane batches mix them.
			e.Exec(`SELECT pgrelay.notify(CASE WHEN g % 2 = 0 THEN 'a' ELSE 'b' END, g::text) FROM generate_series(1, 400) g`)
			e.startProcessor(func(c *actors.Config) {
				c.Concurrency, c.SQLBatchConcurrency, c.SQLBatch = 4, 4, 50
				if tc.sqlBatch > 0 {
					c.SQLBatch = tc.sqlBatch
				}
			})
			testenv.Eventually(e.T, 60*time.Second, "400 successes", func() bool {
				return e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'succeeded'`) == 400
			})
			require.Equal(t, 400, e.Count(`SELECT count(DISTINCT payload) FROM seen`))
			require.Zero(t, e.Count(`SELECT count(*) FROM pgrelay.log WHERE event <> 'succeeded'`))
			b := `SELECT count(*) FROM seen WHERE channel = 'b' AND `
			require.Equal(t, 200, e.Count(`SELECT count(*) FROM seen WHERE channel = 'b'`))
			require.Zero(t, e.Count(b+`COALESCE(app, '') <> ''`), "a session setting reached another channel's handler")
			require.Zero(t, e.Count(b+`COALESCE(app_local, '') <> ''`), "a local setting reached another channel's handler")
			require.Zero(t, e.Count(b+`search_path <> '"$user", public'`), "search_path reached another channel's handler")
			require.Zero(t, e.Count(b+`work_mem <> '4MB'`), "work_mem reached another channel's handler")
			require.Zero(t, e.Count(b+`usr <> session_user`), "the role or the session authorization reached another channel's handler")
			require.Zero(t, e.Count(b+`timeout <> '9s'`), "every handler of b ran under b's timeout")
		})
	}
}

// A handler that turns statement_timeout off (its own setting, which the
// next handler of its channel's batch inherits) does not let that handler
// run past the channel's timeout: the Processor cancels a statement past it
// itself, and the attempt fails as a timed out handler's does.
func TestActorHandlerTimeoutBackstop(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Exec(`CREATE FUNCTION public.tt(p text) RETURNS void LANGUAGE plpgsql AS $$
	BEGIN
	  IF p = 'off' THEN
	    PERFORM set_config('statement_timeout', '0', false);
	  ELSIF p = 'slow' THEN
	    PERFORM pg_sleep(3600);
	  END IF;
	END $$`)
	e.Exec(`SELECT pgrelay.register('t', 'SELECT public.tt($1)', p_timeout := '1 second', p_max_attempts := 1)`)
	// One batch, in this order: the timeout is off when 'slow' starts.
	ids := e.IDs(`SELECT pgrelay.notify_many('t', ARRAY['off', 'slow', 'after'])`)
	require.Len(t, ids, 3)
	e.startProcessor(func(c *actors.Config) { c.Concurrency, c.SQLBatchConcurrency, c.SQLBatch = 8, 8, 50 })
	testenv.Eventually(e.T, 60*time.Second, "the slow handler cut and the others run", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.log WHERE event IN ('succeeded', 'gave_up')`) == 3
	})
	event := func(id int64) string {
		return e.Text(`SELECT string_agg(event, ',' ORDER BY id) FROM pgrelay.log WHERE origin_id = $1`, id)
	}
	require.Equal(t, "succeeded", event(ids[0]))
	require.Equal(t, "gave_up", event(ids[1]))
	require.Equal(t, "succeeded", event(ids[2]))
	require.Equal(t, 1, e.Count(`SELECT count(*) FROM pgrelay.log WHERE origin_id = $1
	  AND error LIKE '%past its channel''s timeout%'`, ids[1]), "the Processor cancelled the handler past its timeout")
}

// An event whose success cannot be recorded (the completion fails for it: a
// trigger on the log rejects its row) is charged like one that fails at
// COMMIT: the others of its batch, and a channel batched alongside, go on.
func TestActorPoisonInCompletion(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, mode string
		sqlBatch   int
	}{
		{"direct batch", "none", 0},
		{"lane batch", "channel", 0},
		{"classic", "none", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.Exec(`CREATE TABLE ran (channel text, payload text)`)
			e.Exec(`CREATE TABLE poison (id bigint)`)
			e.Exec(`CREATE FUNCTION public.reject_success() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN
			  IF NEW.event = 'succeeded' AND NEW.origin_id IN (SELECT id FROM public.poison) THEN
			    RAISE EXCEPTION 'no success for <%>', NEW.origin_id;
			  END IF;
			  RETURN NEW;
			END $$`)
			e.Exec(`CREATE TRIGGER reject_success BEFORE INSERT ON pgrelay.log FOR EACH ROW EXECUTE FUNCTION public.reject_success()`)
			e.Exec(`SELECT pgrelay.register('p', 'INSERT INTO public.ran VALUES (''p'', $1)', p_max_attempts := 2,
			  p_retry_delay := '10 milliseconds', p_concurrency_mode := $1)`, tc.mode)
			e.Exec(`SELECT pgrelay.register('h', 'INSERT INTO public.ran VALUES (''h'', $1)', p_concurrency_mode := $1)`, tc.mode)
			var poison int64
			e.Exec(`SELECT pgrelay.notify('p', 'ok0')`)
			require.NoError(t, e.Pool.QueryRow(context.Background(), `SELECT pgrelay.notify('p', 'poison')`).Scan(&poison))
			e.Exec(`INSERT INTO poison VALUES ($1)`, poison)
			e.Exec(`SELECT pgrelay.notify_many('p', ARRAY['ok1', 'ok2', 'ok3'])`)
			e.Exec(`SELECT pgrelay.notify_many('h', ARRAY(SELECT 'h' || g FROM generate_series(1, 20) g))`)
			e.startProcessor(func(c *actors.Config) {
				if tc.sqlBatch > 0 {
					c.SQLBatch = tc.sqlBatch
				}
			})
			testenv.Eventually(e.T, 60*time.Second, "the other events to succeed and the poison to give up", func() bool {
				return e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'succeeded'`) == 24 &&
					e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'gave_up'`) == 1
			})
			require.Equal(t, 24, e.Count(`SELECT count(*) FROM ran`), "each other event's effects once")
			require.Zero(t, e.Count(`SELECT count(*) FROM ran WHERE payload = 'poison'`))
			require.Zero(t, e.Count(`SELECT count(*) FROM pgrelay.log WHERE origin_id <> $1 AND event <> 'succeeded'`, poison),
				"no attempt of another event was counted")
			require.Equal(t, 2, e.Count(`SELECT count(*) FROM pgrelay.log WHERE origin_id = $1 AND error LIKE '%no success for%'`, poison))
			require.Zero(t, e.Count(`SELECT count(*) FROM pgrelay.queue`))
		})
	}
}

// Claimed events and sql batches have slots of their own: claimed events
// that fill --concurrency (a NATS relay that does not answer) leave the sql
// batches running, and batches that fill --sql-batch-concurrency (handlers
// that wait) leave claims running.
func TestActorClaimedEventsAndBatchesHaveSlotsOfTheirOwn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	e.Exec(`CREATE TABLE public.ran (payload text)`)
	e.Exec(`CREATE FUNCTION public.wait(p text) RETURNS void LANGUAGE plpgsql AS $$
	BEGIN
	  IF p LIKE 'wait%' THEN PERFORM pg_catalog.pg_advisory_xact_lock_shared(5151); END IF;
	  INSERT INTO public.ran VALUES (p);
	END $$`)
	e.Exec(`SELECT pgrelay.register('sql', 'SELECT public.wait($1)')`)
	e.Exec(`SELECT pgrelay.register('out', 'out.subject', p_kind := 'nats')`)
	lock, err := e.Pool.Acquire(ctx)
	require.NoError(t, err)
	defer lock.Release()
	_, err = lock.Exec(ctx, `SELECT pg_catalog.pg_advisory_lock(5151)`)
	require.NoError(t, err)
	unlock := sync.OnceFunc(func() {
		_, err := lock.Exec(ctx, `SELECT pg_catalog.pg_advisory_unlock(5151)`)
		require.NoError(t, err)
	})
	defer unlock()

	gate := make(chan struct{})
	closeGate := sync.OnceFunc(func() { close(gate) })
	defer closeGate()
	var sent atomic.Int32
	p := e.startProcessor(func(c *actors.Config) {
		c.Concurrency, c.SQLBatchConcurrency, c.SQLBatch = 4, 4, 4
		c.Handlers = handlers.Registry{"nats": handlers.HandlerFunc(func(ctx context.Context, ev handlers.Event) (bool, error) {
			if ev.Payload == "hold" {
				select {
				case <-gate:
				case <-ctx.Done():
					return false, ctx.Err()
				}
			}
			sent.Add(1)
			return false, nil
		})}
	})

	// Four held NATS events fill --concurrency; sql events run all the same.
	e.Exec(`SELECT pgrelay.notify_many('out', ARRAY['hold', 'hold', 'hold', 'hold'])`)
	testenv.Eventually(e.T, time.Minute, "the held events to fill the slots", func() bool {
		return testutil.ToFloat64(p.Metrics().InFlight) == 4
	})
	e.Exec(`SELECT pgrelay.notify_many('sql', ARRAY['a', 'b', 'c'])`)
	testenv.Eventually(e.T, time.Minute, "the sql events to run beside the held claims", func() bool {
		return e.Count(`SELECT count(*) FROM public.ran`) == 3
	})
	require.Zero(t, e.Count(`SELECT count(*) FROM pgrelay.log WHERE channel = 'out'`), "the held events still held")
	closeGate()
	testenv.Eventually(e.T, time.Minute, "the held events to end", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.log WHERE channel = 'out' AND event = 'succeeded'`) == 4
	})

	// A batch of four waiting handlers fills --sql-batch-concurrency; a NATS
	// event is claimed and sent all the same.
	e.Exec(`SELECT pgrelay.notify_many('sql', ARRAY['wait1', 'wait2', 'wait3', 'wait4'])`)
	testenv.Eventually(e.T, time.Minute, "a batch to wait with every batch slot", func() bool {
		return testutil.ToFloat64(p.Metrics().BatchSlotsInUse) == 4 && e.Count(`SELECT count(*) FROM pg_catalog.pg_locks
		  WHERE locktype = 'advisory' AND objid = 5151 AND NOT granted`) == 1
	})
	e.Exec(`SELECT pgrelay.notify('out', 'go')`)
	testenv.Eventually(e.T, time.Minute, "the NATS event to be sent beside the waiting batch", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.log WHERE channel = 'out' AND event = 'succeeded'`) == 5
	})
	unlock()
	testenv.Eventually(e.T, time.Minute, "the waiting batch to end", func() bool {
		return e.Count(`SELECT count(*) FROM public.ran`) == 7
	})
	require.Equal(t, int32(5), sent.Load())
}
