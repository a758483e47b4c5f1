package devenv_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/devenv"
	"github.com/pgrelay/pgrelay/internal/testenv"
	"github.com/pgrelay/pgrelay/migrations"
)

// The cluster replicates pgrelay's tables between every pair of nodes, and
// each node has its own node id: on pglogical (two nodes), and on Spock with
// its automatic DDL replication off (two nodes) and on (three nodes, as
// pgEdge installs it), where the migrations, run on every node at once,
// stayed on their node.
func TestClusterReplicatesBothWays(t *testing.T) {
	for _, cfg := range []devenv.ClusterConfig{
		{Engine: devenv.Pglogical},
		{Engine: devenv.Spock, Nodes: 2},
		{Engine: devenv.Spock, Nodes: 3, AutoDDL: true},
	} {
		name := string(cfg.Engine)
		if cfg.AutoDDL {
			name += "-autoddl"
		}
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			c := testenv.ClusterT(t, cfg)
			conns := make([]*pgx.Conn, c.N()+1)
			for n := 1; n <= c.N(); n++ {
				cn, err := pgx.Connect(ctx, c.URL(n))
				require.NoError(t, err)
				t.Cleanup(func() { _ = cn.Close(ctx) })
				conns[n] = cn
				var node int
				require.NoError(t, cn.QueryRow(ctx, "SELECT pgrelay._this_node()").Scan(&node))
				require.Equal(t, n, node)
			}
			waitFor := func(cn *pgx.Conn, sql string, want int) {
				testenv.Eventually(t, 20*time.Second, fmt.Sprintf("%s = %d", sql, want), func() bool {
					return testenv.One[int](t, cn, sql) == want
				})
			}
			_, err := conns[1].Exec(ctx, "SELECT pgrelay.register('r', 'SELECT $1')")
			require.NoError(t, err)
			for n := 2; n <= c.N(); n++ {
				waitFor(conns[n], "SELECT count(*) FROM pgrelay.channels WHERE channel = 'r'", 1)
			}
			for n := 1; n <= c.N(); n++ {
				var id int64
				require.NoError(t, conns[n].QueryRow(ctx, "SELECT pgrelay.notify('r', $1)", fmt.Sprint("from-", n)).Scan(&id))
				require.Equal(t, int64(n), (id>>12)&1023)
			}
			for n := 1; n <= c.N(); n++ {
				for m := 1; m <= c.N(); m++ {
					waitFor(conns[n], fmt.Sprintf("SELECT count(*) FROM pgrelay.queue WHERE owner_node = %d", m), 1)
				}
				// Each node keeps its own record of migrations, and its own
				// lock rows.
				var migs, locks int
				require.NoError(t, conns[n].QueryRow(ctx, "SELECT count(*) FROM pgrelay.schema_migrations").Scan(&migs))
				require.NoError(t, conns[n].QueryRow(ctx, "SELECT count(*) FROM pgrelay.channel_locks WHERE channel = 'r'").Scan(&locks))
				require.Positive(t, migs)
				require.Equal(t, 64, locks)
			}
			if c.Engine() != devenv.Spock {
				return
			}
			for n := 1; n <= c.N(); n++ {
				var local []string
				rows, err := conns[n].Query(ctx, `SELECT relname::text FROM spock.tables
					WHERE nspname = 'pgrelay' AND set_name IS NOT NULL AND relname = ANY ($1::text[])`, migrations.NodeLocalTables())
				require.NoError(t, err)
				local, err = pgx.CollectRows(rows, pgx.RowTo[string])
				require.NoError(t, err)
				require.Empty(t, local, "node %d: node-local tables in a replication set", n)
			}
			h, err := c.Health(ctx)
			require.NoError(t, err)
			require.Empty(t, h.Exceptions)
			require.Empty(t, h.NotReplicating)
			require.Empty(t, h.Resolutions)
		})
	}
}

// A Spock apply worker that node 2's log names as holding a replication
// origin others failed on is ended when idle, and the manager starts the
// subscription's worker again: the remedy waitReplicating applies to a
// subscription that stays down beside its own streaming worker.
func TestSpockEndOriginHolders(t *testing.T) {
	ctx := context.Background()
	c := testenv.ClusterT(t, devenv.ClusterConfig{Engine: devenv.Spock, Nodes: 2})
	cn, err := pgx.Connect(ctx, c.URL(2))
	require.NoError(t, err)
	t.Cleanup(func() { _ = cn.Close(ctx) })
	const worker = `SELECT COALESCE(min(pid), 0) FROM pg_catalog.pg_stat_activity WHERE backend_type LIKE 'spock apply %' AND state = 'idle'`
	var old int
	testenv.Eventually(t, 30*time.Second, "node 2's apply worker to be idle", func() bool {
		old = testenv.One[int](t, cn, worker)
		return old != 0
	})
	ended, err := c.EndOriginHolders(ctx, 2)
	require.NoError(t, err)
	require.Empty(t, ended, "the log names no holder yet")

	// The line Spock logs for each worker that fails on the origin.
	_, err = cn.Exec(ctx, fmt.Sprintf(`DO $$ BEGIN RAISE LOG 'replication origin with ID 1 is already active for PID %d'; END $$`, old))
	require.NoError(t, err)
	testenv.Eventually(t, 10*time.Second, "the holder to be ended", func() bool {
		ended, err = c.EndOriginHolders(ctx, 2)
		require.NoError(t, err)
		return len(ended) == 1
	})
	require.Equal(t, []int{old}, ended)
	require.NoError(t, c.WaitReplicating(ctx))
	testenv.Eventually(t, 30*time.Second, "a new apply worker", func() bool {
		pid := testenv.One[int](t, cn, worker)
		return pid != 0 && pid != old
	})
}
