package actors

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// relay is the root of the tree: it spawns the Processor's long-lived actors
// and supervises them. A child that fails (a panic is a bug: durable state is
// in PostgreSQL, errors travel as messages) is restarted after a backoff that
// grows with repeated failures; its PID stays the same, so the others keep
// talking to it.
type relay struct {
	d     *deps
	ready chan struct{}
}

// supervision restarts a failed child after failures × 100 ms (plus noise),
// counting failures within a 10 s window.
func supervision() actor.SupervisorStrategy {
	return actor.NewExponentialBackoffStrategy(10*time.Second, 100*time.Millisecond)
}

func relayProps(d *deps, ready chan struct{}) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &relay{d: d, ready: ready} },
		actor.WithSupervisor(supervision()))
}

func (r *relay) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Started:
		if r.ready == nil {
			return // restarted: the children are kept
		}
		completer, err1 := ctx.SpawnNamed(completerProps(r.d), "completer")
		dispatcher, err2 := ctx.SpawnNamed(dispatcherProps(r.d), "dispatcher")
		claimer, err3 := ctx.SpawnNamed(claimerProps(r.d), "claimer")
		for _, err := range []error{err1, err2, err3} {
			if err != nil {
				panic(err) // names are fixed and unique: only a bug gets here
			}
		}
		r.d.mu.Lock()
		r.d.claimer, r.d.dispatcher, r.d.completer = claimer, dispatcher, completer
		r.d.mu.Unlock()
		if _, err := ctx.SpawnNamed(heartbeatProps(r.d), "heartbeat"); err != nil {
			panic(err)
		}
		if _, err := ctx.SpawnNamed(janitorProps(r.d), "janitor"); err != nil {
			panic(err)
		}
		ctx.Send(claimer, &wake{})
		close(r.ready)
		r.ready = nil
	case *actor.Stopping, *actor.Stopped, *actor.Restarting, *actor.Terminated:
	default:
		r.d.log.Warn("relay: unexpected message", "type", typeName(ctx.Message()))
	}
}
