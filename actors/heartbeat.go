package actors

import (
	"context"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/pgrelay/pgrelay/events/store"
)

// Messages of the heartbeat actor.
type (
	beat       struct{}
	beatResult struct {
		alive bool
		err   error
	}
)

// The Processor's periodic database work is split among three actors, each
// with its own statements, timeout and skip-while-busy, so that a slow
// statement of one delays none of the others (docs/architecture.md,
// "Heartbeat, leader, rescue and adoption"):
//   - heartbeat (liveness): marks this instance and its node alive and
//     answers the other nodes' asks (the proof, below);
//   - rescuer: rescue, adoption and the rejoin (rescuer.go);
//   - leader (leader mode only): the leader lease and election (leader.go).

// heartbeat marks this instance (and its node) alive in pgrelay.processors
// and pgrelay.nodes every HeartbeatInterval and, in multi-node and leader
// modes, answers the asks of other nodes (why an answer proves something: the
// comment on pgrelay.sync_asks in migrations/0003_v0_2_0.up.sql).
// The answer goes with the beat: a peer that looks alive is one that
// answers, so an answer never waits for a slow rescue or lease step (which
// would make this node look like a pgrelay that does not answer).
type heartbeat struct {
	d        *deps
	busy     bool
	stopTick func()
}

// beatTimeout bounds one beat's statements.
func beatTimeout(cfg Config) time.Duration { return max(cfg.HeartbeatInterval, 5*time.Second) }

func heartbeatProps(d *deps) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &heartbeat{d: d} })
}

func (h *heartbeat) Receive(ctx actor.Context) {
	h.d.hook("heartbeat", ctx.Message())
	switch m := ctx.Message().(type) {
	case *actor.Started:
		h.stopTick = ticker(h.d, ctx.Self(), h.d.cfg.HeartbeatInterval, func() any { return &beat{} })
		ctx.Send(ctx.Self(), &beat{})
	case *actor.Stopping, *actor.Restarting:
		h.stopTick()
	case *beat:
		if h.busy {
			return
		}
		h.busy = true
		self := ctx.Self()
		d := h.d
		// Stop waits for a beat in progress before it unregisters the
		// instance: a late heartbeat would register it again.
		d.work.Add(1)
		go func() {
			defer d.work.Done()
			d.send(self, beatOnce(d))
		}()
	case *beatResult:
		h.busy = false
		d := h.d
		if m.err != nil {
			d.metrics.DBErrors.WithLabelValues("heartbeat").Inc()
			d.log.Error("heartbeat failed", "err", m.err)
			return
		}
		if !m.alive {
			d.log.Warn("this processor had been presumed dead (no heartbeat for dead-after); " +
				"its claims were taken back and will run elsewhere")
		}
	case *actor.Stopped:
	default:
		h.d.log.Warn("heartbeat: unexpected message", "type", typeName(ctx.Message()))
	}
}

// beatOnce does one beat's database work: the heartbeat, the answers to the
// other nodes' asks, and the decision of the events held for their unique
// keys (both only on a cluster's modes).
func beatOnce(d *deps) *beatResult {
	bctx, cancel := context.WithTimeout(context.Background(), beatTimeout(d.cfg))
	defer cancel()
	r := &beatResult{}
	if r.alive, r.err = d.store.Heartbeat(bctx, d.processor, d.info); r.err != nil {
		return r
	}
	if !r.alive && len(d.goHandlers) > 0 {
		// The instance's row was recreated: a Processor that started
		// meanwhile may have deleted its Go handler names as stale.
		if r.err = d.store.SetGoHandlers(bctx, d.processor, d.goHandlers); r.err != nil {
			return r
		}
	}
	if d.cfg.Mode != ModeSingle {
		if _, r.err = d.store.SyncAnswer(bctx); r.err != nil {
			return r
		}
		_, r.err = d.store.ResolveKeys(bctx, d.cfg.DeadAfter)
	}
	return r
}

// rejoining reports whether this node comes back: its row in pgrelay.nodes
// shows it dead (no heartbeat for DeadAfter), adopted since its last
// heartbeat, or decommissioned. Single mode never adopts, so it never rejoins.
func rejoining(ctx context.Context, st *store.Store, cfg Config) (bool, error) {
	if cfg.Mode == ModeSingle {
		return false, nil
	}
	return st.Rejoining(ctx, cfg.DeadAfter)
}

// scope is what the claims and batches of this Processor may take.
func (d *deps) scope() store.ClaimScope { return d.leadership.scope(d.cfg.Mode) }

// peersReady decides whether what this node wrote before its ask (its
// heartbeat, when it rejoins; its lease take, as a candidate) has reached
// every other node and everything they did before seeing it has reached this
// one: a rejoining node may claim its unrestricted rows, a candidate may
// lead. read: peers holds the answers to the ask. A peer that answered has
// applied the ask and sent everything it did before (the comment on
// pgrelay.sync_asks in migrations/0003_v0_2_0.up.sql): when every peer
// answered, the rule is exact. A peer that looks dead here (no heartbeat for
// --dead-after, or no row) may never answer: for it the time rule holds
// (settled: --leader-settle has passed). A peer that looks alive but has not answered in
// max(--leader-settle, --dead-after) since the ask runs a pgrelay that does
// not answer (overdue): it gets the time rule too. With no peer at all,
// nothing is proven and the time rule decides.
func peersReady(peers []store.SyncPeer, read, settled, overdue bool) (bool, string) {
	if !read || len(peers) == 0 {
		if settled {
			return true, "--leader-settle has passed (no answer to wait for)"
		}
		return false, ""
	}
	var dead, silent []int32
	for _, p := range peers {
		switch {
		case p.Answered:
		case !p.Alive:
			dead = append(dead, p.Node)
		default:
			silent = append(silent, p.Node)
		}
	}
	switch {
	case len(silent) > 0 && !overdue, len(dead) > 0 && !settled:
		return false, ""
	case len(silent) > 0:
		return true, fmt.Sprintf("nodes %v look alive but did not answer in max(--leader-settle, --dead-after) (an older pgrelay?)", silent)
	case len(dead) > 0:
		return true, fmt.Sprintf("every live node answered; nodes %v look dead and --leader-settle has passed", dead)
	}
	return true, allAnswered
}

// allAnswered is peersReady's reason when every other node answered.
const allAnswered = "every other node answered"
