package actors_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/actors"
	"github.com/pgrelay/pgrelay/internal/testenv"
)

// These tests run several Processors with different node ids on one
// database: the partitioning, leader election, adoption and pinning logic
// without replication (the real two-node cluster tests are in internal/cli).

// enqueueOn enqueues payloads as if on node (its session's pg_relay.node_id).
func (e *env) enqueueOn(node int, channel string, payloads []string) {
	e.T.Helper()
	ctx := context.Background()
	tx, err := e.Pool.Begin(ctx)
	require.NoError(e.T, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, fmt.Sprintf("SET LOCAL pg_relay.node_id = '%d'", node))
	require.NoError(e.T, err)
	_, err = tx.Exec(ctx, "SELECT pgrelay.notify_many($1, $2)", channel, payloads)
	require.NoError(e.T, err)
	require.NoError(e.T, tx.Commit(ctx))
}

func (e *env) startNode(node int, mode string, mod func(*actors.Config)) *actors.Processor {
	return e.startProcessor(func(c *actors.Config) {
		c.NodeID = &node
		c.Mode = mode
		c.LeaderSettle = 300 * time.Millisecond
		if mod != nil {
			mod(c)
		}
	})
}

// alive keeps every node of a test alive for the test's whole window. A
// node silent for DeadAfter is dead and the live node with the smallest id
// adopts its rows (docs/multi-master.md): with the test Processors' 1 s, a
// loaded machine that holds one heartbeat back past it has node 1 run node
// 2's rows. Two minutes are longer than any wait of these tests.
func alive(mod func(*actors.Config)) func(*actors.Config) {
	return func(c *actors.Config) {
		c.DeadAfter = 2 * time.Minute
		if mod != nil {
			mod(c)
		}
	}
}

// multi-node: each node dispatches the rows it owns, none runs elsewhere.
func TestActorMultiNodeOwnRowsOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Exec(`CREATE TABLE ran (payload text, node int DEFAULT current_setting('pg_relay.node_id')::int)`)
	e.Exec(`SELECT pgrelay.register('m', 'INSERT INTO public.ran(payload) VALUES ($1)')`)
	e.enqueueOn(1, "m", payloads("one", 500))
	e.enqueueOn(2, "m", payloads("two", 500))
	e.startNode(1, actors.ModeMultiNode, alive(nil))
	testenv.Eventually(e.T, 30*time.Second, "node 1's rows", func() bool {
		return e.Count(`SELECT count(*) FROM ran`) == 500
	})
	require.Equal(t, 500, e.Count(`SELECT count(*) FROM ran WHERE node = 1 AND payload LIKE 'one-%'`),
		"node 1 ran only its own rows")
	e.startNode(2, actors.ModeMultiNode, alive(nil))
	testenv.Eventually(e.T, 30*time.Second, "node 2's rows", func() bool {
		return e.Count(`SELECT count(*) FROM ran`) == 1000
	})
	require.Equal(t, 500, e.Count(`SELECT count(*) FROM ran WHERE node = 2 AND payload LIKE 'two-%'`))
	require.Equal(t, 1000, e.Count(`SELECT count(DISTINCT payload) FROM ran`))
	require.Equal(t, 0, e.Count(`SELECT count(*) FROM pgrelay.log WHERE event <> 'succeeded'`))
}

// leader: one node leads and dispatches every unrestricted row, wherever it
// was enqueued; the other dispatches only rows pinned to it; when the leader
// stops, the other takes over.
func TestActorLeaderElectionAndTakeover(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Exec(`CREATE TABLE ran (payload text, node int DEFAULT current_setting('pg_relay.node_id')::int)`)
	e.Exec(`SELECT pgrelay.register('u', 'INSERT INTO public.ran(payload) VALUES ($1)')`)
	e.Exec(`SELECT pgrelay.register('pinned', 'INSERT INTO public.ran(payload) VALUES ($1)', p_node_restricted := true)`)
	fast := func(c *actors.Config) {
		c.HeartbeatInterval = 100 * time.Millisecond
		c.DeadAfter = time.Second
	}
	p1 := e.startNode(1, actors.ModeLeader, fast)
	testenv.Eventually(e.T, 10*time.Second, "node 1 to lead", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay._lease_holder(now()) WHERE leader_node = 1`) == 1
	})
	e.startNode(2, actors.ModeLeader, fast)
	e.enqueueOn(1, "u", payloads("a", 100))
	e.enqueueOn(2, "u", payloads("b", 100))
	e.enqueueOn(2, "pinned", payloads("p2", 20))
	e.enqueueOn(1, "pinned", payloads("p1", 20))
	testenv.Eventually(e.T, 30*time.Second, "240 events", func() bool {
		return e.Count(`SELECT count(*) FROM ran`) == 240
	})
	require.Equal(t, 200, e.Count(`SELECT count(*) FROM ran WHERE node = 1 AND (payload LIKE 'a-%' OR payload LIKE 'b-%')`),
		"the leader ran every unrestricted row, from both nodes")
	require.Equal(t, 20, e.Count(`SELECT count(*) FROM ran WHERE node = 2 AND payload LIKE 'p2-%'`),
		"the non-leader ran the rows pinned to it")
	require.Equal(t, 20, e.Count(`SELECT count(*) FROM ran WHERE node = 1 AND payload LIKE 'p1-%'`))

	// The leader stops (cleanly: it hands the lease over); node 2 takes over.
	require.NoError(t, p1.Stop(context.Background()))
	e.enqueueOn(1, "u", payloads("c", 50))
	testenv.Eventually(e.T, 30*time.Second, "node 2 to take over and run the new rows", func() bool {
		return e.Count(`SELECT count(*) FROM ran WHERE payload LIKE 'c-%'`) == 50
	})
	require.Equal(t, 50, e.Count(`SELECT count(*) FROM ran WHERE node = 2 AND payload LIKE 'c-%'`))
	require.Equal(t, 1, e.Count(`SELECT count(*) FROM pgrelay._lease_holder(now()) WHERE leader_node = 2 AND term >= 2`))
	require.Equal(t, 290, e.Count(`SELECT count(DISTINCT payload) FROM ran`))
	require.Equal(t, 290, e.Count(`SELECT count(*) FROM ran`), "nothing ran twice")
}

// A former leader's claim is fenced: with a stale term the claim takes no
// unrestricted row.
func TestActorLeaderFencing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Exec(`SELECT pgrelay.register('u', 'SELECT $1')`)
	e.enqueueOn(1, "u", []string{"x"})
	e.Exec(`INSERT INTO pgrelay.leader_leases (node_id, term, lease_until, taken_at) VALUES (1, 7, now() + interval '1 minute', now())`)
	ctx := context.Background()
	claim := func(term int64) int {
		tx, err := e.Pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		_, err = tx.Exec(ctx, "SET LOCAL pg_relay.node_id = '1'")
		require.NoError(t, err)
		var n int
		require.NoError(t, tx.QueryRow(ctx, "SELECT count(*) FROM pgrelay._claim(1, 'leader', true, 10, '{sql}', $1)", term).Scan(&n))
		return n
	}
	require.Zero(t, claim(6), "a stale term claims nothing")
	require.Equal(t, 1, claim(7), "the current term claims")
	e.Exec(`UPDATE pgrelay.leader_leases SET lease_until = now() - interval '1 second' WHERE node_id = 1`)
	require.Zero(t, claim(7), "an expired lease claims nothing")
}

// Adoption: a dead node's unrestricted rows are adopted by the live node and
// run; its pinned rows are not, and show as pending_restricted until
// decommissioned.
func TestActorAdoptionAndDecommission(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Exec(`CREATE TABLE ran (payload text, node int DEFAULT current_setting('pg_relay.node_id')::int)`)
	e.Exec(`SELECT pgrelay.register('u', 'INSERT INTO public.ran(payload) VALUES ($1)')`)
	e.Exec(`SELECT pgrelay.register('pinned', 'INSERT INTO public.ran(payload) VALUES ($1)', p_node_restricted := true)`)
	fast := func(c *actors.Config) {
		c.HeartbeatInterval = 100 * time.Millisecond
		c.DeadAfter = time.Second
	}
	// Node 2 was alive, then stopped with work pending.
	p2 := e.startNode(2, actors.ModeMultiNode, fast)
	require.NoError(t, p2.Stop(context.Background()))
	e.enqueueOn(2, "u", payloads("orphan", 300))
	e.enqueueOn(2, "pinned", payloads("stuck", 5))
	e.startNode(1, actors.ModeMultiNode, fast)
	testenv.Eventually(e.T, 30*time.Second, "node 1 to adopt and run node 2's rows", func() bool {
		return e.Count(`SELECT count(*) FROM ran`) == 300
	})
	require.Equal(t, 300, e.Count(`SELECT count(*) FROM ran WHERE node = 1 AND payload LIKE 'orphan-%'`))
	require.Equal(t, 300, e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'adopted' AND error LIKE 'node 2 is dead%adopted by node 1'`))
	require.Equal(t, 5, e.Count(`SELECT count(*) FROM pgrelay.queue WHERE run_in_node = 2 AND dispatched_at IS NULL`),
		"pinned rows are never adopted")
	require.Equal(t, 5, e.Count(`SELECT pending_restricted FROM pgrelay.queue_stats() WHERE channel = 'pinned'`))
	var n int64
	require.NoError(t, e.Pool.QueryRow(context.Background(), `SELECT pgrelay.decommission(2, '1 second')`).Scan(&n))
	require.EqualValues(t, 5, n)
	require.Equal(t, 0, e.Count(`SELECT count(*) FROM pgrelay.queue`))
	require.Equal(t, 5, e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'gave_up' AND error LIKE 'node 2 was decommissioned%'`))
	require.Equal(t, 1, e.Count(`SELECT count(*) FROM pgrelay.nodes WHERE node_id = 2 AND decommissioned_at IS NOT NULL`),
		"node 2 stays as a tombstone")
	// A live node cannot be decommissioned.
	_, err := e.Pool.Exec(context.Background(), `SELECT pgrelay.decommission(1, '1 minute')`)
	require.ErrorContains(t, err, "PR022")
}

// A node that comes back after being dead dispatches only the rows pinned to
// it for the settle (--leader-settle), then claims its unrestricted rows by
// their ownership at that moment: an adoption that reaches it late (here
// written during the settle, as replication would deliver it) wins, and the
// adopted rows never run on it. Both through batches (sql channels of the
// three concurrency modes) and through claims (--sql-batch 1).
func TestActorRejoinSettlesBeforeUnrestricted(t *testing.T) {
	t.Parallel()
	for name, sqlBatch := range map[string]int{"batches": 0, "claims": 1} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.Exec(`CREATE TABLE ran (payload text, node int DEFAULT current_setting('pg_relay.node_id')::int,
				at timestamptz DEFAULT clock_timestamp())`)
			e.Exec(`SELECT pgrelay.register('u', 'INSERT INTO public.ran(payload) VALUES ($1)')`)
			e.Exec(`SELECT pgrelay.register('lane', 'INSERT INTO public.ran(payload) VALUES ($1)',
				p_concurrency_mode := 'channel')`)
			e.Exec(`SELECT pgrelay.register('pinned', 'INSERT INTO public.ran(payload) VALUES ($1)', p_node_restricted := true)`)
			e.enqueueOn(2, "u", payloads("mine", 50))
			e.enqueueOn(2, "lane", payloads("lane", 5))
			e.enqueueOn(2, "u", payloads("adopted", 50))
			e.enqueueOn(2, "pinned", []string{"pin"})
			// Node 2's own copy shows it dead for an hour.
			e.Exec(`INSERT INTO pgrelay.nodes (node_id, mode, last_seen) VALUES (2, 'multi-node', now() - interval '1 hour')`)
			const settle = 3 * time.Second
			var t0 time.Time
			require.NoError(t, e.Pool.QueryRow(context.Background(), `SELECT clock_timestamp()`).Scan(&t0))
			e.startNode(2, actors.ModeMultiNode, func(c *actors.Config) {
				c.LeaderSettle = settle
				c.HeartbeatInterval = 100 * time.Millisecond
				c.DeadAfter = time.Second
				c.SQLBatch = sqlBatch
			})
			testenv.Eventually(e.T, 30*time.Second, "the pinned row to run", func() bool {
				return e.Count(`SELECT count(*) FROM ran WHERE payload = 'pin'`) == 1
			})
			// Node 1's adoption of half the rows arrives now.
			e.Exec(`UPDATE pgrelay.queue SET owner_node = 1 WHERE payload LIKE 'adopted-%'`)
			testenv.Eventually(e.T, 30*time.Second, "node 2's own unrestricted rows to run", func() bool {
				return e.Count(`SELECT count(*) FROM ran WHERE payload LIKE 'mine-%' OR payload LIKE 'lane-%'`) == 55
			})
			var first, pinned time.Time
			require.NoError(t, e.Pool.QueryRow(context.Background(),
				`SELECT min(at) FILTER (WHERE payload <> 'pin'), min(at) FILTER (WHERE payload = 'pin') FROM ran`).
				Scan(&first, &pinned))
			require.GreaterOrEqual(t, first.Sub(t0), settle, "no unrestricted row ran before the settle")
			require.True(t, pinned.Before(first), "the pinned row ran first")
			require.Equal(t, 0, e.Count(`SELECT count(*) FROM ran WHERE payload LIKE 'adopted-%'`),
				"the rows adopted meanwhile never ran on node 2")
			require.Equal(t, 50, e.Count(`SELECT count(*) FROM pgrelay.queue WHERE owner_node = 1 AND dispatched_at IS NULL`))
			require.Equal(t, 56, e.Count(`SELECT count(*) FROM ran WHERE node = 2`))
		})
	}
}

// Retries inherit the pin: a restricted channel's event that fails on node 2
// is retried by a row pinned to node 2 (stamped where the failed attempt
// ran), which only node 2 runs — although node 1 leads and runs every
// unrestricted row.
func TestActorRetryRestampedOnNode(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Exec(`CREATE TABLE ran (payload text, node int DEFAULT current_setting('pg_relay.node_id')::int)`)
	e.Exec(`CREATE SEQUENCE tries`)
	e.Exec(`CREATE FUNCTION flaky(p text) RETURNS void LANGUAGE plpgsql AS $$
		BEGIN
		  IF nextval('public.tries') = 1 THEN RAISE EXCEPTION 'the first attempt fails'; END IF;
		  INSERT INTO public.ran(payload) VALUES (p);
		END $$`)
	e.Exec(`SELECT pgrelay.register('pinned', 'SELECT public.flaky($1)', p_node_restricted := true,
		p_retry_delay := '2 seconds')`)
	fast := func(c *actors.Config) {
		c.HeartbeatInterval = 100 * time.Millisecond
		c.DeadAfter = time.Second
	}
	e.startNode(1, actors.ModeLeader, fast)
	testenv.Eventually(e.T, 10*time.Second, "node 1 to lead", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay._lease_holder(now()) WHERE leader_node = 1`) == 1
	})
	e.startNode(2, actors.ModeLeader, fast)
	e.enqueueOn(2, "pinned", []string{"x"})
	testenv.Eventually(e.T, 20*time.Second, "the retry row", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.queue WHERE channel = 'pinned' AND attempt = 2`) == 1
	})
	require.Equal(t, 1, e.Count(`SELECT count(*) FROM pgrelay.log WHERE channel = 'pinned' AND event = 'failed' AND node = 2`),
		"the first attempt failed on node 2")
	require.Equal(t, 1, e.Count(`SELECT count(*) FROM pgrelay.queue WHERE channel = 'pinned' AND attempt = 2 AND run_in_node = 2`),
		"the retry row is pinned to node 2")
	testenv.Eventually(e.T, 20*time.Second, "the retry to run", func() bool {
		return e.Count(`SELECT count(*) FROM ran`) == 1
	})
	require.Equal(t, 1, e.Count(`SELECT count(*) FROM ran WHERE node = 2`), "the retry ran on node 2")
	require.Equal(t, 1, e.Count(`SELECT count(*) FROM pgrelay.log WHERE channel = 'pinned' AND event = 'succeeded' AND attempt = 2 AND node = 2`))
}

// Adoption is deterministic: with nodes 1 and 3 alive when node 2 dies, only
// node 1 (the live node with the smallest id) adopts, and each adopted row
// has exactly one 'adopted' log row.
func TestActorAdoptionThreeNodes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Exec(`CREATE TABLE ran (payload text, node int DEFAULT current_setting('pg_relay.node_id')::int)`)
	e.Exec(`SELECT pgrelay.register('u', 'INSERT INTO public.ran(payload) VALUES ($1)')`)
	fast := func(c *actors.Config) {
		c.HeartbeatInterval = 100 * time.Millisecond
		c.DeadAfter = time.Second
	}
	p2 := e.startNode(2, actors.ModeMultiNode, fast)
	e.startNode(3, actors.ModeMultiNode, fast)
	e.startNode(1, actors.ModeMultiNode, fast)
	testenv.Eventually(e.T, 10*time.Second, "three live nodes", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.nodes WHERE node_id IN (1, 2, 3) AND last_seen > now() - interval '500 milliseconds'`) == 3
	})
	require.NoError(t, p2.Stop(context.Background()))
	e.enqueueOn(2, "u", payloads("orphan", 300))
	testenv.Eventually(e.T, 30*time.Second, "node 2's rows to be adopted and run", func() bool {
		return e.Count(`SELECT count(*) FROM ran`) == 300
	})
	require.Equal(t, 300, e.Count(`SELECT count(*) FROM ran WHERE node = 1`), "node 1 ran every adopted row")
	require.Equal(t, 300, e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'adopted'`))
	require.Equal(t, 300, e.Count(`SELECT count(DISTINCT queue_id) FROM pgrelay.log WHERE event = 'adopted' AND node = 1
		AND error LIKE 'node 2 is dead%adopted by node 1'`), "one adopted row per queue row, all by node 1")
	require.Equal(t, 300, e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'succeeded' AND node = 1`))
	require.Equal(t, 0, e.Count(`SELECT count(*) FROM pgrelay.log WHERE node = 3`), "node 3 neither adopted nor ran anything")
}

// pgrelay.nodes_overview (what `pgrelay nodes` shows): per node its mode,
// liveness by the caller's dead-after, the leader, its Processors, its
// pending unrestricted rows (by owner) and the rows pinned to it.
func TestActorNodesOverview(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Exec(`SELECT pgrelay.register('held', 'SELECT $1')`)
	e.Exec(`SELECT pgrelay.register('pinned', 'SELECT $1', p_node_restricted := true)`)
	fast := func(c *actors.Config) {
		c.HeartbeatInterval = 100 * time.Millisecond
		c.DeadAfter = time.Second
	}
	p2 := e.startNode(2, actors.ModeLeader, fast)
	require.NoError(t, p2.Stop(context.Background()))
	// Three unrestricted rows of node 1 stay pending (their channel is
	// paused); two rows are pinned to node 2, which is stopped.
	e.enqueueOn(1, "held", payloads("h", 3))
	e.Exec(`SELECT pgrelay.update('held', p_paused := true)`)
	e.enqueueOn(2, "pinned", payloads("p", 2))
	e.startNode(1, actors.ModeLeader, fast)
	testenv.Eventually(e.T, 10*time.Second, "node 1 to lead and node 2 to be dead", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.nodes_overview('1 second') WHERE node_id = 1 AND leader`) == 1 &&
			e.Count(`SELECT count(*) FROM pgrelay.nodes_overview('1 second') WHERE node_id = 2 AND NOT alive`) == 1
	})
	type row struct {
		Node              int
		Mode              string
		Alive, Leader     bool
		Procs, Pend, Pins int64
	}
	overview := func(deadAfter string) []row {
		rows, err := e.Pool.Query(context.Background(),
			`SELECT node_id, mode, alive, leader, processors, pending, pinned FROM pgrelay.nodes_overview($1::interval)`, deadAfter)
		require.NoError(t, err)
		defer rows.Close()
		var out []row
		for rows.Next() {
			var r row
			require.NoError(t, rows.Scan(&r.Node, &r.Mode, &r.Alive, &r.Leader, &r.Procs, &r.Pend, &r.Pins))
			out = append(out, r)
		}
		require.NoError(t, rows.Err())
		return out
	}
	require.Equal(t, []row{
		{Node: 1, Mode: "leader", Alive: true, Leader: true, Procs: 1, Pend: 3, Pins: 0},
		{Node: 2, Mode: "leader", Alive: false, Leader: false, Procs: 0, Pend: 0, Pins: 2},
	}, overview("1 second"))
	// Liveness is judged by the caller's dead-after: with an hour, node 2,
	// stopped a moment ago, still counts as alive.
	require.True(t, overview("1 hour")[1].Alive)
}

// A node that stops while it still settles after taking the lease (it does
// not lead yet) releases the lease too, so the next node need not wait for
// it to run out.
func TestActorStopReleasesSettlingLease(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p1 := e.startNode(1, actors.ModeLeader, func(c *actors.Config) {
		c.HeartbeatInterval = 100 * time.Millisecond
		c.DeadAfter = 30 * time.Second
		c.LeaderSettle = time.Minute // never leads in this test
	})
	testenv.Eventually(e.T, 10*time.Second, "node 1 to take the lease", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay._lease_holder(now()) WHERE leader_node = 1`) == 1
	})
	require.NoError(t, p1.Stop(context.Background()))
	require.Equal(t, 0, e.Count(`SELECT count(*) FROM pgrelay._lease_holder(now())`),
		"the lease was released, not left to run out in 30 s")
}

// After a decommission, rows of the node that arrive later (here enqueued as
// node 2, as replication would deliver them) are adopted and run by the live
// node in multi-node mode: the decommissioned node stays dead.
func TestActorDecommissionAdoptsLateRows(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Exec(`CREATE TABLE ran (payload text, node int DEFAULT current_setting('pg_relay.node_id')::int)`)
	e.Exec(`SELECT pgrelay.register('u', 'INSERT INTO public.ran(payload) VALUES ($1)')`)
	fast := func(c *actors.Config) {
		c.HeartbeatInterval = 100 * time.Millisecond
		c.DeadAfter = time.Second
	}
	p2 := e.startNode(2, actors.ModeMultiNode, fast)
	require.NoError(t, p2.Stop(context.Background()))
	e.enqueueOn(2, "u", payloads("before", 50))
	e.startNode(1, actors.ModeMultiNode, fast)
	testenv.Eventually(e.T, 30*time.Second, "node 1 to adopt and run node 2's rows", func() bool {
		return e.Count(`SELECT count(*) FROM ran WHERE node = 1`) == 50
	})
	_, err := e.Pool.Exec(context.Background(), `SELECT pgrelay.decommission(2, '1 second')`)
	require.NoError(t, err)
	e.enqueueOn(2, "u", payloads("late", 50))
	testenv.Eventually(e.T, 30*time.Second, "node 1 to adopt and run the rows of node 2 that arrived later", func() bool {
		return e.Count(`SELECT count(*) FROM ran WHERE node = 1 AND payload LIKE 'late-%'`) == 50
	})
	require.Equal(t, 100, e.Count(`SELECT count(*) FROM ran`), "nothing ran twice")
	require.Equal(t, 50, e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'adopted'
		AND error LIKE 'node 2 was decommissioned; adopted by node 1%'`))
}

// A node that comes back claims its unrestricted rows as soon as every other
// node has answered its ask (pgrelay.sync_asks, migrations/0003_v0_2_0.up.sql), not after
// the settle (an hour here), and not before: node 1 looks alive but has no
// Processor to answer, so node 2 runs only its pinned row until node 1's
// Processor starts and answers.
func TestActorRejoinEndsWhenEveryPeerAnswered(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Exec(`CREATE TABLE ran (payload text, node int DEFAULT current_setting('pg_relay.node_id')::int)`)
	e.Exec(`SELECT pgrelay.register('u', 'INSERT INTO public.ran(payload) VALUES ($1)')`)
	e.Exec(`SELECT pgrelay.register('pinned', 'INSERT INTO public.ran(payload) VALUES ($1)', p_node_restricted := true)`)
	e.enqueueOn(2, "u", payloads("mine", 20))
	e.enqueueOn(2, "pinned", []string{"pin"})
	e.Exec(`INSERT INTO pgrelay.nodes (node_id, mode, last_seen) VALUES
	          (2, 'multi-node', now() - interval '1 hour'), (1, 'multi-node', now())`)
	slow := func(c *actors.Config) {
		c.LeaderSettle = time.Hour
		c.HeartbeatInterval = 100 * time.Millisecond
		c.DeadAfter = 2 * time.Minute
	}
	e.startNode(2, actors.ModeMultiNode, slow)
	testenv.Eventually(e.T, 30*time.Second, "the pinned row to run", func() bool {
		return e.Count(`SELECT count(*) FROM ran WHERE payload = 'pin'`) == 1
	})
	testenv.Eventually(e.T, 30*time.Second, "node 2 to ask, then beat for half a second", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.sync_asks a JOIN pgrelay.processors p USING (node_id)
		                 WHERE a.node_id = 2 AND p.last_seen > a.asked_at + interval '500 milliseconds'`) == 1
	})
	require.Zero(t, e.Count(`SELECT count(*) FROM ran WHERE payload LIKE 'mine-%'`),
		"no unrestricted row ran before node 1 answered")

	e.startNode(1, actors.ModeMultiNode, slow)
	testenv.Eventually(e.T, 30*time.Second, "node 2's unrestricted rows to run once node 1 answered", func() bool {
		return e.Count(`SELECT count(*) FROM ran WHERE payload LIKE 'mine-%'`) == 20
	})
	require.Equal(t, 21, e.Count(`SELECT count(*) FROM ran WHERE node = 2`))
	require.Equal(t, 1, e.Count(`SELECT count(*) FROM pgrelay.sync_answers WHERE node_id = 2 AND peer = 1`))
}

// A node that took the leader lease leads as soon as every other node has
// answered an ask made after the take, not after the settle (an hour here),
// and not before: node 1 looks alive but has no Processor to answer until it
// starts (and finds the lease taken).
func TestActorLeaderLeadsWhenEveryPeerSawTheTake(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Exec(`CREATE TABLE ran (payload text, node int DEFAULT current_setting('pg_relay.node_id')::int)`)
	e.Exec(`SELECT pgrelay.register('u', 'INSERT INTO public.ran(payload) VALUES ($1)')`)
	e.enqueueOn(1, "u", payloads("a", 20))
	e.Exec(`INSERT INTO pgrelay.nodes (node_id, mode, last_seen) VALUES (1, 'leader', now())`)
	slow := func(c *actors.Config) {
		c.LeaderSettle = time.Hour
		c.HeartbeatInterval = 100 * time.Millisecond
		c.DeadAfter = 2 * time.Minute
	}
	e.startNode(2, actors.ModeLeader, slow)
	testenv.Eventually(e.T, 30*time.Second, "node 2 to take the lease, ask, then beat for half a second", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.leader_leases l, pgrelay.sync_asks a JOIN pgrelay.processors p USING (node_id)
		                 WHERE l.node_id = 2 AND l.lease_until > now() AND a.node_id = 2
		                   AND a.asked_at > l.taken_at AND p.last_seen > a.asked_at + interval '500 milliseconds'`) == 1
	})
	require.Zero(t, e.Count(`SELECT count(*) FROM ran`), "node 2 did not lead before node 1 answered")

	e.startNode(1, actors.ModeLeader, slow)
	testenv.Eventually(e.T, 30*time.Second, "node 2 to lead once node 1 answered", func() bool {
		return e.Count(`SELECT count(*) FROM ran WHERE node = 2`) == 20
	})
	require.Equal(t, 20, e.Count(`SELECT count(*) FROM ran`))
}
