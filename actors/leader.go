package actors

import (
	"context"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/pgrelay/pgrelay/events/store"
)

// Messages of the leader actor.
type (
	leaseTick   struct{}
	leaseResult struct {
		lease    store.Lease
		leaseErr error
		// The candidate's proof: the term of the ask made after the take
		// (asked), or the peers of that ask read back (read); proofErr: the
		// ask or the read failed (the lease step ran all the same).
		asked    int64
		peers    []store.SyncPeer
		read     bool
		proofErr error
	}
)

// leader (leader mode only) runs one step of the leader election every
// HeartbeatInterval, in statements of its own under a timeout of its own
// (leaseTimeout), so that the lease is renewed at every beat whatever the
// rescuer is doing. It keeps deps.leaderTerm: a node that took the lease
// waits until every other live node has answered an ask made after the take
// (or LeaderSettle has passed for those that look dead), then leads if the
// lease is still its own with the same term.
type leader struct {
	d        *deps
	busy     bool
	stopTick func()
	// The term this node took and when (candidate), and whether it leads.
	candidate   int64
	candidateAt time.Time
	// candidateAsk: the ask made after the candidate took the lease (0: not
	// yet), and when; wantAsk: that ask is due.
	candidateAsk   int64
	candidateAskAt time.Time
	wantAsk        bool
}

// leaseTimeout bounds one lease step.
func leaseTimeout(cfg Config) time.Duration { return max(cfg.HeartbeatInterval, 5*time.Second) }

func leaderProps(d *deps) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &leader{d: d} })
}

func (l *leader) Receive(ctx actor.Context) {
	l.d.hook("leader", ctx.Message())
	switch m := ctx.Message().(type) {
	case *actor.Started:
		l.stopTick = ticker(l.d, ctx.Self(), l.d.cfg.HeartbeatInterval, func() any { return &leaseTick{} })
		ctx.Send(ctx.Self(), &leaseTick{})
	case *actor.Stopping, *actor.Restarting:
		l.stopTick()
	case *leaseTick:
		if l.busy {
			return
		}
		l.busy = true
		self := ctx.Self()
		d := l.d
		ask, readTerm := l.wantAsk, l.candidateAsk
		// Stop waits for a step in progress: it releases the lease the step
		// leaves in deps.leaseTerm.
		d.work.Add(1)
		go func() {
			defer d.work.Done()
			d.send(self, leaseOnce(d, ask, readTerm))
		}()
	case *leaseResult:
		l.busy = false
		l.handle(ctx, m)
	case *actor.Stopped:
	default:
		l.d.log.Warn("leader: unexpected message", "type", typeName(ctx.Message()))
	}
}

// leaseOnce reads the answers to the candidate's ask (readTerm > 0), then
// renews or takes the lease, then makes the candidate's ask (ask: the take
// was read in an earlier step, so the ask follows it). The peers are read
// before the lease: a take of theirs that they made before answering has
// reached this node by then, and the lease read next shows who holds it.
func leaseOnce(d *deps, ask bool, readTerm int64) *leaseResult {
	lctx, cancel := context.WithTimeout(context.Background(), leaseTimeout(d.cfg))
	defer cancel()
	r := &leaseResult{}
	if readTerm > 0 && !ask {
		if r.peers, r.proofErr = d.store.SyncPeers(lctx, readTerm, d.cfg.DeadAfter); r.proofErr == nil {
			r.read = true
		}
	}
	if r.lease, r.leaseErr = d.store.LeaseStep(lctx, d.cfg.DeadAfter); r.leaseErr != nil {
		return r
	}
	// The lease this node holds (leading or not yet), kept here and only
	// here: Stop waits for this goroutine, not for the actor to handle the
	// result (a stop can come first, and the result is then never handled),
	// and releases it rather than let it run out.
	held := int64(0)
	if r.lease.Mine {
		held = r.lease.Term
	}
	d.leaseTerm.Store(held)
	if ask && r.lease.Mine {
		r.asked, r.proofErr = d.store.SyncAsk(lctx)
	}
	return r
}

func (l *leader) handle(ctx actor.Context, m *leaseResult) {
	d := l.d
	if m.proofErr != nil {
		d.metrics.DBErrors.WithLabelValues("lease").Inc()
		d.log.Error("leader election: asking the other nodes failed", "err", m.proofErr)
	}
	if m.asked > 0 && l.candidate != 0 && l.candidateAsk == 0 {
		l.candidateAsk, l.candidateAskAt, l.wantAsk = m.asked, time.Now(), false
	}
	if m.leaseErr != nil {
		d.metrics.DBErrors.WithLabelValues("lease").Inc()
		d.log.Error("leader lease step failed", "err", m.leaseErr)
		// A leader that cannot renew keeps its term: the claim checks the
		// lease in the database, so it stops taking unrestricted rows once
		// the lease runs out there.
		return
	}
	l.elect(ctx, m)
}

// elect moves the leader state machine one step.
func (l *leader) elect(ctx actor.Context, m *leaseResult) {
	d := l.d
	lease := m.lease
	claimer, _, _ := d.pids()
	leading := d.leaderTerm.Load()
	switch {
	case !lease.Mine:
		if leading > 0 {
			d.log.Warn("lost the leader lease", "term", leading, "leader", lease.LeaderNode())
		}
		d.leaderTerm.Store(0)
		l.candidate, l.candidateAsk, l.wantAsk = 0, 0, false
	case leading == lease.Term:
		// Renewed.
	case lease.Taken || l.candidate != lease.Term:
		// Took it now, or holds it without having seen the take (a restart):
		// wait for the lease to settle before leading.
		d.leaderTerm.Store(0)
		l.candidate, l.candidateAt = lease.Term, time.Now()
		l.candidateAsk, l.wantAsk = 0, true
		d.log.Info("took the leader lease; waiting for every other node to see it before leading", "term", lease.Term,
			"settle", d.cfg.LeaderSettle)
	default:
		// A candidate: it leads once every live node has seen its take and
		// answered (a take of theirs at the same moment has then reached
		// this node, and pgrelay._lease_holder names the same holder on
		// both: the lease read in this step), or by the time rule.
		ready, why := l.ready(m, time.Now())
		if !ready {
			return
		}
		d.leaderTerm.Store(lease.Term)
		l.candidateAsk = 0
		// Leading by the time rule, without the answer of every other
		// node, is right only while the replication lag stays under the
		// settle and --dead-after (docs/multi-master.md): say so.
		log := d.log.Info
		if why != allAnswered {
			log = d.log.Warn
		}
		log("leading", "term", lease.Term, "because", why)
		ctx.Send(claimer, &wake{})
	}
}

// ready reports whether the candidate leads after the step m, at now
// (peersReady on the answers to its ask), and why. Only a step that read the
// answers to its ask decides: the take's and the ask's own steps, and one
// whose read failed, read none, and prove nothing however late they end.
func (l *leader) ready(m *leaseResult, now time.Time) (bool, string) {
	if !m.read || l.candidateAsk == 0 {
		return false, ""
	}
	cfg := l.d.cfg
	return peersReady(m.peers, true, now.Sub(l.candidateAt) >= cfg.LeaderSettle,
		now.Sub(l.candidateAskAt) >= max(cfg.LeaderSettle, cfg.DeadAfter))
}
