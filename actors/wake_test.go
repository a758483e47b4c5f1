package actors_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/actors"
	"github.com/pgrelay/pgrelay/internal/testenv"
)

// A producer that finds its wake-up slot being taken sends no notification;
// the Processor still runs its event at once: the first producer's
// notification has it arm the slot again and claim until every transaction
// in progress then has ended. The poll is an hour here: nothing else could
// find the second event.
func TestActorWakeUpNotLostWhenTheSlotIsTaken(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"none", "channel"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			ctx := context.Background()
			e.Exec(`CREATE TABLE public.ran (payload text)`)
			e.Exec(`SELECT pgrelay.register('c', 'INSERT INTO public.ran VALUES ($1)', p_concurrency_mode := $1)`, mode)
			ran := func(p string) func() bool {
				return func() bool { return e.Count(`SELECT count(*) FROM public.ran WHERE payload = $1`, p) == 1 }
			}
			armed := func() bool {
				return e.Count(`SELECT count(*) FROM pgrelay.wake_slots WHERE slot = pgrelay._wake_slot('c') AND armed`) == 1
			}
			e.startProcessor(func(c *actors.Config) { c.PollInterval = time.Hour })
			testenv.Eventually(t, 20*time.Second, "the Processor to listen", func() bool {
				return e.Count(`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query = 'LISTEN pgrelay'`) == 1
			})
			e.Exec(`SELECT pgrelay.notify('c', 'warm')`)
			testenv.Eventually(t, 20*time.Second, "the first event to run", ran("warm"))
			testenv.Eventually(t, 20*time.Second, "the slot armed again", armed)

			first, second := e.Conn(-1), e.Conn(-1)
			t1, err := first.Begin(ctx)
			require.NoError(t, err)
			_, err = t1.Exec(ctx, `SELECT pgrelay.notify('c', 'first')`)
			require.NoError(t, err)
			t2, err := second.Begin(ctx)
			require.NoError(t, err)
			_, err = t2.Exec(ctx, `SELECT pgrelay.notify('c', 'second')`)
			require.NoError(t, err)
			var taken bool
			require.NoError(t, t1.QueryRow(ctx, `SELECT NOT armed FROM pgrelay.wake_slots WHERE slot = pgrelay._wake_slot('c')`).Scan(&taken))
			require.True(t, taken, "the first producer took the slot")
			require.NoError(t, t1.Commit(ctx))
			testenv.Eventually(t, 20*time.Second, "the first producer's event to run", ran("first"))
			testenv.Eventually(t, 20*time.Second, "the slot armed again while the second producer is open", armed)
			require.NoError(t, t2.Commit(ctx))
			testenv.Eventually(t, 20*time.Second, "the second producer's event to run without a notification", ran("second"))
		})
	}
}
