package actors_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/actors"
	"github.com/pgrelay/pgrelay/internal/testenv"
)

// A delayed event runs once it is due, never before: in batches (direct and
// lane batches) and on the classic path (SQLBatch 1), for a 'none' channel
// and a serialised one.
func TestActorRunsDelayedEventWhenDue(t *testing.T) {
	t.Parallel()
	t.Run("batches", func(t *testing.T) { t.Parallel(); delayedEvent(t, 0) })
	t.Run("classic", func(t *testing.T) { t.Parallel(); delayedEvent(t, 1) })
}

func delayedEvent(t *testing.T, sqlBatch int) {
	e := newEnv(t)
	e.Exec(`CREATE TABLE ran (channel text, payload text, at timestamptz DEFAULT clock_timestamp())`)
	e.Exec(`SELECT pgrelay.register('later', 'INSERT INTO public.ran (channel, payload) VALUES (''later'', $1)')`)
	e.Exec(`SELECT pgrelay.register('lane', 'INSERT INTO public.ran (channel, payload) VALUES (''lane'', $1)',
		p_concurrency_mode := 'channel')`)
	e.startProcessor(func(c *actors.Config) {
		if sqlBatch > 0 {
			c.SQLBatch = sqlBatch
		}
	})
	// The Processor is running and wakes on each notify; the delayed events
	// are not due yet. The lane's immediate event waits behind its delayed
	// head.
	e.Exec(`CREATE TABLE due (channel text, payload text, not_before timestamptz)`)
	for _, n := range []struct{ channel, payload, delay string }{
		{"later", "x", "1.5 seconds"}, {"lane", "head", "1.5 seconds"}, {"lane", "behind", ""}, {"later", "now", ""},
	} {
		var id int64
		require.NoError(t, e.Pool.QueryRow(context.Background(), `SELECT pgrelay.notify($1, $2, p_delay := NULLIF($3, '')::interval)`,
			n.channel, n.payload, n.delay).Scan(&id))
		e.Exec(`INSERT INTO due SELECT q.channel, q.payload, q.not_before FROM pgrelay.queue q WHERE q.id = $1`, id)
	}
	testenv.Eventually(e.T, 30*time.Second, "every event to run", func() bool {
		return e.Count(`SELECT count(*) FROM ran`) == 4
	})
	require.Equal(t, 0, e.Count(`SELECT count(*) FROM ran r JOIN due d USING (channel, payload) WHERE r.at < d.not_before`),
		"an event ran before its time")
	require.Equal(t, 1, e.Count(`SELECT count(*) FROM ran a JOIN ran b ON a.channel = 'lane' AND b.channel = 'lane'
		AND a.payload = 'head' AND b.payload = 'behind' AND a.at < b.at`), "the lane kept its order")
	require.Equal(t, 4, e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'succeeded'`))
}
