package actors

import (
	"fmt"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/pgrelay/pgrelay/events"
	"github.com/pgrelay/pgrelay/events/store"
	"github.com/pgrelay/pgrelay/internal/handlers"
)

// relay is the root of the tree: it spawns the Processor's long-lived actors
// and supervises them. A child that fails (a panic is a bug: durable state is
// in PostgreSQL, errors travel as messages) is restarted after a backoff that
// grows with repeated failures; its PID stays the same, so the others keep
// talking to it. Should the relay itself be restarted, its children are
// stopped with it and spawned anew (the PIDs in deps are replaced).
type relay struct {
	d     *deps
	ready func()
}

// supervisor restarts a failed child after failures × 100 ms (plus noise),
// counting failures within a 10 s window. A restart does not redeliver the
// message the child failed on, so when that message carried events they are
// ended here first: each counts as a failed attempt (retried, or given up at
// max_attempts), so a poison event cannot crash an actor forever and no event
// is stranded in a claim until its lease runs out. (A completer's write
// result is not a message: it waits in the completer's state until taken in.)
type supervisor struct {
	d       *deps
	backoff actor.SupervisorStrategy
}

func supervision(d *deps) actor.SupervisorStrategy {
	return &supervisor{d: d, backoff: actor.NewExponentialBackoffStrategy(10*time.Second, 100*time.Millisecond)}
}

func (s *supervisor) HandleFailure(system *actor.ActorSystem, sup actor.Supervisor, child *actor.PID,
	rs *actor.RestartStatistics, reason any, message any) {
	s.d.log.Error("actor failed; restarting it", "actor", child.Id, "reason", fmt.Sprint(reason),
		"failures", rs.FailureCount()+1)
	failed := func(ev handlers.Event) {
		finish(s.d, ev, &store.Outcome{ID: ev.ID, ClaimedAt: ev.DispatchedAt, Event: events.Failed,
			Error: fmt.Sprintf("internal error: actor %s failed: %v", child.Id, reason)})
	}
	switch m := actor.UnwrapEnvelopeMessage(message).(type) {
	case *runEvent:
		failed(m.ev)
		if self, ok := sup.(interface{ Self() *actor.PID }); ok {
			// The parent counted the event as routed to the child.
			system.Root.Send(self.Self(), &eventEnded{key: m.key})
		}
	case *dispatchOne:
		failed(handlers.Event{Claimed: m.row, ProcessorID: s.d.processor})
	case *outcome:
		// The completer failed on it: it is lost (its claim is rescued once
		// its lease passes) and no longer waits to be written.
		s.d.metrics.PendingOutcomes.Set(float64(s.d.pendingOutcomes.Add(-1)))
	}
	s.backoff.HandleFailure(system, sup, child, rs, reason, message)
}

func relayProps(d *deps, ready chan struct{}) *actor.Props {
	var once sync.Once
	signal := func() { once.Do(func() { close(ready) }) }
	return actor.PropsFromProducer(func() actor.Actor { return &relay{d: d, ready: signal} },
		actor.WithSupervisor(supervision(d)))
}

func (r *relay) Receive(ctx actor.Context) {
	r.d.hook("relay", ctx.Message())
	switch ctx.Message().(type) {
	case *actor.Started:
		spawn := func(props *actor.Props, name string) *actor.PID {
			pid, err := ctx.SpawnNamed(props, name)
			if err != nil {
				panic(fmt.Sprintf("spawn %s: %v", name, err)) // fixed unique names: only a bug gets here
			}
			return pid
		}
		completer := spawn(completerProps(r.d), "completer")
		dispatcher := spawn(dispatcherProps(r.d), "dispatcher")
		claimer := spawn(claimerProps(r.d), "claimer")
		r.d.setPIDs(claimer, dispatcher, completer)
		spawn(heartbeatProps(r.d), "heartbeat")
		spawn(rescuerProps(r.d), "rescuer")
		if r.d.cfg.Mode == ModeLeader {
			spawn(leaderProps(r.d), "leader")
		}
		spawn(janitorProps(r.d), "janitor")
		spawn(schedulerProps(r.d), "scheduler")
		if r.d.bus != nil {
			spawn(publisherProps(r.d), "publisher")
		}
		ctx.Send(claimer, &wake{})
		r.ready()
	case *actor.Stopping, *actor.Stopped, *actor.Restarting, *actor.Terminated:
	default:
		r.d.log.Warn("relay: unexpected message", "type", typeName(ctx.Message()))
	}
}
