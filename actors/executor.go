package actors

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/pgrelay/pgrelay/actors/handlers"
	"github.com/pgrelay/pgrelay/events"
	"github.com/pgrelay/pgrelay/events/store"
)

// handlerFinished: a handler goroutine of this actor returned (its outcome is
// already on its way to the completer).
type handlerFinished struct {
	ev   handlers.Event
	took time.Duration // the handler's time (its share of a batch's)
}

// executor is a channel actor (one per channel, and per concurrency mode) or,
// under a 'payload' channel actor, a lane actor (one per payload). It runs its
// events' handlers, each in its own goroutine so the mailbox never blocks:
//   - 'none': all at once (the claimer's slots bound how many);
//   - 'channel' and lanes: one at a time, oldest first;
//   - 'payload': routes each event to the lane actor of its payload.
//
// The database already guarantees at most one in-flight event per serialised
// channel or lane across all Processors; the actor keeps that order within
// this Processor too.
type executor struct {
	d        *deps
	key      childKey
	mode     string
	serial   bool
	byLane   bool
	r        router
	queue    []handlers.Event
	running  int
	draining bool
	// lastActive is when an event last arrived or ended here.
	lastActive time.Time
}

func executorProps(d *deps, key childKey, mode string) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor {
		return &executor{d: d, key: key, mode: mode, serial: mode == "channel", byLane: mode == "payload"}
	}, actor.WithSupervisor(supervision(d)))
}

func laneProps(d *deps, key childKey) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor {
		return &executor{d: d, key: key, mode: "lane", serial: true}
	})
}

func (e *executor) Receive(ctx actor.Context) {
	e.d.hook(e.mode, ctx.Message())
	switch m := ctx.Message().(type) {
	case *actor.Started:
		e.lastActive = time.Now()
		e.d.metrics.ChannelActors.Inc()
	case *runEvent:
		e.lastActive = time.Now()
		switch {
		case e.draining:
			release(e.d, m.ev)
			e.ended(ctx)
		case e.byLane:
			lane := laneKey(m.ev.Payload)
			e.r.route(ctx, lane, func() *actor.Props { return laneProps(e.d, lane) }, "lane-",
				&runEvent{ev: m.ev, key: lane})
		default:
			e.queue = append(e.queue, m.ev)
			e.pump(ctx)
		}
	case *handlerFinished:
		e.lastActive = time.Now()
		if e.running > 0 {
			e.running--
		}
		e.ended(ctx)
		e.pump(ctx)
	case *eventEnded: // from a lane actor
		e.r.ended(m.key)
		e.ended(ctx)
	case *childIdle:
		e.r.idle(ctx, m.key)
	case *drainChildren:
		e.draining = true
		e.releaseQueued(ctx)
		e.r.broadcast(ctx, m)
	case *idleCheck:
		// (protoactor's receive timeout races with the mailbox under -race:
		// idleness is checked on the parent's tick instead.)
		e.r.broadcast(ctx, m)
		if len(e.queue) == 0 && e.running == 0 && e.r.empty() &&
			time.Since(e.lastActive) >= e.d.cfg.IdleTimeout {
			ctx.Send(ctx.Parent(), &childIdle{key: e.key})
		}
	case *actor.Restarting, *actor.Stopping:
		// Events this instance queued but never started would be lost with it:
		// give their claims back.
		e.releaseQueued(ctx)
		if _, restarting := m.(*actor.Restarting); restarting {
			e.d.metrics.ChannelActors.Dec()
		}
	case *actor.Stopped:
		e.d.metrics.ChannelActors.Dec()
	case *actor.Terminated:
	default:
		e.d.log.Warn("channel actor: unexpected message", "type", typeName(ctx.Message()), "key", e.key.String())
	}
}

// ended tells the parent one of the events routed here has ended.
func (e *executor) ended(ctx actor.Context) {
	if p := ctx.Parent(); p != nil {
		ctx.Send(p, &eventEnded{key: e.key})
	}
}

func (e *executor) releaseQueued(ctx actor.Context) {
	for _, ev := range e.queue {
		release(e.d, ev)
		e.ended(ctx)
	}
	e.queue = nil
}

func (e *executor) pump(ctx actor.Context) {
	for len(e.queue) > 0 && !e.draining && (!e.serial || e.running == 0) {
		ev := e.queue[0]
		e.queue = e.queue[1:]
		e.running++
		self := ctx.Self()
		go run(e.d, ev, self)
	}
}

// run runs one event's handler and hands its outcome on. It never panics: a
// panicking handler costs one failed attempt.
func run(d *deps, ev handlers.Event, self *actor.PID) {
	start := time.Now()
	committed, err := invoke(d, ev)
	took := time.Since(start)
	d.metrics.HandlerDuration.WithLabelValues(ev.Channel).Observe(took.Seconds())
	finish(d, ev, outcomeOf(d, ev, committed, err, took))
	d.send(self, &handlerFinished{ev: ev, took: took})
}

func invoke(d *deps, ev handlers.Event) (committed bool, err error) {
	defer func() {
		if r := recover(); r != nil {
			d.log.Error("handler panicked", "channel", ev.Channel, "id", ev.ID, "panic", r,
				"stack", string(debug.Stack()))
			committed, err = false, fmt.Errorf("handler panicked: %v", r)
		}
	}()
	h, err := d.handlers.Lookup(ev.Kind)
	if err != nil {
		return false, err
	}
	// A sql handler is cut by statement_timeout, and sets its own deadline,
	// the backstop for a network that does not answer, once it has a
	// connection: waiting for one is not the handler's time.
	ctx, cancel := context.WithTimeout(d.runCtx, ev.Timeout)
	if ev.Kind == "sql" {
		cancel()
		ctx, cancel = context.WithCancel(d.runCtx)
	}
	defer cancel()
	committed, err = h.Handle(ctx, ev)
	if err != nil && errors.Is(err, context.DeadlineExceeded) && d.runCtx.Err() == nil {
		err = fmt.Errorf("handler timed out after %s: %w", ev.Timeout, err)
	}
	return committed, err
}

// classify is what a handler's result means for its event: the outcome to
// record, or "" when the claim was taken back while the handler ran (its
// transaction rolled back: nothing to record). stopping: shutdown cancelled
// the handlers.
func classify(ev handlers.Event, err error, stopping bool) events.Kind {
	switch {
	case err == nil:
		return events.Succeeded
	case errors.Is(err, store.ErrClaimLost):
		return ""
	case stopping:
		// Shutdown cancelled the handler: not the event's fault.
		return events.Release
	case ev.Kind == "sql" && store.IsConnError(err) && !store.IsHandlerConnLost(err):
		// The database went away under the handler (a restart), or the
		// connection failed outside the handler's statement: the attempt did
		// not really happen; the claim goes back once the database is back.
		// (A session that ended while the handler ran, on a server that
		// stayed up, is the handler's failure: a failed attempt, below; the
		// store tells them apart as it does for a batch.)
		return events.Release
	case handlers.IsPermanent(err):
		return events.GaveUp
	}
	return events.Failed
}

// outcomeOf turns a handler's result into the outcome to record (nil when
// there is nothing to record) and counts it.
func outcomeOf(d *deps, ev handlers.Event, committed bool, err error, took time.Duration) *store.Outcome {
	stopping := d.runCtx.Err() != nil
	k := classify(ev, err, stopping)
	switch {
	case k == "":
		d.log.Warn("claim was taken back while the handler ran; its transaction was rolled back",
			"channel", ev.Channel, "id", ev.ID)
		return nil
	case k == events.Release && !stopping:
		d.log.Warn("database connection lost while running a handler; releasing the event",
			"channel", ev.Channel, "id", ev.ID, "err", err)
	case k == events.Failed:
		d.log.Debug("handler failed", "channel", ev.Channel, "id", ev.ID, "attempt", ev.Attempt,
			"took", took, "err", err)
	}
	d.metrics.outcome(ev.Channel, k.Logged(ev.Attempt, ev.MaxAttempts))
	if k == events.Succeeded && committed {
		return nil // the handler's transaction recorded it
	}
	out := &store.Outcome{ID: ev.ID, ClaimedAt: ev.DispatchedAt, Event: k}
	if k == events.Failed || k == events.GaveUp {
		out.Error = err.Error()
	}
	return out
}

// finish ends an event: its outcome goes to the completer, its slot is freed.
// Called from any goroutine.
func finish(d *deps, ev handlers.Event, out *store.Outcome) {
	_, _, completer := d.pids()
	if out != nil {
		sendOutcome(d, completer, *out)
		tellEndedFailing(d, ev, out)
	}
	d.slots.free(1)
}

// release gives an unstarted event's claim back.
func release(d *deps, ev handlers.Event) {
	d.metrics.outcome(ev.Channel, events.Release)
	finish(d, ev, &store.Outcome{ID: ev.ID, ClaimedAt: ev.DispatchedAt, Event: events.Release})
}
