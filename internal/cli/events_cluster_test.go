package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/events"
	"github.com/pgrelay/pgrelay/events/bus"
	"github.com/pgrelay/pgrelay/internal/cli/clitest"
	"github.com/pgrelay/pgrelay/internal/devenv"
	"github.com/pgrelay/pgrelay/internal/testenv"
)

// natsNode is one server of a test's NATS cluster. It runs devenv's
// in-process server (the nats-server library) in a process of its own, the
// test binary started with clitest.NATSNodeEnv, so that it can be lost as a
// crash loses it: SIGKILL, with no leader step-down, no flush of its store
// and its connections dropped without a word. An in-process server's
// Shutdown would do each of those gracefully.
type natsNode struct {
	t   *testing.T
	cfg devenv.NATSConfig
	p   *proc
}

// startNATSCluster starts size servers with JetStream clustered on
// 127.0.0.1 (each its own name, ports and store) and waits until the
// cluster has a JetStream meta leader.
func startNATSCluster(t *testing.T, size int) []*natsNode {
	t.Helper()
	ports := freePorts(t, 2*size)
	var routes []int
	for i := range size {
		routes = append(routes, ports[size+i])
	}
	nodes := make([]*natsNode, size)
	for i := range nodes {
		nodes[i] = &natsNode{t: t, cfg: devenv.NATSConfig{Port: ports[i], Name: fmt.Sprintf("n%d", i+1),
			StoreDir: t.TempDir(), Cluster: &devenv.NATSCluster{Name: "pgrelay-test", Port: routes[i], Routes: routes}}}
		nodes[i].start()
	}
	js := jsClient(t, clusterURL(nodes))
	// JetStream answers for the account only once the servers elected a
	// meta leader.
	testenv.Eventually(t, 60*time.Second, "the cluster's JetStream meta leader", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := js.AccountInfo(ctx)
		return err == nil
	})
	return nodes
}

// freePorts are n ports nothing listens on (held together while chosen, so
// they differ).
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// start runs the server (again, with its store as it was) and waits until it
// accepts connections.
func (n *natsNode) start() {
	n.t.Helper()
	cfg, err := json.Marshal(n.cfg)
	require.NoError(n.t, err)
	n.p = startCLI(n.t, []string{clitest.NATSNodeEnv + "=" + string(cfg)}, "nats-server "+n.cfg.Name)
	testenv.Eventually(n.t, 60*time.Second, "NATS server "+n.cfg.Name+" to start", func() bool {
		return strings.Contains(n.p.stdout.String(), "ready") || n.p.exited()
	})
	require.False(n.t, n.p.exited(), "NATS server %s exited: %s", n.cfg.Name, n.p.stderr.String())
}

// kill ends the server's process with SIGKILL.
func (n *natsNode) kill() {
	n.t.Helper()
	n.p.signal(syscall.SIGKILL)
	require.Equal(n.t, -1, n.p.wait(10*time.Second), "killed by the signal")
}

func (n *natsNode) url() string { return fmt.Sprintf("nats://127.0.0.1:%d", n.cfg.Port) }

// clusterURL is the comma-separated list of the servers' URLs.
func clusterURL(nodes []*natsNode) string {
	var urls []string
	for _, n := range nodes {
		urls = append(urls, n.url())
	}
	return strings.Join(urls, ",")
}

// jsClient is the test's own JetStream client of the servers at url.
func jsClient(t *testing.T, url string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	return js
}

// streamInfo is the stream's info, nil while the servers cannot say (no
// leader yet, a server away).
func streamInfo(js jetstream.JetStream, stream string) *jetstream.StreamInfo {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return nil
	}
	info, err := s.Info(ctx)
	if err != nil {
		return nil
	}
	return info
}

// watchedIDs are the log ids of the documents `pgrelay watch --json` printed.
func watchedIDs(t *testing.T, out string) []int64 {
	t.Helper()
	var ids []int64
	for _, l := range nonEmpty(out) {
		var doc struct {
			ID json.RawMessage `json:"id"`
		}
		require.NoError(t, json.Unmarshal([]byte(l), &doc), l)
		id, err := events.ParseID(doc.ID)
		require.NoError(t, err, l)
		ids = append(ids, id)
	}
	return ids
}

// The events stream on a cluster of three NATS servers: more replicas than
// servers are refused, naming the stream; an existing stream's replicas
// change only when asked; `pgrelay run --nats-replicas 3` creates it with
// three replicas. The server leading the stream, the one `pgrelay watch` is
// connected to, is SIGKILLed in the middle of publishing: the Processor
// publishes every event with the other two. Restarted on its store, it
// catches up, and every log row has reached the watcher exactly once.
func TestRunEventsNATSClusterServerKilled(t *testing.T) {
	t.Parallel()
	nodes := startNATSCluster(t, 3)
	url := clusterURL(nodes)
	js := jsClient(t, url)
	ctx := context.Background()

	// More replicas than the cluster has servers: JetStream's refusal,
	// with the stream's name; nothing is created.
	c, err := bus.Connect(bus.Options{URL: url})
	require.NoError(t, err)
	testenv.Eventually(t, 10*time.Second, "connected", c.Connected)
	_, err = c.EnsureStream(ctx, bus.StreamConfig{Replicas: 5})
	require.ErrorIs(t, err, bus.ErrStreamConfig)
	require.ErrorContains(t, err, "create stream PGRELAY_EVENTS")
	require.ErrorContains(t, err, "replicas 5: ")
	require.ErrorContains(t, err, "(5 replicas take a NATS cluster of at least 5 servers with JetStream)")
	t.Logf("5 replicas on 3 servers: %v", err)
	require.Nil(t, streamInfo(js, "PGRELAY_EVENTS"))
	// An existing stream's replicas: changed when asked, else kept.
	for _, step := range []struct {
		replicas int
		did      string
		want     int
	}{{0, "created", 1}, {3, "updated", 3}, {0, "ok", 3}, {3, "ok", 3}} {
		did, err := c.EnsureStream(ctx, bus.StreamConfig{Replicas: step.replicas})
		require.NoError(t, err, "replicas %d", step.replicas)
		require.Equal(t, step.did, did, "replicas %d", step.replicas)
		require.Equal(t, step.want, streamInfo(js, "PGRELAY_EVENTS").Config.Replicas, "replicas %d", step.replicas)
	}
	require.NoError(t, js.DeleteStream(ctx, "PGRELAY_EVENTS"))
	require.NoError(t, c.Close())

	d := newDB(t)
	d.Exec(`SELECT pgrelay.register('k', 'SELECT length($1)')`)
	run := startCLI(t, nil, "run", "--database-url", d.URL, "--nats-url", url, "--nats-replicas", "3",
		"--nats-publish-batch", "100", "--nats-publish-interval", "50ms")
	var info *jetstream.StreamInfo
	testenv.Eventually(t, 60*time.Second, "the stream created with its replicas, and its leader", func() bool {
		info = streamInfo(js, "PGRELAY_EVENTS")
		return (info != nil && info.Cluster != nil && info.Cluster.Leader != "") || run.exited()
	})
	require.False(t, run.exited(), run.stderr.String())
	require.Equal(t, 3, info.Config.Replicas)
	var lost *natsNode
	for _, n := range nodes {
		if n.cfg.Name == info.Cluster.Leader {
			lost = n
		}
	}
	require.NotNil(t, lost, "the stream's leader %q", info.Cluster.Leader)
	// The watcher is given the leader's URL only: it is connected to the
	// server that will be lost, and finds the others from the cluster.
	w := startCLI(t, nil, "watch", "--nats-url", lost.url(), "--json", "--since", "1h")

	notify := func(from, to int) {
		d.Exec(fmt.Sprintf(`SELECT pgrelay.notify_many('k', ARRAY(SELECT 'k' || g FROM generate_series(%d, %d) g))`,
			from, to))
	}
	// That server is lost while the first events are published, and the
	// next ones are enqueued while it is away.
	notify(1, 1500)
	testenv.Eventually(t, 60*time.Second, "the first events in the stream and watched", func() bool {
		info = streamInfo(js, "PGRELAY_EVENTS")
		return (info != nil && info.State.Msgs > 0 && len(nonEmpty(w.stdout.String())) > 0) || run.exited() || w.exited()
	})
	require.False(t, run.exited(), run.stderr.String())
	require.False(t, w.exited(), w.stderr.String())
	lost.kill()
	t.Logf("killed %s (the stream's leader: %s) with %d of the first 1500 events' log rows in the stream",
		lost.cfg.Name, info.Cluster.Leader, info.State.Msgs)
	notify(1501, 2500)

	// The other two go on: every event is stored, once. (The watcher may
	// wait for the lost server: its reader's consumer can have been placed
	// there.)
	logRows := func() int { return d.Count(`SELECT count(*) FROM pgrelay.log`) } // one per event: its success
	testenv.Eventually(t, 120*time.Second, "the events run and stored with a server away", func() bool {
		info = streamInfo(js, "PGRELAY_EVENTS")
		return (logRows() == 2500 && info != nil && info.State.Msgs == 2500) || run.exited() || w.exited()
	})
	require.False(t, run.exited(), run.stderr.String())
	require.False(t, w.exited(), w.stderr.String())

	// Back on its store, the server catches up from the others.
	lost.start()
	testenv.Eventually(t, 120*time.Second, "every replica current again", func() bool {
		info = streamInfo(js, "PGRELAY_EVENTS")
		if info == nil || info.Cluster == nil || len(info.Cluster.Replicas) != 2 {
			return false
		}
		for _, r := range info.Cluster.Replicas {
			if !r.Current || r.Offline {
				return false
			}
		}
		return true
	})
	notify(2501, 3000)
	testenv.Eventually(t, 120*time.Second, "every event run, stored and watched", func() bool {
		total := logRows()
		info = streamInfo(js, "PGRELAY_EVENTS")
		return (total == 3000 && info != nil && int(info.State.Msgs) == total &&
			len(nonEmpty(w.stdout.String())) >= total) || run.exited() || w.exited()
	})
	require.False(t, run.exited(), run.stderr.String())
	require.False(t, w.exited(), w.stderr.String())
	run.signal(syscall.SIGTERM)
	require.Equal(t, 0, run.wait(60*time.Second))
	w.signal(syscall.SIGINT)
	require.Equal(t, 0, w.wait(30*time.Second))

	want := d.IDs(`SELECT id FROM pgrelay.log ORDER BY id`)
	got := watchedIDs(t, w.stdout.String())
	require.Equal(t, len(want), len(got), "one watched event per log row")
	seen := map[int64]bool{}
	for _, id := range got {
		require.False(t, seen[id], "log row %d watched twice", id)
		seen[id] = true
	}
	for _, id := range want {
		require.True(t, seen[id], "log row %d not watched", id)
	}
	t.Logf("%d log rows, each watched once", len(want))
}
