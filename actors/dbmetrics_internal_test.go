package actors

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

// A scrape while the database cannot be reached counts one failed read of
// the backlog (op="queue_stats"), and nothing under op="spock_status": that
// counter is for Spock nodes only.
func TestDatabaseCollectorUnreachableCountsNoSpockError(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	pool, err := pgxpool.New(context.Background(), fmt.Sprintf("postgres://nobody@127.0.0.1:%d/none?connect_timeout=2", port))
	require.NoError(t, err)
	defer pool.Close()
	m, err := NewMetrics(nil)
	require.NoError(t, err)
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(NewDatabaseCollector(DatabaseCollectorConfig{DB: pool, Errors: m.DBErrors,
		Channel: m.initChannel, Logger: slog.New(slog.DiscardHandler)})))
	_, err = reg.Gather()
	require.NoError(t, err)
	require.Equal(t, 1.0, testutil.ToFloat64(m.DBErrors.WithLabelValues("queue_stats")))
	require.Equal(t, 0.0, testutil.ToFloat64(m.DBErrors.WithLabelValues("spock_status")))
}
