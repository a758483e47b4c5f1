package bench_test

import (
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/devenv"
)

// clusterNode is a node's figures of cluster-load, as far as the test reads
// them.
type clusterNode struct {
	Node             int         `json:"node"`
	Producing        bool        `json:"producing"`
	Produced         int         `json:"produced"`
	Completed        int         `json:"completed"`
	ClusterEvents    int         `json:"cluster_events"`
	Window           float64     `json:"window_seconds"`
	WALBytes         int64       `json:"wal_bytes"`
	WALBytesPerEvent float64     `json:"wal_bytes_per_event"`
	CPU              *clusterCPU `json:"server_cpu_us_per_event"`
	CPUPerSecond     *clusterCPU `json:"server_cpu_us_per_second"`
	Peers            []struct {
		Peer              int     `json:"peer"`
		SentBytes         int64   `json:"sent_bytes"`
		SentBytesPerEvent float64 `json:"sent_bytes_per_event"`
	} `json:"peers"`
	Lag []struct {
		Origin  int     `json:"origin"`
		Samples int     `json:"samples"`
		P50     float64 `json:"p50"`
		P99     float64 `json:"p99"`
	} `json:"apply_lag_ms"`
}

type clusterCPU struct {
	Total      float64 `json:"total"`
	Backends   float64 `json:"backends"`
	WALSenders float64 `json:"walsenders"`
	Apply      float64 `json:"apply"`
	Other      float64 `json:"other"`
}

// parts checks that c's parts add up to its total.
func (c *clusterCPU) parts(t *testing.T, what string) {
	t.Helper()
	finite(t, what, c.Total)
	c.sum(t, what)
}

// sum checks that the parts add up to the total.
func (c *clusterCPU) sum(t *testing.T, what string) {
	t.Helper()
	assert.InDelta(t, c.Total, c.Backends+c.WALSenders+c.Apply+c.Other, 1, what)
}

// cluster-load on two Spock nodes, tiny: each phase's nodes measured, the
// producing nodes' events all completed (the harness checks node 1's log),
// each node's replication to its peer read, every lag probe of a producing
// node applied and stamped on the other, and the report's cluster charts drawn in a browser. The
// harness, not the figures: no value is compared with a target.
func TestBenchClusterLoad(t *testing.T) {
	if _, err := devenv.FindSpock(); err != nil {
		t.Skipf("Spock variant skipped: %v", err)
	}
	t.Parallel() // its own cluster: nothing of the shared test server's
	plot := filepath.Join(t.TempDir(), "report.html")
	code, out, errOut := cliMain("bench", "cluster-load", "--json", "--cluster-nodes", "2", "--cluster-rate", "40",
		"--cluster-duration", "2s", "--cluster-producers", "2", "--plot", plot, "--log-level", "warn")
	require.Equal(t, 0, code, errOut)
	var doc struct {
		Error     string `json:"error"`
		Scenarios []struct {
			Name         string `json:"name"`
			Measurements []struct {
				Name   string       `json:"name"`
				Events int          `json:"events"`
				Rate   float64      `json:"rate"`
				Node   *clusterNode `json:"cluster_node"`
				Cost   *struct {
					WALBytesPerEvent    float64 `json:"wal_bytes_per_event"`
					ServerCPUUSPerEvent float64 `json:"server_cpu_us_per_event"`
				} `json:"cost"`
			} `json:"measurements"`
		} `json:"scenarios"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
	require.Empty(t, doc.Error)
	require.Len(t, doc.Scenarios, 1)
	ms := doc.Scenarios[0].Measurements
	phases := []string{"multi-node, idle", "multi-node, node 1 producing", "multi-node, every node producing", "leader, every node producing"}
	require.Len(t, ms, 2*len(phases))
	for i, phase := range phases {
		var produced, completed int
		nodes := make([]*clusterNode, 2)
		for k := range 2 {
			m := ms[2*i+k]
			require.Equal(t, fmt.Sprintf("%s: node %d", phase, k+1), m.Name)
			f := m.Node
			require.NotNil(t, f, m.Name)
			nodes[k] = f
			assert.Equal(t, k+1, f.Node)
			assert.Equal(t, f.Completed, m.Events, m.Name)
			assert.Equal(t, i > 1 || (i == 1 && k == 0), f.Producing, m.Name)
			if f.Producing {
				assert.Positive(t, f.Produced, m.Name)
			} else {
				assert.Zero(t, f.Produced, m.Name)
			}
			produced += f.Produced
			completed += f.Completed
			finite(t, m.Name+" window", f.Window)
			if assert.NotNil(t, f.CPUPerSecond, "%s: the nodes run on this machine", m.Name) {
				if i == 0 {
					// An idle node over the test's 2 s window: its few
					// milliseconds a second may round to no clock tick
					// (/proc counts 10 ms ticks), so 0 is a measurement too.
					cpu := f.CPUPerSecond.Total
					assert.True(t, cpu >= 0 && !math.IsInf(cpu, 0), "%s CPU per second = %v", m.Name, cpu)
					f.CPUPerSecond.sum(t, m.Name+" CPU per second")
				} else {
					f.CPUPerSecond.parts(t, m.Name+" CPU per second")
				}
			}
			if i == 0 { // idle: no event, no cost per event
				assert.Zero(t, f.ClusterEvents, m.Name)
				assert.Nil(t, m.Cost, m.Name)
				assert.Nil(t, f.CPU, m.Name)
				assert.Empty(t, f.Lag, m.Name)
				continue
			}
			finite(t, m.Name+" WAL", f.WALBytesPerEvent)
			require.NotNil(t, m.Cost, m.Name)
			assert.Equal(t, f.WALBytesPerEvent, m.Cost.WALBytesPerEvent, m.Name)
			if assert.NotNil(t, f.CPU, m.Name) {
				f.CPU.parts(t, m.Name+" CPU per event")
				assert.Equal(t, f.CPU.Total, m.Cost.ServerCPUUSPerEvent, m.Name)
			}
			// One slot feeds the other node.
			if assert.Len(t, f.Peers, 1, m.Name) {
				assert.Equal(t, 2-k, f.Peers[0].Peer, m.Name)
			}
		}
		for _, f := range nodes {
			assert.Equal(t, produced, f.ClusterEvents, phase)
		}
		if i == 0 {
			assert.Zero(t, completed, phase)
			continue
		}
		assert.Positive(t, completed, phase)
		// A producing node's changes went to its peer, whose apply lag from
		// it was sampled; a node that does not produce has no lag sampled
		// from it.
		for k, f := range nodes {
			peer := nodes[1-k]
			if f.Producing {
				assert.Positive(t, f.Peers[0].SentBytes, "%s: node %d sent its changes", phase, f.Node)
				if assert.Len(t, peer.Lag, 1, "%s: lag on node %d", phase, peer.Node) {
					assert.Equal(t, f.Node, peer.Lag[0].Origin)
					assert.Positive(t, peer.Lag[0].Samples)
					assert.LessOrEqual(t, peer.Lag[0].P50, peer.Lag[0].P99)
				}
			} else {
				assert.Empty(t, peer.Lag, "%s: node %d produced nothing", phase, f.Node)
			}
		}
		switch i {
		case 1: // multi-node: node 2 owns no event
			assert.Zero(t, nodes[1].Completed, phase)
		case 3: // leader: one node dispatches every event
			assert.True(t, nodes[0].Completed == 0 || nodes[1].Completed == 0, "%s: %d and %d", phase, nodes[0].Completed, nodes[1].Completed)
		}
	}
	charts := reportCharts(t, plot)
	for _, title := range []string{"Cluster: events per second by node", "Cluster: server CPU per event by node",
		"Cluster: WAL per event by node", "Cluster: bytes sent to each peer per event", "Cluster: apply lag"} {
		assert.Positive(t, charts[title], "%s: %v", title, charts)
	}
}
