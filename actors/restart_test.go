package actors_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/actors"
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
	own, err := testenv.StartPostgres(ctx, testenv.PostgresConfig{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = own.Stop() })
	url, err := own.NewDatabase(ctx, "restart")
	require.NoError(t, err)
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	e := &env{t: t, url: url, pool: pool}
	e.exec(`CREATE TABLE ran (payload text)`)
	e.exec(`CREATE FUNCTION public.work(p text) RETURNS void LANGUAGE sql AS
	$$ SELECT pg_sleep(0.005); INSERT INTO public.ran VALUES (p) $$`)
	e.exec(`SELECT pgrelay.register('r', 'SELECT public.work($1)', p_max_attempts := 50, p_retry_delay := '50 milliseconds')`)
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
	e.eventually(30*time.Second, "some events to run", func() bool {
		return e.count(`SELECT count(*) FROM ran`) > 20
	})
	require.NoError(t, own.Restart(ctx))
	enqueue(2)
	enqueue(3)
	e.eventually(2*time.Minute, "all 400 events to succeed", func() bool {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(DISTINCT origin_id) FROM pgrelay.log WHERE event = 'succeeded'`).Scan(&n); err != nil {
			return false
		}
		return n == 400
	})
	require.Equal(t, 400, e.count(`SELECT count(DISTINCT payload) FROM ran`))
	// A sql handler's effects commit with its completion: none ran twice.
	require.Equal(t, 400, e.count(`SELECT count(*) FROM ran`))
	require.Equal(t, 400, e.count(`SELECT count(*) FROM pgrelay.log WHERE event = 'succeeded'`))
	require.Zero(t, e.count(`SELECT count(*) FROM pgrelay.log WHERE event IN ('failed', 'gave_up')`),
		"the restart cost no attempt")
	e.eventually(10*time.Second, "the queue to empty", func() bool {
		return e.count(`SELECT count(*) FROM pgrelay.queue`) == 0
	})
}
