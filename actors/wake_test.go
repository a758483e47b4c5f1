package actors_test

import (
	"context"
	"sync/atomic"
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

// A notification that a running batcher takes does not wake the claimer
// itself; the arming it causes does. A producer on another channel whose
// wake-up slot is the same, which found it taken, has its event claimed
// without a notification of its own (the poll is an hour).
func TestActorWakeUpNotLostBehindABatchersNotification(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.Exec(`CREATE TABLE public.ran (payload text)`)
	e.Exec(`SELECT pgrelay.register('a', 'INSERT INTO public.ran VALUES ($1)')`)
	var b string
	require.NoError(t, e.Conn(-1).QueryRow(ctx, `SELECT 'b' || g FROM pg_catalog.generate_series(1, 100000) g
	  WHERE pgrelay._wake_slot('b' || g) = pgrelay._wake_slot('a') LIMIT 1`).Scan(&b))
	// A channel the claimer claims: serialised.
	e.Exec(`SELECT pgrelay.register($1, 'INSERT INTO public.ran VALUES ($1)', p_concurrency_mode := 'channel')`, b)
	ran := func(p string) func() bool {
		return func() bool { return e.Count(`SELECT count(*) FROM public.ran WHERE payload = $1`, p) == 1 }
	}
	armed := func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.wake_slots WHERE slot = pgrelay._wake_slot('a') AND armed`) == 1
	}
	e.startProcessor(func(c *actors.Config) { c.PollInterval, c.IdleTimeout = time.Hour, time.Hour })
	testenv.Eventually(t, 20*time.Second, "the Processor to listen", func() bool {
		return e.Count(`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query = 'LISTEN pgrelay'`) == 1
	})
	e.Exec(`SELECT pgrelay.notify('a', 'warm')`)
	testenv.Eventually(t, 20*time.Second, "the first event to run (a batcher for a)", ran("warm"))
	testenv.Eventually(t, 20*time.Second, "the slot armed again", armed)

	ta, err := e.Conn(-1).Begin(ctx)
	require.NoError(t, err)
	_, err = ta.Exec(ctx, `SELECT pgrelay.notify('a', 'a1')`)
	require.NoError(t, err)
	tb, err := e.Conn(-1).Begin(ctx)
	require.NoError(t, err)
	_, err = tb.Exec(ctx, `SELECT pgrelay.notify($1, 'b1')`, b)
	require.NoError(t, err)
	require.NoError(t, tb.Commit(ctx))
	require.NoError(t, ta.Commit(ctx))
	testenv.Eventually(t, 20*time.Second, "a's event to run", ran("a1"))
	testenv.Eventually(t, 20*time.Second, "the other channel's event to run without a notification", ran("b1"))
}

// A notification naming a 'none' channel whose events the Processor claims
// (here a sql channel with SQLBatch 1; a Go Handle handler's, an email or
// NATS channel's alike) has the claimer claim that channel alone at once;
// the full claim follows the arming.
func TestActorNotificationClaimsItsChannelAlone(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Exec(`CREATE TABLE public.ran (payload text)`)
	e.Exec(`SELECT pgrelay.register('c', 'INSERT INTO public.ran VALUES ($1)')`)
	alone := make(chan string, 100)
	e.startProcessor(func(c *actors.Config) {
		c.PollInterval, c.SQLBatch = time.Hour, 1
		actors.SetTestHook(c, func(name string, msg any) {
			if ch, ok := actors.WakeChannel(msg); ok && name == "claimer" {
				alone <- ch
			}
		})
	})
	testenv.Eventually(t, 20*time.Second, "the Processor to listen", func() bool {
		return e.Count(`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query = 'LISTEN pgrelay'`) == 1
	})
	ran := func(p string) func() bool {
		return func() bool { return e.Count(`SELECT count(*) FROM public.ran WHERE payload = $1`, p) == 1 }
	}
	// The first event makes the channel known: its rows came from a claim.
	// (Its own notification may reach the dispatcher after that claim, on a
	// loaded machine, and already claim the channel alone.)
	e.Exec(`SELECT pgrelay.notify('c', 'warm')`)
	testenv.Eventually(t, 20*time.Second, "the first event to run", ran("warm"))
	testenv.Eventually(t, 20*time.Second, "the slot armed again", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.wake_slots WHERE slot = pgrelay._wake_slot('c') AND armed`) == 1
	})
	e.Exec(`SELECT pgrelay.notify('c', 'next')`)
	testenv.Eventually(t, 20*time.Second, "the next event to run", ran("next"))
	testenv.Eventually(t, 20*time.Second, "a claim of the channel alone", func() bool { return len(alone) > 0 })
	require.Equal(t, "c", <-alone)
}

// While a batcher drains a backlog in full batches, a producer's
// notification does not have the slots armed again at once: the batches
// find the channel's new rows by themselves, so the arming (and the claim
// that follows each) waits until a batch comes back short. Arming at every
// notification made each producer notify again, and each arming cost a
// full claim beside the batches. Every event still runs, and so does one
// notified after the drain: the poll is an hour here.
func TestActorDrainingBatcherDefersTheArming(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.Exec(`CREATE TABLE public.ran (payload text)`)
	e.Exec(`SELECT pgrelay.register('c', 'INSERT INTO public.ran VALUES ($1)')`)
	e.Exec(`SELECT pgrelay.notify_many('c', ARRAY(SELECT 'b' FROM generate_series(1, 30000)))`)
	var armings atomic.Int64
	e.startProcessor(func(c *actors.Config) {
		c.PollInterval = time.Hour
		actors.SetTestHook(c, func(name string, msg any) {
			if name == "armer" && actors.IsArming(msg) {
				armings.Add(1)
			}
		})
	})
	backlogRan := func() int {
		return e.Count(`SELECT count(*) FROM public.ran WHERE payload = 'b'`)
	}
	testenv.Eventually(t, 60*time.Second, "the drain under way", func() bool { return backlogRan() >= 3000 })

	// A producer notifies one event per transaction until the backlog is
	// nearly drained; armings are counted from here to there.
	before := armings.Load()
	produced := 0
	conn := e.Conn(-1)
	for backlogRan() < 27000 {
		_, err := conn.Exec(ctx, `SELECT pgrelay.notify('c', 'p')`)
		require.NoError(t, err)
		produced++
	}
	during := armings.Load() - before
	t.Logf("%d events notified during the drain, %d armings", produced, during)
	require.GreaterOrEqual(t, produced, 50, "the producer notified during the drain")
	require.LessOrEqual(t, during, int64(2), "armings while the batcher drained full batches")

	testenv.Eventually(t, 60*time.Second, "every event to run", func() bool {
		return e.Count(`SELECT count(*) FROM public.ran`) == 30000+produced
	})
	_, err := conn.Exec(ctx, `SELECT pgrelay.notify('c', 'after')`)
	require.NoError(t, err)
	testenv.Eventually(t, 20*time.Second, "an event notified after the drain to run", func() bool {
		return e.Count(`SELECT count(*) FROM public.ran WHERE payload = 'after'`) == 1
	})
}
