package actors_test

// Flow control with running Processors: priorities, a channel's
// max_in_flight and its rate limit, across Processors of one database. An
// event's priority is set by an UPDATE of its row in the producer's
// transaction, as notify()'s p_priority stores it.

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/actors"
	"github.com/pgrelay/pgrelay/internal/testenv"
)

// 1 000 low then 10 high events on one channel's backlog: the 10 are claimed
// before every low event that was not claimed yet when they committed. The
// handler records when its event was claimed (dispatched_at).
func TestActorHighPriorityOvertakesTheBacklog(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Exec(`CREATE TABLE public.runs (payload text, claimed_at timestamptz)`)
	e.Exec(`SELECT pgrelay.register('pri', 'INSERT INTO public.runs
	  SELECT $1, (SELECT q.dispatched_at FROM pgrelay.queue q WHERE q.channel = ''pri'' AND q.payload = $1)')`)
	e.Exec(`SELECT pgrelay.notify_many('pri', ARRAY(SELECT 'low' || g FROM generate_series(1, 1000) g))`)
	// One Processor, events claimed (SQLBatch 1): its claims follow each
	// other, so claim times order them.
	e.startProcessor(func(c *actors.Config) { c.Concurrency, c.SQLBatch = 4, 1 })
	testenv.Eventually(t, 60*time.Second, "the backlog to be draining", func() bool {
		return e.Count(`SELECT count(*) FROM public.runs`) >= 100
	})
	e.Exec(`SELECT pgrelay.notify_many('pri', ARRAY(SELECT 'high' || g FROM generate_series(1, 10) g), p_priority := 10)`)
	committed := testenv.One[time.Time](t, e.Pool, "SELECT clock_timestamp()")
	testenv.Eventually(t, 120*time.Second, "every event to run", func() bool {
		return e.Count(`SELECT count(*) FROM public.runs`) == 1010
	})
	lastHigh := testenv.One[time.Time](t, e.Pool, "SELECT max(claimed_at) FROM public.runs WHERE payload LIKE 'high%'")
	after := e.Count(`SELECT count(*) FROM public.runs WHERE payload LIKE 'low%' AND claimed_at > $1`, committed)
	require.Greater(t, after, 500, "most of the backlog was still to run")
	require.Zero(t, e.Count(`SELECT count(*) FROM public.runs
		WHERE payload LIKE 'low%' AND claimed_at > $1 AND claimed_at < $2`, committed, lastHigh),
		"low events claimed after the high ones committed, before the last high one")
}

// max_in_flight 4 across 3 Processors: handlers that sleep record their
// spans; never more than 4 overlap, and 4 do. The poll is an hour: an event
// that ends has its Processor claim the channel's next one (a sql handler
// records its own event, so no written outcome wakes the claimer).
func TestActorMaxInFlightAcrossProcessors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Exec(`CREATE TABLE public.spans (payload text, started timestamptz, ended timestamptz)`)
	e.Exec(`CREATE FUNCTION public.span(p text) RETURNS void LANGUAGE plpgsql AS $$
	DECLARE s timestamptz := clock_timestamp();
	BEGIN
	  PERFORM pg_sleep(0.05);
	  INSERT INTO public.spans VALUES (p, s, clock_timestamp());
	END $$`)
	e.Exec(`SELECT pgrelay.register('lim', 'SELECT public.span($1)', p_max_in_flight := 4)`)
	e.Exec(`SELECT pgrelay.notify_many('lim', ARRAY(SELECT g::text FROM generate_series(1, 80) g))`)
	for range 3 {
		e.startProcessor(func(c *actors.Config) { c.PollInterval = time.Hour })
	}
	testenv.Eventually(t, 120*time.Second, "every event to run", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.log WHERE channel = 'lim' AND event = 'succeeded'`) == 80
	})
	overlap := e.Count(`SELECT max(n) FROM (SELECT (SELECT count(*) FROM public.spans b
		WHERE b.started <= a.started AND b.ended > a.started) AS n FROM public.spans a) x`)
	require.Equal(t, 4, overlap, "at most 4 ran at once, and 4 did")
	took := testenv.One[float64](t, e.Pool, `SELECT extract(epoch FROM max(ended) - min(started)) FROM public.spans`)
	t.Logf("80 events of 50 ms, 4 at a time: %.2f s (%.0f events/s; 80/s at best)", took, 80/took)
}

// A rate limit of 50 per second across 3 Processors: 600 events, and no
// window of a second holds more than 50 starts, timed by their claims (a
// handler starts a moment later: the documented tolerance), while the
// busiest holds at least half of the limit.
func TestActorRateLimitAcrossProcessors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Exec(`CREATE TABLE public.starts (payload text, at timestamptz, claimed_at timestamptz)`)
	e.Exec(`SELECT pgrelay.register('rate', 'INSERT INTO public.starts SELECT $1, clock_timestamp(),
	  (SELECT q.dispatched_at FROM pgrelay.queue q WHERE q.channel = ''rate'' AND q.payload = $1)',
		p_rate_limit := 50, p_rate_period := '1 second')`)
	e.Exec(`SELECT pgrelay.notify_many('rate', ARRAY(SELECT g::text FROM generate_series(1, 600) g))`)
	for range 3 {
		e.startProcessor(nil)
	}
	testenv.Eventually(t, 120*time.Second, "every event to run", func() bool {
		return e.Count(`SELECT count(*) FROM public.starts`) == 600
	})
	// A start is timed by its claim (the row's dispatched_at): no window
	// of a second holds more than 50 of them.
	window := func(col, less string) int {
		return e.Count(`SELECT max(n) FROM (SELECT (SELECT count(*) FROM public.starts b
			WHERE b.`+col+` >= a.`+col+` AND b.`+col+` < a.`+col+` + interval '1 second' - $1::interval) AS n
			FROM public.starts a) x`, less)
	}
	busiest := window("claimed_at", "0")
	require.LessOrEqual(t, busiest, 50, "claims in a window of 1 s")
	// The limit is used, not only respected: the busiest second holds at
	// least half of it. Not a speed bound: a claim takes as many rows as
	// its Processor has free slots (16 here) and the allowance leaves, all
	// at one instant (its transaction's time); the allowance frees as the
	// window slides and three Processors polling every 100 ms take it. To
	// stay under 25, all three together would have to claim fewer than 25
	// trivial events in every second of the run, when a loaded 2-core
	// machine fills the window (50) within the second.
	require.GreaterOrEqual(t, busiest, 25, "the busiest second's claims: the limit is used")
	// The handlers start a moment after their claim.
	t.Logf("handler starts in a window of 1 s: at most %d; of 0.9 s: %d", window("at", "0"), window("at", "100 milliseconds"))
	took := testenv.One[float64](t, e.Pool, `SELECT extract(epoch FROM max(at) - min(at)) FROM public.starts`)
	t.Logf("600 events at 50/s: %.1f s from the first start to the last (11 s at best)", took)
}

// A rate limit of 5 per 200 ms, with the poll an hour: a claim that finds
// the window full leaves the rest for the claim it schedules for when the
// window has room, so all 40 events run without a poll; no window of 200 ms
// holds more than 5 claims.
func TestActorRateLimitWakesWhenTheWindowReopens(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Exec(`CREATE TABLE public.starts (payload text, claimed_at timestamptz)`)
	e.Exec(`SELECT pgrelay.register('rate', 'INSERT INTO public.starts SELECT $1,
	  (SELECT q.dispatched_at FROM pgrelay.queue q WHERE q.channel = ''rate'' AND q.payload = $1)',
		p_rate_limit := 5, p_rate_period := '200 milliseconds')`)
	e.Exec(`SELECT pgrelay.notify_many('rate', ARRAY(SELECT g::text FROM generate_series(1, 40) g))`)
	e.startProcessor(func(c *actors.Config) { c.PollInterval = time.Hour })
	testenv.Eventually(t, 120*time.Second, "every event to run", func() bool {
		return e.Count(`SELECT count(*) FROM public.starts`) == 40
	})
	busiest := e.Count(`SELECT max(n) FROM (SELECT (SELECT count(*) FROM public.starts b
		WHERE b.claimed_at >= a.claimed_at AND b.claimed_at < a.claimed_at + interval '200 milliseconds') AS n
		FROM public.starts a) x`)
	require.LessOrEqual(t, busiest, 5, "claims in a window of 200 ms")
	took := testenv.One[float64](t, e.Pool, `SELECT extract(epoch FROM max(claimed_at) - min(claimed_at)) FROM public.starts`)
	t.Logf("40 events at 5 per 200 ms: %.2f s from the first claim to the last (1.4 s at best)", took)
}
