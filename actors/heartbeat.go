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
		alive   bool
		rescued int
		adopted int
		lease   *store.Lease // leader mode only
		// The proof: the term of the ask this beat made, or the peers of
		// the latest ask read back (read).
		asked int64
		peers []store.SyncPeer
		read  bool
		err   error
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
	// candidateAsk: the ask made after the candidate took the lease (0: not
	// yet), and when.
	candidateAsk   int64
	candidateAskAt time.Time
	// The proof (migrations/0006_rejoin_proof.up.sql): the term of this
	// node's latest ask to its peers (0: none) and when it was made; wantAsk:
	// a new ask is due (at a rejoin's start, after a lease take).
	askTerm int64
	askedAt time.Time
	wantAsk bool
}

func heartbeatProps(d *deps) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &heartbeat{d: d} })
}

func (h *heartbeat) Receive(ctx actor.Context) {
	h.d.hook("heartbeat", ctx.Message())
	switch m := ctx.Message().(type) {
	case *actor.Started:
		h.stopTick = ticker(h.d, ctx.Self(), h.d.cfg.HeartbeatInterval, func() any { return &beat{} })
		h.wantAsk = h.d.rejoining.Load()
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
		ask, readTerm := h.wantAsk, int64(0)
		if d.rejoining.Load() || h.candidateAsk > 0 {
			readTerm = h.askTerm
		}
		// Stop waits for a beat in progress before it unregisters the
		// instance: a late heartbeat would register it again.
		d.work.Add(1)
		go func() {
			defer d.work.Done()
			d.send(self, beatOnce(d, ask, readTerm))
		}()
	case *beatResult:
		h.busy = false
		h.handle(ctx, m)
	case *actor.Stopped:
	default:
		h.d.log.Warn("heartbeat: unexpected message", "type", typeName(ctx.Message()))
	}
}

// beatOnce does one beat's database work. It answers the other nodes' asks,
// and asks them to answer (ask) or reads their answers to ask readTerm (> 0).
func beatOnce(d *deps, ask bool, readTerm int64) *beatResult {
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
	if _, r.err = d.store.SyncAnswer(bctx); r.err != nil {
		return r
	}
	if r.adopted, r.err = d.store.Adopt(bctx, d.cfg.DeadAfter); r.err != nil {
		return r
	}
	switch {
	case ask:
		if r.asked, r.err = d.store.SyncAsk(bctx); r.err != nil {
			return r
		}
	case readTerm > 0:
		if r.peers, r.err = d.store.SyncPeers(bctx, readTerm, d.cfg.DeadAfter); r.err != nil {
			return r
		}
		r.read = true
	}
	if d.cfg.Mode == ModeLeader {
		l, err := d.store.LeaseStep(bctx, d.cfg.DeadAfter)
		if err != nil {
			r.err = err
			return r
		}
		// The lease this node holds (leading or not yet), kept here and only
		// here: Stop waits for this goroutine, not for the actor to handle
		// the result (a stop can come first, and the result is then never
		// handled), and releases it rather than let it run out.
		held := int64(0)
		if l.Mine {
			held = l.Term
		}
		d.leaseTerm.Store(held)
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
	if m.asked > 0 {
		h.askTerm, h.askedAt, h.wantAsk = m.asked, time.Now(), false
		if h.candidate != 0 && h.candidateAsk == 0 {
			h.candidateAsk, h.candidateAskAt = m.asked, h.askedAt
		}
	}
	if d.rejoining.Load() {
		h.rejoin(ctx, m)
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
		h.elect(ctx, *m.lease, m)
	}
}

// rejoin ends the rejoin when every peer answered this node's ask, or when
// the time rule allows it (peersReady), and wakes the claimer to take the
// unrestricted rows this node owns now (ownership is read by the claim).
func (h *heartbeat) rejoin(ctx actor.Context, m *beatResult) {
	d := h.d
	now := time.Now()
	read := m.read && m.err == nil
	ready, why := peersReady(m.peers, read, now.After(d.rejoinUntil),
		read && now.Sub(h.askedAt) >= max(d.cfg.LeaderSettle, d.cfg.DeadAfter))
	if !ready {
		return
	}
	d.rejoining.Store(false)
	d.log.Info("rejoined: claiming unrestricted rows again", "because", why)
	claimer, _, _ := d.pids()
	ctx.Send(claimer, &wake{})
}

// peersReady decides whether what this node wrote before its ask (its
// heartbeat, when it rejoins; its lease take, as a candidate) has reached
// every other node and everything they did before seeing it has reached this
// one: a rejoining node may claim its unrestricted rows, a candidate may
// lead. read: peers holds the answers to the ask. A peer that answered has
// applied the ask and sent everything it did before
// (migrations/0006_rejoin_proof.up.sql): when every peer answered, the rule
// is exact. A peer that looks dead here (no heartbeat for --dead-after, or no
// row) may never answer: for it the time rule holds (settled: --leader-settle
// has passed). A peer that looks alive but has not answered in
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
	return true, "every other node answered"
}

// elect moves the leader state machine one step.
func (h *heartbeat) elect(ctx actor.Context, l store.Lease, m *beatResult) {
	d := h.d
	claimer, _, _ := d.pids()
	leading := d.leaderTerm.Load()
	switch {
	case !l.Mine:
		if leading > 0 {
			d.log.Warn("lost the leader lease", "term", leading, "leader", l.Leader)
		}
		d.leaderTerm.Store(0)
		h.candidate, h.candidateAsk = 0, 0
	case leading == l.Term:
		// Renewed.
	case l.Taken || h.candidate != l.Term:
		// Took it now, or holds it without having seen the take (a restart):
		// wait for the lease to settle before leading.
		d.leaderTerm.Store(0)
		h.candidate, h.candidateAt = l.Term, time.Now()
		h.candidateAsk, h.wantAsk = 0, true
		d.log.Info("took the leader lease; waiting for every other node to see it before leading", "term", l.Term,
			"settle", d.cfg.LeaderSettle)
	default:
		// A candidate: it leads once every live node has seen its take and
		// answered (a take of theirs at the same moment has then reached
		// this node, and last-update-wins left one holder on both: the
		// lease read in this beat), or by the time rule.
		read := m.read && h.candidateAsk > 0
		ready, why := peersReady(m.peers, read, time.Since(h.candidateAt) >= d.cfg.LeaderSettle,
			read && time.Since(h.candidateAskAt) >= max(d.cfg.LeaderSettle, d.cfg.DeadAfter))
		if !ready {
			return
		}
		d.leaderTerm.Store(l.Term)
		h.candidateAsk = 0
		d.log.Info("leading", "term", l.Term, "because", why)
		ctx.Send(claimer, &wake{})
	}
}
