package actors

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgrelay/pgrelay/events"
	"github.com/pgrelay/pgrelay/events/store"
)

// Messages of the batchers.
type (
	// batchReady: the 'none' sql channel has rows ready, or ("") some lane
	// of a serialised sql channel has (from the claimer, or a notification
	// naming the channel). seen is a time after the rows committed: a batch
	// started after it sees them.
	batchReady struct {
		channel string
		kind    string // the channel's: sql, or go (a HandleTx handler's)
		seen    time.Time
		hint    string // the channel's wake hint, from the claimer ("" when unknown)
		// armOwed: a producer's notification whose arming the listener
		// left to this batcher, as it drained (d.drains).
		armOwed bool
	}
	// batchHint: a notification named a channel by its wake hint; the
	// channel's batcher, if it is running, gets a batchReady, else the
	// claimer a wake (whose claim starts a batcher when one is due).
	batchHint struct {
		hint    string
		seen    time.Time
		armOwed bool // the listener left the arming to the channel's batcher
	}
	// batchDone: a batch goroutine returned; its slots are already free.
	batchDone struct {
		requested int
		batch     *store.DirectBatch
		err       error
		started   time.Time // when the batcher started it
	}
	// batchRetry: the backoff after a failed batch has passed.
	batchRetry struct{}
)

// batchTarget is how long a batch's handlers should take at most, by their
// time measured on the server: a batch holds its events until it commits, so
// a channel whose handlers are slow runs smaller batches (down to one event
// per transaction), in parallel.
const batchTarget = time.Second

// laneBatchTarget is batchTarget for lane batches, shorter: a lane batch runs
// the heads of different lanes one after the other, which the classic path
// runs in parallel, so slow handlers get lane batches of one or two, run in
// parallel, while quick ones still share transactions.
const laneBatchTarget = 100 * time.Millisecond

// probeBatch is the size of a channel's first batch, which measures the
// time per event.
const probeBatch = 8

// batcher is the channel actor of a 'none' sql channel. It runs the channel's
// events in direct batches (store.RunDirect): a transaction locks up to
// SQLBatch ready rows, runs each handler under its own savepoint and records
// the outcomes, with one commit. The lane batcher (channel "") does the same
// for the heads of the serialised sql channels' lanes (store.RunLanes), one
// event per lane and batch, going on from where its last batch ended: what
// differs between the two is their batchSource. It starts batches while rows
// are ready and slots are free, several at once, and keeps going while
// batches come back full; the claimer tells it when rows are ready again.
type batcher struct {
	d       *deps
	key     childKey
	channel string
	src     batchSource
	running int
	// credit is how many batches to start: one when the claimer says rows
	// are ready, two more for every batch that comes back full (so a backlog
	// ramps up to as many batches as slots allow), none after one comes back
	// short (creditAfter).
	credit     int
	draining   bool
	failures   int  // batches failed in a row
	backingOff bool // after a failed batch, until retry fires
	retry      *time.Timer
	avg        time.Duration // moving average of one handler's time on the server; 0 until measured
	lastActive time.Time
	lastStart  time.Time // when the last batch started
	// moreAt: when a batch last came back full or with rows likely ready
	// again (creditAfter).
	moreAt time.Time
	// full: the last batch came back full, so the running ones go on with
	// the channel's backlog and find its new rows by themselves: the batcher
	// drains, and says so under its wake hint (d.setDraining). armOwed: the
	// listener left it a notification's arming, which it asks for once it
	// no longer drains: a batch came back short, or none runs. So while a
	// backlog drains, the channel's producers send no notification, and
	// nothing arms the slots or claims beside the batches at each of them.
	full    bool
	armOwed bool
	hint    string // the channel's wake hint, once the claimer gave it
}

// batchSource is what a batcher's batches take.
type batchSource interface {
	// target is how long a batch's handlers should take at most.
	target() time.Duration
	// next is the next batch to start, with running batches under way.
	next(running int) batchRun
	// done takes note of a batch that came back without an error; again:
	// rows are likely ready once more.
	done(batch *store.DirectBatch) (again bool)
}

// batchRun runs one batch of up to n events.
type batchRun func(ctx context.Context, st *store.Store, scope store.ClaimScope, n int) (*store.DirectBatch, error)

// directBatches are the batches of one 'none' sql channel.
type directBatches struct{ channel string }

func (directBatches) target() time.Duration { return batchTarget }

func (s directBatches) next(int) batchRun {
	return func(ctx context.Context, st *store.Store, scope store.ClaimScope, n int) (*store.DirectBatch, error) {
		return st.RunDirect(ctx, scope, s.channel, n)
	}
}

// goBatches are the batches of one 'none' go channel whose handler was
// registered with HandleTx: its Go function in place of a statement.
type goBatches struct {
	d       *deps
	channel string
}

func (goBatches) target() time.Duration { return batchTarget }

func (s goBatches) next(int) batchRun {
	return func(ctx context.Context, st *store.Store, scope store.ClaimScope, n int) (*store.DirectBatch, error) {
		return st.RunGoDirect(ctx, scope, s.channel, s.d.directGo, n, goDirect(s.d))
	}
}

func (goBatches) done(*store.DirectBatch) bool { return false }

func (directBatches) done(*store.DirectBatch) bool { return false }

// laneBatches are the lane batcher's batches.
type laneBatches struct {
	// after is where the walk over the lanes stands; seen holds lanes its
	// batches took, where batches started alongside a running one begin
	// instead (at random), so they do not all walk past the same held lanes.
	after store.LaneKey
	seen  []store.LaneKey
}

// maxSeenLanes bounds the lane batcher's sample of lanes.
const maxSeenLanes = 1024

func (*laneBatches) target() time.Duration { return laneBatchTarget }

func (s *laneBatches) next(running int) batchRun {
	after := s.after
	if running > 0 && len(s.seen) > 0 {
		after = s.seen[rand.IntN(len(s.seen))]
	}
	return func(ctx context.Context, st *store.Store, scope store.ClaimScope, n int) (*store.DirectBatch, error) {
		return st.RunLanes(ctx, scope, after, n)
	}
}

func (s *laneBatches) done(batch *store.DirectBatch) bool {
	s.after = batch.Last()
	for _, e := range batch.Events {
		k := store.LaneKey{Channel: e.Channel, Lane: e.Lane}
		if len(s.seen) < maxSeenLanes {
			s.seen = append(s.seen, k)
		} else {
			s.seen[rand.IntN(maxSeenLanes)] = k
		}
	}
	// The lanes this batch ran may have their next event ready now.
	return len(batch.Events) > 0
}

func batcherProps(d *deps, key childKey, channel, kind string) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor {
		var src batchSource = directBatches{channel: channel}
		switch {
		case channel == "":
			src = &laneBatches{}
		case kind == "go":
			src = goBatches{d: d, channel: channel}
		}
		return &batcher{d: d, key: key, channel: channel, src: src}
	}, actor.WithSupervisor(supervision(d)))
}

func (b *batcher) Receive(ctx actor.Context) {
	b.d.hook("batcher", ctx.Message())
	switch m := ctx.Message().(type) {
	case *actor.Started:
		b.lastActive = time.Now()
		b.d.metrics.ChannelActors.Inc()
		// A restarted batcher has lost its hint: look again.
		b.credit = 1
		b.fill(ctx)
	case *batchReady:
		b.lastActive = time.Now()
		if p := ctx.Parent(); p != nil {
			ctx.Send(p, &eventEnded{key: b.key})
		}
		// A batch started since the rows were seen has seen them too.
		if m.seen.IsZero() || !b.lastStart.After(m.seen) {
			b.credit = max(b.credit, 1)
			b.fill(ctx)
		}
		if m.hint != "" && b.hint == "" {
			b.hint = m.hint
		}
		b.armOwed = b.armOwed || m.armOwed
		b.settle()
	case *batchDone:
		b.lastActive = time.Now()
		// A batch started before a restart reports to the new instance,
		// which did not count it.
		b.running = max(0, b.running-1)
		b.measure(m)
		b.full = m.err == nil && m.batch != nil && len(m.batch.Events) >= m.requested
		if m.err != nil {
			b.settle()
			b.failures++
			b.d.metrics.DBErrors.WithLabelValues("batch").Inc()
			b.d.log.Error("a batch failed; its events are pending again", "channel", b.channel, "err", m.err,
				"attempt", b.failures)
			self := ctx.Self()
			if b.retry != nil {
				b.retry.Stop()
			}
			b.backingOff = true
			b.retry = time.AfterFunc(backoff(b.failures), func() { b.d.send(self, &batchRetry{}) })
			return
		}
		b.failures = 0
		again := m.batch != nil && b.src.done(m.batch)
		b.credit = creditAfter(b.credit, b.d.cfg.SQLBatchConcurrency, b.full, again, m.started, b.moreAt)
		if b.full || again {
			b.moreAt = time.Now()
		}
		// Nothing reads the batch's events after this (countBatch and the
		// trace ran before it was sent).
		b.d.store.Recycle(m.batch)
		b.fill(ctx)
		b.settle()
	case *batchRetry:
		b.backingOff = false
		b.credit = max(b.credit, 1)
		b.fill(ctx)
	case *drainChildren:
		b.draining = true
		b.full = false
		b.settle()
	case *idleCheck:
		if b.running == 0 && time.Since(b.lastActive) >= b.d.cfg.IdleTimeout {
			ctx.Send(ctx.Parent(), &childIdle{key: b.key})
		}
	case *actor.Restarting, *actor.Stopping:
		if b.retry != nil {
			b.retry.Stop()
		}
		b.full = false
		b.settle()
		if _, restarting := m.(*actor.Restarting); restarting {
			b.d.metrics.ChannelActors.Dec()
		}
	case *actor.Stopped:
		b.d.metrics.ChannelActors.Dec()
	case *actor.Terminated:
	default:
		b.d.log.Warn("batcher: unexpected message", "type", typeName(ctx.Message()), "channel", b.channel)
	}
}

// settle says under the channel's hint whether the batcher drains (its last
// batch came back full and a batch runs, which will find the rows of
// producers that found their slot taken), and asks for the arming left to it
// once it does not.
func (b *batcher) settle() {
	drains := b.full && b.running > 0
	b.d.setDraining(b.hint, drains)
	if b.armOwed && !drains {
		b.armOwed = false
		b.d.askArm()
	}
}

// size is the number of events the next batch asks for: enough to fill
// batchTarget at the measured time per event, within 1..SQLBatch. Until the
// time is measured a batch takes a few events.
func (b *batcher) size() int {
	if b.avg == 0 {
		return min(b.d.cfg.SQLBatch, probeBatch)
	}
	return max(1, min(b.d.cfg.SQLBatch, int(b.src.target()/max(b.avg, time.Microsecond))))
}

// fill starts batches while it has credit and batch slots are free. Until the
// time per event is measured, one batch runs at a time.
func (b *batcher) fill(ctx actor.Context) {
	for b.credit > 0 && !b.draining && !b.backingOff && (b.avg > 0 || b.running == 0) {
		// Batch slots are events: a batch holds all of its events until it
		// commits.
		// Batches beside a running one leave room for other channels.
		keep := 0
		if b.running > 0 {
			keep = batchReserve(b.d.cfg)
		}
		n := b.d.batchSlots.takeUpTo(b.size(), keep)
		if n == 0 {
			// A batch's return, or the claimer once batch slots free up,
			// fills again.
			return
		}
		run := b.src.next(b.running)
		b.running++
		b.credit--
		b.lastStart = time.Now()
		b.d.batches.Add(1)
		go runDirect(b.d, b.channel, run, n, b.lastStart, ctx.Self())
	}
}

// creditAfter is a batcher's credit once a batch started at started came
// back: two more (up to most) when it came back full, the channel likely
// holding more; at least one when its source says rows are likely ready
// again; else none — unless a batch that ran beside it came back with more
// after it started (moreAt): the short one may have found those rows held by
// the other, so its answer keeps the credit the other gave.
func creditAfter(credit, most int, full, again bool, started, moreAt time.Time) int {
	switch {
	case full:
		return min(credit+2, most)
	case again:
		return max(credit, 1)
	case moreAt.After(started):
		return credit
	}
	return 0
}

// batchReserve is how many batch slots a batcher leaves free when it starts
// a batch beside one it runs already: room for a batch of another channel
// without waiting for this channel's backlog. A quarter of the batch slots,
// at most a batch.
func batchReserve(cfg Config) int {
	return max(1, min(cfg.SQLBatch, cfg.SQLBatchConcurrency/4))
}

// countBatch records a finished batch's outcomes in the metrics. It runs in
// the batch's goroutine before the slots are freed: a stopping Processor
// waits for its slots, not for the batcher's mailbox, so counting on the
// batcher's side could miss a batch that committed during the stop.
func countBatch(d *deps, batch *store.DirectBatch, err error) {
	if batch == nil {
		return
	}
	evs := batch.Events
	ran := 0
	// A run of events of one channel and outcome is counted at once: a
	// direct batch holds one channel, its events mostly one outcome.
	for i := 0; i < len(evs); {
		ch, k := evs[i].Channel, recordedKind(evs[i].Outcome)
		j := i + 1
		for j < len(evs) && evs[j].Channel == ch && recordedKind(evs[j].Outcome) == k {
			j++
		}
		d.metrics.Claimed.WithLabelValues(ch).Add(float64(j - i))
		d.metrics.outcomeN(ch, k, j-i) // as recorded: the completion decided what gave up
		if ranHandler(k) {
			ran += j - i
		}
		i = j
	}
	if ran == 0 || err != nil {
		return
	}
	// Each event's share of the handlers' time on the server; the batch's
	// whole time when the committed pipeline ran no handler.
	per := batch.Took / time.Duration(ran)
	if batch.Timed > 0 {
		per = batch.HandlerTime / time.Duration(batch.Timed)
	}
	var obs prometheus.Observer
	var of string // obs's channel
	for i := range evs {
		if !ranHandler(evs[i].Outcome) {
			continue
		}
		if obs == nil || evs[i].Channel != of {
			obs, of = d.metrics.HandlerDuration.WithLabelValues(evs[i].Channel), evs[i].Channel
		}
		obs.Observe(per.Seconds())
	}
}

// recordedKind is the outcome a batch's event is counted under: as
// recorded, or released when the batch recorded nothing of it.
func recordedKind(k events.Kind) events.Kind {
	if k == "" {
		return events.Release
	}
	return k
}

// measure folds a finished batch's time per handler into the average that
// sizes the next batches. The size follows the handlers' own time on the
// server: the claim and the completion cost a batch the same whatever its
// size, and counting them per event would shrink batches the more they cost.
func (b *batcher) measure(m *batchDone) {
	if m.batch == nil || m.err != nil {
		return
	}
	if m.batch.TimingErr != nil {
		b.d.log.Debug("batch timing fell back to wall time", "channel", b.channel, "err", m.batch.TimingErr)
	}
	var handler time.Duration
	switch ran := ranIn(m.batch); {
	case m.batch.Timed > 0:
		handler = m.batch.HandlerTime / time.Duration(m.batch.Timed)
	case ran > 0:
		handler = m.batch.Took / time.Duration(ran)
	default:
		return
	}
	if b.avg == 0 {
		b.avg = max(handler, time.Microsecond)
	} else {
		b.avg = max((b.avg*3+handler)/4, time.Microsecond)
	}
}

// ranIn is how many of a batch's events ran their handler.
func ranIn(batch *store.DirectBatch) int {
	n := 0
	for _, e := range batch.Events {
		if ranHandler(e.Outcome) {
			n++
		}
	}
	return n
}

// ranHandler reports whether a batch's event with outcome k ran its handler.
func ranHandler(k events.Kind) bool {
	return k == events.Succeeded || k == events.Failed || k == events.GaveUp || k == events.Snoozed
}

// runDirect runs one batch of up to n events (of channel: "" for lanes) and
// reports to self. Its n slots are freed before it reports. It never panics.
func runDirect(d *deps, channel string, run batchRun, n int, started time.Time, self *actor.PID) {
	defer d.batches.Done()
	var b *store.DirectBatch
	var err error
	start := time.Now()
	func() {
		defer func() {
			if r := recover(); r != nil {
				d.log.Error("a batch panicked", "channel", channel, "panic", r, "stack", string(debug.Stack()))
				err = fmt.Errorf("batch panicked: %v", r)
			}
		}()
		// RunDirect bounds the batch with a deadline; the run context
		// cancels it at the shutdown timeout.
		ctx, cancel := context.WithCancel(d.runCtx)
		defer cancel()
		b, err = run(ctx, d.store, d.scope(), n)
	}()
	countBatch(d, b, err)
	if err == nil {
		d.tracing.directBatch(d, b, start, time.Now())
	}
	d.batchSlots.free(n)
	d.send(self, &batchDone{requested: n, batch: b, err: err, started: started})
}
