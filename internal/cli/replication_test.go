package cli_test

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/testenv"
)

// On a real pglogical pair whose node 2 left the notifier's tables out of
// replication (the easy mistake: pgrelay's own tables replicated, the
// notifier's not), `pgrelay nodes` names the missing tables on node 2 and
// none on node 1, and `pgrelay run --mode multi-node` warns at start on node
// 2 and not on node 1. A database without pglogical or Spock says so.
func TestReplicationCheckWarns(t *testing.T) {
	ctx := context.Background()
	cluster, err := testenv.StartCluster(ctx, testenv.ClusterConfig{})
	require.NoError(t, err)
	t.Cleanup(cluster.Stop)
	require.NoError(t, cluster.Node(2).Exec(ctx, testenv.ClusterDB, `SELECT pglogical.replication_set_remove_table('default', c.oid)
		FROM pg_class c WHERE c.relnamespace = 'pgrelay_notifier'::regnamespace AND c.relkind = 'r'`))
	const missing = "pgrelay_notifier.debug_log, pgrelay_notifier.notifications, pgrelay_notifier.status_events"

	code, out, errOut := cliMain("nodes", "--database-url", cluster.URL(2))
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "replication (node 2, pglogical): NOT REPLICATED: "+missing+" (add them")
	code, out, errOut = cliMain("nodes", "--database-url", cluster.URL(1))
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "replication (node 1, pglogical): every table of pgrelay and pgrelay_notifier is in a subscribed replication set")

	p2 := startCLI(t, nil, "run", "--database-url", cluster.URL(2), "--mode", "multi-node", "--log-level", "warn")
	eventually(t, time.Minute, "the replication warning of node 2", func() bool {
		return strings.Contains(p2.stderr.String(), "replication: tables not in a subscribed replication set on this node")
	})
	require.Contains(t, p2.stderr.String(), missing)
	require.Contains(t, p2.stderr.String(), "email events whose notification was composed on another node will fail as missing")

	// Node 1: once its Processor heartbeats, the check is behind it.
	pool, err := pgxpool.New(ctx, cluster.URL(1))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	p1 := startCLI(t, nil, "run", "--database-url", cluster.URL(1), "--mode", "multi-node", "--log-level", "warn")
	eventually(t, time.Minute, "node 1's Processor to heartbeat", func() bool {
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pgrelay.processors p
			JOIN pgrelay.nodes x ON x.node_id = p.node_id WHERE x.node_id = 1`).Scan(&n))
		return n > 0
	})
	require.NotContains(t, p1.stderr.String(), "replication:")
	for _, p := range []*proc{p1, p2} {
		p.signal(syscall.SIGTERM)
		require.Equal(t, 0, p.wait(30*time.Second))
	}

	// No replication extension at all.
	d := newDB(t)
	code, out, errOut = cliMain("nodes", "--database-url", d.url)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "replication (node 0): no pglogical or Spock in this database")
}
