package actors

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/trace"

	"github.com/pgrelay/pgrelay/events"
	"github.com/pgrelay/pgrelay/events/store"
	"github.com/pgrelay/pgrelay/internal/handlers"
)

// run runs one event's handler and hands its outcome on. It never panics: a
// panicking handler costs one failed attempt.
func run(d *deps, ev handlers.Event, self *actor.PID) {
	start := time.Now()
	ctx, span := d.tracing.start(d.runCtx, attemptOf(ev), time.Time{})
	committed, err := invoke(d, ctx, ev)
	took := time.Since(start)
	d.metrics.HandlerDuration.WithLabelValues(ev.Channel).Observe(took.Seconds())
	out := outcomeOf(d, ev, committed, err, took)
	d.tracing.end(span, attemptOf(ev), spanOutcome(out, err), err, time.Time{})
	finish(d, ev, out)
	d.send(self, &handlerFinished{ev: ev, took: took})
}

// spanOutcome is what an attempt's span records of out, the outcome
// outcomeOf gave for a handler's err: nil is a success the handler's
// transaction recorded, or a claim taken back (released).
func spanOutcome(out *store.Outcome, err error) events.Kind {
	switch {
	case out != nil:
		return out.Event
	case err == nil:
		return events.Succeeded
	}
	return events.Release
}

// invoke runs ev's handler under base (the run context, with the attempt's
// span when tracing).
func invoke(d *deps, base context.Context, ev handlers.Event) (committed bool, err error) {
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
	// connection: waiting for one is not the handler's time. A Go handler
	// sets its deadline itself too (a transactional one once it has its
	// connection).
	ctx, cancel := context.WithTimeout(base, ev.Timeout)
	if ev.Kind == "sql" || ev.Kind == "go" {
		cancel()
		ctx, cancel = context.WithCancel(base)
	}
	defer cancel()
	committed, err = h.Handle(ctx, ev)
	return committed, timedOut(d, ev, err)
}

// timedOut names the channel's timeout in err when the handler's deadline
// (not a shutdown) cut it.
func timedOut(d *deps, ev handlers.Event, err error) error {
	if err != nil && errors.Is(err, context.DeadlineExceeded) && d.runCtx.Err() == nil {
		return fmt.Errorf(events.HandlerTimeoutPrefix+"%s: %w", ev.Timeout, err)
	}
	return err
}

// runBatch runs a batch of events of one channel whose Go handler takes
// batches, in one transaction that completes them all, and hands on their
// outcomes: all succeeded, or all failed with the batch's error (an attempt
// each). It never panics.
func runBatch(d *deps, evs []handlers.Event, self *actor.PID) {
	start := time.Now()
	// One span per event; the handler's ctx carries the first's.
	ctx := d.runCtx
	var spans []trace.Span
	if d.tracing != nil {
		spans = make([]trace.Span, len(evs))
		for i, ev := range evs {
			var sctx context.Context
			sctx, spans[i] = d.tracing.start(d.runCtx, attemptOf(ev), start)
			if i == 0 {
				ctx = sctx
			}
		}
	}
	err := invokeBatch(d, ctx, evs)
	took := time.Since(start)
	share := took / time.Duration(len(evs))
	// One claim was taken back (which, the transaction does not say): the
	// batch rolled back, and the others, still held, go back unrun.
	lost := errors.Is(err, store.ErrClaimLost)
	if lost {
		d.log.Warn("a claim of a batch was taken back while its handler ran; the batch rolled back and its other events are released",
			"channel", evs[0].Channel, "events", len(evs))
	}
	for i, ev := range evs {
		d.metrics.HandlerDuration.WithLabelValues(ev.Channel).Observe(share.Seconds())
		if lost {
			if spans != nil {
				d.tracing.end(spans[i], attemptOf(ev), events.Release, err, time.Time{})
			}
			release(d, ev)
		} else {
			out := outcomeOf(d, ev, err == nil, err, share)
			if spans != nil {
				d.tracing.end(spans[i], attemptOf(ev), spanOutcome(out, err), err, time.Time{})
			}
			finish(d, ev, out)
		}
		d.send(self, &handlerFinished{ev: ev, took: share})
	}
}

func invokeBatch(d *deps, base context.Context, evs []handlers.Event) (err error) {
	defer func() {
		if r := recover(); r != nil {
			d.log.Error("handler panicked", "channel", evs[0].Channel, "events", len(evs), "panic", r,
				"stack", string(debug.Stack()))
			err = fmt.Errorf("handler panicked: %v", r)
		}
	}()
	h, ok := d.handlers["go"].(handlers.Go)
	if !ok {
		return fmt.Errorf("no Go handlers in this Processor")
	}
	// The handler sets its deadline once it has its connection.
	ctx, cancel := context.WithCancel(base)
	defer cancel()
	return timedOut(d, evs[0], h.HandleBatch(ctx, evs))
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
	case isSnooze(err):
		// The handler put its event back (pgrelay.Snooze): no attempt.
		return events.Snoozed
	case ev.Kind == "go" && store.IsConnError(err) && !isHandlerError(err):
		// A Go handler's transaction lost its connection outside the
		// handler's own work (acquire, begin, completion, commit): as for
		// sql, not an attempt. What the handler returned is its own failure.
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
	if k != events.Failed && k != events.GaveUp {
		// A failure is counted once written, as the log records it: whether
		// it gave up is decided there (completer.recorded).
		d.metrics.outcome(ev.Channel, k)
	}
	if k == events.Succeeded && committed {
		return nil // the handler's transaction recorded it
	}
	out := record(ev, k, err)
	return &out
}

// record is the outcome k of ev, whose handler returned err.
func record(ev handlers.Event, k events.Kind, err error) store.Outcome {
	out := store.Outcome{ID: ev.ID, ClaimedAt: ev.DispatchedAt, Event: k}
	if k == events.Failed || k == events.GaveUp {
		out.Error = err.Error()
	}
	if delay, ok := handlers.RetryDelay(err); ok && k == events.Failed {
		out.RetryAfter, out.OriginID = delay, ev.OriginID
	}
	if delay, ok := handlers.SnoozeDelay(err); ok && k == events.Snoozed {
		out.SnoozeFor = delay
	}
	return out
}

// isSnooze reports whether a handler's result is a Snooze.
func isSnooze(err error) bool {
	_, ok := handlers.SnoozeDelay(err)
	return ok
}

// goDirect runs the Go functions of a direct batch of a go channel
// (store.RunGoDirect): each handler under a guard that turns its panic into
// its failure and names its timeout; its outcome as invokeTxEach's.
func goDirect(d *deps) store.GoDirect {
	event := func(e *store.DirectEvent) handlers.Event {
		return handlers.Event{Claimed: store.Claimed{ID: e.ID, OriginID: e.OriginID, Channel: e.Channel,
			Payload: e.Payload, Attempt: e.Attempt, EnqueuedAt: e.EnqueuedAt, Kind: e.Kind, Handler: e.Handler,
			Mode: "none", Timeout: e.Timeout, MaxAttempts: e.MaxAttempts, Traceparent: e.Traceparent},
			ProcessorID: d.processor}
	}
	var readTraces func(ctx context.Context, tx pgx.Tx, evs []store.DirectEvent) error
	if d.tracing != nil {
		readTraces = func(ctx context.Context, tx pgx.Tx, evs []store.DirectEvent) error {
			origins := make([]int64, len(evs))
			for i, e := range evs {
				origins[i] = e.OriginID
			}
			found, err := store.Traceparents(ctx, tx, origins)
			if err != nil {
				return err
			}
			for i := range evs {
				evs[i].Traceparent = found[evs[i].OriginID]
			}
			return nil
		}
	}
	return store.GoDirect{
		Trace: readTraces,
		Run: func(ctx context.Context, tx pgx.Tx, e *store.DirectEvent) (err error) {
			ev := event(e)
			ctx, span := d.tracing.start(ctx, attemptOf(ev), time.Time{})
			defer func() {
				if r := recover(); r != nil {
					d.log.Error("handler panicked", "channel", ev.Channel, "id", ev.ID, "panic", r,
						"stack", string(debug.Stack()))
					err = fmt.Errorf("handler panicked: %v", r)
				}
				if span != nil {
					k := classify(ev, err, d.runCtx.Err() != nil)
					if k == "" {
						k = events.Failed
					}
					d.tracing.end(span, attemptOf(ev), k, err, time.Time{})
				}
			}()
			h, ok := d.handlers["go"].(handlers.Go)
			if !ok {
				return fmt.Errorf("no Go handlers in this Processor")
			}
			return timedOut(d, ev, h.CallTx(ctx, tx, ev))
		},
		Outcome: func(e *store.DirectEvent, err error) store.Outcome {
			ev := event(e)
			k := classify(ev, err, d.runCtx.Err() != nil)
			if k == "" {
				k = events.Failed // a handler's error is never a claim taken back
			}
			if k == events.Failed {
				d.log.Debug("handler failed", "channel", ev.Channel, "id", ev.ID, "attempt", ev.Attempt, "err", err)
			}
			return record(ev, k, err)
		},
	}
}

// isHandlerError reports whether err is a handler's own failure.
func isHandlerError(err error) bool {
	var h *store.HandlerError
	return errors.As(err, &h)
}

// finish ends an event: its outcome goes to the completer, its slot is freed.
// Called from any goroutine.
func finish(d *deps, ev handlers.Event, out *store.Outcome) {
	claimer, _, completer := d.pids()
	if out != nil {
		sendOutcome(d, completer, ev, *out)
		tellEndedFailing(d, ev, *out, out.Event)
	}
	d.slots.free(1)
	if out == nil && (ev.Mode != "none" || d.limited(ev.Channel)) {
		// The handler's own transaction recorded the event (HandleTx,
		// HandleTxBatch, a sql handler claimed alone): the next event of its
		// serialised channel or lane, or of its channel held by its
		// max_in_flight, may start now, and nothing else would claim it
		// before the poll. (The completer wakes the claimer once it has
		// written the outcomes it is given.)
		d.send(claimer, &wake{})
	}
}

// release gives an unstarted event's claim back.
func release(d *deps, ev handlers.Event) {
	d.metrics.outcome(ev.Channel, events.Release)
	finish(d, ev, &store.Outcome{ID: ev.ID, ClaimedAt: ev.DispatchedAt, Event: events.Release})
}
