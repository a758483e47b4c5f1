package actors

import (
	"context"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/pgrelay/pgrelay/events/store"
)

// Messages of the claimer.
type (
	// wake: rows may be ready (NOTIFY, poll, a completion, a rescue).
	wake struct{}
	// slotsFreed: events ended; their slots can be claimed again.
	slotsFreed struct{}
	// stopClaiming: stop for good; answered once no claim is in progress.
	stopClaiming struct{}
	// claimResult: a claim query returned.
	claimResult struct {
		rows      []store.Claimed
		requested int
		err       error
		took      time.Duration
	}
	stopped struct{}
)

// claimer claims rows when there are free slots: as many as there are slots,
// at most BatchSize per query (pull-based backpressure: nothing is claimed
// that could not start soon). One claim query runs at a time, off the
// actor's mailbox.
type claimer struct {
	d          *deps
	claiming   bool
	again      bool
	stopping   bool
	waiter     *actor.PID
	failures   int
	stopTick   func()
	retryTimer *time.Timer
}

func claimerProps(d *deps) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &claimer{d: d} })
}

func (c *claimer) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		c.stopTick = ticker(c.d, ctx.Self(), c.d.cfg.PollInterval, func() any { return &wake{} })
	case *actor.Stopping, *actor.Restarting:
		c.stopTick()
		if c.retryTimer != nil {
			c.retryTimer.Stop()
		}
	case *wake:
		c.maybeClaim(ctx)
	case *slotsFreed:
		c.maybeClaim(ctx)
	case *claimResult:
		c.claiming = false
		c.d.metrics.ClaimLatency.Observe(m.took.Seconds())
		if m.err != nil {
			c.failures++
			c.d.metrics.DBErrors.WithLabelValues("claim").Inc()
			c.d.log.Error("claim failed; retrying", "err", m.err, "attempt", c.failures)
			c.retryLater(ctx)
		} else {
			c.failures = 0
			if len(m.rows) > 0 {
				c.d.inflight.Add(int64(len(m.rows)))
				c.d.metrics.InFlight.Set(float64(c.d.inflight.Load()))
				// One message per event: should the dispatcher fail on one,
				// its supervisor ends exactly that one.
				_, dispatcher, _ := c.d.pids()
				for _, row := range m.rows {
					ctx.Send(dispatcher, &dispatchOne{row: row})
				}
			}
			if len(m.rows) == m.requested {
				c.again = true // the queue likely holds more
			}
		}
		if c.stopping {
			if c.waiter != nil {
				ctx.Send(c.waiter, &stopped{})
				c.waiter = nil
			}
			return
		}
		if c.again && m.err == nil {
			c.again = false
			c.maybeClaim(ctx)
		}
	case *stopClaiming:
		c.stopping = true
		if c.claiming {
			c.waiter = ctx.Sender()
			return
		}
		ctx.Respond(&stopped{})
	case *actor.Stopped:
	default:
		c.d.log.Warn("claimer: unexpected message", "type", typeName(ctx.Message()))
	}
}

func (c *claimer) retryLater(ctx actor.Context) {
	if c.retryTimer != nil {
		c.retryTimer.Stop()
	}
	self := ctx.Self()
	c.retryTimer = time.AfterFunc(backoff(c.failures), func() { c.d.send(self, &wake{}) })
}

func (c *claimer) maybeClaim(ctx actor.Context) {
	if c.stopping {
		return
	}
	if c.claiming {
		c.again = true
		return
	}
	// The count of events in flight lives in deps, not here, so a restarted
	// claimer still knows it.
	free := c.d.cfg.Concurrency - int(c.d.inflight.Load())
	if free <= 0 {
		return
	}
	n := min(free, c.d.cfg.BatchSize)
	c.claiming = true
	self := ctx.Self()
	d := c.d
	go func() {
		start := time.Now()
		qctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		rows, err := d.store.Claim(qctx, d.processor, d.cfg.Mode, d.leaderTerm.Load(), n, d.kinds)
		cancel()
		d.send(self, &claimResult{rows: rows, requested: n, err: err, took: time.Since(start)})
	}()
}
