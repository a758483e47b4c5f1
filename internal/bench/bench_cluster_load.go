package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgrelay/pgrelay/actors"
	"github.com/pgrelay/pgrelay/events/store"
	"github.com/pgrelay/pgrelay/internal/devenv"
)

// The cluster-load scenario: what a node of a Spock cluster costs under a
// steady load, per event, so that larger clusters can be modelled from it
// (docs/scaling.md).
//
// Each node that produces runs --cluster-producers connections committing
// one notify() per transaction on a schedule of --cluster-rate events/s (an
// open loop: a steady load, whose apply lag means something, rather than a
// backlog, whose lag would be the burst's); every node runs its Processor.
// Four phases on one cluster of --cluster-nodes durable Spock nodes:
//
//  0. multi-node, idle: what a node costs per second with nothing to do;
//  1. multi-node, node 1 producing: what an event costs the node that
//     enqueues and dispatches it, and what applying it costs each other node;
//  2. multi-node, every node producing;
//  3. leader, every node producing: the leader dispatches every event.
//
// Each phase warms up for clusterWarmUp, then measures for
// --cluster-duration; the producers stop, and the phase ends once every
// event produced completed and node 1's log holds a success for each.
// Per node and per event produced in the cluster during the window:
//
//   - WAL bytes (pg_current_wal_insert_lsn() at both ends);
//   - server CPU µs, from /proc, split by process title into client
//     backends (the producers', the Processor's, the bench's), walsenders
//     (decoding for the peers), Spock's apply workers and the rest
//     (background processes, and processes that exited);
//   - per peer, the bytes of changes decoded and sent to it
//     (pg_stat_replication_slots.total_bytes of its slot) and the WAL its
//     walsender read (sent_lsn);
//   - apply lag per origin: every lagProbeEvery each producing node inserts
//     a probe row (its clock_timestamp()) into a replicated table of the
//     bench's, in a transaction of its own amid the load; a trigger enabled
//     for replication only stamps each probe's arrival on the other nodes
//     (clock_timestamp() again: one machine, one clock). The lag is the
//     difference, from the probe's insert to its apply.

const (
	clusterLoadChannel = "pgrelay_bench_load"
	clusterWarmUp      = 2 * time.Second
	lagProbeEvery      = 100 * time.Millisecond
)

// clusterNodeFigures is what one node did and cost during a phase's
// window. The per-event figures are per event produced in the whole
// cluster during the window (ClusterEvents).
type clusterNodeFigures struct {
	Node          int   `json:"node"`
	Producing     bool  `json:"producing"`
	Produced      int64 `json:"produced"`
	Completed     int64 `json:"completed"`
	ClusterEvents int64 `json:"cluster_events"`
	// Window is the measured window, in seconds.
	Window           float64     `json:"window_seconds"`
	WALBytes         int64       `json:"wal_bytes"`
	WALBytesPerEvent float64     `json:"wal_bytes_per_event"`
	CPU              *clusterCPU `json:"server_cpu_us_per_event,omitempty"`
	// Per second of the window, whatever the events: what a node costs
	// idle, and how busy it was.
	WALBytesPerSecond float64       `json:"wal_bytes_per_second"`
	CPUPerSecond      *clusterCPU   `json:"server_cpu_us_per_second,omitempty"`
	Peers             []clusterPeer `json:"peers"`
	Lag               []clusterLag  `json:"apply_lag_ms,omitempty"`
}

// clusterCPU is a node's server CPU per event, in µs, by process kind.
type clusterCPU struct {
	Total      float64 `json:"total"`
	Backends   float64 `json:"backends"`
	WALSenders float64 `json:"walsenders"`
	Apply      float64 `json:"apply"`
	Other      float64 `json:"other"`
}

// clusterPeer is what a node sent to one peer.
type clusterPeer struct {
	Peer int `json:"peer"`
	// SentBytes: changes decoded and sent to the peer
	// (pg_stat_replication_slots.total_bytes); WALReadBytes: how far its
	// walsender read the WAL (sent_lsn).
	SentBytes            int64   `json:"sent_bytes"`
	SentBytesPerEvent    float64 `json:"sent_bytes_per_event"`
	WALReadBytesPerEvent float64 `json:"wal_read_bytes_per_event"`
}

// clusterLag is the apply lag on a node of the transactions of one origin.
type clusterLag struct {
	Origin  int     `json:"origin"`
	Samples int     `json:"samples"`
	P50     float64 `json:"p50"`
	P99     float64 `json:"p99"`
	Max     float64 `json:"max"`
}

// loadCluster is the scenario's cluster: a pool and the postmaster per
// node, and which peer each replication slot feeds.
type loadCluster struct {
	c          *devenv.Cluster
	pools      []*pgxpool.Pool
	postmaster []int            // per node; 0: its CPU is not measured
	slots      []map[string]int // per node: its slot name -> the peer it feeds
	names      map[string]int   // Spock node name -> node number
}

// nodeMark is a node's counters at a moment.
type nodeMark struct {
	wal   walMark
	cpu   cpuParts
	cpuOK bool
	slots map[string]slotMark
}

type slotMark struct{ sentLSN, total int64 }

func (b *bench) scenarioClusterLoad(ctx context.Context) (*scenarioResult, error) {
	res := &scenarioResult{Name: "cluster-load"}
	c, err := devenv.StartCluster(ctx, devenv.ClusterConfig{Engine: devenv.Spock, Nodes: b.o.ClusterNodes, Durable: true})
	if err != nil {
		return nil, err
	}
	defer c.Stop()
	cl := &loadCluster{c: c, names: map[string]int{}}
	defer func() {
		for _, p := range cl.pools {
			p.Close()
		}
	}()
	for n := 1; n <= c.N(); n++ {
		cl.names[fmt.Sprintf("n%d", n)] = n
		pcfg, err := pgxpool.ParseConfig(c.URL(n))
		if err != nil {
			return nil, fmt.Errorf("parse node %d's URL: %w", n, err)
		}
		store.PinSearchPath(pcfg.ConnConfig)
		pcfg.MaxConns = 4
		pool, err := pgxpool.NewWithConfig(ctx, pcfg)
		if err != nil {
			return nil, fmt.Errorf("connect to node %d: %w", n, err)
		}
		cl.pools = append(cl.pools, pool)
		var backend int
		if err := pool.QueryRow(ctx, `SELECT pg_catalog.pg_backend_pid()`).Scan(&backend); err != nil {
			return nil, fmt.Errorf("node %d: read the backend's pid: %w", n, err)
		}
		cl.postmaster = append(cl.postmaster, localPostmaster(backend))
	}
	if err := cl.readSlots(ctx); err != nil {
		return nil, err
	}
	if err := cl.createProbes(ctx); err != nil {
		return nil, err
	}
	if _, err := cl.pools[0].Exec(ctx, `SELECT pgrelay.register($1::pg_catalog.text, $2::pg_catalog.text)`,
		clusterLoadChannel, noopHandler); err != nil {
		return nil, fmt.Errorf("register the bench channel: %w", err)
	}
	if err := c.Sync(ctx, time.Minute); err != nil {
		return nil, err
	}
	every := func(int) bool { return true }
	phases := []struct {
		name, mode string
		producing  func(n int) bool
	}{
		{"multi-node, idle", actors.ModeMultiNode, func(int) bool { return false }},
		{"multi-node, node 1 producing", actors.ModeMultiNode, func(n int) bool { return n == 1 }},
		{"multi-node, every node producing", actors.ModeMultiNode, every},
		{"leader, every node producing", actors.ModeLeader, every},
	}
	for i, ph := range phases {
		ms, err := b.clusterLoadPhase(ctx, cl, i, ph.name, ph.mode, ph.producing)
		for _, m := range ms {
			res.add(m)
		}
		if err != nil {
			return res, fmt.Errorf("%s: %w", ph.name, err)
		}
	}
	return res, nil
}

// readSlots learns, from each node's subscriptions, which of its peers'
// slots feeds it.
func (cl *loadCluster) readSlots(ctx context.Context) error {
	cl.slots = make([]map[string]int, cl.c.N())
	for i := range cl.slots {
		cl.slots[i] = map[string]int{}
	}
	for n, pool := range cl.pools {
		rows, err := pool.Query(ctx, `SELECT s.sub_slot_name::pg_catalog.text, o.node_name::pg_catalog.text
			FROM spock.subscription s JOIN spock.node o ON o.node_id = s.sub_origin`)
		if err != nil {
			return fmt.Errorf("node %d: read the subscriptions: %w", n+1, err)
		}
		type sub struct{ Slot, Origin string }
		subs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[sub])
		if err != nil {
			return fmt.Errorf("node %d: read the subscriptions: %w", n+1, err)
		}
		for _, s := range subs {
			origin, ok := cl.names[s.Origin]
			if !ok {
				return fmt.Errorf("node %d subscribes to an unknown node %q", n+1, s.Origin)
			}
			cl.slots[origin-1][s.Slot] = n + 1
		}
	}
	return nil
}

// clusterLoadPhase runs one phase: every node's Processor in mode, the
// producers on the nodes producing says, and returns a measurement per node.
func (b *bench) clusterLoadPhase(ctx context.Context, cl *loadCluster, phase int, name, mode string, producing func(int) bool) ([]*measurement, error) {
	N := cl.c.N()
	// Fresh nodes, as in the cluster scenario (bench_cluster.go).
	if _, err := cl.pools[0].Exec(ctx, `DELETE FROM pgrelay.nodes WHERE node_id >= 0`); err != nil {
		return nil, fmt.Errorf("forget the previous phase's nodes: %w", err)
	}
	if err := cl.c.Sync(ctx, time.Minute); err != nil {
		return nil, err
	}
	mark, err := logMark(ctx, cl.pools[0])
	if err != nil {
		return nil, err
	}
	for _, pool := range cl.pools {
		if err := settle(ctx, pool); err != nil {
			return nil, err
		}
	}
	procs := make([]*actors.Processor, 0, N)
	stopProcs := func() error {
		var errs []error
		for _, p := range procs {
			if err := p.Stop(context.WithoutCancel(ctx)); err != nil {
				errs = append(errs, fmt.Errorf("stop a Processor: %w", err))
			}
		}
		procs = procs[:0]
		return errors.Join(errs...)
	}
	defer func() { _ = stopProcs() }()
	counters := make([]counterSum, N)
	for n := 1; n <= N; n++ {
		p, err := newProcessor(b.procConfig(cl.c.URL(n), mode))
		if err != nil {
			return nil, err
		}
		if err := p.Start(ctx); err != nil {
			return nil, fmt.Errorf("start node %d's Processor: %w", n, err)
		}
		procs = append(procs, p)
		counters[n-1], _ = procCounters([]*actors.Processor{p}, []string{clusterLoadChannel})
	}
	if mode == actors.ModeLeader {
		if err := waitFor(ctx, "a leader", func() (bool, error) {
			var held bool
			err := cl.pools[0].QueryRow(ctx, `SELECT EXISTS (SELECT FROM pgrelay._lease_holder(pg_catalog.now()))`).Scan(&held)
			return held, err
		}); err != nil {
			return nil, err
		}
	}
	// The producers.
	produced := make([]*atomic.Int64, N)
	var stops []func() error
	stopProducers := func() error {
		var errs []error
		for _, s := range stops {
			errs = append(errs, s())
		}
		stops = nil
		return errors.Join(errs...)
	}
	defer func() { _ = stopProducers() }()
	for n := 1; n <= N; n++ {
		produced[n-1] = &atomic.Int64{}
		if !producing(n) {
			continue
		}
		stop, err := b.steadyProducers(ctx, cl.c.URL(n), n, produced[n-1])
		if err != nil {
			return nil, err
		}
		stops = append(stops, stop)
	}
	bar := b.prog.start("cluster-load, "+name, 0)
	if err := sleepCtx(ctx, clusterWarmUp); err != nil {
		bar.finish()
		return nil, err
	}
	// The window.
	start := time.Now()
	from, err := cl.markAll(ctx)
	if err != nil {
		bar.finish()
		return nil, err
	}
	prod0, done0 := snapshot(produced), sums(counters)
	probeStop := cl.probe(ctx, phase, producing)
	werr := func() error {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for time.Since(start) < b.o.ClusterDuration {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-t.C:
				bar.set(0)
			}
		}
		return nil
	}()
	to, err := cl.markAll(ctx)
	window := time.Since(start)
	prod1, done1 := snapshot(produced), sums(counters)
	probes, probeErr := probeStop()
	bar.finish()
	if err = errors.Join(werr, err, probeErr, stopProducers()); err != nil {
		return nil, err
	}
	// Every event produced completes, and node 1 sees its success.
	var total int64
	for _, p := range produced {
		total += p.Load()
	}
	if _, err := b.follow(ctx, follow{label: "cluster-load, " + name + " (drain)", target: total,
		done: func() int64 { return sumOf(counters) }, start: time.Now()}); err != nil {
		return nil, err
	}
	if err := stopProcs(); err != nil {
		return nil, err
	}
	if err := waitFor(ctx, "every success in node 1's log", func() (bool, error) {
		return checkLog(ctx, cl.pools[0], mark, []string{clusterLoadChannel}, total, false) == nil, nil
	}); err != nil {
		return nil, fmt.Errorf("%w (%v)", err, checkLog(ctx, cl.pools[0], mark, []string{clusterLoadChannel}, total, false))
	}
	lags, err := cl.readProbes(ctx, phase, probes)
	if err != nil {
		return nil, err
	}

	var clusterEvents int64
	for n := range N {
		clusterEvents += prod1[n] - prod0[n]
	}
	var out []*measurement
	for n := 1; n <= N; n++ {
		f := cl.figures(n, from[n-1], to[n-1], window, clusterEvents, lags[n-1])
		f.Producing = producing(n)
		f.Produced = prod1[n-1] - prod0[n-1]
		f.Completed = done1[n-1] - done0[n-1]
		m := newMeasurement(fmt.Sprintf("%s: node %d", name, n), "pgrelay", f.Completed, window, "events/s")
		m.Node = f
		if clusterEvents > 0 {
			m.Cost = newEventCost(f.WALBytes, to[n-1].wal.xid-from[n-1].wal.xid, clusterEvents, 0)
			if f.CPU != nil {
				m.Cost.ServerCPUUSPerEvent = f.CPU.Total
			}
		}
		m.Detail = f.detail(b.o.ClusterRate, mode)
		out = append(out, m)
	}
	return out, nil
}

// figures computes node n's figures between two marks.
func (cl *loadCluster) figures(n int, from, to nodeMark, window time.Duration, events int64, lags map[int][]float64) *clusterNodeFigures {
	f := &clusterNodeFigures{Node: n, ClusterEvents: events, WALBytes: to.wal.lsn - from.wal.lsn, Window: secs(window)}
	per := func(v float64) float64 {
		if events <= 0 {
			return 0
		}
		return round(v/float64(events), 1)
	}
	f.WALBytesPerEvent = per(float64(f.WALBytes))
	f.WALBytesPerSecond = round(float64(f.WALBytes)/window.Seconds(), 0)
	if from.cpuOK && to.cpuOK {
		split := func(scale func(float64) float64) *clusterCPU {
			us := func(ns int64) float64 { return scale(float64(ns) / 1e3) }
			d := to.cpu.minus(from.cpu)
			return &clusterCPU{Total: us(d.total()), Backends: us(d.backend), WALSenders: us(d.send), Apply: us(d.apply), Other: us(d.rest)}
		}
		if events > 0 {
			f.CPU = split(per)
		}
		f.CPUPerSecond = split(func(v float64) float64 { return round(v/window.Seconds(), 0) })
	}
	for slot, peer := range cl.slots[n-1] {
		a, b := from.slots[slot], to.slots[slot]
		f.Peers = append(f.Peers, clusterPeer{Peer: peer, SentBytes: b.total - a.total,
			SentBytesPerEvent: per(float64(b.total - a.total)), WALReadBytesPerEvent: per(float64(b.sentLSN - a.sentLSN))})
	}
	slices.SortFunc(f.Peers, func(a, b clusterPeer) int { return a.Peer - b.Peer })
	for origin, samples := range lags {
		slices.Sort(samples)
		f.Lag = append(f.Lag, clusterLag{Origin: origin, Samples: len(samples),
			P50: round(nearestRank(samples, 50), 1), P99: round(nearestRank(samples, 99), 1), Max: round(samples[len(samples)-1], 1)})
	}
	slices.SortFunc(f.Lag, func(a, b clusterLag) int { return a.Origin - b.Origin })
	return f
}

// detail is the table's DETAIL cell of a node's figures.
func (f *clusterNodeFigures) detail(rate float64, mode string) string {
	var parts []string
	if f.Producing {
		parts = append(parts, fmt.Sprintf("produced %d here (%.0f/s, offered %g/s)", f.Produced, float64(f.Produced)/f.Window, rate))
	} else {
		parts = append(parts, "no producers here")
	}
	if f.CPUPerSecond != nil {
		parts = append(parts, fmt.Sprintf("%s; per second: server CPU %.0f ms, WAL %.0f kB", mode, f.CPUPerSecond.Total/1000, f.WALBytesPerSecond/1000))
	}
	if f.ClusterEvents == 0 {
		return strings.Join(parts, "; ")
	}
	parts = append(parts, fmt.Sprintf("per event of the cluster's %d: WAL %.0f B", f.ClusterEvents, f.WALBytesPerEvent))
	if f.CPU != nil {
		parts = append(parts, fmt.Sprintf("server CPU %.1f µs (backends %.1f, walsenders %.1f, apply %.1f, other %.1f)",
			f.CPU.Total, f.CPU.Backends, f.CPU.WALSenders, f.CPU.Apply, f.CPU.Other))
	}
	for _, p := range f.Peers {
		parts = append(parts, fmt.Sprintf("sent to node %d %.0f B", p.Peer, p.SentBytesPerEvent))
	}
	for _, l := range f.Lag {
		parts = append(parts, fmt.Sprintf("apply lag from node %d p50 %.1fms p99 %.1fms", l.Origin, l.P50, l.P99))
	}
	return strings.Join(parts, "; ")
}

// markAll reads every node's counters.
func (cl *loadCluster) markAll(ctx context.Context) ([]nodeMark, error) {
	out := make([]nodeMark, len(cl.pools))
	for i, pool := range cl.pools {
		var err error
		if out[i].wal, err = markWAL(ctx, pool); err != nil {
			return nil, fmt.Errorf("node %d: %w", i+1, err)
		}
		if cl.postmaster[i] != 0 {
			if out[i].cpu, err = serverCPUParts(cl.postmaster[i]); err == nil {
				out[i].cpuOK = true
			}
		}
		rows, err := pool.Query(ctx, `SELECT s.slot_name::pg_catalog.text,
				COALESCE((r.sent_lsn - '0/0'::pg_catalog.pg_lsn)::pg_catalog.int8, 0),
				COALESCE(st.total_bytes, 0)
			FROM pg_catalog.pg_replication_slots s
			LEFT JOIN pg_catalog.pg_stat_replication r ON r.pid = s.active_pid
			LEFT JOIN pg_catalog.pg_stat_replication_slots st ON st.slot_name = s.slot_name`)
		if err != nil {
			return nil, fmt.Errorf("node %d: read the replication slots: %w", i+1, err)
		}
		out[i].slots = map[string]slotMark{}
		var slot string
		var m slotMark
		if _, err := pgx.ForEachRow(rows, []any{&slot, &m.sentLSN, &m.total}, func() error {
			out[i].slots[slot] = m
			return nil
		}); err != nil {
			return nil, fmt.Errorf("node %d: read the replication slots: %w", i+1, err)
		}
	}
	return out, nil
}

// probe inserts a lag probe on every producing node every lagProbeEvery
// until stop, which returns how many each node inserted.
func (cl *loadCluster) probe(ctx context.Context, phase int, producing func(int) bool) (stop func() ([]int, error)) {
	pctx, cancel := context.WithCancel(ctx)
	N := len(cl.pools)
	sent := make([]int, N)
	errs := make([]error, N)
	var wg sync.WaitGroup
	for i, pool := range cl.pools {
		if !producing(i + 1) {
			continue
		}
		wg.Go(func() {
			t := time.NewTicker(lagProbeEvery)
			defer t.Stop()
			for {
				select {
				case <-pctx.Done():
					return
				case <-t.C:
				}
				// Not cancelled with the probes: a probe cut off mid-flight
				// might commit uncounted.
				if _, err := pool.Exec(ctx, `INSERT INTO pgrelay_bench.lag_probe (origin, phase, seq, sent_at)
					VALUES ($1::pg_catalog.int4, $2::pg_catalog.int4, $3::pg_catalog.int4, pg_catalog.clock_timestamp())`,
					i+1, phase, sent[i]); err != nil {
					errs[i] = fmt.Errorf("node %d: insert a lag probe: %w", i+1, err)
					return
				}
				sent[i]++
			}
		})
	}
	return func() ([]int, error) {
		cancel()
		wg.Wait()
		return sent, errors.Join(errs...)
	}
}

// readProbes waits until every node applied the phase's probes of every
// other node, and returns each node's lags (ms) per origin.
func (cl *loadCluster) readProbes(ctx context.Context, phase int, sent []int) ([]map[int][]float64, error) {
	if err := cl.c.Sync(ctx, time.Minute); err != nil {
		return nil, err
	}
	out := make([]map[int][]float64, len(cl.pools))
	for i, pool := range cl.pools {
		out[i] = map[int][]float64{}
		rows, err := pool.Query(ctx, `SELECT origin, (EXTRACT(epoch FROM applied_at - sent_at) * 1000)::pg_catalog.float8
			FROM pgrelay_bench.lag_probe WHERE phase = $1::pg_catalog.int4 AND origin <> $2::pg_catalog.int4 AND applied_at IS NOT NULL`,
			phase, i+1)
		if err != nil {
			return nil, fmt.Errorf("node %d: read the lag probes: %w", i+1, err)
		}
		var origin int
		var ms float64
		if _, err := pgx.ForEachRow(rows, []any{&origin, &ms}, func() error {
			out[i][origin] = append(out[i][origin], ms)
			return nil
		}); err != nil {
			return nil, fmt.Errorf("node %d: read the lag probes: %w", i+1, err)
		}
		for o, n := range sent {
			if o != i && len(out[i][o+1]) != n {
				return nil, fmt.Errorf("node %d: %d of node %d's %d lag probes applied and stamped", i+1, len(out[i][o+1]), o+1, n)
			}
		}
	}
	return out, nil
}

// createProbes creates the lag probes' table on every node, its trigger
// enabled for replication only, and replicates it.
func (cl *loadCluster) createProbes(ctx context.Context) error {
	if err := cl.c.ExecBoth(ctx, `CREATE SCHEMA pgrelay_bench;
		CREATE TABLE pgrelay_bench.lag_probe (origin int NOT NULL, phase int NOT NULL, seq int NOT NULL,
			sent_at timestamptz NOT NULL, applied_at timestamptz, PRIMARY KEY (origin, phase, seq));
		CREATE FUNCTION pgrelay_bench.lag_probe_applied() RETURNS trigger LANGUAGE plpgsql AS
			'BEGIN NEW.applied_at := pg_catalog.clock_timestamp(); RETURN NEW; END';
		CREATE TRIGGER lag_probe_applied BEFORE INSERT ON pgrelay_bench.lag_probe
			FOR EACH ROW EXECUTE FUNCTION pgrelay_bench.lag_probe_applied();
		ALTER TABLE pgrelay_bench.lag_probe ENABLE REPLICA TRIGGER lag_probe_applied`); err != nil {
		return fmt.Errorf("create the lag probes' table: %w", err)
	}
	return cl.c.Replicate(ctx, "pgrelay_bench.lag_probe")
}

// steadyProducers starts --cluster-producers connections on url committing
// notify() one event per transaction, together at --cluster-rate events/s on
// a fixed schedule; count counts the commits. stop ends them.
func (b *bench) steadyProducers(ctx context.Context, url string, node int, count *atomic.Int64) (stop func() error, err error) {
	conns := b.o.ClusterProducers
	pool, err := producerPool(ctx, url, conns)
	if err != nil {
		return nil, err
	}
	// The schedule stops first; the producers then commit what is due and
	// return (an insert cancelled mid-flight might commit uncounted).
	sched, stopSched := context.WithCancel(ctx)
	// Due events wait here for a free producer; the schedule does not wait
	// for them (a full queue: the offered rate is not reached).
	due := make(chan int64, max(1, int(b.o.ClusterRate)))
	var wg sync.WaitGroup
	errs := make([]error, conns)
	prefix := fmt.Sprintf("n%d-", node)
	for g := range conns {
		wg.Go(func() {
			for k := range due {
				if errs[g] != nil {
					continue // drain
				}
				if _, err := pool.Exec(ctx, `SELECT pgrelay.notify($1::pg_catalog.text, $2::pg_catalog.text)`,
					clusterLoadChannel, prefix+strconv.FormatInt(k, 10)); err != nil {
					errs[g] = fmt.Errorf("node %d: producer %d: %w", node, g, err)
					stopSched()
					continue
				}
				count.Add(1)
			}
		})
	}
	wg.Go(func() {
		defer close(due)
		interval := time.Duration(float64(time.Second) / b.o.ClusterRate)
		start := time.Now()
		for k := int64(0); ; k++ {
			if wait := time.Until(start.Add(time.Duration(k) * interval)); wait > 0 {
				t := time.NewTimer(wait)
				select {
				case <-sched.Done():
					t.Stop()
					return
				case <-t.C:
				}
			}
			select {
			case due <- k:
			case <-sched.Done():
				return
			default: // every producer busy and the queue full: this event is not offered
			}
		}
	})
	return func() error {
		stopSched()
		wg.Wait()
		pool.Close()
		return errors.Join(errs...)
	}, nil
}

func snapshot(xs []*atomic.Int64) []int64 {
	out := make([]int64, len(xs))
	for i, x := range xs {
		out[i] = x.Load()
	}
	return out
}

func sums(cs []counterSum) []int64 {
	out := make([]int64, len(cs))
	for i, c := range cs {
		out[i] = c.value()
	}
	return out
}

func sumOf(cs []counterSum) int64 {
	var s int64
	for _, c := range cs {
		s += c.value()
	}
	return s
}

// nearestRank is the nearest-rank percentile of sorted samples.
func nearestRank(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(float64(len(sorted))*p/100 + 0.999999)
	return sorted[min(max(rank, 1), len(sorted))-1]
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// writeCluster is the table of cluster-load's per-node figures, per event
// produced in the cluster during each phase's window.
func (r *benchReport) writeCluster(w io.Writer) error {
	var rows []string
	for _, s := range r.Scenarios {
		for _, m := range s.Measurements {
			f := m.Node
			if f == nil {
				continue
			}
			phase, _, _ := strings.Cut(m.Name, ": node ")
			cpu := "-"
			if f.CPU != nil {
				cpu = fmt.Sprintf("%.1f (%.1f / %.1f / %.1f / %.1f)", f.CPU.Total, f.CPU.Backends, f.CPU.WALSenders, f.CPU.Apply, f.CPU.Other)
			}
			var sent, lag []string
			for _, p := range f.Peers {
				sent = append(sent, fmt.Sprintf("%d: %.0f", p.Peer, p.SentBytesPerEvent))
			}
			for _, l := range f.Lag {
				lag = append(lag, fmt.Sprintf("%d: %.1f / %.1f", l.Origin, l.P50, l.P99))
			}
			cps := "-"
			if f.CPUPerSecond != nil {
				cps = fmt.Sprintf("%.0f", f.CPUPerSecond.Total/1000)
			}
			rows = append(rows, fmt.Sprintf("%s\t%d\t%.0f\t%s\t%.0f\t%s\t%s\t%s\n", phase, f.Node, m.Rate, cps, f.WALBytesPerEvent, cpu,
				orDash(strings.Join(sent, ", ")), orDash(strings.Join(lag, ", "))))
		}
	}
	if len(rows) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CLUSTER PHASE\tNODE\tCOMPLETED/S\tCPU ms/s\tWAL B/EVENT\tSERVER CPU µs/EVENT (BACKENDS / WALSENDERS / APPLY / OTHER)\tSENT B/EVENT TO PEER\tAPPLY LAG FROM ORIGIN p50 / p99 ms")
	for _, row := range rows {
		fmt.Fprint(tw, row)
	}
	return tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
