package actors

import (
	"context"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/pgrelay/pgrelay/events/store"
)

// Messages of the heartbeat actor.
type (
	beat       struct{}
	beatResult struct {
		alive   bool
		rescued int
		adopted int
		lease   *store.Lease // leader mode only
		err     error
	}
)

// heartbeat marks this instance (and its node) alive in pgrelay.processors
// and pgrelay.nodes every HeartbeatInterval, then:
//   - takes back the claims of this node's instances that stopped
//     heartbeating for DeadAfter, or that overran their lease (rescue);
//   - in multi-node and leader modes, adopts the unrestricted work of dead
//     nodes when this node is the one to do it;
//   - in leader mode, runs one step of the leader election and keeps
//     deps.leaderTerm: a node that took the lease waits LeaderSettle, then
//     leads only if the lease is still its own with the same term.
type heartbeat struct {
	d        *deps
	busy     bool
	stopTick func()
	// Leader election: the term this node took and when (candidate), and
	// whether it leads.
	candidate   int64
	candidateAt time.Time
	// rejoined: the rejoin settle has passed and the claimer was woken.
	rejoined bool
}

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
		h.handle(ctx, m)
	case *actor.Stopped:
	default:
		h.d.log.Warn("heartbeat: unexpected message", "type", typeName(ctx.Message()))
	}
}

// beatOnce does one beat's database work.
func beatOnce(d *deps) *beatResult {
	bctx, cancel := context.WithTimeout(context.Background(), max(d.cfg.HeartbeatInterval, 5*time.Second))
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
	if r.rescued, r.err = d.store.Rescue(bctx, d.processor, d.cfg.DeadAfter, d.cfg.LeaseGrace); r.err != nil {
		return r
	}
	if d.cfg.Mode == ModeSingle {
		return r
	}
	if r.adopted, r.err = d.store.Adopt(bctx, d.cfg.DeadAfter); r.err != nil {
		return r
	}
	if d.cfg.Mode == ModeLeader {
		l, err := d.store.LeaseStep(bctx, d.cfg.DeadAfter)
		if err != nil {
			r.err = err
			return r
		}
		r.lease = &l
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

func (h *heartbeat) handle(ctx actor.Context, m *beatResult) {
	d := h.d
	claimer, _, _ := d.pids()
	if !h.rejoined && !d.rejoinUntil.IsZero() && !time.Now().Before(d.rejoinUntil) {
		// The rejoin settle has passed: claim the unrestricted rows this node
		// owns now (ownership is read by the claim itself).
		h.rejoined = true
		d.log.Info("rejoin settle passed; claiming unrestricted rows again")
		ctx.Send(claimer, &wake{})
	}
	if m.err != nil {
		d.metrics.DBErrors.WithLabelValues("heartbeat").Inc()
		d.log.Error("heartbeat failed", "err", m.err)
		// A leader that cannot renew keeps its term: the claim checks the
		// lease in the database, so it stops taking unrestricted rows once
		// the lease runs out there.
		return
	}
	if !m.alive {
		d.log.Warn("this processor had been presumed dead (no heartbeat for dead-after); " +
			"its claims were taken back and will run elsewhere")
	}
	if m.rescued > 0 {
		d.metrics.Rescued.Add(float64(m.rescued))
		d.log.Warn("rescued claims of dead or stuck processors", "events", m.rescued)
	}
	if m.adopted > 0 {
		d.log.Warn("adopted the work of a dead node", "events", m.adopted)
	}
	if m.rescued > 0 || m.adopted > 0 {
		ctx.Send(claimer, &wake{})
	}
	if m.lease != nil {
		h.elect(ctx, *m.lease)
	}
}

// elect moves the leader state machine one step.
func (h *heartbeat) elect(ctx actor.Context, l store.Lease) {
	d := h.d
	claimer, _, _ := d.pids()
	leading := d.leaderTerm.Load()
	switch {
	case !l.Mine:
		if leading > 0 {
			d.log.Warn("lost the leader lease", "term", leading, "leader", l.Leader)
		}
		d.leaderTerm.Store(0)
		d.leaseTerm.Store(0)
		h.candidate = 0
	case leading == l.Term:
		// Renewed.
	case l.Taken || h.candidate != l.Term:
		// Took it now, or holds it without having seen the take (a restart):
		// wait for the lease to settle before leading.
		d.leaderTerm.Store(0)
		d.leaseTerm.Store(l.Term)
		h.candidate, h.candidateAt = l.Term, time.Now()
		d.log.Info("took the leader lease; settling before leading", "term", l.Term,
			"settle", d.cfg.LeaderSettle)
	case time.Since(h.candidateAt) >= d.cfg.LeaderSettle:
		d.leaderTerm.Store(l.Term)
		d.log.Info("leading", "term", l.Term)
		ctx.Send(claimer, &wake{})
	}
}
