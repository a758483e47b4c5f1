package cli_test

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/devenv"
	"github.com/pgrelay/pgrelay/internal/testenv"
)

// mmDeadAfter is the Processors' --dead-after in the cluster tests: long
// enough that a heartbeat delayed by a loaded 2-core machine, plus the
// replication lag, never makes a live node look dead (which would have its
// work adopted while it runs).
const mmDeadAfter = 6 * time.Second

// mmNode is one node of the real two-node cluster.
type mmNode struct {
	t    *testing.T
	n    int
	url  string
	pool *pgxpool.Pool
}

func (m *mmNode) exec(sql string, args ...any) {
	m.t.Helper()
	_, err := m.pool.Exec(context.Background(), sql, args...)
	require.NoError(m.t, err, "node %d: %s", m.n, sql)
}

func (m *mmNode) count(sql string, args ...any) int {
	m.t.Helper()
	var n int
	require.NoError(m.t, m.pool.QueryRow(context.Background(), sql, args...).Scan(&n), "node %d: %s", m.n, sql)
	return n
}

func (m *mmNode) enqueue(channel, prefix string, n int) {
	m.t.Helper()
	ps := make([]string, n)
	for i := range ps {
		ps[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	m.exec(`SELECT pgrelay.notify_many($1, $2)`, channel, ps)
}

// run starts `pgrelay run` against this node in mode.
func (m *mmNode) run(mode string, extra ...string) *proc {
	args := append([]string{"run", "--database-url", m.url, "--mode", mode,
		"--heartbeat-interval", "250ms", "--dead-after", mmDeadAfter.String(), "--leader-settle", "1s",
		"--poll-interval", "200ms", "--concurrency", "16", "--log-level", "warn"}, extra...)
	return startCLI(m.t, nil, args...)
}

// The cluster tests share one real two-node active-active cluster
// (PostgreSQL 15 + pglogical, last-update-wins) and run one after the other.
func TestMultiMasterCluster(t *testing.T) {
	ctx := context.Background()
	cluster, err := devenv.StartCluster(ctx, devenv.ClusterConfig{})
	require.NoError(t, err)
	t.Cleanup(cluster.Stop)
	// The handler records where it ran; its table is local to each node (not
	// replicated), as a materialised view's heap would be.
	require.NoError(t, cluster.ExecBoth(ctx, `CREATE SCHEMA app;
		CREATE TABLE app.ran (channel text, payload text, node int, at timestamptz DEFAULT clock_timestamp());
		CREATE FUNCTION app.work(ch text, p text) RETURNS void LANGUAGE sql AS
		  $$ INSERT INTO app.ran(channel, payload, node) VALUES (ch, p, pgrelay._this_node()) $$;`))
	nodes := make([]*mmNode, 3)
	for n := 1; n <= 2; n++ {
		pool, err := pgxpool.New(ctx, cluster.URL(n))
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		nodes[n] = &mmNode{t: t, n: n, url: cluster.URL(n), pool: pool}
	}
	n1, n2 := nodes[1], nodes[2]
	// register on node 1 replicates the channel to node 2.
	register := func(channel, extra string) {
		n1.exec(fmt.Sprintf(`SELECT pgrelay.register('%s', 'SELECT app.work(''%s'', $1)'%s)`, channel, channel, extra))
		testenv.Eventually(t, 20*time.Second, "channel "+channel+" on node 2", func() bool {
			return n2.count(`SELECT count(*) FROM pgrelay.channels WHERE channel = $1`, channel) == 1
		})
	}
	// succeeded counts the succeeded log rows of channel seen on node n (the
	// log replicates: each node sees both nodes' rows).
	succeeded := func(m *mmNode, channel string) int {
		return m.count(`SELECT count(*) FROM pgrelay.log WHERE channel = $1 AND event = 'succeeded'`, channel)
	}

	t.Run("multi-node", func(t *testing.T) {
		register("mn", "")
		// A 'channel'-mode sql channel (lane batches): each node runs its own
		// events one at a time, in id order.
		register("mnc", ", p_concurrency_mode := 'channel'")
		n1.enqueue("mn", "one", 5000)
		n2.enqueue("mn", "two", 5000)
		n1.enqueue("mnc", "one", 200)
		n2.enqueue("mnc", "two", 200)
		p1, p2 := n1.run("multi-node"), n2.run("multi-node")
		testenv.Eventually(t, 3*time.Minute, "10 000 events on both nodes", func() bool {
			return succeeded(n1, "mn") >= 10000 && succeeded(n2, "mn") >= 10000
		})
		testenv.Eventually(t, time.Minute, "the 'channel' lanes on both nodes", func() bool {
			return succeeded(n1, "mnc") >= 400 && succeeded(n2, "mnc") >= 400
		})
		require.Equal(t, 400, succeeded(n1, "mnc"))
		for _, m := range []*mmNode{n1, n2} {
			prefix := map[int]string{1: "one", 2: "two"}[m.n]
			want := make([]string, 200)
			for i := range want {
				want[i] = fmt.Sprintf("%s-%d", prefix, i)
			}
			got := mmColumn(t, m, `SELECT payload FROM app.ran WHERE channel = 'mnc' ORDER BY at`)
			require.Equal(t, want, got, "node %d ran its own 'channel' events, in id order", m.n)
			require.Equal(t, 200, m.count(`SELECT count(*) FROM app.ran WHERE channel = 'mnc' AND node = $1`, m.n))
		}
		require.Equal(t, 10000, succeeded(n1, "mn"))
		// Each event ran on its owner node, once.
		require.Equal(t, 5000, n1.count(`SELECT count(DISTINCT payload) FROM app.ran WHERE channel = 'mn' AND node = 1 AND payload LIKE 'one-%'`))
		require.Equal(t, 5000, n1.count(`SELECT count(*) FROM app.ran WHERE channel = 'mn'`))
		require.Equal(t, 5000, n2.count(`SELECT count(DISTINCT payload) FROM app.ran WHERE channel = 'mn' AND node = 2 AND payload LIKE 'two-%'`))
		require.Equal(t, 5000, n2.count(`SELECT count(*) FROM app.ran WHERE channel = 'mn'`))
		// The log agrees: each origin succeeded once, on the node in its id.
		require.Equal(t, 10000, n1.count(`SELECT count(DISTINCT origin_id) FROM pgrelay.log WHERE channel = 'mn' AND event = 'succeeded' AND node = (origin_id >> 12) & 1023`))
		require.Equal(t, 0, n1.count(`SELECT count(*) FROM pgrelay.log WHERE channel = 'mn' AND event <> 'succeeded'`))
		p1.signal(syscall.SIGTERM)
		p2.signal(syscall.SIGTERM)
		require.Equal(t, 0, p1.wait(30*time.Second))
		require.Equal(t, 0, p2.wait(30*time.Second))
	})

	t.Run("leader", func(t *testing.T) {
		register("ld", "")
		// The backlog's handler takes a moment, so that the leader still has
		// rows pending and a batch in flight when it is killed.
		n1.exec(`SELECT pgrelay.register('lk', 'SELECT app.work(''lk'', $1), pg_sleep(0.002)')`)
		testenv.Eventually(t, 20*time.Second, "channel lk on node 2", func() bool {
			return n2.count(`SELECT count(*) FROM pgrelay.channels WHERE channel = 'lk'`) == 1
		})
		// Node 1 polls only every 10 minutes: it learns of rows enqueued on
		// node 2 only from the replica wake-up trigger (queue_wake_replica).
		p1 := n1.run("leader", "--poll-interval", "10m")
		// Node 1 holds the lease, and node 2 knows it before it starts: a
		// node 2 that starts while node 1's lease row is still on its way
		// (replication lagging on a loaded machine) finds the lease free,
		// takes it, and wins it by last-update-wins while node 1 settles.
		testenv.Eventually(t, 30*time.Second, "node 1's lease on both nodes", func() bool {
			const held = `SELECT count(*) FROM pgrelay._lease_holder(now()) WHERE leader_node = 1`
			return n1.count(held) == 1 && n2.count(held) == 1
		})
		p2 := n2.run("leader")
		n1.enqueue("ld", "a", 1000)
		n2.enqueue("ld", "b", 1000) // enqueued on the follower: replicated to the leader
		testenv.Eventually(t, 2*time.Minute, "2 000 events", func() bool { return succeeded(n1, "ld") >= 2000 })
		require.Equal(t, 2000, succeeded(n1, "ld"))
		require.Equal(t, 2000, n1.count(`SELECT count(*) FROM app.ran WHERE channel = 'ld' AND node = 1`),
			"the leader ran every unrestricted event, from both nodes")
		require.Equal(t, 0, n2.count(`SELECT count(*) FROM app.ran WHERE channel = 'ld'`))

		// Replication lag, end to end: an event enqueued on node 2 runs on the
		// leader, node 1, which is idle and does not poll: only the wake-up
		// trigger, fired by the replication apply worker, tells it.
		start := time.Now()
		n2.enqueue("ld", "lag", 1)
		testenv.Eventually(t, 15*time.Second, "the lag probe (woken by the replica trigger, not the 10-minute poll)", func() bool {
			return n1.count(`SELECT count(*) FROM app.ran WHERE channel = 'ld' AND payload = 'lag-0'`) == 1
		})
		t.Logf("enqueued on node 2, ran on the leader (node 1) after %s", time.Since(start).Round(time.Millisecond))

		// A backlog on both nodes; kill the leader (SIGKILL) while it works
		// through it: node 2 takes over within the documented bound.
		const backlog = 3000
		n1.enqueue("lk", "k1", backlog/2)
		n2.enqueue("lk", "k2", backlog/2)
		testenv.Eventually(t, time.Minute, "the leader to be working on the backlog", func() bool {
			return n1.count(`SELECT count(*) FROM app.ran WHERE channel = 'lk'`) >= 100
		})
		p1.signal(syscall.SIGKILL)
		killed := time.Now()
		p1.wait(10 * time.Second)
		pending := n1.count(`SELECT count(*) FROM pgrelay.queue WHERE channel = 'lk'`)
		require.Positive(t, pending, "the leader was killed with rows pending")
		testenv.Eventually(t, time.Minute, "node 2 to take over", func() bool {
			return n2.count(`SELECT count(*) FROM app.ran WHERE channel = 'lk'`) > 0
		})
		var took time.Duration
		var first time.Time
		require.NoError(t, n2.pool.QueryRow(context.Background(),
			`SELECT min(at) FROM app.ran WHERE channel = 'lk'`).Scan(&first))
		took = first.Sub(killed)
		// docs/multi-master.md: takeover within --dead-after + --leader-settle
		// + two --heartbeat-interval (6s + 1s + 0.5s here); the margin is for
		// a loaded 2-core machine (a beat or a claim delayed).
		bound := mmDeadAfter + time.Second + 2*250*time.Millisecond
		t.Logf("leader killed with %d rows pending; node 2 ran its first event %s later (documented bound %s)",
			pending, took.Round(time.Millisecond), bound)
		require.Less(t, took, bound+4*time.Second, "takeover within the documented bound (plus a margin)")
		require.Equal(t, 1, n2.count(`SELECT count(*) FROM pgrelay._lease_holder(now()) WHERE leader_node = 2 AND term >= 2`))
		testenv.Eventually(t, time.Minute, "every event to succeed", func() bool { return succeeded(n2, "lk") >= backlog })
		// The killed leader's batch in flight rolled back with its connection
		// (its handlers' effects and outcomes): each sql event ran once, and
		// succeeded once — not only once per origin.
		require.Equal(t, backlog, succeeded(n2, "lk"))
		require.Equal(t, backlog, n2.count(`SELECT count(DISTINCT origin_id) FROM pgrelay.log WHERE channel = 'lk' AND event = 'succeeded'`))
		ran := n1.count(`SELECT count(*) FROM app.ran WHERE channel = 'lk'`) + n2.count(`SELECT count(*) FROM app.ran WHERE channel = 'lk'`)
		require.Equal(t, backlog, ran, "no event's effects committed twice")
		require.Equal(t, 2001, succeeded(n2, "ld"))
		p2.signal(syscall.SIGTERM)
		require.Equal(t, 0, p2.wait(30*time.Second))
	})

	t.Run("node-restricted", func(t *testing.T) {
		register("mv", ", p_node_restricted := true, p_deduplicate := true")
		// The same deployment script runs on every node (pg_auto_mv): on node
		// 2 the replicated channel is registered again, identically, a no-op;
		// a different definition is refused.
		n2.exec(`SELECT pgrelay.register('mv', 'SELECT app.work(''mv'', $1)', p_node_restricted := true, p_deduplicate := true)`)
		_, err := n2.pool.Exec(ctx, `SELECT pgrelay.register('mv', 'SELECT app.work(''mv'', $1)', p_node_restricted := true)`)
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr)
		require.Equal(t, "PR003", pgErr.Code)
		require.Contains(t, pgErr.Message, "deduplicate")
		// Each node has the channel's lock rows, made locally.
		require.Equal(t, 64, n2.count(`SELECT count(*) FROM pgrelay.channel_locks WHERE channel = 'mv'`))
		// One unrestricted row stays pending on node 1: its channel is paused.
		register("held", "")
		n1.exec(`SELECT pgrelay.notify('held', 'x')`)
		n1.exec(`SELECT pgrelay.update('held', p_paused := true)`)
		// No Processor runs yet: the same payload queued on each node, twice.
		for _, m := range []*mmNode{n1, n2} {
			m.exec(`SELECT pgrelay.notify('mv', 'orders_summary')`)
			m.exec(`SELECT pgrelay.notify('mv', 'orders_summary')`)
		}
		testenv.Eventually(t, 20*time.Second, "both pinned rows on both nodes", func() bool {
			return n1.count(`SELECT count(*) FROM pgrelay.queue WHERE channel = 'mv'`) == 2 &&
				n2.count(`SELECT count(*) FROM pgrelay.queue WHERE channel = 'mv'`) == 2
		})
		// Dedup is per node: one row pinned to each.
		require.Equal(t, 1, n1.count(`SELECT count(*) FROM pgrelay.queue WHERE channel = 'mv' AND run_in_node = 1`))
		require.Equal(t, 1, n1.count(`SELECT count(*) FROM pgrelay.queue WHERE channel = 'mv' AND run_in_node = 2`))
		// Leader mode on both: each node runs its own refresh, once. Node 1
		// has had no Processor since the leader scenario killed it: it looks
		// dead, and a node 2 that started first would adopt its unrestricted
		// rows (the held one) before node 1's first heartbeat arrived. Node 2
		// starts once it sees node 1 alive.
		p1 := n1.run("leader")
		testenv.Eventually(t, 30*time.Second, "node 1 alive on node 2", func() bool {
			return n2.count(`SELECT count(*) FROM pgrelay.nodes WHERE node_id = 1 AND last_seen > now() - $1::interval`,
				mmDeadAfter.String()) == 1
		})
		p2 := n2.run("leader")
		testenv.Eventually(t, time.Minute, "a refresh on each node", func() bool {
			return n1.count(`SELECT count(*) FROM app.ran WHERE channel = 'mv'`) == 1 &&
				n2.count(`SELECT count(*) FROM app.ran WHERE channel = 'mv'`) == 1
		})
		require.Equal(t, 1, n1.count(`SELECT count(*) FROM app.ran WHERE channel = 'mv' AND node = 1`))
		require.Equal(t, 1, n2.count(`SELECT count(*) FROM app.ran WHERE channel = 'mv' AND node = 2`))

		// Node 2 stops for good; a row pinned to it is never run elsewhere.
		p2.signal(syscall.SIGTERM)
		require.Equal(t, 0, p2.wait(30*time.Second))
		n2.exec(`SELECT pgrelay.notify('mv', 'stranded')`)
		testenv.Eventually(t, 20*time.Second, "the stranded row on node 1", func() bool {
			return n1.count(`SELECT pending_restricted FROM pgrelay.queue_stats() WHERE channel = 'mv'`) == 1
		})
		testenv.Eventually(t, 30*time.Second, "node 2 to count as dead", func() bool {
			return n1.count(`SELECT count(*) FROM pgrelay.nodes WHERE node_id = 2 AND last_seen < now() - $1::interval`,
				mmDeadAfter.String()) == 1
		})
		require.Equal(t, 1, n1.count(`SELECT count(*) FROM pgrelay.queue WHERE channel = 'mv' AND run_in_node = 2 AND dispatched_at IS NULL`))
		require.Equal(t, 0, n1.count(`SELECT count(*) FROM app.ran WHERE payload = 'stranded'`))
		// Node 2 may have held the lease when it stopped (it released it):
		// node 1 leads after taking it and settling.
		testenv.Eventually(t, 30*time.Second, "node 1 to lead", func() bool {
			return n1.count(`SELECT count(*) FROM pgrelay.nodes_overview($1) WHERE node_id = 1 AND leader`, mmDeadAfter.String()) == 1
		})
		code, out, errOut := cliMain("nodes", "--database-url", n1.url, "--dead-after", mmDeadAfter.String())
		require.Equal(t, 0, code, errOut)
		table := parseTable(t, out)
		require.Len(t, table, 2, out)
		// Node 1 leads and holds one pending unrestricted row (of the paused
		// channel); node 2 is dead with one row pinned to it.
		for col, want := range map[string]string{"NODE": "1", "MODE": "leader", "STATE": "alive", "LEADER": "leader",
			"PROCESSORS": "1", "PENDING": "1", "PINNED": "0"} {
			require.Equal(t, want, table[0][col], "node 1 %s:\n%s", col, out)
		}
		for col, want := range map[string]string{"NODE": "2", "MODE": "leader", "STATE": "dead", "LEADER": "",
			"PROCESSORS": "0", "PENDING": "0", "PINNED": "1"} {
			require.Equal(t, want, table[1][col], "node 2 %s:\n%s", col, out)
		}
		code, out, errOut = cliMain("nodes", "decommission", "2", "--database-url", n1.url, "--dead-after", mmDeadAfter.String())
		require.Equal(t, 2, code, "decommission needs --yes: %s %s", out, errOut)
		require.Contains(t, out, "decommissioning node 2 would discard 1 pinned rows")
		require.Equal(t, 1, n1.count(`SELECT count(*) FROM pgrelay.queue WHERE run_in_node = 2`), "nothing was discarded")
		code, out, errOut = cliMain("nodes", "decommission", "2", "--yes", "--database-url", n1.url, "--dead-after", mmDeadAfter.String())
		require.Equal(t, 0, code, errOut)
		require.Contains(t, out, "1 pinned rows discarded")
		testenv.Eventually(t, 20*time.Second, "the decommission to replicate", func() bool {
			return n2.count(`SELECT count(*) FROM pgrelay.queue WHERE channel = 'mv'`) == 0
		})
		p1.signal(syscall.SIGTERM)
		require.Equal(t, 0, p1.wait(30*time.Second))
	})

	t.Run("adoption", func(t *testing.T) {
		register("ad", "")
		// Node 2's Processor ran once (so node 2 is a known multi-node node),
		// then was killed; 1 000 rows wait on node 2.
		p2 := n2.run("multi-node")
		testenv.Eventually(t, 20*time.Second, "node 2 to heartbeat", func() bool {
			return n1.count(`SELECT count(*) FROM pgrelay.nodes WHERE node_id = 2 AND mode = 'multi-node' AND last_seen > now() - interval '1 second'`) == 1
		})
		p2.signal(syscall.SIGKILL)
		p2.wait(10 * time.Second)
		n2.enqueue("ad", "orphan", 1000)
		testenv.Eventually(t, 20*time.Second, "node 2's rows on node 1", func() bool {
			return n1.count(`SELECT count(*) FROM pgrelay.queue WHERE channel = 'ad'`) == 1000
		})
		// Node 2's database goes down too: node 1's adoption reaches node 2
		// only once it is back.
		require.NoError(t, cluster.StopNode(2))
		p1 := n1.run("multi-node")
		testenv.Eventually(t, 2*time.Minute, "node 1 to adopt and run node 2's rows", func() bool {
			return n1.count(`SELECT count(*) FROM app.ran WHERE channel = 'ad'`) == 1000
		})
		require.Equal(t, 1000, n1.count(`SELECT count(*) FROM pgrelay.log WHERE channel = 'ad' AND event = 'adopted'`))

		// Node 2 comes back, database and Processor at once. Until node 1's
		// adoption replicates, node 2's own copy lists the 1 000 rows as its
		// own and pending: its Processor rejoins (it finds itself dead) and
		// claims unrestricted rows only once node 1 has answered its ask,
		// which reaches node 2 after the adoption (the settle, an hour here,
		// never decides).
		require.NoError(t, cluster.StartNode(ctx, 2))
		n2.pool.Reset()
		p2 = n2.run("multi-node", "--leader-settle", "1h")
		require.NoError(t, cluster.WaitReplicating(ctx))
		testenv.Eventually(t, 30*time.Second, "the adoption and the outcomes to reach node 2", func() bool {
			return n2.count(`SELECT count(*) FROM pgrelay.queue WHERE channel = 'ad'`) == 0
		})
		testenv.Eventually(t, 20*time.Second, "node 2 to heartbeat again", func() bool {
			return n1.count(`SELECT count(*) FROM pgrelay.nodes WHERE node_id = 2 AND last_seen > now() - interval '1 second'`) == 1
		})
		require.Equal(t, 0, n2.count(`SELECT count(*) FROM app.ran WHERE channel = 'ad'`), "node 2 ran none of the adopted rows")
		n2.enqueue("ad", "back", 10)
		testenv.Eventually(t, 30*time.Second, "node 2 to run its new rows once node 1 answered", func() bool {
			return n2.count(`SELECT count(*) FROM app.ran WHERE channel = 'ad' AND payload LIKE 'back-%'`) == 10
		})
		require.Equal(t, 10, n2.count(`SELECT count(*) FROM app.ran WHERE channel = 'ad'`), "and none of the adopted ones")
		for _, m := range []*mmNode{n1, n2} {
			testenv.Eventually(t, 30*time.Second, fmt.Sprint("every outcome on node ", m.n), func() bool {
				return m.count(`SELECT count(*) FROM pgrelay.log WHERE channel = 'ad' AND event = 'succeeded'`) == 1010
			})
			require.Equal(t, 1010, m.count(`SELECT count(DISTINCT origin_id) FROM pgrelay.log WHERE channel = 'ad' AND event = 'succeeded'`))
		}
		for _, p := range []*proc{p1, p2} {
			p.signal(syscall.SIGTERM)
			require.Equal(t, 0, p.wait(30*time.Second))
		}
	})
}

// mmColumn runs a one-column text query on node m.
func mmColumn(t *testing.T, m *mmNode, sql string) []string {
	t.Helper()
	rows, err := m.pool.Query(context.Background(), sql)
	require.NoError(t, err, sql)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err, sql)
	return out
}

// parseTable reads the aligned table `pgrelay nodes` prints: one map per row,
// by header, each cell cut at its header's column.
func parseTable(t *testing.T, out string) []map[string]string {
	t.Helper()
	ls := lines(out)
	require.NotEmpty(t, ls)
	header := ls[0]
	var names []string
	var starts []int
	for i := 0; i < len(header); {
		if header[i] == ' ' {
			i++
			continue
		}
		// A header name ends at two spaces (names may hold one: LAST HEARTBEAT).
		j := i
		for j < len(header) && !(header[j] == ' ' && (j+1 == len(header) || header[j+1] == ' ')) {
			j++
		}
		names = append(names, header[i:j])
		starts = append(starts, i)
		i = j
	}
	var table []map[string]string
	for _, l := range ls[1:] {
		if l == "" { // the table ends at a blank line
			break
		}
		row := map[string]string{}
		for k, name := range names {
			end := len(l)
			if k+1 < len(starts) {
				end = min(starts[k+1], len(l))
			}
			if starts[k] < end {
				row[name] = strings.TrimSpace(l[starts[k]:end])
			} else {
				row[name] = ""
			}
		}
		table = append(table, row)
	}
	return table
}

// `pgrelay run --node-id N` runs the Processor's sessions as node N: its
// heartbeat rows and the log rows of the events it ran name node 7.
func TestRunNodeID(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	d.enqueue("c", "SELECT $1", 3)
	p := startCLI(t, nil, "run", "--database-url", d.URL, "--node-id", "7", "--poll-interval", "200ms",
		"--log-level", "warn")
	testenv.Eventually(t, 30*time.Second, "3 events", func() bool { return d.succeeded() == 3 })
	require.Equal(t, 3, d.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'succeeded' AND node = 7`))
	require.Equal(t, 1, d.Count(`SELECT count(*) FROM pgrelay.nodes WHERE node_id = 7`))
	require.Equal(t, 1, d.Count(`SELECT count(*) FROM pgrelay.processors WHERE node_id = 7`))
	p.signal(syscall.SIGTERM)
	require.Equal(t, 0, p.wait(30*time.Second))
}

// `pgrelay nodes` on one database; `nodes decommission` without --yes says
// how many pinned rows it would discard, discards nothing and exits 2; with
// it the node shows as decommissioned.
func TestNodesListAndDecommissionDryRun(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	d.Exec(`SELECT pgrelay.register('pinned', 'SELECT $1', p_node_restricted := true)`)
	d.Exec(`INSERT INTO pgrelay.nodes (node_id, mode, last_seen) VALUES (3, 'multi-node', now() - interval '1 hour'),
		(4, 'multi-node', now())`)
	for range 2 {
		_, err := d.Pool.Exec(context.Background(), `BEGIN; SET LOCAL pg_relay.node_id = '3';
			SELECT pgrelay.notify('pinned', 'x'); COMMIT`)
		require.NoError(t, err)
	}
	code, out, errOut := cliMain("nodes", "--database-url", d.URL)
	require.Equal(t, 0, code, errOut)
	table := parseTable(t, out)
	require.Len(t, table, 2, out)
	require.Equal(t, map[string]string{"NODE": "3", "MODE": "multi-node", "STATE": "dead", "LEADER": "",
		"PROCESSORS": "0", "PENDING": "0", "PINNED": "2"}, pick(table[0], "NODE", "MODE", "STATE", "LEADER", "PROCESSORS", "PENDING", "PINNED"))
	require.Equal(t, "alive", table[1]["STATE"])
	// Dead is judged by the command's own --dead-after.
	code, out, errOut = cliMain("nodes", "--database-url", d.URL, "--dead-after", "2h")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "alive", parseTable(t, out)[0]["STATE"])

	// --watch shows the view again every interval, the changes included.
	code, out, errOut = cliMain("nodes", "--database-url", d.URL, "--watch", "10ms", "--limit", "3")
	require.Equal(t, 0, code, errOut)
	views := strings.Split(out, "pgrelay nodes — ")
	require.Len(t, views, 4, out)
	for _, v := range views[1:] {
		require.Contains(t, v, "every 10ms, Ctrl-C to stop")
		require.Len(t, parseTable(t, v[strings.Index(v, "NODE"):]), 2, v)
		require.Contains(t, v, "replication (node 0): no pglogical or Spock", v)
	}
	code, _, errOut = cliMain("nodes", "--database-url", d.URL, "--limit", "3")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "--limit needs --watch")

	code, out, errOut = cliMain("nodes", "decommission", "3", "--database-url", d.URL)
	require.Equal(t, 2, code, errOut)
	require.Contains(t, out, "decommissioning node 3 would discard 2 pinned rows")
	require.Contains(t, errOut, "--yes")
	require.Equal(t, 2, d.Count(`SELECT count(*) FROM pgrelay.queue WHERE run_in_node = 3`), "nothing discarded")
	code, out, errOut = cliMain("nodes", "decommission", "3", "--yes", "--database-url", d.URL)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "2 pinned rows discarded")
	require.Zero(t, d.Count(`SELECT count(*) FROM pgrelay.queue`))
	// It stays listed, decommissioned, so that its rows arriving late are
	// adopted.
	code, out, errOut = cliMain("nodes", "--database-url", d.URL)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "decommissioned", parseTable(t, out)[0]["STATE"], out)
}

func pick(m map[string]string, keys ...string) map[string]string {
	out := map[string]string{}
	for _, k := range keys {
		out[k] = m[k]
	}
	return out
}
