package actors

import (
	"context"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// Messages of the heartbeat actor.
type (
	beat       struct{}
	beatResult struct {
		alive   bool
		rescued int
		err     error
	}
)

// heartbeat marks this instance alive in pgrelay.processors every
// HeartbeatInterval and takes back the claims of this node's instances that
// stopped heartbeating for DeadAfter, or that overran their lease.
type heartbeat struct {
	d        *deps
	busy     bool
	stopTick func()
}

func heartbeatProps(d *deps) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &heartbeat{d: d} })
}

func (h *heartbeat) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		h.stopTick = ticker(h.d, ctx.Self(), h.d.cfg.HeartbeatInterval, func() any { return &beat{} })
	case *actor.Stopping, *actor.Restarting:
		h.stopTick()
	case *beat:
		if h.busy {
			return
		}
		h.busy = true
		self := ctx.Self()
		d := h.d
		go func() {
			bctx, cancel := context.WithTimeout(context.Background(), max(d.cfg.HeartbeatInterval, 5*time.Second))
			defer cancel()
			alive, err := d.store.Heartbeat(bctx, d.processor, d.info)
			n := 0
			if err == nil {
				n, err = d.store.Rescue(bctx, d.processor, d.cfg.DeadAfter, d.cfg.LeaseGrace)
			}
			d.send(self, &beatResult{alive: alive, rescued: n, err: err})
		}()
	case *beatResult:
		h.busy = false
		switch {
		case m.err != nil:
			h.d.metrics.DBErrors.WithLabelValues("heartbeat").Inc()
			h.d.log.Error("heartbeat failed", "err", m.err)
		case !m.alive:
			h.d.log.Warn("this processor had been presumed dead (no heartbeat for dead-after); " +
				"its claims were taken back and will run elsewhere")
		}
		if m.rescued > 0 {
			h.d.metrics.Rescued.Add(float64(m.rescued))
			h.d.log.Warn("rescued claims of dead or stuck processors", "events", m.rescued)
			claimer, _, _ := h.d.pids()
			ctx.Send(claimer, &wake{})
		}
	case *actor.Stopped:
	default:
		h.d.log.Warn("heartbeat: unexpected message", "type", typeName(ctx.Message()))
	}
}
