package actors

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/pgrelay/pgrelay/events/bus"
	"github.com/pgrelay/pgrelay/events/store"
	"github.com/pgrelay/pgrelay/internal/handlers"
)

// deps is what every actor of one Processor shares: its settings and
// connections, and three parts with owners of their own: the slots (the
// claimer takes them, the claimed events' ends free them; the batchers
// take and free batch slots of their own), the
// actor ids (set by the relay) and the node's leadership (kept by the
// rescuer and the leader actor). Its other fields are set before the tree starts and not
// changed after.
type deps struct {
	cfg      Config
	store    *store.Store
	handlers handlers.Registry
	kinds    []string
	// goHandlers: the names of the Go handlers (recorded in
	// pgrelay.go_handlers for the stats).
	goHandlers []string
	// direct: sql channels run in direct and lane batches (batcher), not
	// through claims.
	direct bool
	// directGo: GoKind of the Go handlers registered with HandleTx, whose
	// 'none' go channels run in direct batches (batcher) too.
	directGo  []string
	metrics   *Metrics
	tracing   *tracing // nil: no spans
	log       *slog.Logger
	processor int64
	node      int // pg_relay.node_id of the Processor's sessions
	// hints: what a wake-up names each channel by, as the database says
	// (wake.go).
	hints *wakeHints
	// armDue asks the armer to arm the wake-up slots (listener.go); see
	// askArm.
	armDue chan struct{}
	// drainingHints: the wake hints of the channels whose batcher drains a
	// backlog (batcher.full): a notification of theirs leaves the arming to
	// the batcher.
	drainingHints sync.Map
	// flowLimited: the channels with a max_in_flight, read by the claimer
	// at its first claim and at every poll (nil until read).
	flowLimited atomic.Pointer[map[string]struct{}]
	info        store.ProcessorInfo
	runCtx      context.Context // cancelled when in-flight handlers must stop
	slots       *slots          // claimed events; the in-flight gauge
	batchSlots  *slots          // what running sql batches hold
	// pendingOutcomes: outcomes sent to the completer and not yet written
	// (in its mailbox, its buffer, or being written); the claimer claims
	// nothing while maxPendingOutcomes wait.
	pendingOutcomes atomic.Int64
	bus             *bus.Conn      // nil without NATS
	work            sync.WaitGroup // goroutines Stop waits for before closing connections
	// batches: the batch goroutines, which Stop waits for before it stops
	// the actors they report to.
	batches sync.WaitGroup

	actorIDs
	leadership
}

// actorIDs are the ids of the tree's long-lived actors, set by the relay as
// it spawns them (anew should the relay itself restart) and read from any
// actor or goroutine.
type actorIDs struct {
	system     *actor.ActorSystem
	mu         sync.RWMutex
	claimer    *actor.PID
	dispatcher *actor.PID
	completer  *actor.PID
}

func (a *actorIDs) pids() (claimer, dispatcher, completer *actor.PID) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.claimer, a.dispatcher, a.completer
}

func (a *actorIDs) setPIDs(claimer, dispatcher, completer *actor.PID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.claimer, a.dispatcher, a.completer = claimer, dispatcher, completer
}

// send delivers msg to pid from outside any actor (goroutines, timers).
func (a *actorIDs) send(pid *actor.PID, msg any) {
	if pid != nil {
		a.system.Root.Send(pid, msg)
	}
}

// runsBatches reports whether the Processor runs batches: sql channels, or the
// 'none' go channels of HandleTx handlers.
func (d *deps) runsBatches() bool { return d.direct || len(d.directGo) > 0 }

// notifySlotsFreed tells the claimer that slots were freed.
func (a *actorIDs) notifySlotsFreed() {
	claimer, _, _ := a.pids()
	a.send(claimer, &slotsFreed{})
}

// notifyBatchSlotsFreed tells the claimer that batch slots were freed.
func (a *actorIDs) notifyBatchSlotsFreed() {
	claimer, _, _ := a.pids()
	a.send(claimer, &batchSlotsFreed{})
}

// leadership is this node's standing in multi-node and leader modes, kept by
// the rescuer (the rejoin) and the leader actor (the lease) and read by the
// claimer and the batchers.
type leadership struct {
	// rejoining: the node had been dead or adopted when this Processor
	// started, and claims only rows pinned to it until the rescuer ends the
	// rejoin (its peers answered, or the time rule: rejoinUntil, set before
	// the tree starts).
	rejoining   atomic.Bool
	rejoinUntil time.Time
	// leaseTerm is the term of the lease this node holds, leading or still
	// settling: Stop releases it.
	leaseTerm atomic.Int64
	// leaderTerm is the lease term this node leads with in leader mode, 0
	// when it is not the leader. Set by the leader actor, read by the
	// claimer, which passes it to the claim (the database fences stale terms).
	leaderTerm atomic.Int64
}

// scope is which rows the node's claims and batches may take in mode. While
// the node rejoins, only the rows pinned to it: the scope of a leader-mode
// node that does not lead.
func (l *leadership) scope(mode string) store.ClaimScope {
	if l.rejoining.Load() {
		return store.ClaimScope{Mode: ModeLeader}
	}
	return store.ClaimScope{Mode: mode, Term: l.leaderTerm.Load()}
}

// askArm asks the armer to arm the wake-up slots (once, however often
// asked before it gets to it). Nil-safe for deps without an armer.
func (d *deps) askArm() {
	select {
	case d.armDue <- struct{}{}:
	default:
	}
}

// setDraining records whether the channel with this wake hint drains a
// backlog ("" is no hint: nothing to record).
func (d *deps) setDraining(hint string, draining bool) {
	switch {
	case hint == "":
	case draining:
		d.drainingHints.Store(hint, struct{}{})
	default:
		d.drainingHints.Delete(hint)
	}
}

// drains reports whether the channel with this wake hint drains a backlog.
func (d *deps) drains(hint string) bool {
	_, ok := d.drainingHints.Load(hint)
	return ok
}

// limited reports whether channel has a max_in_flight, as last read.
func (d *deps) limited(channel string) bool {
	m := d.flowLimited.Load()
	if m == nil {
		return false
	}
	_, ok := (*m)[channel]
	return ok
}

// readFlowLimits reads the channels with a max_in_flight; on an error the
// last read stays (the poll claims their next events meanwhile).
func (d *deps) readFlowLimits(ctx context.Context) {
	m, err := d.store.FlowLimited(ctx)
	if err != nil {
		if ctx.Err() == nil {
			d.metrics.DBErrors.WithLabelValues("flow_limits").Inc()
			d.log.Warn("could not read the channels' max_in_flight; their next events wait for the poll", "err", err)
		}
		return
	}
	d.flowLimited.Store(&m)
}

func (d *deps) hook(actor string, msg any) {
	if d.cfg.testHook != nil {
		d.cfg.testHook(actor, msg)
	}
}

// goBatch reports whether ev runs in batches (a Go handler registered with
// HandleTxBatch).
func (d *deps) goBatch(ev handlers.Event) bool {
	if ev.Kind != "go" {
		return false
	}
	h, ok := d.handlers["go"].(handlers.Go)
	return ok && h.IsBatch(ev.Handler)
}

// goGathered reports whether ev waits for the other events of its claim
// (goBatch), and how many may run together.
func (d *deps) goGathered(ev handlers.Event) (bool, int) {
	switch {
	case d.goBatch(ev):
		return true, d.cfg.BatchSize
	}
	return false, 1
}
