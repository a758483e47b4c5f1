package cli_test

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/devenv"
	"github.com/pgrelay/pgrelay/internal/testenv"
)

// On a real pair whose node 2 left the notifier's tables out of replication
// (the easy mistake: pgrelay's own tables replicated, the notifier's not) and
// put its record of migrations in one, on pglogical and on Spock, `pgrelay
// nodes` names the missing tables and the wrongly replicated one on node 2
// and none on node 1, and `pgrelay run --mode multi-node` warns at start on
// node 2 and not on node 1. A database without pglogical or Spock says so.
func TestReplicationCheckWarns(t *testing.T) {
	for _, engine := range []devenv.Engine{devenv.Pglogical, devenv.Spock} {
		t.Run(string(engine), func(t *testing.T) { replicationCheckWarns(t, engine) })
	}
}

func replicationCheckWarns(t *testing.T, engine devenv.Engine) {
	ctx := context.Background()
	cluster := testenv.ClusterT(t, devenv.ClusterConfig{Engine: engine})
	remove := `SELECT pglogical.replication_set_remove_table('default', c.oid)
		FROM pg_class c WHERE c.relnamespace = 'pgrelay_notifier'::regnamespace AND c.relkind = 'r';
		SELECT pglogical.replication_set_add_table('default', 'pgrelay.schema_migrations')`
	if engine == devenv.Spock {
		remove = `SELECT spock.repset_remove_table('default', c.oid)
			FROM pg_class c WHERE c.relnamespace = 'pgrelay_notifier'::regnamespace AND c.relkind = 'r';
			SELECT spock.repset_add_table('default', 'pgrelay.schema_migrations')`
	}
	require.NoError(t, cluster.Node(2).Exec(ctx, devenv.ClusterDB, remove))
	const missing = "pgrelay_notifier.debug_log, pgrelay_notifier.notifications, pgrelay_notifier.status_events"

	code, out, errOut := cliMain("nodes", "--database-url", cluster.URL(2))
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "replication (node 2, "+string(engine)+"): NOT REPLICATED: "+missing+" (add them")
	require.Contains(t, out, "replication (node 2, "+string(engine)+"): WRONGLY REPLICATED: pgrelay.schema_migrations (set default) (each node keeps its own")
	code, out, errOut = cliMain("nodes", "--database-url", cluster.URL(1))
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "replication (node 1, "+string(engine)+"): every table of pgrelay and pgrelay_notifier is in a subscribed replication set")
	require.NotContains(t, out, "WRONGLY")
	if engine == devenv.Spock {
		require.Regexp(t, `(?m)^subscriptions \(node 1, spock\): sub_n1_n2 from n2 replicating(, lag \S+ \(\d+ bytes\))?$`, out)
		require.Contains(t, out, "apply exceptions (node 1, spock): none in spock.exception_log\n")
	} else {
		require.NotContains(t, out, "subscriptions (")
	}

	if engine == devenv.Spock {
		require.NoError(t, cluster.Node(2).Exec(ctx, devenv.ClusterDB, `SELECT spock.sub_disable('sub_n2_n1', true)`))
	}
	p2 := startCLI(t, nil, "run", "--database-url", cluster.URL(2), "--mode", "multi-node", "--log-level", "warn")
	testenv.Eventually(t, time.Minute, "the replication warnings of node 2", func() bool {
		return strings.Contains(p2.stderr.String(), "replication: tables not in a subscribed replication set on this node") &&
			strings.Contains(p2.stderr.String(), "replication: node-local tables in a replication set")
	})
	if engine == devenv.Spock {
		testenv.Eventually(t, 10*time.Second, "node 2's warning of its disabled subscription", func() bool {
			return strings.Contains(p2.stderr.String(), "replication: Spock subscriptions not replicating on this node")
		})
		require.Contains(t, p2.stderr.String(), `subscriptions="sub_n2_n1 (disabled)"`)
	}
	require.Contains(t, p2.stderr.String(), missing)
	require.Contains(t, p2.stderr.String(), "email events whose notification was composed on another node will fail as missing")

	// Node 1: once its Processor heartbeats, the check is behind it.
	pool, err := pgxpool.New(ctx, cluster.URL(1))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	p1 := startCLI(t, nil, "run", "--database-url", cluster.URL(1), "--mode", "multi-node", "--log-level", "info",
		"--metrics-addr", "127.0.0.1:0")
	testenv.Eventually(t, time.Minute, "node 1's Processor to heartbeat", func() bool {
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pgrelay.processors p
			JOIN pgrelay.nodes x ON x.node_id = p.node_id WHERE x.node_id = 1`).Scan(&n))
		return n > 0
	})
	require.NotContains(t, p1.stderr.String(), "replication:")
	// Its metrics: on Spock, node 1's subscription and its apply exceptions.
	var addr []string
	testenv.Eventually(t, 30*time.Second, "node 1's metrics address", func() bool {
		addr = regexp.MustCompile(`msg="serving metrics" addr=(\S+)`).FindStringSubmatch(p1.stderr.String())
		return addr != nil
	})
	resp, err := http.Get("http://" + addr[1] + "/metrics")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.NoError(t, err)
	if engine == devenv.Spock {
		require.Contains(t, string(body), `pgrelay_spock_subscription_replicating{provider="n2",subscription="sub_n1_n2"} 1`)
		require.Contains(t, string(body), `pgrelay_spock_exceptions{tables="all"} 0`)
		require.Contains(t, string(body), `pgrelay_spock_exceptions{tables="pgrelay"} 0`)
	} else {
		require.NotContains(t, string(body), "pgrelay_spock_")
	}
	require.NotContains(t, string(body), `op="spock_status"`)
	for _, p := range []*proc{p1, p2} {
		p.signal(syscall.SIGTERM)
		require.Equal(t, 0, p.wait(30*time.Second))
	}
	if engine == devenv.Spock {
		// pgrelay migrate, run again, repairs node 2: the notifier's tables
		// back in 'default', schema_migrations out.
		code, out, errOut = cliMain("migrate", "--database-url", cluster.URL(2))
		require.Equal(t, 0, code, errOut)
		require.Contains(t, out, "added pgrelay_notifier.notifications to Spock replication set default\n")
		require.Contains(t, out, "removed pgrelay.schema_migrations from Spock replication set default (each node keeps its own)\n")
		code, out, errOut = cliMain("nodes", "--database-url", cluster.URL(2))
		require.Equal(t, 0, code, errOut)
		require.Contains(t, out, "replication (node 2, spock): every table of pgrelay and pgrelay_notifier is in a subscribed replication set")
		require.NotContains(t, out, "WRONGLY")
	}
}

// A database without pglogical or Spock says so.
func TestReplicationCheckNone(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	code, out, errOut := cliMain("nodes", "--database-url", d.URL)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "replication (node 0): no pglogical or Spock in this database")
}
