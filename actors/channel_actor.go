package actors

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/pgrelay/pgrelay/internal/handlers"
)

// Messages of the channel and lane actors.
type (
	// handlerFinished: a handler goroutine of this actor returned (its
	// outcome is already on its way to the completer).
	handlerFinished struct {
		ev   handlers.Event
		took time.Duration // the handler's time (its share of a batch's)
	}
)

// channelActor is a channel actor (one per channel, and per concurrency mode) or,
// under a 'payload' channel actor, a lane actor (one per payload). It runs its
// events' handlers, each in its own goroutine so the mailbox never blocks:
//   - 'none': all at once (the claimer's slots bound how many);
//   - 'channel' and lanes: one at a time, oldest first;
//   - 'payload': routes each event to the lane actor of its payload.
//
// The database already guarantees at most one in-flight event per serialised
// channel or lane across all Processors; the actor keeps that order within
// this Processor too.
type channelActor struct {
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

func channelActorProps(d *deps, key childKey, mode string) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor {
		return &channelActor{d: d, key: key, mode: mode, serial: mode == "channel", byLane: mode == "payload"}
	}, actor.WithSupervisor(supervision(d)))
}

// laneActorProps: a lane actor is a serial channelActor for one payload of a
// 'payload' channel actor.
func laneActorProps(d *deps, key childKey) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor {
		return &channelActor{d: d, key: key, mode: "lane", serial: true}
	})
}

func (e *channelActor) Receive(ctx actor.Context) {
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
			e.r.route(ctx, lane, func() *actor.Props { return laneActorProps(e.d, lane) }, "lane-",
				&runEvent{ev: m.ev, key: lane})
		case !e.serial && e.gathered(m.ev):
			// Events of a Go batch handler wait for the last of their
			// claim's, to run with it.
			e.queue = append(e.queue, m.ev)
			if m.last {
				e.pump(ctx)
			}
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
		// Events that waited for the last of their claim's, which did not
		// come (the dispatcher failed on it), run now.
		e.pump(ctx)
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
func (e *channelActor) ended(ctx actor.Context) {
	if p := ctx.Parent(); p != nil {
		ctx.Send(p, &eventEnded{key: e.key})
	}
}

func (e *channelActor) releaseQueued(ctx actor.Context) {
	for _, ev := range e.queue {
		release(e.d, ev)
		e.ended(ctx)
	}
	e.queue = nil
}

// gathered reports whether ev waits for the other events of its claim, to
// run with them (a Go batch handler).
func (e *channelActor) gathered(ev handlers.Event) bool {
	ok, _ := e.d.goGathered(ev)
	return ok
}

func (e *channelActor) pump(ctx actor.Context) {
	for len(e.queue) > 0 && !e.draining && (!e.serial || e.running == 0) {
		if ok, most := e.d.goGathered(e.queue[0]); ok {
			evs := e.takeBatch(most)
			e.running += len(evs)
			self := ctx.Self()
			if e.d.goBatch(evs[0]) {
				go runBatch(e.d, evs, self)
			} else {
				go run(e.d, evs[0], self)
			}
			continue
		}
		ev := e.queue[0]
		e.queue = e.queue[1:]
		e.running++
		self := ctx.Self()
		go run(e.d, ev, self)
	}
}

// takeBatch takes the events at the head of the queue that run in one Go
// batch: those of the head's handler, up to most ('none' mode), or the
// head alone (a serialised channel or lane runs one event at a time).
func (e *channelActor) takeBatch(most int) []handlers.Event {
	n := 1
	if !e.serial {
		for n < len(e.queue) && n < most && e.queue[n].Handler == e.queue[0].Handler &&
			e.gathered(e.queue[n]) {
			n++
		}
	}
	evs := make([]handlers.Event, n)
	copy(evs, e.queue[:n])
	e.queue = e.queue[n:]
	return evs
}
