package actors

import (
	"context"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/pgrelay/pgrelay/events/store"
)

// Messages of the completer.
type (
	// outcome: one event's outcome to write.
	outcome struct{ o store.Outcome }
	// flushResult: a batch was written (or failed to be).
	flushResult struct {
		batch []store.Outcome
		err   error
		took  time.Duration
	}
	// flushAll: answered with flushed once every outcome received is written.
	flushAll   struct{}
	flushed    struct{}
	flushRetry struct{}
)

// maxCompleteBatch bounds one completion statement.
const maxCompleteBatch = 1000

// completer writes outcomes to pgrelay.log (and deletes or reschedules their
// queue rows) in batches. It writes as soon as it is idle: outcomes that
// arrive while a batch is being written wait for the next one, so batches grow
// with load and latency stays low when load is light. A failed write keeps its
// outcomes and is retried with backoff; nothing is dropped.
type completer struct {
	d *deps
	*completerState
}

// completerState outlives a completer instance: a restarted completer goes on
// with the outcomes its predecessor had not written yet.
type completerState struct {
	buf      []store.Outcome
	flushing bool
	failures int
	waiters  []*actor.PID
	retry    *time.Timer
}

func completerProps(d *deps) *actor.Props {
	state := &completerState{}
	return actor.PropsFromProducer(func() actor.Actor { return &completer{d: d, completerState: state} })
}

func (c *completer) Receive(ctx actor.Context) {
	c.d.hook("completer", ctx.Message())
	switch m := ctx.Message().(type) {
	case *outcome:
		c.buf = append(c.buf, m.o)
		c.d.metrics.PendingOutcomes.Set(float64(len(c.buf)))
		if c.failures == 0 { // else a retry is scheduled: do not hammer the database
			c.flush(ctx)
		}
	case *flushResult:
		c.flushing = false
		c.d.metrics.CompleteLatency.Observe(m.took.Seconds())
		if m.err != nil {
			c.failures++
			c.d.metrics.DBErrors.WithLabelValues("complete").Inc()
			c.d.log.Error("writing outcomes failed; retrying", "err", m.err, "outcomes", len(m.batch),
				"attempt", c.failures)
			c.buf = append(m.batch, c.buf...)
			self := ctx.Self()
			c.retry = time.AfterFunc(backoff(c.failures), func() { c.d.send(self, &flushRetry{}) })
			return
		}
		c.failures = 0
		c.d.metrics.PendingOutcomes.Set(float64(len(c.buf)))
		// Serialised lanes may have a next event now that this one is done.
		claimer, _, _ := c.d.pids()
		ctx.Send(claimer, &wake{})
		c.flush(ctx)
	case *flushRetry:
		c.flush(ctx)
	case *flushAll:
		c.waiters = append(c.waiters, ctx.Sender())
		if c.failures == 0 {
			c.flush(ctx)
		}
	case *actor.Stopping:
		if c.retry != nil {
			c.retry.Stop()
		}
	case *actor.Started:
		// A restarted completer picks up where its predecessor stopped.
		if c.failures == 0 {
			c.flush(ctx)
		}
	case *actor.Stopped, *actor.Restarting:
	default:
		c.d.log.Warn("completer: unexpected message", "type", typeName(ctx.Message()))
	}
}

func (c *completer) flush(ctx actor.Context) {
	if c.flushing {
		return
	}
	if len(c.buf) == 0 {
		for _, w := range c.waiters {
			if w != nil {
				ctx.Send(w, &flushed{})
			}
		}
		c.waiters = nil
		return
	}
	n := min(len(c.buf), maxCompleteBatch)
	batch := make([]store.Outcome, n)
	copy(batch, c.buf[:n])
	c.buf = c.buf[n:]
	c.flushing = true
	self := ctx.Self()
	d := c.d
	go func() {
		start := time.Now()
		// Outcomes are written even while the Processor stops.
		wctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := d.store.Complete(wctx, d.processor, batch)
		cancel()
		d.send(self, &flushResult{batch: batch, err: err, took: time.Since(start)})
	}()
}
