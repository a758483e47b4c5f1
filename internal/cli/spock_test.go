package cli_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/testenv"
)

// spockWatch checks a Spock cluster after each scenario: spock.exception_log
// empty on every node, every subscription replicating, and each conflict
// Spock resolved on pgrelay's tables since the last check of a kind the
// scenario explains (why it is harmless).
type spockWatch struct {
	t    *testing.T
	c    *testenv.Cluster
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
		require.True(t, ok, "%s: %d unexplained Spock resolutions %s", scenario, n, k)
		got = append(got, fmt.Sprintf("%s: %d (%s)", k, n, why))
	}
	t.Logf("%s: spock.exception_log empty, every subscription replicating; spock.resolutions on pgrelay's tables: %d kinds\n  %s",
		scenario, len(got), strings.Join(got, "\n  "))
}

// sync waits until every node has applied everything every other node sent
// up to now (nodes in down are stopped).
func (w *spockWatch) sync(down ...int) {
	w.t.Helper()
	require.NoError(w.t, w.c.Sync(context.Background(), time.Minute, down...))
}

// The cluster scenarios on a real three-node pgEdge Spock cluster with its
// automatic DDL replication on, as pgEdge installs it (pgrelay migrate ran on
// every node at once). pglogical's two-node test (TestMultiMasterCluster)
// covers the same logic; these run once, on Spock only.
func TestSpockCluster(t *testing.T) {
	ctx := context.Background()
	cluster := testenv.ClusterT(t, testenv.ClusterConfig{Engine: testenv.Spock, Nodes: 3, AutoDDL: true})
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
			eventually(t, 20*time.Second, "channel "+channel+" on node "+fmt.Sprint(m.n), func() bool {
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
		"pgrelay.nodes update_update": "the lease row taken by several nodes at the same moment (leader mode started everywhere at once): " +
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
				eventually(t, 3*time.Minute, fmt.Sprintf("%d %s events on node %d", ch.n, ch.name, m.n), func() bool {
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
			eventually(t, time.Minute, fmt.Sprint("the refresh on node ", m.n), func() bool {
				return m.count(`SELECT count(*) FROM app.ran WHERE channel = 'mv'`) == 1
			})
		}
		for _, m := range all {
			eventually(t, 20*time.Second, fmt.Sprint("three refreshes logged on node ", m.n), func() bool {
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
}
