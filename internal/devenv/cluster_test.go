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
