package actors

import "github.com/jackc/pgx/v5/pgxpool"

// SetTestHook installs a function that sees every message an actor receives
// before the actor does ("relay", "dispatcher", "claimer", "completer",
// "heartbeat", "rescuer", "leader", "batcher", "publisher", or a channel actor's concurrency mode:
// "none", "channel", "payload", "lane"). A panic in it is a panic of that
// actor.
func SetTestHook(c *Config, h func(actor string, msg any)) { c.testHook = h }

// RunEventPayload returns the payload of a message when it is a run-event
// message, for hooks that pick one event.
func RunEventPayload(msg any) (string, bool) {
	if m, ok := msg.(*runEvent); ok {
		return m.ev.Payload, true
	}
	return "", false
}

// IsBatchDone reports whether msg is a batcher's batchDone.
func IsBatchDone(msg any) bool {
	_, ok := msg.(*batchDone)
	return ok
}

// HotPool is the Processor's hot pool, for tests that hold some of its
// connections so that the Processor works on the others.
func HotPool(p *Processor) *pgxpool.Pool { return p.hot }

// HotPoolConns is how many connections the Processor's hot pool holds open.
func HotPoolConns(p *Processor) int32 { return p.hot.Stat().TotalConns() }

// DispatchPayload returns the payload of a message when it is the
// dispatcher's dispatchOne, for hooks that pick one event.
func DispatchPayload(msg any) (string, bool) {
	if m, ok := msg.(*dispatchOne); ok {
		return m.row.Payload, true
	}
	return "", false
}

// WakeChannel returns the channel of a claimer's wake that asks to claim
// one channel alone.
func WakeChannel(msg any) (string, bool) {
	if m, ok := msg.(*wake); ok && m.channel != "" {
		return m.channel, true
	}
	return "", false
}

// IsArming reports whether msg is what the armer shows the "armer" hook
// after each arming of the wake-up slots.
func IsArming(msg any) bool {
	_, ok := msg.(armedWakes)
	return ok
}
