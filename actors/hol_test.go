package actors_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/actors"
	"github.com/pgrelay/pgrelay/internal/testenv"
)

// No head-of-line blocking across channels: while one channel drains a
// backlog with every batch it can start, an event of another channel runs
// at once, not after the backlog. (Its handler records how much of the
// backlog was still queued when it ran.)
func TestActorFreshChannelRunsBesideABacklog(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"none", "channel"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.Exec(`CREATE TABLE public.fresh (payload text, backlog_left bigint)`)
			e.Exec(`SELECT pgrelay.register('backlog', 'SELECT $1')`)
			e.Exec(`SELECT pgrelay.register('fresh', 'INSERT INTO public.fresh
			  SELECT $1, count(*) FROM pgrelay.queue WHERE channel = ''backlog''', p_concurrency_mode := $1)`, mode)
			e.Exec(`SELECT pgrelay.notify_many('backlog', ARRAY(SELECT g::text FROM generate_series(1, 60000) g))`)
			e.startProcessor(func(c *actors.Config) {
				d := actors.Defaults()
				c.Concurrency, c.SQLBatch, c.SQLBatchConcurrency = d.Concurrency, d.SQLBatch, d.SQLBatchConcurrency
			})
			testenv.Eventually(t, 30*time.Second, "the backlog to be draining", func() bool {
				return e.Count(`SELECT count(*) FROM pgrelay.log WHERE channel = 'backlog'`) >= 200
			})
			e.Exec(`SELECT pgrelay.notify('fresh', 'x')`)
			testenv.Eventually(t, 60*time.Second, "the fresh event to run", func() bool {
				return e.Count(`SELECT count(*) FROM public.fresh`) == 1
			})
			left := e.Count(`SELECT backlog_left FROM public.fresh`)
			require.Greater(t, left, 30000, "the fresh event ran with %d backlog events still queued", left)
		})
	}
}
