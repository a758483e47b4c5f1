package cli_test

import (
	"context"
	"fmt"
	"maps"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/devenv"
	"github.com/pgrelay/pgrelay/internal/testenv"
)

// schedDeadAfter is the --dead-after of the schedules' cluster test: short,
// as the ticks it costs are the gap the test measures.
const schedDeadAfter = 2 * time.Second

// A periodic event on the three-node Spock cluster in multi-node mode: the
// schedule made on node 1 is node 1's, and node 1's Processor fires each
// tick; killed (SIGKILL, its database up and replicating), node 2 adopts the
// schedule once node 1 has been silent for --dead-after, fires once to catch
// up and then every tick. Every node holds the same events: no tick twice,
// and ticks missing only in the dead-after gap. One cluster, a 1-second
// schedule (the shortest), a few seconds on each side of the kill.
func TestSpockScheduleAdoptedAfterKill(t *testing.T) {
	ctx := context.Background()
	cluster := testenv.ClusterT(t, devenv.ClusterConfig{Engine: devenv.Spock, Nodes: 3, AutoDDL: true})
	w := &spockWatch{t: t, c: cluster, seen: map[string]int{}}
	nodes := make([]*mmNode, cluster.N()+1)
	for n := 1; n <= cluster.N(); n++ {
		pool, err := pgxpool.New(ctx, cluster.URL(n))
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		nodes[n] = &mmNode{t: t, n: n, url: cluster.URL(n), pool: pool}
	}
	all := nodes[1:]
	n1, n2 := nodes[1], nodes[2]
	// A paused channel: the fired events stay in the queue, where every
	// node's copy shows when and where each was enqueued.
	n1.exec(`SELECT pgrelay.register('beat', 'SELECT $1')`)
	n1.exec(`SELECT pgrelay.update('beat', p_paused := true)`)
	for _, m := range all {
		testenv.Eventually(t, 20*time.Second, fmt.Sprint("the channel on node ", m.n), func() bool {
			return m.count(`SELECT count(*) FROM pgrelay.channels WHERE channel = 'beat' AND paused`) == 1
		})
	}
	w.check(t, "set-up", nil)

	run := func(m *mmNode) *proc {
		return startCLI(t, nil, "run", "--database-url", m.url, "--mode", "multi-node",
			"--heartbeat-interval", "250ms", "--dead-after", schedDeadAfter.String(), "--leader-settle", "1s",
			"--poll-interval", "200ms", "--log-level", "warn")
	}
	procs := make([]*proc, len(nodes))
	for _, m := range all {
		procs[m.n] = run(m)
	}
	for _, m := range all {
		testenv.Eventually(t, 30*time.Second, fmt.Sprint("node ", m.n, "'s Processor"), func() bool {
			return n1.count(`SELECT count(*) FROM pgrelay.nodes WHERE node_id = $1 AND last_seen > now() - interval '1 second'`, m.n) == 1
		})
	}

	n1.exec(`SELECT pgrelay.schedule('beat', 'beat', 'b', p_every := '1 second')`)
	var anchor time.Time
	require.NoError(t, n1.pool.QueryRow(ctx, `SELECT anchor FROM pgrelay.schedules WHERE name = 'beat'`).Scan(&anchor))
	until := func(m *mmNode, at time.Time) {
		testenv.Eventually(t, time.Minute, fmt.Sprint("node ", m.n, "'s clock at ", at), func() bool {
			return m.count(`SELECT count(*) WHERE clock_timestamp() >= $1`, at) == 1
		})
	}
	until(n1, anchor.Add(4500*time.Millisecond))
	procs[1].signal(syscall.SIGKILL)
	procs[1].wait(30 * time.Second)
	testenv.Eventually(t, 30*time.Second, "node 2 to adopt node 1's schedule", func() bool {
		return n2.count(`SELECT count(*) FROM pgrelay.schedules WHERE name = 'beat' AND node = 2`) == 1
	})
	var adopted time.Time
	require.NoError(t, n2.pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&adopted))
	until(n2, adopted.Add(4*time.Second))
	n2.exec(`SELECT pgrelay.unschedule('beat')`)
	stop := []*proc{procs[2], procs[3]}
	for _, p := range stop {
		p.signal(syscall.SIGTERM)
	}
	for _, p := range stop {
		require.Equal(t, 0, p.wait(30*time.Second))
	}
	w.sync()

	// Every node's copy of the queue: the same events, each tick once.
	var want []tickOf
	for _, m := range all {
		rows, err := m.pool.Query(ctx, `SELECT floor(date_part('epoch', q.enqueued_at - $1))::int8, ((q.origin_id >> 12) & 1023)::int4
			FROM pgrelay.queue q WHERE q.channel = 'beat' ORDER BY q.enqueued_at, q.id`, anchor)
		require.NoError(t, err)
		got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[tickOf])
		require.NoError(t, err)
		if want == nil {
			want = got
		}
		require.Equal(t, want, got, "node %d's events", m.n)
	}
	t.Logf("events (tick, node): %v", want)
	var before, after []int64
	for _, g := range want {
		switch {
		case g.Node == 1 && after == nil:
			before = append(before, g.Tick)
		case g.Node == 2:
			after = append(after, g.Tick)
		default:
			t.Fatalf("an event of node %d, or of node 1 after node 2's: %v", g.Node, want)
		}
	}
	require.Equal(t, []int64{1, 2, 3, 4}, before, "node 1 fired each tick until it was killed: %v", want)
	require.GreaterOrEqual(t, len(after), 3, "%v", want)
	for i := 1; i < len(after); i++ {
		require.Equal(t, after[i-1]+1, after[i], "after the catch-up, every tick once: %v", want)
	}
	// The gap: node 1 silent for --dead-after, then the adopter's next
	// round (a heartbeat) and its scheduler's next pass; one catch-up fire.
	gap := after[0] - before[len(before)-1]
	require.LessOrEqual(t, gap, int64(schedDeadAfter/time.Second)+2, "ticks missing beyond the dead-after gap: %v", want)

	explain := maps.Clone(adoptionConflicts)
	explain["pgrelay.schedule_defs update_origin_differs"] = "node 1's schedule, last written by node 1 (its fires), " +
		"re-owned by node 2 (adoption); node 1 writes it no more"
	explain["pgrelay.schedule_defs delete_origin_differs"] = "the schedule, last written by its owner's fires, removed by unschedule()"
	w.check(t, "schedules", explain)
}

// tickOf is one fired event: the tick it was fired in (seconds since the
// schedule's anchor) and the node that fired it (its origin id's).
type tickOf struct {
	Tick int64
	Node int
}
