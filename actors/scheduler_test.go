package actors_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/actors"
	"github.com/pgrelay/pgrelay/internal/testenv"
)

// Periodic events (pgrelay.schedule): the Processors' scheduler fires each
// tick once. The schedules' channel is paused, so each fired event stays in
// the queue with its enqueued_at, the fire's transaction time: tick k of a
// schedule anchored at a is the one fired in [a + k·every, a + (k+1)·every).

// scheduleOn calls pgrelay.schedule on node's session (the schedule's owner).
func (e *env) scheduleOn(node int, args string) {
	e.T.Helper()
	ctx := context.Background()
	tx, err := e.Pool.Begin(ctx)
	require.NoError(e.T, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, fmt.Sprintf("SET LOCAL pg_relay.node_id = '%d'", node))
	require.NoError(e.T, err)
	_, err = tx.Exec(ctx, "SELECT pgrelay.schedule("+args+")")
	require.NoError(e.T, err)
	require.NoError(e.T, tx.Commit(ctx))
}

// pausedChannel registers a paused channel: its events stay in the queue.
func (e *env) pausedChannel(name string) {
	e.T.Helper()
	e.Exec(`SELECT pgrelay.register($1, 'SELECT $1')`, name)
	e.Exec(`SELECT pgrelay.update($1, p_paused := true)`, name)
}

// tickOf is one fired event: the tick it was fired in and the node whose
// Processor fired it (the node in its origin id; an adoption changes the
// row's owner).
type tickOf struct {
	Tick int64
	Node int
}

// ticks reads the events of channel fired for schedule name, by tick.
func (e *env) ticks(channel string, anchor time.Time, every time.Duration) []tickOf {
	e.T.Helper()
	rows, err := e.Pool.Query(context.Background(), `SELECT floor(date_part('epoch', q.enqueued_at - $2) / $3)::int8, ((q.origin_id >> 12) & 1023)::int4
		FROM pgrelay.queue q WHERE q.channel = $1 ORDER BY q.id`, channel, anchor, every.Seconds())
	require.NoError(e.T, err)
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[tickOf])
	require.NoError(e.T, err)
	return out
}

// untilAnchorPlus waits until the database's clock reads anchor + d.
func (e *env) untilAnchorPlus(anchor time.Time, d time.Duration) {
	e.T.Helper()
	testenv.Eventually(e.T, d+time.Minute, fmt.Sprintf("%s after the anchor", d), func() bool {
		return e.Count(`SELECT count(*) WHERE clock_timestamp() >= $1`, anchor.Add(d)) == 1
	})
}

// Two Processors on one database, a schedule every second for 30 seconds:
// 30 events (± 1 at the edges), one per tick, none twice. A count over time
// is the proof that every tick fired once: a tick fired twice, or one
// skipped, changes it; the schedule's every is the minimum (1 second), so the
// run is as short as 30 ticks allow.
func TestActorScheduleTwoProcessorsFireEachTickOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.pausedChannel("tick")
	e.startProcessor(nil)
	e.startProcessor(nil)
	e.Exec(`SELECT pgrelay.schedule('every-second', 'tick', 'beat', p_every := '1 second')`)
	anchor := testenv.One[time.Time](t, e.Pool, `SELECT anchor FROM pgrelay.schedules WHERE name = 'every-second'`)
	e.untilAnchorPlus(anchor, 30*time.Second+500*time.Millisecond)
	require.True(t, testenv.One[bool](t, e.Pool, `SELECT pgrelay.unschedule('every-second')`))

	got := e.ticks("tick", anchor, time.Second)
	require.InDelta(t, 30, len(got), 1, "%v", got)
	seen := map[int64]bool{}
	for i, g := range got {
		require.False(t, seen[g.Tick], "tick %d fired twice: %v", g.Tick, got)
		seen[g.Tick] = true
		require.Equal(t, int64(i+1), g.Tick, "ticks fired in order, none skipped: %v", got)
	}
}

// In multi-node mode a schedule fires on its owner only; when its node dies
// the adopter owns it and fires once to catch up, then every tick; in leader
// mode the leader's node fires every schedule, whoever owns it.
func TestActorScheduleOwnerAdoptionAndLeader(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.pausedChannel("mn")
	fast := func(c *actors.Config) {
		c.HeartbeatInterval = 100 * time.Millisecond
		c.DeadAfter = 2 * time.Second
	}
	p1 := e.startNode(1, actors.ModeMultiNode, fast)
	e.startNode(2, actors.ModeMultiNode, fast)
	e.scheduleOn(1, `'mn', 'mn', 'x', p_every := '1 second'`)
	anchor := testenv.One[time.Time](t, e.Pool, `SELECT anchor FROM pgrelay.schedules WHERE name = 'mn'`)
	e.untilAnchorPlus(anchor, 3*time.Second+500*time.Millisecond)
	require.NoError(t, p1.Stop(context.Background()))
	testenv.Eventually(t, 30*time.Second, "node 2 to adopt the schedule", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.schedules WHERE name = 'mn' AND node = 2`) == 1
	})
	adopted := testenv.One[time.Time](t, e.Pool, `SELECT clock_timestamp()`)
	e.untilAnchorPlus(adopted.Add(-(adopted.Sub(anchor) % time.Second)), 3*time.Second+500*time.Millisecond)
	require.True(t, testenv.One[bool](t, e.Pool, `SELECT pgrelay.unschedule('mn')`))

	got := e.ticks("mn", anchor, time.Second)
	var before, after []int64
	for _, g := range got {
		if g.Node == 1 {
			require.Empty(t, after, "node 1 fired after node 2: %v", got)
			before = append(before, g.Tick)
		} else {
			after = append(after, g.Tick)
		}
	}
	require.Equal(t, []int64{1, 2, 3}, before, "node 1 fired its schedule's ticks: %v", got)
	require.GreaterOrEqual(t, len(after), 3, "%v", got)
	for i := 1; i < len(after); i++ {
		require.Equal(t, after[i-1]+1, after[i], "after the catch-up, every tick once: %v", got)
	}
	// Node 1 stopped after tick 3; node 2 adopted it once node 1 had been
	// silent for the dead-after (2 s): one catch-up fire, no replay.
	require.GreaterOrEqual(t, after[0], int64(3+2), "the ticks of the dead-after gap are not replayed: %v", got)

	// Leader mode: node 3 leads and fires node 4's schedule.
	e.pausedChannel("ld")
	e.startNode(3, actors.ModeLeader, fast)
	testenv.Eventually(t, 30*time.Second, "node 3 to lead", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay._lease_holder(now()) WHERE leader_node = 3`) == 1
	})
	e.startNode(4, actors.ModeLeader, fast)
	e.scheduleOn(4, `'ld', 'ld', 'y', p_every := '1 second'`)
	anchor = testenv.One[time.Time](t, e.Pool, `SELECT anchor FROM pgrelay.schedules WHERE name = 'ld'`)
	e.untilAnchorPlus(anchor, 3*time.Second+500*time.Millisecond)
	require.True(t, testenv.One[bool](t, e.Pool, `SELECT pgrelay.unschedule('ld')`))
	got = e.ticks("ld", anchor, time.Second)
	require.GreaterOrEqual(t, len(got), 2, "%v", got)
	for i, g := range got {
		require.Equal(t, 3, g.Node, "the leader's node fired each tick: %v", got)
		if i > 0 {
			require.Equal(t, got[i-1].Tick+1, g.Tick, "every tick once: %v", got)
		}
	}
}

// A cron schedule's first tick is computed by the Processor that owns it.
func TestActorScheduleCronFirstTick(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.pausedChannel("c")
	e.Exec(`SELECT pgrelay.schedule('nightly', 'c', 'n', p_cron := '0 3 * * *', p_timezone := 'Europe/Paris')`)
	e.startProcessor(nil)
	testenv.Eventually(t, 30*time.Second, "the first tick computed", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.schedules WHERE next_fire IS NOT NULL`) == 1
	})
	require.Equal(t, "03:00:00", testenv.One[string](t, e.Pool,
		`SELECT (next_fire AT TIME ZONE 'Europe/Paris')::time::text FROM pgrelay.schedules`))
	require.True(t, testenv.One[bool](t, e.Pool,
		`SELECT next_fire > anchor AND next_fire <= anchor + interval '1 day' FROM pgrelay.schedules`))
}
