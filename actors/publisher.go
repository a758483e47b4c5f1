package actors

import (
	"context"
	"errors"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/pgrelay/pgrelay/events"
	"github.com/pgrelay/pgrelay/events/bus"
)

// Messages of the publisher.
type (
	// publishTick: look for events to publish (ticker, or more are waiting).
	publishTick struct{}
	// publishDone: a publishing round ended.
	publishDone struct{ r roundResult }
)

// publisher follows this node's rows of pgrelay.log (and of the notifier's
// status_events) and publishes each as JSON on NATS (docs/events.md). Its
// position is a cursor row in pgrelay.publish_cursors, moved only once NATS
// acknowledged everything up to it, so a restart or an outage loses nothing:
// what was not acknowledged is published again, and JetStream drops the
// copies by Nats-Msg-Id within its duplicate window (past half of it, the
// publisher looks in the stream for them first: findStored). Dispatch never waits on it; while NATS is away the
// events wait in the log and the backlog shows in a gauge and `pgrelay stats`.
//
// A round (lease, horizon, batch, publish, wait for acks, move the cursor)
// runs in a goroutine on the publisher's own connection, one at a time;
// rounds follow each other at once while a batch comes back full.
type publisher struct {
	d         *deps
	w         *pubWorker
	busy      bool
	failures  int
	notBefore time.Time
	stopTick  func()
	cancel    context.CancelFunc
	lastErr   string
	lastLog   time.Time
	state     string
}

func publisherProps(d *deps) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &publisher{d: d} })
}

func (p *publisher) Receive(ctx actor.Context) {
	p.d.hook("publisher", ctx.Message())
	switch m := ctx.Message().(type) {
	case *actor.Started:
		p.w = newPubWorker(p.d)
		p.stopTick = ticker(p.d, ctx.Self(), p.d.cfg.NATS.PublishInterval, func() any { return &publishTick{} })
		ctx.Send(ctx.Self(), &publishTick{})
	case *actor.Stopping, *actor.Restarting:
		p.stopTick()
		if p.cancel != nil {
			p.cancel()
		}
		// The connection is closed once a running round has ended; Stop
		// waits for that before it closes the pools.
		w := p.w
		p.d.work.Add(1)
		go func() {
			defer p.d.work.Done()
			w.close()
		}()
	case *publishTick:
		if p.busy || time.Now().Before(p.notBefore) {
			return
		}
		p.busy = true
		rctx, cancel := context.WithCancel(context.Background())
		p.cancel = cancel
		self, w, d := ctx.Self(), p.w, p.d
		d.work.Add(1)
		go func() {
			defer d.work.Done()
			defer cancel()
			d.send(self, &publishDone{r: w.round(rctx)})
		}()
	case *publishDone:
		p.busy = false
		p.record(m.r)
		if m.r.err != nil {
			p.failures++
			p.notBefore = time.Now().Add(backoff(p.failures))
			return
		}
		p.failures = 0
		if m.r.more {
			ctx.Send(ctx.Self(), &publishTick{})
		}
	case *actor.Stopped:
	default:
		p.d.log.Warn("publisher: unexpected message", "type", typeName(ctx.Message()))
	}
}

// record counts a round's outcome and logs what changed. A round that could
// not publish (NATS away included) is a publish error; a failure that
// repeats is logged once a minute, not at every retry, and NATS away is
// logged as the state "waiting for NATS" (the bus logs why). That
// publishing resumed is logged after a round that published.
func (p *publisher) record(r roundResult) {
	m := p.d.metrics.Events
	for src, n := range r.published {
		m.Published.WithLabelValues(src).Add(float64(n))
	}
	for src, n := range r.oversize {
		m.Oversize.WithLabelValues(src).Add(float64(n))
	}
	m.Duplicates.Add(float64(r.duplicates))
	// A source left out of a measurement is not reported (the notifier's
	// where it is not used), and a standby reports none: another Processor
	// of the node publishes, and a value of this one's would stay as it was
	// when it last published.
	if r.backlog != nil || r.state == stateStandby {
		for _, src := range []string{events.SourceLog, events.SourceNotifier} {
			n, ok := r.backlog[src]
			if !ok {
				m.Backlog.DeleteLabelValues(src)
				m.Lag.DeleteLabelValues(src)
				continue
			}
			m.Backlog.WithLabelValues(src).Set(float64(n))
			m.Lag.WithLabelValues(src).Set(r.lag[src].Seconds())
		}
	}
	if p.d.bus.Connected() {
		m.Connected.Set(1)
	} else {
		m.Connected.Set(0)
	}
	if r.err != nil {
		m.PublishErrors.Inc()
	}
	switch {
	case errors.Is(r.err, bus.ErrNotConnected):
		p.lastErr = r.err.Error()
		p.setState(stateNoNATS, r.stream)
	case r.err != nil:
		msg := r.err.Error()
		if msg != p.lastErr || time.Since(p.lastLog) > time.Minute {
			p.d.log.Error("publishing events to NATS failed; retrying (dispatch goes on, the events wait in the log)",
				"err", r.err)
			p.lastErr, p.lastLog = msg, time.Now()
		}
	default:
		if p.lastErr != "" && r.state == statePublishing {
			p.d.log.Info("publishing events to NATS again")
			p.lastErr = ""
		}
		p.setState(r.state, r.stream)
	}
}

// setState logs a change of the publisher's state.
func (p *publisher) setState(state, stream string) {
	if state == "" || state == p.state {
		return
	}
	if stream != "" {
		p.d.log.Info("event publisher: "+state, "stream", stream)
	} else {
		p.d.log.Info("event publisher: " + state)
	}
	p.state = state
}

// roundResult is what one round did.
type roundResult struct {
	state      string
	stream     string
	published  map[string]int
	oversize   map[string]int
	duplicates int
	backlog    map[string]int64 // nil when not measured this round
	// lag: per source, the age of the oldest row not yet published (0 when
	// none); measured with the backlog.
	lag  map[string]time.Duration
	more bool
	err  error
}

// Publisher states, as logged.
const (
	statePublishing = "publishing"
	stateStandby    = "standby: another Processor of this node holds the publisher lease"
	stateNoNATS     = "waiting for NATS"
)
