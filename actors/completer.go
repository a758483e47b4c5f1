package actors

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgrelay/pgrelay/events"
	"github.com/pgrelay/pgrelay/events/store"
	"github.com/pgrelay/pgrelay/internal/handlers"
)

// flushResult: a batch was written (or failed to be). part: the batch was a
// part of a refused write being isolated.
type flushResult struct {
	batch []store.Outcome
	part  bool
	err   error
	took  time.Duration
	// gaveUp: the ids the write recorded as gave_up.
	gaveUp map[int64]bool
}

// Messages of the completer.
type (
	// outcome: one event's outcome to write, and the event.
	outcome struct {
		o  store.Outcome
		ev handlers.Event
	}
	// flushDone: a write finished; its result waits in
	// completerState.written.
	flushDone struct{}
	// flushAll: answered with flushed once every outcome received is written.
	flushAll   struct{}
	flushed    struct{}
	flushRetry struct{}
	// parkedRetry: the backoff of the parked outcomes has passed.
	parkedRetry struct{}
)

// sendOutcome hands an outcome to the completer, counting it as waiting to
// be written from now on: the claimer's back-pressure sees it even before the
// completer has taken it from its mailbox.
func sendOutcome(d *deps, completer *actor.PID, ev handlers.Event, o store.Outcome) {
	if completer == nil {
		return
	}
	d.metrics.PendingOutcomes.Set(float64(d.pendingOutcomes.Add(1)))
	d.send(completer, &outcome{o: o, ev: ev})
}

// maxCompleteBatch bounds one completion statement.
const maxCompleteBatch = 1000

// maxPendingOutcomes is how many outcomes may wait to be written before the
// claimer stops claiming (back-pressure): at least a full completion
// statement, and the concurrency. The events still running when the limit is
// reached add theirs, so at most maxPendingOutcomes + Concurrency outcomes
// wait; none is ever dropped.
func maxPendingOutcomes(cfg Config) int64 {
	return int64(max(cfg.Concurrency, maxCompleteBatch))
}

// completer writes outcomes to pgrelay.log (and deletes or reschedules their
// queue rows) in batches. It writes as soon as it is idle: outcomes that
// arrive while a batch is being written wait for the next one, so batches grow
// with load and latency stays low when load is light.
//
// Nothing is dropped. A write that fails for want of the database (a lost
// connection, a timeout, a read-only server) keeps its outcomes and is
// retried with backoff. A write the database refuses for the data it holds
// (SQLSTATE class 22, 23 or 54: a text it cannot store, a value out of range)
// is split in halves, written one half at a time, down to the single outcome
// it refuses, so that the others are recorded at once. That outcome is
// written again with a placeholder for its error text (the text goes to the
// Processor's log); should even that be refused, it is parked and retried
// with backoff on its own while the rest goes on. The claimer stops claiming
// while maxPendingOutcomes outcomes wait to be written.
type completer struct {
	d *deps
	*completerState
}

// completerState outlives a completer instance: a restarted completer goes on
// with the outcomes its predecessor had not written yet.
type completerState struct {
	buf []store.Outcome
	// isolating: parts of a refused write, written one at a time before buf.
	isolating [][]store.Outcome
	// parked: outcomes refused alone even with a placeholder error; written
	// again after parkTimer.
	parked       []store.Outcome
	parkFailures int
	// originals: the error texts of outcomes being written with a
	// placeholder instead, by outcome id.
	originals map[int64]string
	parkTimer *time.Timer
	flushing  bool
	// written: the result of the write under way once it finished, set by the
	// write's goroutine and taken in by the completer (flushDone). It stays
	// here until taken in whole, so a completer that fails while taking it
	// in has its successor take it in again (on Started).
	written atomic.Pointer[flushResult]
	// failing: the events of the failed and given-up outcomes not written
	// yet, by outcome id: once written, they are counted as the log
	// records them (recorded).
	failing  map[int64]handlers.Event
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
		c.buf = append(c.buf, m.o) // counted by sendOutcome
		if m.o.Event == events.Failed || m.o.Event == events.GaveUp {
			if c.failing == nil {
				c.failing = map[int64]handlers.Event{}
			}
			c.failing[m.o.ID] = m.ev
		}
		if c.failures == 0 { // else a retry is scheduled: do not hammer the database
			c.flush(ctx)
		}
	case *flushDone:
		c.collect(ctx)
	case *flushRetry:
		c.flush(ctx)
	case *parkedRetry:
		for _, o := range c.parked {
			c.isolating = append(c.isolating, []store.Outcome{o})
		}
		c.parked = nil
		if c.failures == 0 {
			c.flush(ctx)
		}
	case *flushAll:
		c.waiters = append(c.waiters, ctx.Sender())
		if c.failures == 0 {
			c.flush(ctx)
		}
	case *actor.Stopping:
		if c.retry != nil {
			c.retry.Stop()
		}
		if c.parkTimer != nil {
			c.parkTimer.Stop()
		}
	case *actor.Started:
		// A restarted completer picks up where its predecessor stopped,
		// with the result of the write it was taking in, if any.
		c.collect(ctx)
		if c.failures == 0 {
			c.flush(ctx)
		}
	case *actor.Stopped, *actor.Restarting:
	default:
		c.d.log.Warn("completer: unexpected message", "type", typeName(ctx.Message()))
	}
}

// collect takes in the result of the finished write, if there is one.
func (c *completer) collect(ctx actor.Context) {
	m := c.written.Load()
	if m == nil {
		return
	}
	c.flushing = false
	c.d.metrics.CompleteLatency.Observe(m.took.Seconds())
	if m.err != nil {
		c.failed(ctx, m)
		c.written.CompareAndSwap(m, nil)
		if c.failures == 0 { // else a retry is scheduled
			c.flush(ctx)
		}
		return
	}
	c.failures = 0
	c.d.metrics.PendingOutcomes.Set(float64(c.d.pendingOutcomes.Add(-int64(len(m.batch)))))
	if len(c.originals) > 0 {
		for _, o := range m.batch {
			delete(c.originals, o.ID)
		}
	}
	if len(c.parked) == 0 {
		c.parkFailures = 0
	}
	c.recorded(m)
	// Taken in: from here on, a new write may finish and leave its result.
	c.written.CompareAndSwap(m, nil)
	// Serialised lanes may have a next event now that this one is done;
	// the claimer may have stopped for want of room here.
	claimer, _, _ := c.d.pids()
	ctx.Send(claimer, &wake{})
	c.flush(ctx)
}

// recorded counts the failures of a written batch as the log records them:
// whether one gave up the completion decided, by the channel's max_attempts
// then (pgrelay._complete_outcomes). A failure that gave up there is told
// to its handler (tellEndedFailing).
func (c *completer) recorded(m *flushResult) {
	for _, o := range m.batch {
		if o.Event != events.Failed && o.Event != events.GaveUp {
			continue
		}
		ev, ok := c.failing[o.ID]
		if !ok {
			continue // counted already: a write taken in twice
		}
		delete(c.failing, o.ID)
		switch {
		case m.gaveUp[o.ID]:
			c.d.metrics.outcome(ev.Channel, events.GaveUp)
			if o.Event == events.Failed {
				tellEndedFailing(c.d, ev, o, events.GaveUp)
			}
		case o.Event == events.Failed:
			c.d.metrics.outcome(ev.Channel, events.Failed)
		}
	}
}

// failed handles a write that failed: refused for its data, it is split (or,
// one outcome, given a placeholder error or parked); otherwise it is retried
// with backoff.
func (c *completer) failed(ctx actor.Context, m *flushResult) {
	c.d.metrics.DBErrors.WithLabelValues("complete").Inc()
	code, refused := refusedData(m.err)
	if refused {
		// The database answered: it is up, only this write's data is wrong.
		c.failures = 0
	}
	switch {
	case !refused:
		c.failures++
		c.d.log.Error("writing outcomes failed; retrying", "err", m.err, "outcomes", len(m.batch),
			"attempt", c.failures)
		if m.part {
			c.isolating = append([][]store.Outcome{m.batch}, c.isolating...)
		} else {
			c.buf = append(m.batch, c.buf...)
		}
		self := ctx.Self()
		c.retry = time.AfterFunc(backoff(c.failures), func() { c.d.send(self, &flushRetry{}) })
	case len(m.batch) > 1:
		c.d.log.Warn("the database refused a write of outcomes; writing it in parts to find the one it refuses",
			"err", m.err, "outcomes", len(m.batch))
		half := len(m.batch) / 2
		c.isolating = append([][]store.Outcome{m.batch[:half:half], m.batch[half:]}, c.isolating...)
	case m.batch[0].Error != "" && !c.replaced(m.batch[0].ID):
		o := m.batch[0]
		c.d.log.Error("the database refused an outcome's error text; recording the outcome with a placeholder",
			"id", o.ID, "event", o.Event, "err", m.err, "text", fmt.Sprintf("%q", o.Error[:min(len(o.Error), store.MaxText)]))
		if c.originals == nil {
			c.originals = map[int64]string{}
		}
		c.originals[o.ID] = o.Error
		o.Error = placeholder(code)
		c.isolating = append([][]store.Outcome{{o}}, c.isolating...)
	default:
		// Refused whatever its text: the text was not at fault, and goes
		// with it again.
		o := m.batch[0]
		if orig, ok := c.originals[o.ID]; ok {
			o.Error = orig
			delete(c.originals, o.ID)
		}
		c.parked = append(c.parked, o)
		c.parkFailures++
		wait := backoff(c.parkFailures)
		c.d.log.Error("the database refused an outcome; retrying it on its own, the others go on",
			"id", o.ID, "event", o.Event, "err", m.err, "retry_in", wait)
		if c.parkTimer != nil {
			c.parkTimer.Stop()
		}
		self := ctx.Self()
		c.parkTimer = time.AfterFunc(wait, func() { c.d.send(self, &parkedRetry{}) })
	}
}

// replaced reports whether the outcome with this id is being written with a
// placeholder error.
func (c *completer) replaced(id int64) bool {
	_, ok := c.originals[id]
	return ok
}

// placeholder is the error recorded for an outcome whose own error text the
// database refused with SQLSTATE code.
func placeholder(code string) string {
	return "pgrelay could not record this outcome's error text (the database refused it: SQLSTATE " + code +
		"); the Processor's log has it"
}

// refusedData reports whether err is the database refusing a statement for
// the data it was given (SQLSTATE class 22 data exception, 23 integrity
// constraint violation, 54 program limit exceeded), with the SQLSTATE: the
// same statement fails however often it is retried, and splitting it finds
// the outcome at fault.
func refusedData(err error) (string, bool) {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return "", false
	}
	switch pgErr.Code[:2] {
	case "22", "23", "54":
		return pgErr.Code, true
	}
	return "", false
}

func (c *completer) flush(ctx actor.Context) {
	if c.flushing {
		return
	}
	var batch []store.Outcome
	part := false
	switch {
	case len(c.isolating) > 0:
		batch, part = c.isolating[0], true
		c.isolating = c.isolating[1:]
	case len(c.buf) > 0:
		n := min(len(c.buf), maxCompleteBatch)
		batch = make([]store.Outcome, n)
		copy(batch, c.buf[:n])
		c.buf = c.buf[n:]
	case len(c.parked) > 0:
		// Written again once their backoff has passed.
		return
	default:
		for _, w := range c.waiters {
			if w != nil {
				ctx.Send(w, &flushed{})
			}
		}
		c.waiters = nil
		return
	}
	c.flushing = true
	self := ctx.Self()
	d, state := c.d, c.completerState
	go func() {
		start := time.Now()
		// Outcomes are written even while the Processor stops.
		wctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		rec, err := d.store.Complete(wctx, d.processor, batch)
		cancel()
		state.written.Store(&flushResult{batch: batch, part: part, err: err, took: time.Since(start), gaveUp: rec.GaveUp})
		d.send(self, &flushDone{})
	}()
}
