package actors_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/actors"
	"github.com/pgrelay/pgrelay/internal/devenv"
	"github.com/pgrelay/pgrelay/internal/testenv"
)

// PostgreSQL restarting under a running Processor: it reconnects and goes on;
// every committed event runs, none is lost or stuck, and no attempt is
// counted for the sessions the restart ended — with batches, and on the
// classic path (SQLBatch 1).
func TestActorSurvivesPostgresRestart(t *testing.T) {
	t.Parallel()
	t.Run("batches", func(t *testing.T) { t.Parallel(); survivesRestart(t, 0) })
	t.Run("classic", func(t *testing.T) { t.Parallel(); survivesRestart(t, 1) })
}

func survivesRestart(t *testing.T, sqlBatch int) {
	ctx := context.Background()
	own, err := devenv.StartPostgres(ctx, devenv.PostgresConfig{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = own.Stop() })
	url, err := own.NewDatabase(ctx, "restart")
	require.NoError(t, err)
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	e := envOn(t, url, pool)
	e.Exec(`CREATE TABLE ran (payload text)`)
	e.Exec(`CREATE FUNCTION public.work(p text) RETURNS void LANGUAGE sql AS
	$$ SELECT pg_sleep(0.005); INSERT INTO public.ran VALUES (p) $$`)
	e.Exec(`SELECT pgrelay.register('r', 'SELECT public.work($1)', p_max_attempts := 50, p_retry_delay := '50 milliseconds')`)
	e.startProcessor(func(c *actors.Config) {
		c.LeaseGrace = 5 * time.Second
		if sqlBatch > 0 {
			c.SQLBatch = sqlBatch
		}
	})

	// Enqueue in rounds; a round that fails (the server is down) is retried,
	// so every payload is committed exactly once.
	enqueue := func(round int) {
		batch := payloads(fmt.Sprintf("r%d", round), 100)
		deadline := time.Now().Add(60 * time.Second)
		for {
			_, err := pool.Exec(ctx, `SELECT pgrelay.notify_many('r', $1)`, batch)
			if err == nil {
				return
			}
			require.True(t, time.Now().Before(deadline), "could not enqueue round %d: %v", round, err)
			time.Sleep(100 * time.Millisecond)
		}
	}
	enqueue(0)
	enqueue(1)
	testenv.Eventually(e.T, 30*time.Second, "some events to run", func() bool {
		return e.Count(`SELECT count(*) FROM ran`) > 20
	})
	require.NoError(t, own.Restart(ctx))
	enqueue(2)
	enqueue(3)
	testenv.Eventually(e.T, 2*time.Minute, "all 400 events to succeed", func() bool {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(DISTINCT origin_id) FROM pgrelay.log WHERE event = 'succeeded'`).Scan(&n); err != nil {
			return false
		}
		return n == 400
	})
	require.Equal(t, 400, e.Count(`SELECT count(DISTINCT payload) FROM ran`))
	// A sql handler's effects commit with its completion: none ran twice.
	require.Equal(t, 400, e.Count(`SELECT count(*) FROM ran`))
	require.Equal(t, 400, e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'succeeded'`))
	var failures []string
	rows, err := pool.Query(ctx, `SELECT format('%s attempt %s: %s', event, attempt, error) FROM pgrelay.log
	  WHERE event IN ('failed', 'gave_up') ORDER BY id`)
	require.NoError(t, err)
	for rows.Next() {
		var f string
		require.NoError(t, rows.Scan(&f))
		failures = append(failures, f)
	}
	require.NoError(t, rows.Err())
	require.Empty(t, failures, "the restart cost no attempt")
	testenv.Eventually(e.T, 10*time.Second, "the queue to empty", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.queue`) == 0
	})
}

// The claimer, the completer, the heartbeat and the rescuer are restarted after they
// fail, each time after a longer backoff (failures × 100 ms within the
// supervisor's window), and go on working: events are claimed, outcomes
// written (an outcome lost with a crashed completer is rescued once its claim
// passes its lease; a completer that fails on a write's result goes on with
// it, and nothing waits for a rescue), the instance keeps beating.
func TestActorSupervisorRestartsCoreActors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		actor, msg string
		rescues    bool // the crashes lose outcomes
	}{
		{"claimer", "*actors.wake", false},
		{"completer", "*actors.outcome", true},
		{"completer", "*actors.flushDone", false},
		{"heartbeat", "*actors.beat", false},
		{"rescuer", "*actors.rescueTick", false},
	} {
		t.Run(tc.actor+" "+tc.msg, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.Exec(`CREATE TABLE ran (payload text)`)
			e.Exec(`SELECT pgrelay.register('ok', 'INSERT INTO public.ran VALUES ($1)')`)
			e.Exec(`SELECT pgrelay.register('bad', 'SELECT 1/0 WHERE $1 IS NOT NULL', p_max_attempts := 2,
			  p_retry_delay := '10 milliseconds', p_timeout := '1 second')`)
			e.Exec(`SELECT pgrelay.notify_many('ok', ARRAY['1', '2', '3'])`)
			e.Exec(`SELECT pgrelay.notify_many('bad', ARRAY['1', '2', '3', '4'])`)
			const crashes = 4
			var mu sync.Mutex
			var crashedAt, startedAt []time.Time
			e.startProcessor(func(c *actors.Config) {
				c.SQLBatch = 1 // outcomes of failures go through the completer
				c.LeaseGrace = time.Second
				actors.SetTestHook(c, func(name string, msg any) {
					if name != tc.actor {
						return
					}
					mu.Lock()
					defer mu.Unlock()
					switch fmt.Sprintf("%T", msg) {
					case "*actor.Started":
						startedAt = append(startedAt, time.Now())
					case tc.msg:
						// Once per incarnation, crashes times in a row.
						if len(crashedAt) < crashes && len(startedAt) == len(crashedAt)+1 {
							crashedAt = append(crashedAt, time.Now())
							panic(tc.actor + " bug")
						}
					}
				})
			})
			restarts := func() int {
				mu.Lock()
				defer mu.Unlock()
				return len(startedAt) - 1
			}
			testenv.Eventually(e.T, 60*time.Second, "the restarts", func() bool { return restarts() == crashes })
			testenv.Eventually(e.T, 60*time.Second, "every event to end", func() bool {
				return e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'succeeded'`) == 3 &&
					e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'gave_up'`) == 4
			})
			require.Equal(t, 3, e.Count(`SELECT count(*) FROM ran`))
			if !tc.rescues {
				require.Zero(t, e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'rescued'`), "no outcome was lost")
			}
			// Still working after the crashes.
			e.Exec(`SELECT pgrelay.notify_many('ok', ARRAY['4', '5'])`)
			e.Exec(`SELECT pgrelay.notify('bad', '5')`)
			testenv.Eventually(e.T, 30*time.Second, "later events to end", func() bool {
				return e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'succeeded'`) == 5 &&
					e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'gave_up'`) == 5
			})
			var seen time.Time
			require.NoError(t, e.Pool.QueryRow(context.Background(), `SELECT last_seen FROM pgrelay.processors`).Scan(&seen))
			testenv.Eventually(e.T, 30*time.Second, "a later heartbeat", func() bool {
				return e.Count(`SELECT count(*) FROM pgrelay.processors WHERE last_seen > $1`, seen) == 1
			})

			mu.Lock()
			defer mu.Unlock()
			require.Len(t, startedAt, crashes+1, "no more restarts than crashes")
			delays := make([]time.Duration, crashes)
			for i := range crashes {
				delays[i] = startedAt[i+1].Sub(crashedAt[i])
				require.GreaterOrEqual(t, delays[i], time.Duration(i+1)*100*time.Millisecond,
					"restart %d waited its backoff", i+1)
			}
			t.Logf("restart delays: %v", delays)
			require.Greater(t, delays[crashes-1], delays[0], "the backoff grows: %v", delays)
		})
	}
}
