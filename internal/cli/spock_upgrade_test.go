package cli_test

import (
	"context"
	"fmt"
	"os"
	"sort"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/devenv"
	"github.com/pgrelay/pgrelay/internal/testenv"
)

// spockProducer notifies on one node, one event at a time, until stopped,
// and keeps the payloads whose transaction committed (name-0, name-1, ...).
type spockProducer struct {
	name      string
	mu        sync.Mutex
	committed []string
	err       error
	stop      chan struct{}
	done      chan struct{}
}

func startSpockProducer(ctx context.Context, name string, pool *pgxpool.Pool) *spockProducer {
	p := &spockProducer{name: name, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-p.stop:
				return
			case <-tick.C:
			}
			payload := fmt.Sprintf("%s-%d", name, i)
			if _, err := pool.Exec(ctx, "SELECT pgrelay.notify('up', $1)", payload); err != nil {
				p.mu.Lock()
				p.err = fmt.Errorf("producer %s: notify %s: %w", name, payload, err)
				p.mu.Unlock()
				return
			}
			p.mu.Lock()
			p.committed = append(p.committed, payload)
			p.mu.Unlock()
		}
	}()
	return p
}

// count is how many events committed so far; it fails the test when the
// producer failed.
func (p *spockProducer) count(t *testing.T) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	require.NoError(t, p.err)
	return len(p.committed)
}

// more waits until n more events committed.
func (p *spockProducer) more(t *testing.T, n int) {
	t.Helper()
	want := p.count(t) + n
	testenv.Eventually(t, time.Minute, fmt.Sprintf("%d events notified by producer %s", want, p.name), func() bool {
		return p.count(t) >= want
	})
}

func (p *spockProducer) halt(t *testing.T) []string {
	close(p.stop)
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	require.NoError(t, p.err)
	return p.committed
}

// The upgrade of a three-node Spock cluster, as docs/upgrading.md's
// "Upgrading a Spock cluster" says, while a producer notifies on every node
// all along (but while its node restarts): from the schema of release 0.1.0
// (testdata/v0.1.0) to this pgrelay's, which adds columns (queue.priority,
// ...) and tables. migrate refuses while the node replicates; with every
// subscription disabled the nodes are migrated one by one, each node's
// changes waiting in its replication slots; every node is restarted; once
// every node is migrated the subscriptions are enabled again: every event
// is then on every node, nothing is in spock.exception_log, and the
// Processors run every event once.
//
// One of node 1's apply workers is held inside a transaction of node 2's
// when its subscriptions are disabled (a trigger of node 1 waits for a lock
// the test holds): Spock 5.0 stops the worker between two changes of that
// transaction and keeps, in memory, that it was applying it. Enabled again
// without a restart, the worker takes the transaction for one that failed,
// replays it in its exception mode, logs each of its rows in
// spock.exception_log ("discarded due to exception (root cause not
// captured)") and skips it: the event is lost on node 1. The restart
// forgets it; the transaction then applies.
func TestSpockClusterUpgrade(t *testing.T) {
	ctx := context.Background()
	cluster := testenv.ClusterT(t, devenv.ClusterConfig{Engine: devenv.Spock, Nodes: 3, AutoDDL: true,
		Migrations: os.DirFS("../../migrations/testdata/v0.1.0")})
	w := &spockWatch{t: t, c: cluster, seen: map[string]int{}}
	nodes := make([]*mmNode, cluster.N()+1)
	for n := 1; n <= cluster.N(); n++ {
		pool, err := pgxpool.New(ctx, cluster.URL(n))
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		nodes[n] = &mmNode{t: t, n: n, url: cluster.URL(n), pool: pool}
	}
	all := nodes[1:]
	// app.hold replicates; on node 1 (only) a trigger that the apply worker
	// fires too waits for advisory lock 7301 first.
	require.NoError(t, cluster.ExecBoth(ctx, `CREATE SCHEMA app; CREATE TABLE app.hold (payload text PRIMARY KEY)`))
	require.NoError(t, cluster.Replicate(ctx, "app.hold"))
	all[0].exec(`SET spock.enable_ddl_replication = off; SET spock.include_ddl_repset = off;
		CREATE FUNCTION app.hold_wait() RETURNS trigger LANGUAGE plpgsql AS
		  $$ BEGIN PERFORM pg_advisory_xact_lock(7301); RETURN NEW; END $$;
		CREATE TRIGGER hold_wait BEFORE INSERT ON app.hold FOR EACH ROW EXECUTE FUNCTION app.hold_wait();
		ALTER TABLE app.hold ENABLE ALWAYS TRIGGER hold_wait`)
	all[0].exec("SELECT pgrelay.register('up', 'SELECT length($1)')")
	w.sync()
	w.check(t, "at 0.1.0", nil)

	var want []string
	producers := make([]*spockProducer, len(all))
	for i, m := range all {
		producers[i] = startSpockProducer(ctx, fmt.Sprintf("n%d", m.n), m.pool)
	}
	more := func() {
		for _, p := range producers {
			p.more(t, 10)
		}
	}
	more()
	migrate := func(m *mmNode) (int, string, string) {
		return runCLI(t, nil, "migrate", "--database-url", m.url)
	}

	// 1. No Processor runs (0.1.0's would be stopped here). migrate refuses
	// while the node replicates, changing nothing.
	code, _, stderr := migrate(all[0])
	require.Equal(t, 1, code, stderr)
	require.Contains(t, stderr, "this Spock node replicates with its peers (enabled subscriptions sub_n1_n2, sub_n1_n3; "+
		"peers streaming from slots ")
	require.Contains(t, stderr, "nothing was changed")
	require.Equal(t, 2, all[0].count("SELECT max(version) FROM pgrelay.schema_migrations"))

	// Node 2 commits a transaction that node 1's apply worker starts and
	// then waits in, inside it.
	lock, err := all[0].pool.Acquire(ctx)
	require.NoError(t, err)
	_, err = lock.Exec(ctx, "SELECT pg_advisory_lock(7301)")
	require.NoError(t, err)
	all[1].exec("WITH h AS (INSERT INTO app.hold VALUES ('n2-held') RETURNING payload) SELECT pgrelay.notify('up', payload) FROM h")
	want = append(want, "n2-held")
	testenv.Eventually(t, time.Minute, "node 1's apply worker waiting inside node 2's transaction", func() bool {
		return all[0].count(`SELECT count(*) FROM pg_stat_activity WHERE backend_type LIKE 'spock apply%'
			AND wait_event_type = 'Lock' AND wait_event = 'advisory'`) == 1
	})

	// 2. Every node's subscriptions disabled; once no peer streams from any
	// node, replication has stopped.
	for _, m := range all {
		require.Equal(t, 2, m.count("SELECT count(*) FROM spock.subscription s WHERE spock.sub_disable(s.sub_name, true)"))
	}
	_, err = lock.Exec(ctx, "SELECT pg_advisory_unlock(7301)")
	require.NoError(t, err)
	lock.Release()
	for _, m := range all {
		testenv.Eventually(t, time.Minute, fmt.Sprintf("no peer streaming from node %d", m.n), func() bool {
			return m.count("SELECT count(*) FROM pg_replication_slots WHERE plugin = 'spock_output' AND active") == 0
		})
	}

	// 3. Each node migrated in turn while the producers keep notifying: a
	// migrated node's events (with their new columns) wait in its slots.
	for _, m := range all {
		code, stdout, stderr := migrate(m)
		require.Equal(t, 0, code, "node %d: %s%s", m.n, stdout, stderr)
		require.Contains(t, stdout, "schema at version")
		more()
	}
	// Another peer still at the old schema would have been refused the
	// same way: here nothing is left to apply, so nothing is checked.
	code, _, stderr = migrate(all[0])
	require.Equal(t, 0, code, stderr)

	// 4. Every node restarted, its producer paused meanwhile.
	for i, m := range all {
		want = append(want, producers[i].halt(t)...)
		require.NoError(t, cluster.StopNode(m.n))
		require.NoError(t, cluster.StartNode(ctx, m.n))
		m.pool.Reset()
		producers[i] = startSpockProducer(ctx, fmt.Sprintf("n%d-restarted", m.n), m.pool)
	}
	more()

	// 5. Every node migrated and restarted: the subscriptions enabled
	// again; what waited applies to migrated tables (node 2's held
	// transaction included).
	for _, m := range all {
		require.Equal(t, 2, m.count("SELECT count(*) FROM spock.subscription s WHERE spock.sub_enable(s.sub_name, true)"))
	}
	more()
	for _, p := range producers {
		want = append(want, p.halt(t)...)
	}
	sort.Strings(want)
	w.check(t, "upgraded", nil)
	for _, m := range all {
		require.Equal(t, want, mmColumn(t, m, "SELECT payload FROM pgrelay.queue WHERE channel = 'up' ORDER BY payload COLLATE \"C\""),
			"node %d has every event of every node", m.n)
		require.Equal(t, []string{"n2-held"}, mmColumn(t, m, "SELECT payload FROM app.hold"), "node %d", m.n)
	}

	// 6. This release's Processors run every event once, on its owner.
	var ps []*proc
	for _, m := range all {
		ps = append(ps, m.run("multi-node"))
	}
	succeeded := func(m *mmNode) int {
		return m.count("SELECT count(*) FROM pgrelay.log WHERE channel = 'up' AND event = 'succeeded'")
	}
	for _, m := range all {
		testenv.Eventually(t, 3*time.Minute, fmt.Sprintf("%d events succeeded, seen on node %d", len(want), m.n), func() bool {
			return succeeded(m) >= len(want)
		})
	}
	require.Equal(t, len(want), succeeded(all[0]))
	require.Equal(t, len(want), all[0].count(`SELECT count(DISTINCT origin_id) FROM pgrelay.log WHERE channel = 'up' AND event = 'succeeded'
		AND node = (origin_id >> 12) & 1023`), "each event succeeded once, on its owner")
	for _, p := range ps {
		p.signal(syscall.SIGTERM)
	}
	for _, p := range ps {
		require.Equal(t, 0, p.wait(30*time.Second))
	}
	w.check(t, "drained", nil)
}
