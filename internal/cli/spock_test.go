package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/events"
	"github.com/pgrelay/pgrelay/internal/devenv"
	"github.com/pgrelay/pgrelay/internal/testenv"
)

// spockWatch checks a Spock cluster after each scenario: spock.exception_log
// empty on every node, every subscription replicating, and each conflict
// Spock resolved on pgrelay's tables since the last check of a kind the
// scenario explains (why it is harmless).
type spockWatch struct {
	t    *testing.T
	c    *devenv.Cluster
	seen map[string]int
}

// check waits until the nodes have applied what each other sent (a
// spock.sync_event() on each node, waited for on every other), then reads
// the cluster's health. explain maps "table conflict_type" to why such a
// conflict is harmless; a resolution of any other kind fails the test.
func (w *spockWatch) check(t *testing.T, scenario string, explain map[string]string) {
	t.Helper()
	ctx := context.Background()
	w.sync()
	h, err := w.c.Health(ctx)
	require.NoError(t, err)
	require.Empty(t, h.Exceptions, "%s: spock.exception_log", scenario)
	require.Empty(t, h.NotReplicating, "%s: subscriptions", scenario)
	keys := make([]string, 0, len(h.Resolutions))
	for k := range h.Resolutions {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var got []string
	for _, k := range keys {
		n := h.Resolutions[k] - w.seen[k]
		w.seen[k] = h.Resolutions[k]
		if n == 0 {
			continue
		}
		// k is "table conflict_type/conflict_resolution".
		kind := k[:strings.LastIndexByte(k, '/')]
		why, ok := explain[kind]
		require.True(t, ok, "%s: %d unexplained Spock resolutions %s; the latest: %s", scenario, n, k, h.Samples[k])
		sample := h.Samples[k]
		if len(sample) > 400 {
			sample = sample[:400] + "..."
		}
		got = append(got, fmt.Sprintf("%s: %d (%s)\n    the latest: %s", k, n, why, sample))
	}
	t.Logf("%s: spock.exception_log empty, every subscription replicating; spock.resolutions on pgrelay's tables: %d kinds\n  %s",
		scenario, len(got), strings.Join(got, "\n  "))
}

// sync waits until every node has applied everything every other node sent
// up to now (nodes in down are stopped).
func (w *spockWatch) sync(down ...int) {
	w.t.Helper()
	ctx := context.Background()
	if err := w.c.Sync(ctx, time.Minute, down...); err != nil {
		// Say why: a transaction that fails to apply disables its
		// subscription (exception_behaviour sub_disable) and is logged.
		h, herr := w.c.Health(ctx)
		w.t.Fatalf("%v\n  spock.exception_log: %q\n  not replicating: %q\n  (reading them: %v)",
			err, h.Exceptions, h.NotReplicating, herr)
	}
}

// The cluster scenarios on a real three-node pgEdge Spock cluster with its
// automatic DDL replication on, as pgEdge installs it (pgrelay migrate ran on
// every node at once). pglogical's two-node test (TestMultiMasterCluster)
// covers the same logic; these run once, on Spock only.
func TestSpockCluster(t *testing.T) {
	ctx := context.Background()
	cluster := testenv.ClusterT(t, devenv.ClusterConfig{Engine: devenv.Spock, Nodes: 3, AutoDDL: true})
	w := &spockWatch{t: t, c: cluster, seen: map[string]int{}}
	// The handler's table is local to each node, as a materialised view's
	// heap would be.
	require.NoError(t, cluster.ExecBoth(ctx, `CREATE SCHEMA app;
		CREATE TABLE app.ran (channel text, payload text, node int, at timestamptz DEFAULT clock_timestamp());
		CREATE FUNCTION app.work(ch text, p text) RETURNS void LANGUAGE sql AS
		  $$ INSERT INTO app.ran(channel, payload, node) VALUES (ch, p, pgrelay._this_node()) $$;`))
	nodes := make([]*mmNode, cluster.N()+1)
	for n := 1; n <= cluster.N(); n++ {
		pool, err := pgxpool.New(ctx, cluster.URL(n))
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		nodes[n] = &mmNode{t: t, n: n, url: cluster.URL(n), pool: pool}
	}
	all := nodes[1:]
	n1, n2, n3 := nodes[1], nodes[2], nodes[3]
	_, _ = n2, n3
	register := func(channel, extra string) {
		n1.exec(fmt.Sprintf(`SELECT pgrelay.register('%s', 'SELECT app.work(''%s'', $1)'%s)`, channel, channel, extra))
		for _, m := range all[1:] {
			testenv.Eventually(t, 20*time.Second, "channel "+channel+" on node "+fmt.Sprint(m.n), func() bool {
				return m.count(`SELECT count(*) FROM pgrelay.channels WHERE channel = $1`, channel) == 1
			})
		}
	}
	succeeded := func(m *mmNode, channel string) int {
		return m.count(`SELECT count(*) FROM pgrelay.log WHERE channel = $1 AND event = 'succeeded'`, channel)
	}
	stop := func(ps ...*proc) {
		t.Helper()
		for _, p := range ps {
			p.signal(syscall.SIGTERM)
		}
		for _, p := range ps {
			require.Equal(t, 0, p.wait(30*time.Second))
		}
	}
	w.check(t, "set-up", nil)

	// Each node's heartbeat and Processor rows are written by that node only;
	// the lease row by the nodes that take and renew it.
	beats := map[string]string{
		"pgrelay.nodes update_origin_differs": "the lease row (node_id -1), last written by another node, renewed or taken",
		"pgrelay.nodes update_update": "the lease row taken by several nodes at the same moment (leader mode started on every node at once, " +
			"or the surviving nodes taking the lease the killed leader let run out): " +
			"last update wins leaves one holder on every node, and a node leads only if it still holds the lease after --leader-settle",
		"pgrelay.nodes insert_exists": "the lease row made by several nodes at once, as above",
	}

	t.Run("multi-node", func(t *testing.T) {
		register("mn", "")
		register("mnc", ", p_concurrency_mode := 'channel'")
		register("mnp", ", p_concurrency_mode := 'payload'")
		for _, m := range all {
			m.enqueue("mn", fmt.Sprint("n", m.n), 2000)
			m.enqueue("mnc", fmt.Sprint("n", m.n), 100)
			m.exec(`SELECT pgrelay.notify_many('mnp', ARRAY(SELECT 'k' || (i % 5) FROM generate_series(1, 100) i))`)
		}
		var ps []*proc
		for _, m := range all {
			ps = append(ps, m.run("multi-node"))
		}
		for _, ch := range []struct {
			name string
			n    int
		}{{"mn", 6000}, {"mnc", 300}, {"mnp", 300}} {
			for _, m := range all {
				testenv.Eventually(t, 3*time.Minute, fmt.Sprintf("%d %s events on node %d", ch.n, ch.name, m.n), func() bool {
					return succeeded(m, ch.name) >= ch.n
				})
			}
			require.Equal(t, ch.n, succeeded(n1, ch.name))
			require.Equal(t, ch.n, n1.count(`SELECT count(DISTINCT origin_id) FROM pgrelay.log WHERE channel = $1 AND event = 'succeeded'
				AND node = (origin_id >> 12) & 1023`, ch.name), "each %s event succeeded once, on its owner", ch.name)
			for _, m := range all {
				require.Equal(t, ch.n/3, m.count(`SELECT count(*) FROM app.ran WHERE channel = $1 AND node = $2`, ch.name, m.n))
				require.Equal(t, ch.n/3, m.count(`SELECT count(*) FROM app.ran WHERE channel = $1`, ch.name))
			}
		}
		for _, m := range all {
			want := make([]string, 100)
			for i := range want {
				want[i] = fmt.Sprintf("n%d-%d", m.n, i)
			}
			require.Equal(t, want, mmColumn(t, m, `SELECT payload FROM app.ran WHERE channel = 'mnc' ORDER BY at`),
				"node %d ran its own 'channel' events, in id order", m.n)
		}
		require.Equal(t, 0, n1.count(`SELECT count(*) FROM pgrelay.log WHERE channel IN ('mn', 'mnc', 'mnp') AND event <> 'succeeded'`))
		stop(ps...)
		w.check(t, "multi-node", beats)
	})

	t.Run("unique keys", func(t *testing.T) {
		// One key notified on the three nodes at once, each in a transaction
		// left open until all three called: no node sees another's row, so
		// each accepts it and returns its own id. Each node holds its event
		// until the others' answers prove their rows below it are there;
		// then every node keeps the lowest id: it runs once, and each other
		// node ends its own deduplicated, naming it.
		register("uk", "")
		var ps []*proc
		for _, m := range all {
			ps = append(ps, m.run("multi-node"))
		}
		for _, m := range all {
			testenv.Eventually(t, 30*time.Second, fmt.Sprint("every node known on node ", m.n), func() bool {
				return m.count(`SELECT count(*) FROM pgrelay.nodes WHERE node_id > 0 AND mode = 'multi-node'`) == len(all)
			})
		}
		ids := make([]int64, len(all))
		txs := make([]pgx.Tx, len(all))
		for i, m := range all {
			tx, err := m.pool.Begin(ctx)
			require.NoError(t, err)
			txs[i] = tx
			require.NoError(t, tx.QueryRow(ctx, `SELECT pgrelay.notify('uk', $1, p_key := 'once', p_unique_for := '1 hour')`,
				fmt.Sprint("n", m.n)).Scan(&ids[i]))
		}
		for _, tx := range txs {
			require.NoError(t, tx.Commit(ctx))
		}
		require.Len(t, slices.Compact(slices.Sorted(slices.Values(ids))), len(all), "each node accepted the key")
		survivor := slices.Min(ids)
		for _, m := range all {
			testenv.Eventually(t, time.Minute, fmt.Sprint("the key's events ended on node ", m.n), func() bool {
				return m.count(`SELECT count(*) FROM pgrelay.log WHERE channel = 'uk' AND event IN ('succeeded', 'deduplicated')`) == len(all)
			})
		}
		ran := 0
		for i, m := range all {
			require.Equal(t, 1, m.count(`SELECT count(*) FROM pgrelay.log WHERE channel = 'uk' AND event = 'succeeded' AND origin_id = $1`, survivor))
			require.Equal(t, len(all)-1, m.count(`SELECT count(*) FROM pgrelay.log WHERE channel = 'uk' AND event = 'deduplicated'
				AND origin_id <> $1 AND node = (origin_id >> 12) & 1023 AND strpos(error, $1::text) > 0`, survivor),
				"each loser ended by its own node, naming the survivor")
			ran += m.count(`SELECT count(*) FROM app.ran WHERE channel = 'uk'`)
			if ids[i] != survivor {
				var st string
				require.NoError(t, m.pool.QueryRow(ctx, `SELECT pgrelay.status($1)`, ids[i]).Scan(&st))
				require.Equal(t, "deduplicated", st)
			}
		}
		require.Equal(t, 1, ran, "the key's event ran once in the cluster")
		// Within the window, after its success, every node returns it.
		for _, m := range all {
			require.Equal(t, survivor, int64(m.count(`SELECT pgrelay.notify('uk', 'again', p_key := 'once', p_unique_for := '1 hour')`)))
		}
		stop(ps...)
		w.check(t, "unique keys", beats)
	})

	t.Run("pg_auto_mv", func(t *testing.T) {
		// One deployment script, run on every node at the same moment:
		// it registers the same node-restricted channel and queues a
		// refresh, twice (the second is deduplicated against the node's own
		// pending row).
		script := `SELECT pgrelay.register('mv', 'SELECT app.work(''mv'', $1)', p_node_restricted := true, p_deduplicate := true);
			SELECT pgrelay.notify('mv', 'orders_summary');
			SELECT pgrelay.notify('mv', 'orders_summary');`
		errs := make(chan error, len(all))
		for _, m := range all {
			go func() {
				_, err := m.pool.Exec(ctx, script)
				errs <- err
			}()
		}
		for range all {
			require.NoError(t, <-errs)
		}
		w.sync()
		// Run again later, on every node (a re-deployment): the channel is
		// there, identical; the refresh still pending on each node absorbs it.
		for _, m := range all {
			_, err := m.pool.Exec(ctx, script)
			require.NoError(t, err, "node %d", m.n)
		}
		w.sync()
		for _, m := range all {
			require.Equal(t, 1, m.count(`SELECT count(*) FROM pgrelay.channels WHERE channel = 'mv' AND node_restricted AND deduplicate`))
			require.Equal(t, 64, m.count(`SELECT count(*) FROM pgrelay.channel_locks WHERE channel = 'mv'`))
			for _, pin := range all {
				require.Equal(t, 1, m.count(`SELECT count(*) FROM pgrelay.queue WHERE channel = 'mv' AND run_in_node = $1`, pin.n),
					"node %d sees one refresh pinned to node %d", m.n, pin.n)
			}
		}
		// Leader mode on every node: each node runs its own refresh, once,
		// whoever leads.
		var ps []*proc
		for _, m := range all {
			ps = append(ps, m.run("leader"))
		}
		for _, m := range all {
			testenv.Eventually(t, time.Minute, fmt.Sprint("the refresh on node ", m.n), func() bool {
				return m.count(`SELECT count(*) FROM app.ran WHERE channel = 'mv'`) == 1
			})
		}
		for _, m := range all {
			testenv.Eventually(t, 20*time.Second, fmt.Sprint("three refreshes logged on node ", m.n), func() bool {
				return succeeded(m, "mv") == 3
			})
			require.Equal(t, 1, m.count(`SELECT count(*) FROM app.ran WHERE channel = 'mv' AND node = $1`, m.n))
			// One notify absorbed per node at the deployment, two at the
			// re-deployment.
			require.Equal(t, 9, m.count(`SELECT count(*) FROM pgrelay.log WHERE channel = 'mv' AND event = 'deduplicated'`))
		}
		stop(ps...)
		w.check(t, "pg_auto_mv", map[string]string{
			"pgrelay.channels insert_exists":      "the script registered the same channel on every node at once: identical rows, either wins",
			"pgrelay.nodes update_origin_differs": beats["pgrelay.nodes update_origin_differs"],
			"pgrelay.nodes update_update":         beats["pgrelay.nodes update_update"],
			"pgrelay.nodes insert_exists":         beats["pgrelay.nodes insert_exists"],
		})
	})

	t.Run("notifier and NATS", func(t *testing.T) {
		smtp := smtpCatcher(t, devenv.SMTPConfig{})
		nats, js := startNATS(t)
		n1.exec(`SELECT pgrelay_notifier.create_channel('mail', 'app@shop.example')`)
		for _, m := range all[1:] {
			testenv.Eventually(t, 20*time.Second, fmt.Sprint("channel mail on node ", m.n), func() bool {
				return m.count(`SELECT count(*) FROM pgrelay.channels WHERE channel = 'mail'`) == 1
			})
		}
		send := func(round string) {
			for _, m := range all {
				m.exec(`SELECT pgrelay_notifier.send('mail', ARRAY[$1 || '-' || g || '@example.org'], 'Order ' || g, 'b')
					FROM generate_series(1, 50) g`, fmt.Sprintf("%s-n%d", round, m.n))
			}
		}
		env := []string{"PGRELAY_SMTP_URL=" + smtp.URL()}
		runAll := func(mode string) []*proc {
			var ps []*proc
			for _, m := range all {
				ps = append(ps, startCLI(t, env, "run", "--database-url", m.url, "--mode", mode,
					"--heartbeat-interval", "250ms", "--dead-after", mmDeadAfter.String(), "--leader-settle", "1s",
					"--poll-interval", "200ms", "--concurrency", "16", "--log-level", "warn",
					"--nats-url", nats.URL(), "--nats-publish-interval", "50ms"))
			}
			return ps
		}
		sent := func(m *mmNode) int {
			return m.count(`SELECT count(*) FROM pgrelay_notifier.notifications WHERE status = 'sent'`)
		}
		// multi-node: each node sends the emails composed on it.
		send("mn")
		ps := runAll("multi-node")
		for _, m := range all {
			testenv.Eventually(t, time.Minute, fmt.Sprint("150 emails sent, seen on node ", m.n), func() bool { return sent(m) == 150 })
		}
		// An email is marked sent before its event's outcome is written
		// (the completer's batch): a stopped Processor has written them all.
		stop(ps...)
		for _, m := range all {
			require.Equal(t, 50, m.count(`SELECT count(*) FROM pgrelay.log WHERE channel = 'mail' AND event = 'succeeded' AND node = $1`, m.n))
		}
		// leader: the leader sends every email, whichever node composed it
		// (it reads the notification from its own replicated copy).
		send("ld")
		ps = runAll("leader")
		for _, m := range all {
			testenv.Eventually(t, time.Minute, fmt.Sprint("300 emails sent, seen on node ", m.n), func() bool { return sent(m) == 300 })
		}
		var leader int
		require.NoError(t, n1.pool.QueryRow(ctx, `SELECT leader_node FROM pgrelay._lease_holder(now())`).Scan(&leader))
		// The outcomes follow the sends (the completer's batch), then
		// replicate to node 1.
		testenv.Eventually(t, time.Minute, "the 300 emails' successes logged, seen on node 1", func() bool {
			return n1.count(`SELECT count(*) FROM pgrelay.log WHERE channel = 'mail' AND event = 'succeeded'`) == 300
		})
		w.sync()
		for _, m := range all {
			want := 50 // its own, in multi-node mode
			if m.n == leader {
				want += 150
			}
			require.Equal(t, want, n1.count(`SELECT count(*) FROM pgrelay.log WHERE channel = 'mail' AND event = 'succeeded' AND node = $1`, m.n),
				"node %d (the leader: node %d)", m.n, leader)
		}
		// Every email arrived once.
		got := map[string]int{}
		for _, msg := range smtp.Messages() {
			require.Len(t, msg.To, 1)
			got[strings.Trim(msg.To[0], "<>")]++
		}
		require.Len(t, got, 300)
		for rcpt, k := range got {
			require.Equal(t, 1, k, "%s arrived %d times", rcpt, k)
		}
		// The NATS publisher of every node publishes that node's log rows:
		// each log row in the stream once.
		w.sync()
		total := n1.count(`SELECT count(*) FROM pgrelay.log`)
		testenv.Eventually(t, time.Minute, "every log row in the stream", func() bool {
			return eventMsgs(t, js) >= total
		})
		stop(ps...)
		ids := eventLogIDs(t, js)
		want := map[int64]bool{}
		for _, id := range mmIDs(t, n1, `SELECT id FROM pgrelay.log`) {
			want[id] = true
		}
		seen := map[int64]bool{}
		for _, id := range ids {
			require.False(t, seen[id], "log row %d twice in the stream", id)
			require.True(t, want[id], "stream message for log row %d, not in the log", id)
			seen[id] = true
		}
		for id := range want {
			require.True(t, seen[id], "log row %d missing from the stream", id)
		}
		w.check(t, "notifier and NATS", map[string]string{
			"pgrelay.nodes update_origin_differs": beats["pgrelay.nodes update_origin_differs"],
			"pgrelay.nodes update_update":         beats["pgrelay.nodes update_update"],
			"pgrelay.nodes insert_exists":         beats["pgrelay.nodes insert_exists"],
		})
	})

	t.Run("leader", func(t *testing.T) {
		n1.exec(`SELECT pgrelay.register('lk', 'SELECT app.work(''lk'', $1), pg_sleep(0.002)')`)
		for _, m := range all[1:] {
			testenv.Eventually(t, 20*time.Second, fmt.Sprint("channel lk on node ", m.n), func() bool {
				return m.count(`SELECT count(*) FROM pgrelay.channels WHERE channel = 'lk'`) == 1
			})
		}
		// Node 1 leads first, and every node knows it before the others start.
		p1 := n1.run("leader", "--poll-interval", "10m")
		const held = `SELECT count(*) FROM pgrelay._lease_holder(now()) WHERE leader_node = 1`
		for _, m := range all {
			testenv.Eventually(t, 30*time.Second, fmt.Sprint("node 1's lease on node ", m.n), func() bool { return m.count(held) == 1 })
		}
		p2, p3 := n2.run("leader"), n3.run("leader")
		// A failure below must not leave leaders running into the next scenario.
		t.Cleanup(func() {
			for _, p := range []*proc{p1, p2, p3} {
				if !p.exited() {
					_ = p.cmd.Process.Kill()
					<-p.done
				}
			}
		})
		// A backlog enqueued on every node: the leader runs it all.
		const backlog = 3000
		for _, m := range all {
			m.enqueue("lk", fmt.Sprint("k", m.n), backlog/3)
		}
		testenv.Eventually(t, time.Minute, "the leader to be working on the backlog", func() bool {
			return n1.count(`SELECT count(*) FROM app.ran WHERE channel = 'lk'`) >= 100
		})
		p1.signal(syscall.SIGKILL)
		killed := time.Now()
		p1.wait(10 * time.Second)
		pending := n1.count(`SELECT count(*) FROM pgrelay.queue WHERE channel = 'lk'`)
		require.Positive(t, pending, "the leader was killed with rows pending")
		var next *mmNode
		testenv.Eventually(t, time.Minute, "another node to take over", func() bool {
			for _, m := range all[1:] {
				if m.count(`SELECT count(*) FROM app.ran WHERE channel = 'lk'`) > 0 {
					next = m
					return true
				}
			}
			return false
		})
		var first time.Time
		require.NoError(t, next.pool.QueryRow(ctx, `SELECT min(at) FROM app.ran WHERE channel = 'lk'`).Scan(&first))
		took := first.Sub(killed)
		bound := mmDeadAfter + time.Second + 2*250*time.Millisecond
		t.Logf("leader killed with %d rows pending; node %d ran its first event %s later (documented bound %s)",
			pending, next.n, took.Round(time.Millisecond), bound)
		require.Less(t, took, bound+4*time.Second, "takeover within the documented bound (plus a margin)")
		testenv.Eventually(t, 2*time.Minute, "every event to succeed", func() bool { return succeeded(next, "lk") >= backlog })
		w.sync() // node 1 lost only its Processor: its database must have every outcome too
		if ran := leaderRuns(t, all); len(ran) > 0 {
			t.Logf("events that ran more than once (payload: node@time...), then the lease rows:\n%s", strings.Join(ran, "\n"))
			if h, err := w.c.Health(ctx); err == nil {
				t.Logf("spock.resolutions on pgrelay's tables: %v\nthe latest of each: %v", h.Resolutions, h.Samples)
			}
		}
		for _, m := range all {
			require.Equal(t, backlog, succeeded(m, "lk"), "node %d's log", m.n)
			require.Equal(t, backlog, m.count(`SELECT count(DISTINCT origin_id) FROM pgrelay.log WHERE channel = 'lk' AND event = 'succeeded'`))
			require.Equal(t, 1, m.count(`SELECT count(*) FROM pgrelay._lease_holder(now()) WHERE leader_node = $1 AND term >= 2`, next.n))
		}
		ran := 0
		for _, m := range all {
			ran += m.count(`SELECT count(*) FROM app.ran WHERE channel = 'lk'`)
		}
		require.Equal(t, backlog, ran, "no event's effects committed twice")
		stop(p2, p3)
		w.check(t, "leader", map[string]string{
			"pgrelay.nodes update_origin_differs": beats["pgrelay.nodes update_origin_differs"],
			"pgrelay.nodes update_update":         beats["pgrelay.nodes update_update"],
			"pgrelay.queue update_origin_differs": "a row enqueued on one node, claimed or run by the leader: the leader's update " +
				"reaches the third node, whose copy came from the row's origin; the leader alone writes unrestricted rows",
			"pgrelay.queue delete_origin_differs": "the same for the leader's delete of a row it ran",
		})
	})

	t.Run("adoption", func(t *testing.T) {
		register("ad", "")
		// Node 3's Processor ran once (a known multi-node node), then was
		// killed; 600 rows wait on node 3, and one row pinned to it.
		p3 := n3.run("multi-node")
		testenv.Eventually(t, 20*time.Second, "node 3 to heartbeat", func() bool {
			return n1.count(`SELECT count(*) FROM pgrelay.nodes WHERE node_id = 3 AND mode = 'multi-node' AND last_seen > now() - interval '1 second'`) == 1
		})
		p3.signal(syscall.SIGKILL)
		p3.wait(10 * time.Second)
		n3.enqueue("ad", "orphan", 600)
		n3.exec(`SELECT pgrelay.notify('mv', 'pinned-3')`)
		w.sync()
		// Node 3's database goes down too.
		require.NoError(t, cluster.StopNode(3))
		p1, p2 := n1.run("multi-node"), n2.run("multi-node")
		testenv.Eventually(t, 2*time.Minute, "node 1 to adopt and run node 3's rows", func() bool {
			return n1.count(`SELECT count(*) FROM app.ran WHERE channel = 'ad'`) == 600
		})
		// The live node with the smallest id adopted, the other ran none.
		require.Equal(t, 600, n1.count(`SELECT count(*) FROM pgrelay.log WHERE channel = 'ad' AND event = 'adopted' AND node = 1`))
		require.Equal(t, 0, n2.count(`SELECT count(*) FROM app.ran WHERE channel = 'ad'`))
		// The row pinned to node 3 is untouched on both live nodes.
		for _, m := range all[:2] {
			require.Equal(t, 1, m.count(`SELECT count(*) FROM pgrelay.queue WHERE channel = 'mv' AND run_in_node = 3
				AND owner_node = 3 AND dispatched_at IS NULL AND attempt = 1`), "node %d", m.n)
			require.Equal(t, 0, m.count(`SELECT count(*) FROM app.ran WHERE payload = 'pinned-3'`))
		}

		// Node 3 comes back, database and Processor at once: it rejoins
		// (claims unrestricted rows only once nodes 1 and 2 have answered its
		// ask; the settle, an hour here, never decides), runs its pinned row,
		// its new rows, and none of the adopted ones.
		require.NoError(t, cluster.StartNode(ctx, 3))
		n3.pool.Reset()
		p3 = n3.run("multi-node", "--leader-settle", "1h")
		require.NoError(t, cluster.WaitReplicating(ctx))
		testenv.Eventually(t, 30*time.Second, "the adoption and the outcomes to reach node 3", func() bool {
			return n3.count(`SELECT count(*) FROM pgrelay.queue WHERE channel = 'ad'`) == 0
		})
		testenv.Eventually(t, 30*time.Second, "node 3 to run its pinned row", func() bool {
			return n3.count(`SELECT count(*) FROM app.ran WHERE payload = 'pinned-3'`) == 1
		})
		require.Equal(t, 0, n3.count(`SELECT count(*) FROM app.ran WHERE channel = 'ad'`), "node 3 ran none of the adopted rows")
		n3.enqueue("ad", "back", 5)
		testenv.Eventually(t, 30*time.Second, "node 3 to run its new rows once its peers answered", func() bool {
			return n3.count(`SELECT count(*) FROM app.ran WHERE channel = 'ad' AND payload LIKE 'back-%'`) == 5
		})
		require.Equal(t, 5, n3.count(`SELECT count(*) FROM app.ran WHERE channel = 'ad'`), "and none of the adopted ones")
		require.Equal(t, 2, n3.count(`SELECT count(*) FROM pgrelay.sync_answers WHERE node_id = 3`), "nodes 1 and 2 answered")
		w.sync()
		for _, m := range all {
			require.Equal(t, 605, m.count(`SELECT count(*) FROM pgrelay.log WHERE channel = 'ad' AND event = 'succeeded'`))
			require.Equal(t, 605, m.count(`SELECT count(DISTINCT origin_id) FROM pgrelay.log WHERE channel = 'ad' AND event = 'succeeded'`))
			// Node 3's refreshes: pg_auto_mv's and its pinned row, each once.
			require.Equal(t, 2, m.count(`SELECT count(*) FROM pgrelay.log WHERE channel = 'mv' AND event = 'succeeded' AND node = 3`))
		}
		w.check(t, "adoption", adoptionConflicts)

		// Decommission: node 3 stops for good with a row pinned to it.
		stop(p3)
		n3.exec(`SELECT pgrelay.notify('mv', 'stranded')`)
		for _, m := range all[:2] {
			testenv.Eventually(t, 20*time.Second, fmt.Sprint("the stranded row on node ", m.n), func() bool {
				return m.count(`SELECT count(*) FROM pgrelay.queue WHERE channel = 'mv' AND payload = 'stranded'`) == 1
			})
		}
		testenv.Eventually(t, 30*time.Second, "node 3 to count as dead", func() bool {
			return n1.count(`SELECT count(*) FROM pgrelay.nodes WHERE node_id = 3 AND last_seen < now() - $1::interval`,
				mmDeadAfter.String()) == 1
		})
		code, out, errOut := cliMain("nodes", "--database-url", n1.url, "--dead-after", mmDeadAfter.String())
		require.Equal(t, 0, code, errOut)
		table := parseTable(t, out)
		require.Len(t, table, 3, out)
		require.Equal(t, map[string]string{"NODE": "3", "STATE": "dead", "PINNED": "1"}, pick(table[2], "NODE", "STATE", "PINNED"), out)
		require.Contains(t, out, "replication (node 1, spock): every table of pgrelay and pgrelay_notifier is in a subscribed replication set")
		// The same, watched: each view shows the subscriptions and their lag.
		code, out, errOut = cliMain("nodes", "--database-url", n1.url, "--dead-after", mmDeadAfter.String(),
			"--watch", "10ms", "--limit", "2")
		require.Equal(t, 0, code, errOut)
		require.Equal(t, 2, strings.Count(out, "subscriptions (node 1, spock): "), out)
		require.Equal(t, 2, strings.Count(out, "apply exceptions (node 1, spock): none"), out)
		code, out, errOut = cliMain("nodes", "decommission", "3", "--yes", "--database-url", n1.url, "--dead-after", mmDeadAfter.String())
		require.Equal(t, 0, code, errOut)
		require.Contains(t, out, "1 pinned rows discarded")
		for _, m := range all {
			testenv.Eventually(t, 20*time.Second, fmt.Sprint("the decommission to reach node ", m.n), func() bool {
				return m.count(`SELECT count(*) FROM pgrelay.queue WHERE run_in_node = 3`) == 0 &&
					m.count(`SELECT count(*) FROM pgrelay.nodes WHERE node_id = 3 AND decommissioned_at IS NOT NULL`) == 1
			})
		}
		require.Equal(t, 0, n3.count(`SELECT count(*) FROM app.ran WHERE payload = 'stranded'`))
		stop(p1, p2)
		w.check(t, "decommission", adoptionConflicts)
	})
}

// adoptionConflicts explains the conflicts Spock resolves on pgrelay's
// tables when a node's work is adopted and the node comes back.
var adoptionConflicts = map[string]string{
	"pgrelay.nodes update_origin_differs": "node 3's row, last written by node 3, marked adopted or decommissioned by node 1",
	"pgrelay.nodes update_update": "node 3's row: the adopter's adopted_at mark crossed node 3's first heartbeat after its return, " +
		"and the later write won; node 3 had found itself dead at start and settled before claiming unrestricted rows, " +
		"so the mark, which only node 3 reads, was not needed",
	"pgrelay.queue update_origin_differs": "node 3's rows, re-owned by node 1 (adoption): the third node's copy came from node 3; " +
		"node 3 writes them no more (it is dead, and settles when it returns)",
	"pgrelay.queue delete_origin_differs":      "node 3's rows, run and deleted by the adopter, or its pinned row discarded by the decommission",
	"pgrelay.processors delete_origin_differs": "node 3's Processor rows, removed by the adopter",
	"pgrelay.processors delete_delete": "the killed Processor's row of node 3, removed both by the adopter and by node 3 " +
		"on its return (a dead instance of its own node): gone either way",
}

// mmIDs runs a one-column bigint query on node m.
func mmIDs(t *testing.T, m *mmNode, sql string) []int64 {
	t.Helper()
	rows, err := m.pool.Query(context.Background(), sql)
	require.NoError(t, err, sql)
	out, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err, sql)
	return out
}

// eventMsgs counts the stream's messages on the log's subjects
// (pgrelay.events.>; the notifier's status events are on others).
func eventMsgs(t *testing.T, js jetstream.JetStream) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, "PGRELAY_EVENTS")
	if err != nil {
		return 0
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter("pgrelay.events.>"))
	require.NoError(t, err)
	n := 0
	for _, k := range info.State.Subjects {
		n += int(k)
	}
	return n
}

// eventLogIDs reads the log ids of every message on the log's subjects.
func eventLogIDs(t *testing.T, js jetstream.JetStream) []int64 {
	t.Helper()
	ctx := context.Background()
	want := eventMsgs(t, js)
	cons, err := js.OrderedConsumer(ctx, "PGRELAY_EVENTS", jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{"pgrelay.events.>"}})
	require.NoError(t, err)
	var ids []int64
	for len(ids) < want {
		batch, err := cons.Fetch(1000, jetstream.FetchMaxWait(2*time.Second))
		require.NoError(t, err)
		n := 0
		for m := range batch.Messages() {
			n++
			var doc events.Published
			require.NoError(t, json.Unmarshal(m.Data(), &doc))
			ids = append(ids, doc.ID)
		}
		require.Positive(t, n, "read %d of %d messages", len(ids), want)
	}
	return ids
}

// The pg_auto_mv case on three Spock nodes with automatic DDL replication
// off: one deployment script, run on every node at the same moment, makes
// the node's materialised view and its refresh function, registers the same
// node-restricted channel and queues a refresh; orders written on one node
// replicate, a refresh queued on every node runs once on each, and every
// node's own copy of the view shows them.
func TestSpockDeploymentScript(t *testing.T) {
	ctx := context.Background()
	cluster := testenv.ClusterT(t, devenv.ClusterConfig{Engine: devenv.Spock, Nodes: 3})
	w := &spockWatch{t: t, c: cluster, seen: map[string]int{}}
	var all []*mmNode
	for n := 1; n <= cluster.N(); n++ {
		pool, err := pgxpool.New(ctx, cluster.URL(n))
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		all = append(all, &mmNode{t: t, n: n, url: cluster.URL(n), pool: pool})
	}
	// The application's table replicates (added to the set on every node);
	// the materialised view cannot.
	script := `CREATE SCHEMA IF NOT EXISTS app;
		CREATE TABLE IF NOT EXISTS app.orders (id bigint PRIMARY KEY, amount numeric NOT NULL);
		SELECT spock.repset_add_table('default', 'app.orders')
		 WHERE NOT EXISTS (SELECT FROM spock.tables WHERE nspname = 'app' AND relname = 'orders' AND set_name = 'default');
		CREATE MATERIALIZED VIEW IF NOT EXISTS app.orders_summary AS
		  SELECT count(*) AS orders, coalesce(sum(amount), 0) AS total FROM app.orders;
		CREATE OR REPLACE FUNCTION app.refresh_view(p_view text) RETURNS void LANGUAGE plpgsql AS
		  $$ BEGIN EXECUTE format('REFRESH MATERIALIZED VIEW app.%I', p_view); END $$;
		SELECT pgrelay.register('refresh_view', 'SELECT app.refresh_view($1)',
		  p_node_restricted := true, p_deduplicate := true);`
	errs := make(chan error, len(all))
	for _, m := range all {
		go func() {
			_, err := m.pool.Exec(ctx, script)
			errs <- err
		}()
	}
	for range all {
		require.NoError(t, <-errs)
	}
	w.sync()
	all[0].exec(`INSERT INTO app.orders SELECT g, 10 FROM generate_series(1, 30) g`)
	w.sync()
	for _, m := range all {
		require.Equal(t, 30, m.count(`SELECT count(*) FROM app.orders`))
		require.Equal(t, 0, m.count(`SELECT orders FROM app.orders_summary`), "node %d's view is stale", m.n)
		m.exec(`SELECT pgrelay.notify('refresh_view', 'orders_summary')`)
	}
	var ps []*proc
	for _, m := range all {
		ps = append(ps, m.run("multi-node"))
	}
	for _, m := range all {
		testenv.Eventually(t, time.Minute, fmt.Sprint("node ", m.n, "'s view refreshed"), func() bool {
			return m.count(`SELECT orders FROM app.orders_summary`) == 30
		})
	}
	for _, p := range ps {
		p.signal(syscall.SIGTERM)
	}
	for _, p := range ps {
		require.Equal(t, 0, p.wait(30*time.Second))
	}
	w.sync()
	for _, m := range all {
		// Three refreshes, one per node, each run on its node.
		require.Equal(t, 3, m.count(`SELECT count(*) FROM pgrelay.log WHERE channel = 'refresh_view' AND event = 'succeeded'
			AND node = (origin_id >> 12) & 1023`))
		require.Equal(t, 0, m.count(`SELECT count(*) FROM pgrelay.queue`))
	}
	w.check(t, "deployment script", map[string]string{
		"pgrelay.channels insert_exists": "the script registered the same channel on every node at once: identical rows, either wins",
	})
}

// leaderRuns describes the events of channel lk that ran more than once,
// "payload: node N@time ..." (the first 20), followed, when there are any, by
// each node's lease row; nothing when every event ran once. The lease steps
// of the Processors are in their output (warnings).
func leaderRuns(t *testing.T, all []*mmNode) []string {
	t.Helper()
	type run struct {
		node int
		at   time.Time
	}
	runs := map[string][]run{}
	for _, m := range all {
		rows, err := m.pool.Query(context.Background(), `SELECT payload, node, at FROM app.ran WHERE channel = 'lk'`)
		require.NoError(t, err)
		var p string
		var r run
		_, err = pgx.ForEachRow(rows, []any{&p, &r.node, &r.at}, func() error {
			runs[p] = append(runs[p], r)
			return nil
		})
		require.NoError(t, err)
	}
	var out []string
	for p, rs := range runs {
		if len(rs) < 2 {
			continue
		}
		d := p + ":"
		for _, r := range rs {
			d += fmt.Sprintf(" node %d@%s", r.node, r.at.Format("15:04:05.000"))
		}
		out = append(out, d)
	}
	sort.Strings(out)
	if len(out) > 0 {
		for _, m := range all {
			var lease string
			require.NoError(t, m.pool.QueryRow(context.Background(), `SELECT COALESCE(string_agg(format('node %s term %s until %s taken %s',
				node_id, term, lease_until, taken_at), '; ' ORDER BY node_id), 'none') FROM pgrelay.leader_leases`).Scan(&lease))
			out = append(out, fmt.Sprintf("node %d's lease bids: %s", m.n, lease))
		}
	}
	if len(out) > 24 {
		out = append(out[:20], out[len(out)-len(all):]...)
	}
	return out
}
