package actors

import (
	"context"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/pgrelay/pgrelay/events/store"
)

// Messages of the claimer.
type (
	// wake: rows may be ready (NOTIFY, poll, a completion, a rescue). A
	// poll claims into any free slot, however few. channel: a notification
	// named this 'none' channel, claimed by itself (store.ClaimChannel)
	// unless a claim is running (the next, full, claim takes its rows).
	wake struct {
		poll    bool
		channel string
	}
	// slotsFreed: events ended; their slots can be claimed again.
	slotsFreed struct{}
	// batchSlotsFreed: a batch ended; its batch slots are free again.
	batchSlotsFreed struct{}
	// rateReopened: the window of a rate-limited channel a claim left rows
	// of has room again (claimer.rateTimer number seq): claim into any free
	// slot.
	rateReopened struct{ seq uint64 }
	// stopClaiming: stop for good; answered once no claim is in progress.
	stopClaiming struct{}
	// claimResult: a claim query returned.
	claimResult struct {
		rows      []store.Claimed
		ready     []store.Ready // 'none' channels with rows ready for batches; "" for lanes
		requested int
		err       error
		took      time.Duration
		at        time.Time         // when the result arrived: after the ready rows committed
		hints     map[string]string // wake hints of the channels (wake.go)
		// reopens: when the earliest window of the rate-limited channels
		// the claim left rows of has room again (store.RateWait); zero
		// if none.
		reopens time.Time
	}
	stopped struct{}
)

// claimer claims rows when there are free slots: as many as there are slots,
// at most BatchSize per query (pull-based backpressure: nothing is claimed
// that could not start soon). One claim query runs at a time, off the
// actor's mailbox.
type claimer struct {
	d        *deps
	claiming bool
	again    bool
	// wanted: a claim was due but could not run for want of free slots, or
	// the last one came back full: the next freed slots claim. Otherwise
	// freed slots claim nothing: new rows wake the claimer, batchers go on
	// by themselves, and the poll catches the rest.
	wanted   bool
	stopping bool
	// held: the last claim due was held back because the completer has
	// maxPendingOutcomes outcomes to write (logged once per episode).
	held       bool
	waiter     *actor.PID
	failures   int
	stopTick   func()
	retryTimer *time.Timer
	// againAny: the claim due once the running one returns (again) claims
	// into any free slot, as a poll does: a rate window reopened meanwhile.
	againAny bool
	// againBatches: that claim runs even without room, for the channels
	// ready for batches (claimSize's forBatches).
	againBatches bool
	// rateTimer claims when the earliest reported window of a rate-limited
	// channel has room again (rateAt); a claim that reports an earlier one
	// replaces it. rateSeq numbers the timers: a replaced timer's message,
	// sent before it was stopped, is ignored.
	rateTimer *time.Timer
	rateAt    time.Time
	rateSeq   uint64
}

func claimerProps(d *deps) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &claimer{d: d} })
}

func (c *claimer) Receive(ctx actor.Context) {
	c.d.hook("claimer", ctx.Message())
	switch m := ctx.Message().(type) {
	case *actor.Started:
		c.stopTick = ticker(c.d, ctx.Self(), c.d.cfg.PollInterval, func() any { return &wake{poll: true} })
	case *actor.Stopping, *actor.Restarting:
		c.stopTick()
		if c.retryTimer != nil {
			c.retryTimer.Stop()
		}
		c.stopRateTimer()
	case *wake:
		c.maybeClaim(ctx, m.poll, m.poll, m.channel, true)
	case *slotsFreed:
		if c.wanted {
			c.maybeClaim(ctx, false, false, "", false)
		}
	case *batchSlotsFreed:
		// A batcher that found no free batch slot asks for the next ones:
		// the claim tells it its channel's rows are ready.
		if c.d.batchSlots.wasStarved() {
			c.maybeClaim(ctx, false, false, "", true)
		}
	case *rateReopened:
		if m.seq != c.rateSeq || c.rateTimer == nil {
			return // replaced or stopped
		}
		c.rateTimer = nil
		if c.claiming {
			c.again, c.againAny = true, true
			return
		}
		c.maybeClaim(ctx, true, false, "", false)
	case *claimResult:
		c.claiming = false
		c.d.metrics.ClaimLatency.Observe(m.took.Seconds())
		if m.err != nil {
			c.failures++
			c.d.metrics.DBErrors.WithLabelValues("claim").Inc()
			c.d.log.Error("claim failed; retrying", "err", m.err, "attempt", c.failures)
			c.retryLater(ctx)
		} else {
			c.failures = 0
			if len(m.rows) > 0 {
				c.d.slots.take(len(m.rows))
				// One message per event: should the dispatcher fail on one,
				// its supervisor ends exactly that one.
				_, dispatcher, _ := c.d.pids()
				last := lastOfChannels(m.rows)
				for i, row := range m.rows {
					ctx.Send(dispatcher, &dispatchOne{row: row, last: last[row.Channel] == i, hint: m.hints[row.Channel]})
				}
			}
			if len(m.ready) > 0 {
				_, dispatcher, _ := c.d.pids()
				for _, r := range m.ready {
					ctx.Send(dispatcher, &batchReady{channel: r.Channel, kind: r.Kind, seen: m.at, hint: m.hints[r.Channel]})
				}
			}
			if m.requested > 0 && len(m.rows) == m.requested {
				c.again = true // the queue likely holds more
				c.wanted = true
			}
			if !m.reopens.IsZero() {
				c.claimAt(ctx, m.reopens)
			}
		}
		if c.stopping {
			if c.waiter != nil {
				ctx.Send(c.waiter, &stopped{})
				c.waiter = nil
			}
			return
		}
		if c.again && m.err == nil {
			anyFree, forBatches := c.againAny, c.againBatches
			c.again, c.againAny, c.againBatches = false, false, false
			c.maybeClaim(ctx, anyFree, false, "", forBatches)
		}
	case *stopClaiming:
		c.stopping = true
		if c.claiming {
			c.waiter = ctx.Sender()
			return
		}
		ctx.Respond(&stopped{})
	case *actor.Stopped:
	default:
		c.d.log.Warn("claimer: unexpected message", "type", typeName(ctx.Message()))
	}
}

func (c *claimer) retryLater(ctx actor.Context) {
	if c.retryTimer != nil {
		c.retryTimer.Stop()
	}
	self := ctx.Self()
	c.retryTimer = time.AfterFunc(backoff(c.failures), func() { c.d.send(self, &wake{}) })
}

// claimAt has the claimer claim at at (into any free slot), unless a claim
// is due earlier already: a rate-limited channel's window has room again
// then.
func (c *claimer) claimAt(ctx actor.Context, at time.Time) {
	if c.stopping || (c.rateTimer != nil && !at.Before(c.rateAt)) {
		return
	}
	c.stopRateTimer()
	c.rateSeq++
	seq, self := c.rateSeq, ctx.Self()
	c.rateAt = at
	c.rateTimer = time.AfterFunc(time.Until(at), func() { c.d.send(self, &rateReopened{seq: seq}) })
}

func (c *claimer) stopRateTimer() {
	if c.rateTimer != nil {
		c.rateTimer.Stop()
		c.rateTimer = nil
	}
}

// maybeClaim claims if it may (claimSize): into any free slot with anyFree,
// else once claimAtLeast are free; readLimits (a poll) reads the channels'
// max_in_flight again; channel: a 'none' channel claimed alone; forBatches:
// rows for batches may be ready.
func (c *claimer) maybeClaim(ctx actor.Context, anyFree, readLimits bool, channel string, forBatches bool) {
	if c.stopping {
		return
	}
	if c.claiming {
		c.again = true
		c.againBatches = c.againBatches || forBatches
		return
	}
	// The slots live in deps, not here, so a restarted claimer still knows
	// them.
	// While busy, wait until a fair number of slots is free: a claim visits
	// channels whatever it takes home, so claiming slot by slot as events end
	// would cost a claim per event. The poll fills whatever is free, so a
	// slot never stays empty for longer than a poll interval.
	// Back-pressure: while the completer cannot keep up (the database
	// refuses or fails its writes), claiming more would only pile up
	// outcomes. Its next written batch wakes the claimer.
	if pending := c.d.pendingOutcomes.Load(); pending >= maxPendingOutcomes(c.d.cfg) {
		if !c.held {
			c.held = true
			c.d.log.Warn("outcomes are waiting to be written; claiming nothing until the log catches up",
				"pending_outcomes", pending)
		}
		c.wanted = true
		return
	}
	if c.held {
		c.held = false
		c.d.log.Info("outcomes written; claiming again")
	}
	n, run := claimSize(c.d.cfg, c.d.slots.inUse(), c.d.slots.available(), anyFree, c.d.runsBatches(), forBatches)
	c.wanted = n == 0
	if !run {
		return
	}
	if n == 0 {
		channel = "" // the claim of every channel reports the ready ones
	}
	c.claiming = true
	self := ctx.Self()
	d := c.d
	go func() {
		start := time.Now()
		qctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		var rows []store.Claimed
		var ready []store.Ready
		var waits []store.RateWait
		var err error
		if channel != "" {
			rows, waits, err = d.store.ClaimChannel(qctx, d.processor, d.scope(), n, channel, d.kinds, d.direct, d.directGo)
		} else {
			rows, ready, waits, err = d.store.Claim(qctx, d.processor, d.scope(), n, d.kinds, d.direct, d.directGo)
		}
		reopens := reopensAt(time.Now(), waits)
		if err == nil {
			d.tracing.lookup(qctx, d, rows)
		}
		if readLimits || d.flowLimited.Load() == nil {
			d.readFlowLimits(qctx)
		}
		cancel()
		took := time.Since(start)
		var hints map[string]string
		if err == nil {
			hints = d.hintsOf(rows, ready)
		}
		d.send(self, &claimResult{rows: rows, ready: ready, requested: n, err: err, took: took, at: time.Now(), hints: hints,
			reopens: reopens})
	}()
}

// reopensAt is when the earliest of a claim's rate waits ends, the claim
// having answered at answered; zero for none.
func reopensAt(answered time.Time, waits []store.RateWait) time.Time {
	var at time.Time
	for _, w := range waits {
		if t := answered.Add(w.Wait); at.IsZero() || t.Before(at) {
			at = t
		}
	}
	return at
}

// hintsOf is the wake hints of the channels a dispatcher may hear of by
// one: those of a claim's 'none'-mode rows, claimed channel by channel
// when woken, and those with a ready batch.
func (d *deps) hintsOf(rows []store.Claimed, ready []store.Ready) map[string]string {
	var channels []string
	for _, r := range rows {
		if r.Mode == "none" {
			channels = append(channels, r.Channel)
		}
	}
	for _, r := range ready {
		if r.Channel != "" {
			channels = append(channels, r.Channel)
		}
	}
	if len(channels) == 0 {
		return nil
	}
	hints, err := d.hints.of(d.runCtx, d, channels)
	if err != nil {
		d.metrics.DBErrors.WithLabelValues("wake_hint").Inc()
		d.log.Warn("could not read the wake hints; wake-ups of these channels wake the claimer", "err", err)
	}
	return hints
}

// claimSize is how many rows a claim due now takes (n), and whether it runs.
// With room (a free slot for anyFree, else claimAtLeast free or none in use)
// it takes up to BatchSize. Without room a claim of none still runs when the
// Processor runs batches and their rows may be ready (forBatches: a wake, a
// freed batch slot): batches have slots of their own, and the claim reports
// the channels ready for them. A claimed event's end alone runs none: that
// would be a claim per ended event.
func claimSize(cfg Config, inUse, free int, anyFree, batches, forBatches bool) (n int, run bool) {
	if free > 0 && (anyFree || inUse == 0 || free >= claimAtLeast(cfg)) {
		return min(free, cfg.BatchSize), true
	}
	return 0, batches && forBatches
}

// claimAtLeast is how many slots must be free before a busy Processor claims
// again: an eighth of the concurrency, at most a batch.
func claimAtLeast(cfg Config) int {
	return max(1, min(cfg.BatchSize, cfg.Concurrency/8))
}

// lastOfChannels is the index in a claim's rows of each channel's last row
// to run (not expired): the channel actor starts a Go batch once it has it,
// so that the claim's events of a channel run in one batch.
func lastOfChannels(rows []store.Claimed) map[string]int {
	last := make(map[string]int)
	for i, row := range rows {
		if !row.Expired {
			last[row.Channel] = i
		}
	}
	return last
}
