package actors

import (
	"context"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/pgrelay/pgrelay/events/store"
)

// Messages of the rescuer.
type (
	rescueTick   struct{}
	rescueResult struct {
		rescued int
		adopted int
		// The rejoin's proof: the term of the ask made (asked), or the
		// peers of the latest ask read back (read).
		asked int64
		peers []store.SyncPeer
		read  bool
		err   error
	}
)

// rescuer, every HeartbeatInterval:
//   - takes back the claims of this node's instances that stopped
//     heartbeating for DeadAfter, or that overran their lease (rescue);
//   - in multi-node and leader modes, adopts the unrestricted work of dead
//     nodes when this node is the one to do it;
//   - while this node rejoins (it had been dead or adopted), asks the other
//     nodes to answer and reads their answers, and ends the rejoin once
//     every one answered or the time rule allows it (peersReady). The
//     rejoin is adoption's other half: it waits for an adoption of this
//     node's rows still on its way, so it lives beside the adoptions.
//
// Its statements have a timeout of their own (rescueTimeout): a slow rescue
// delays neither the heartbeat nor the leader lease, which run in actors of
// their own.
type rescuer struct {
	d        *deps
	busy     bool
	stopTick func()
	// The rejoin's ask: its term (0: none yet) and when it was made;
	// wantAsk: one is due (at a rejoin's start).
	askTerm int64
	askedAt time.Time
	wantAsk bool
}

// rescueTimeout bounds one round of the rescuer: a rescue or an adoption
// may move many rows, and nothing else waits for it.
func rescueTimeout(cfg Config) time.Duration { return max(cfg.DeadAfter, 5*time.Second) }

func rescuerProps(d *deps) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &rescuer{d: d} })
}

func (r *rescuer) Receive(ctx actor.Context) {
	r.d.hook("rescuer", ctx.Message())
	switch m := ctx.Message().(type) {
	case *actor.Started:
		r.stopTick = ticker(r.d, ctx.Self(), r.d.cfg.HeartbeatInterval, func() any { return &rescueTick{} })
		r.wantAsk = r.d.rejoining.Load()
		ctx.Send(ctx.Self(), &rescueTick{})
	case *actor.Stopping, *actor.Restarting:
		r.stopTick()
	case *rescueTick:
		if r.busy {
			return
		}
		r.busy = true
		self := ctx.Self()
		d := r.d
		ask, readTerm := false, int64(0)
		if d.rejoining.Load() {
			ask, readTerm = r.wantAsk, r.askTerm
		}
		d.work.Add(1)
		go func() {
			defer d.work.Done()
			d.send(self, rescueOnce(d, ask, readTerm))
		}()
	case *rescueResult:
		r.busy = false
		r.handle(ctx, m)
	case *actor.Stopped:
	default:
		r.d.log.Warn("rescuer: unexpected message", "type", typeName(ctx.Message()))
	}
}

// rescueOnce does one round: the rejoin's ask (ask) or the read of its
// answers (readTerm > 0) first, as they are quick and the rejoin waits on
// them; then the rescue and, in multi-node and leader modes, the adoption.
// The statements run until the timeout or the Processor's stop.
func rescueOnce(d *deps, ask bool, readTerm int64) *rescueResult {
	rctx, cancel := context.WithTimeout(d.runCtx, rescueTimeout(d.cfg))
	defer cancel()
	r := &rescueResult{}
	switch {
	case ask:
		if r.asked, r.err = d.store.SyncAsk(rctx); r.err != nil {
			return r
		}
	case readTerm > 0:
		if r.peers, r.err = d.store.SyncPeers(rctx, readTerm, d.cfg.DeadAfter); r.err != nil {
			return r
		}
		r.read = true
	}
	if r.rescued, r.err = d.store.Rescue(rctx, d.processor, d.cfg.DeadAfter, d.cfg.LeaseGrace); r.err != nil {
		return r
	}
	if d.cfg.Mode != ModeSingle {
		r.adopted, r.err = d.store.Adopt(rctx, d.cfg.DeadAfter)
	}
	return r
}

func (r *rescuer) handle(ctx actor.Context, m *rescueResult) {
	d := r.d
	if m.asked > 0 {
		r.askTerm, r.askedAt, r.wantAsk = m.asked, time.Now(), false
	}
	if d.rejoining.Load() {
		r.rejoin(ctx, m)
	}
	if m.err != nil {
		if d.runCtx.Err() == nil {
			d.metrics.DBErrors.WithLabelValues("rescue").Inc()
			d.log.Error("rescue or adoption failed", "err", m.err)
		}
		// What it rescued or adopted before the error is counted below.
	}
	if m.rescued > 0 {
		d.metrics.Rescued.Add(float64(m.rescued))
		d.log.Warn("rescued claims of dead or stuck processors", "events", m.rescued)
	}
	if m.adopted > 0 {
		d.log.Warn("adopted the work of a dead node", "events", m.adopted)
	}
	if m.rescued > 0 || m.adopted > 0 {
		claimer, _, _ := d.pids()
		ctx.Send(claimer, &wake{})
	}
}

// rejoin ends the rejoin when every peer answered this node's ask, or when
// the time rule allows it (peersReady), and wakes the claimer to take the
// unrestricted rows this node owns now (ownership is read by the claim).
func (r *rescuer) rejoin(ctx actor.Context, m *rescueResult) {
	d := r.d
	now := time.Now()
	read := m.read
	ready, why := peersReady(m.peers, read, now.After(d.rejoinUntil),
		read && now.Sub(r.askedAt) >= max(d.cfg.LeaderSettle, d.cfg.DeadAfter))
	if !ready {
		return
	}
	d.rejoining.Store(false)
	d.log.Info("rejoined: claiming unrestricted rows again", "because", why)
	claimer, _, _ := d.pids()
	ctx.Send(claimer, &wake{})
}
