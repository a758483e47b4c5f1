package testenv_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/testenv"
)

// The two-node cluster replicates pgrelay's tables both ways, and each node
// has its own node id.
func TestClusterReplicatesBothWays(t *testing.T) {
	ctx := context.Background()
	c, err := testenv.StartCluster(ctx, testenv.ClusterConfig{})
	require.NoError(t, err)
	defer c.Stop()
	conn := func(n int) *pgx.Conn {
		cn, err := pgx.Connect(ctx, c.URL(n))
		require.NoError(t, err)
		t.Cleanup(func() { _ = cn.Close(ctx) })
		return cn
	}
	c1, c2 := conn(1), conn(2)
	var node int
	require.NoError(t, c2.QueryRow(ctx, "SELECT pgrelay._this_node()").Scan(&node))
	require.Equal(t, 2, node)
	_, err = c1.Exec(ctx, "SELECT pgrelay.register('r', 'SELECT $1')")
	require.NoError(t, err)
	waitFor := func(cn *pgx.Conn, sql string, want int) {
		deadline := time.Now().Add(20 * time.Second)
		for {
			var n int
			require.NoError(t, cn.QueryRow(ctx, sql).Scan(&n))
			if n == want {
				return
			}
			require.True(t, time.Now().Before(deadline), "waiting for %s = %d (got %d)", sql, want, n)
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitFor(c2, "SELECT count(*) FROM pgrelay.channels WHERE channel = 'r'", 1)
	var id1, id2 int64
	require.NoError(t, c1.QueryRow(ctx, "SELECT pgrelay.notify('r', 'from-1')").Scan(&id1))
	require.NoError(t, c2.QueryRow(ctx, "SELECT pgrelay.notify('r', 'from-2')").Scan(&id2))
	waitFor(c1, "SELECT count(*) FROM pgrelay.queue WHERE owner_node = 2", 1)
	waitFor(c2, "SELECT count(*) FROM pgrelay.queue WHERE owner_node = 1", 1)
	require.Equal(t, int64(1), (id1>>12)&1023)
	require.Equal(t, int64(2), (id2>>12)&1023)
}
