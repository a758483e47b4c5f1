package actors

import (
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/pgrelay/pgrelay/events"
	"github.com/pgrelay/pgrelay/events/store"
	"github.com/pgrelay/pgrelay/internal/handlers"
)

// Messages of the dispatcher and the channel and lane actors.
type (
	// dispatchOne: a row the claimer claimed; last: the last row of its
	// channel in its claim that runs; hint: its channel's wake hint, for a
	// 'none'-mode row ("" when unknown).
	dispatchOne struct {
		row  store.Claimed
		last bool
		hint string
	}
	// runEvent: run one event (parent to child, whose key in the parent's
	// router is key); last: the last of its channel in its claim.
	runEvent struct {
		ev   handlers.Event
		key  childKey
		last bool
	}
	// eventEnded: one event routed to the child with this key has ended.
	eventEnded struct{ key childKey }
	// childIdle: the child with this key has had nothing to do for IdleTimeout.
	childIdle struct{ key childKey }
	// drain: stop starting events, release those not started; the dispatcher
	// answers drained once nothing is in flight.
	drain         struct{}
	drainChildren struct{}
	drained       struct{}
	checkDrained  struct{}
	// idleCheck: the dispatcher's periodic tick down the tree; a child idle
	// for IdleTimeout answers childIdle.
	idleCheck struct{}
)

// childKey names a child in its parent's router: the dispatcher's channel
// actors (channel and concurrency mode) and batchers (channel, "" for the
// lane batcher), a 'payload' channel actor's lane actors (payload).
type childKey struct {
	channel string
	mode    string // a channel actor's concurrency mode
	batch   bool   // a batcher
	lane    string // a lane actor's payload
}

func channelKey(channel, mode string) childKey { return childKey{channel: channel, mode: mode} }
func batcherKey(channel string) childKey       { return childKey{channel: channel, batch: true} }
func laneKey(payload string) childKey          { return childKey{lane: payload} }

// String is the key in log lines.
func (k childKey) String() string {
	switch {
	case k.batch && k.channel == "":
		return "lane batcher"
	case k.batch:
		return "batcher " + k.channel
	case k.channel == "":
		return "lane " + k.lane
	}
	return "channel " + k.channel + " (" + k.mode + ")"
}

// router keeps an actor's children by key with the number of events each has
// not finished, so a child is only stopped when it holds nothing (a message
// sent to a stopping actor would be lost).
type router struct {
	children map[childKey]*routed
}

type routed struct {
	pid         *actor.PID
	outstanding int
}

func (r *router) route(ctx actor.Context, key childKey, props func() *actor.Props, prefix string, msg any) {
	if r.children == nil {
		r.children = map[childKey]*routed{}
	}
	c, ok := r.children[key]
	if !ok {
		c = &routed{pid: ctx.SpawnPrefix(props(), prefix)}
		r.children[key] = c
	}
	c.outstanding++
	ctx.Send(c.pid, msg)
}

func (r *router) ended(key childKey) {
	if c, ok := r.children[key]; ok && c.outstanding > 0 {
		c.outstanding--
	}
}

// idle stops the child with key when it holds nothing.
func (r *router) idle(ctx actor.Context, key childKey) {
	if c, ok := r.children[key]; ok && c.outstanding == 0 {
		delete(r.children, key)
		ctx.Stop(c.pid)
	}
}

func (r *router) broadcast(ctx actor.Context, msg any) {
	for _, c := range r.children {
		ctx.Send(c.pid, msg)
	}
}

func (r *router) empty() bool { return len(r.children) == 0 }

// dispatcher routes each claimed event to its channel's actor, spawning it
// on demand. Expired events are recorded without running.
type dispatcher struct {
	d        *deps
	r        router
	draining bool
	waiters  []*actor.PID
	stopTick func()
	stopIdle func()
	// hints: by its wakeHint, each channel that has had a batcher, or whose
	// events came from a claim to run in mode 'none'.
	hints map[string]hinted
}

// hinted is a channel a notification may name (by its wakeHint): batch, a
// channel of a batcher's; else one claimed channel by channel
// (_claim_channel).
type hinted struct {
	channel string
	batch   bool
}

// hint notes channel under its wake hint (wake.go), when the claimer had it.
func (p *dispatcher) hint(hint, channel string, batch bool) {
	if hint == "" {
		return
	}
	if p.hints == nil {
		p.hints = map[string]hinted{}
	}
	p.hints[hint] = hinted{channel: channel, batch: batch}
}

func dispatcherProps(d *deps) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &dispatcher{d: d} },
		actor.WithSupervisor(supervision(d)))
}

func (p *dispatcher) Receive(ctx actor.Context) {
	p.d.hook("dispatcher", ctx.Message())
	switch m := ctx.Message().(type) {
	case *dispatchOne:
		row := m.row
		ev := handlers.Event{Claimed: row, ProcessorID: p.d.processor}
		p.d.metrics.Claimed.WithLabelValues(row.Channel).Inc()
		switch {
		case row.Expired:
			p.d.metrics.outcome(row.Channel, events.Expired)
			finish(p.d, ev, &store.Outcome{ID: row.ID, ClaimedAt: row.DispatchedAt, Event: events.Expired})
		case p.draining:
			release(p.d, ev)
		default:
			if row.Mode == "none" && m.last { // once a channel and claim
				p.hint(m.hint, row.Channel, false)
			}
			key := channelKey(row.Channel, row.Mode)
			mode := row.Mode
			p.r.route(ctx, key, func() *actor.Props { return channelActorProps(p.d, key, mode) },
				fmt.Sprintf("channel-%d-%s-", p.d.node, row.Channel), &runEvent{ev: ev, key: key, last: m.last})
		}
	case *batchReady:
		if !p.draining {
			// "" is the lane batcher's: the serialised sql channels' lanes.
			key := batcherKey(m.channel)
			channel, kind := m.channel, m.kind
			name := fmt.Sprintf("batch-%d-%s-", p.d.node, channel)
			if channel == "" {
				name = fmt.Sprintf("lanes-%d-", p.d.node)
			} else {
				p.hint(m.hint, channel, true)
			}
			p.r.route(ctx, key, func() *actor.Props { return batcherProps(p.d, key, channel, kind) }, name, m)
		}
	case *batchHint:
		// Only a running batcher: the notification does not say whether
		// the channel is a 'none' sql channel; the claim does. A channel
		// claimed channel by channel is claimed alone (the claimer's full
		// claim follows the arming); anything else costs a full claim.
		// An arming left to a draining batcher goes to it; with no
		// batcher to take it, it is asked for now.
		h, known := p.hints[m.hint]
		if c, ok := p.r.children[batcherKey(h.channel)]; known && h.batch && ok && !p.draining {
			c.outstanding++
			ctx.Send(c.pid, &batchReady{channel: h.channel, seen: m.seen, armOwed: m.armOwed})
			return
		}
		if m.armOwed {
			p.d.askArm()
		}
		claimer, _, _ := p.d.pids()
		if known && !h.batch {
			ctx.Send(claimer, &wake{channel: h.channel})
			return
		}
		ctx.Send(claimer, &wake{})
	case *eventEnded:
		p.r.ended(m.key)
	case *childIdle:
		p.r.idle(ctx, m.key)
	case *drain:
		p.draining = true
		p.r.broadcast(ctx, &drainChildren{})
		p.waiters = append(p.waiters, ctx.Sender())
		if p.stopTick == nil {
			p.stopTick = ticker(p.d, ctx.Self(), 20*time.Millisecond, func() any { return &checkDrained{} })
		}
		p.checkDrained(ctx)
	case *checkDrained:
		p.checkDrained(ctx)
	case *idleCheck:
		p.r.broadcast(ctx, m)
	case *actor.Started:
		p.stopIdle = ticker(p.d, ctx.Self(), max(p.d.cfg.IdleTimeout/2, 10*time.Millisecond),
			func() any { return &idleCheck{} })
	case *actor.Stopping, *actor.Restarting:
		if p.stopTick != nil {
			p.stopTick()
			p.stopTick = nil
		}
		if p.stopIdle != nil {
			p.stopIdle()
			p.stopIdle = nil
		}
	case *actor.Stopped, *actor.Terminated:
	default:
		p.d.log.Warn("dispatcher: unexpected message", "type", typeName(ctx.Message()))
	}
}

func (p *dispatcher) checkDrained(ctx actor.Context) {
	if len(p.waiters) == 0 || p.d.slots.inUse() > 0 || p.d.batchSlots.inUse() > 0 {
		return
	}
	for _, w := range p.waiters {
		if w != nil {
			ctx.Send(w, &drained{})
		}
	}
	p.waiters = nil
}
