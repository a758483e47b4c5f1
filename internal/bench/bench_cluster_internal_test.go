package bench

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/devenv"
)

// A cluster scenario that fails on Spock says what Spock says of its
// replication: here a subscription disabled, as a transaction that fails
// to apply leaves it (exception_behaviour sub_disable).
func TestClusterFailureCarriesSpockHealth(t *testing.T) {
	if _, err := devenv.FindSpock(); err != nil {
		t.Skipf("Spock variant skipped: %v", err)
	}
	t.Parallel() // its own cluster
	ctx := context.Background()
	c, err := devenv.StartCluster(ctx, devenv.ClusterConfig{Engine: devenv.Spock, Nodes: 2})
	require.NoError(t, err)
	t.Cleanup(c.Stop)
	conn, err := pgx.Connect(ctx, c.URL(2))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(ctx) })
	var sub string
	require.NoError(t, conn.QueryRow(ctx, "SELECT sub_name::text FROM spock.subscription").Scan(&sub))
	_, err = conn.Exec(ctx, "SELECT spock.sub_disable($1::name, true)", sub)
	require.NoError(t, err)

	waited := errors.New("waited 2m0s for the queued rows on node 1")
	err = withHealth(ctx, c, waited)
	require.ErrorIs(t, err, waited)
	require.ErrorContains(t, err, "not replicating: [\"node 2: "+sub+"=disabled")
	require.ErrorContains(t, err, "spock.exception_log: []")
}
