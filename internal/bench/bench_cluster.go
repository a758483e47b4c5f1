package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgrelay/pgrelay/actors"
	"github.com/pgrelay/pgrelay/internal/devenv"
	"github.com/pgrelay/pgrelay/migrations"
)

// scenarioCluster measures multi-node throughput on a real two-node cluster:
// n events on one node with one Processor, then n events spread over both
// nodes with a Processor on each (same cluster, same run).
func (b *bench) scenarioCluster(ctx context.Context) (*scenarioResult, error) {
	return b.clusterScenario(ctx, "cluster", devenv.ClusterConfig{})
}

// scenarioClusterSpock is the same on a three-node pgEdge Spock cluster
// (SPOCK_PG_HOME): one node, two, three.
func (b *bench) scenarioClusterSpock(ctx context.Context) (*scenarioResult, error) {
	return b.clusterScenario(ctx, "cluster-spock", devenv.ClusterConfig{Engine: devenv.Spock, Nodes: 3})
}

// nodeWords names the runs of clusterScenario.
var nodeWords = []string{"", "one node", "two nodes", "three nodes", "four nodes"}

// clusterScenario runs the events on one node, then spread over two, and so
// on up to every node of the cluster cfg describes.
func (b *bench) clusterScenario(ctx context.Context, name string, cfg devenv.ClusterConfig) (*scenarioResult, error) {
	const channel = "pgrelay_bench_mn"
	res := &scenarioResult{Name: name}
	c, err := devenv.StartCluster(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer c.Stop()
	var pools []*pgxpool.Pool
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	var urls []string
	for n := 1; n <= c.N(); n++ {
		urls = append(urls, c.URL(n))
	}
	for _, url := range urls {
		pool, err := pgxpool.New(ctx, url)
		if err != nil {
			return nil, fmt.Errorf("connect: %w", err)
		}
		pools = append(pools, pool)
		if _, err := migrations.Up(ctx, pool); err != nil {
			return nil, err
		}
	}
	if _, err := pools[0].Exec(ctx, `SELECT pgrelay.register($1::pg_catalog.text, $2::pg_catalog.text)`, channel, noopHandler); err != nil {
		return nil, fmt.Errorf("register the bench channel: %w", err)
	}
	for i, pool := range pools[1:] {
		if err := waitFor(ctx, fmt.Sprintf("the channel on node %d", i+2), func() (bool, error) {
			var ok bool
			err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pgrelay.channels WHERE channel = $1)`, channel).Scan(&ok)
			return ok, err
		}); err != nil {
			return nil, err
		}
	}
	var one *measurement
	for k := 1; k <= c.N(); k++ {
		m, err := b.clusterRun(ctx, nodeWords[k], pools[:k], urls[:k], channel)
		if err != nil {
			return res, withHealth(ctx, c, err)
		}
		res.add(m)
		if k == 1 {
			one = m
			continue
		}
		res.ratio(nodeWords[k]+"/one node", m.Rate, one.Rate, 0)
	}
	return res, nil
}

// clusterRun enqueues the events spread over the nodes of pools, runs a
// multi-node Processor on each, and waits until node 1's log holds every
// success (replication included).
func (b *bench) clusterRun(ctx context.Context, label string, pools []*pgxpool.Pool, urls []string, channel string) (*measurement, error) {
	per := b.o.Events / len(pools)
	total := per * len(pools)
	// Every run starts its nodes as new ones: a node whose row shows it dead
	// (stopped after the previous run) would rejoin, dispatching only its
	// pinned rows for --leader-settle (docs/multi-master.md).
	if _, err := pools[0].Exec(ctx, `DELETE FROM pgrelay.nodes WHERE node_id >= 0`); err != nil {
		return nil, fmt.Errorf("forget the previous run's nodes: %w", err)
	}
	mark, err := logMark(ctx, pools[0])
	if err != nil {
		return nil, err
	}
	for node, pool := range pools {
		if _, err := b.insertBatches(ctx, fmt.Sprintf("cluster, %s: enqueue on node %d", label, node+1), per, b.o.Batch,
			notifyMany(pool, channel, fmt.Sprintf("%d-", node))); err != nil {
			return nil, err
		}
	}
	// Every node must see every row, with fresh statistics, before the clock
	// starts.
	var procs []actors.Config
	for i, pool := range pools {
		if err := waitFor(ctx, fmt.Sprintf("the queued rows on node %d", i+1), func() (bool, error) {
			var c int
			err := pool.QueryRow(ctx, `SELECT count(*) FROM pgrelay.queue WHERE channel = $1`, channel).Scan(&c)
			return c >= total, err
		}); err != nil {
			return nil, err
		}
		if err := settle(ctx, pool); err != nil {
			return nil, err
		}
		procs = append(procs, b.procConfig(urls[i], actors.ModeMultiNode))
	}
	d, err := b.drain(ctx, drainSpec{label: "cluster, " + label, profile: fmt.Sprintf("cluster-%d", len(pools)),
		procs: procs, channels: []string{channel}, target: int64(total)})
	if err != nil {
		return nil, err
	}
	if err := waitFor(ctx, "every success in node 1's log", func() (bool, error) {
		return checkLog(ctx, pools[0], mark, []string{channel}, int64(total), false) == nil, nil
	}); err != nil {
		return nil, err
	}
	seen := time.Since(d.start)
	m := newMeasurement("multi-node, "+label, "pgrelay", int64(total), d.took, "events/s")
	m.Series = d.series
	m.Detail = fmt.Sprintf("every success in node 1's log (replication included) after %.3fs: %.0f events/s",
		seen.Seconds(), float64(total)/seen.Seconds())
	return m, nil
}

// withHealth adds to err what a Spock cluster says of its replication:
// spock.exception_log and the subscriptions not replicating, each with the
// node's log. A transaction that fails to apply disables its subscription
// (exception_behaviour sub_disable): what it carried then never arrives.
func withHealth(ctx context.Context, c *devenv.Cluster, err error) error {
	if c.Engine() != devenv.Spock {
		return err
	}
	h, herr := c.Health(context.WithoutCancel(ctx))
	if herr != nil {
		return fmt.Errorf("%w (the cluster's health could not be read: %v)", err, herr)
	}
	return fmt.Errorf("%w\nspock.exception_log: %q\nnot replicating: %q", err, h.Exceptions, h.NotReplicating)
}

// waitFor polls cond every 50 ms until it holds, for at most stallAfter.
func waitFor(ctx context.Context, what string, cond func() (bool, error)) error {
	deadline := time.Now().Add(stallAfter)
	for {
		ok, err := cond()
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("waited %s for %s", stallAfter, what)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
