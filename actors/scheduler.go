package actors

import (
	"context"
	"errors"
	"fmt"
	"time"
	// The time zones of pgrelay.schedule(), whatever the host has installed.
	_ "time/tzdata"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/robfig/cron/v3"

	"github.com/pgrelay/pgrelay/events/store"
)

// Messages of the scheduler.
type (
	scheduleTick   struct{}
	scheduleResult struct {
		fired int
		// wait: until the next tick this node may fire; none: it may fire
		// none now.
		wait time.Duration
		none bool
		err  error
	}
)

// scheduleLimit bounds the schedules one pass fires: one transaction holds
// their row locks, so a pass stays short; the next pass follows at once.
const scheduleLimit = 100

// scheduler fires the periodic events of pgrelay.schedules this node may
// fire (the claim's scope: any in single mode, the leader's in leader mode,
// the node's own in multi-node mode, none while the node rejoins). It wakes
// at the next tick it knows of, and at least every PollInterval to see
// schedules made or changed meanwhile. Each fire is one transaction that
// enqueues the event and advances the schedule under its row lock
// (store.FireSchedules): two Processors never fire the same tick.
type scheduler struct {
	d     *deps
	busy  bool
	timer *time.Timer
}

func schedulerProps(d *deps) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &scheduler{d: d} })
}

func (s *scheduler) Receive(ctx actor.Context) {
	s.d.hook("scheduler", ctx.Message())
	switch m := ctx.Message().(type) {
	case *actor.Started:
		ctx.Send(ctx.Self(), &scheduleTick{})
	case *actor.Stopping, *actor.Restarting:
		s.stopTimer()
	case *scheduleTick:
		if s.busy {
			return
		}
		s.busy = true
		self := ctx.Self()
		d := s.d
		scope := d.scope()
		d.work.Add(1)
		go func() {
			defer d.work.Done()
			d.send(self, scheduleOnce(d, scope))
		}()
	case *scheduleResult:
		s.busy = false
		s.handle(ctx, m)
	case *actor.Stopped:
	default:
		s.d.log.Warn("scheduler: unexpected message", "type", typeName(ctx.Message()))
	}
}

// scheduleOnce reads when the next tick is due and, when one is, fires what
// is due and reads again.
func scheduleOnce(d *deps, scope store.ClaimScope) *scheduleResult {
	sctx, cancel := context.WithTimeout(d.runCtx, max(d.cfg.PollInterval, 5*time.Second))
	defer cancel()
	r := &scheduleResult{}
	for range 2 {
		wait, ok, err := d.store.ScheduleWake(sctx, scope)
		if err != nil {
			r.err = err
			return r
		}
		r.wait, r.none = wait, !ok
		if !ok || wait > 0 {
			return r
		}
		n, err := d.store.FireSchedules(sctx, scope, scheduleLimit, cronTick)
		r.fired += n
		if err != nil {
			r.err = err
			return r
		}
	}
	return r
}

func (s *scheduler) handle(ctx actor.Context, m *scheduleResult) {
	d := s.d
	wait := d.cfg.PollInterval
	if m.err != nil {
		if d.runCtx.Err() == nil {
			d.metrics.DBErrors.WithLabelValues("schedule").Inc()
			d.log.Error("firing schedules failed", "err", m.err)
		}
	} else if !m.none {
		wait = min(max(m.wait, 0), wait)
	}
	if m.fired > 0 {
		d.log.Debug("fired schedules", "events", m.fired)
	}
	s.stopTimer()
	self := ctx.Self()
	s.timer = time.AfterFunc(wait, func() { d.send(self, &scheduleTick{}) })
}

func (s *scheduler) stopTimer() {
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
}

// errNeverMatches: a cron expression no time matches (as 30 February).
var errNeverMatches = errors.New("the expression matches no time in the next five years")

// cronTick is the first tick of cron expression expr on timezone's wall
// clock after after (robfig/cron/v3's standard parser: pgrelay.schedule()
// accepted the expression with a grammar no wider than it).
func cronTick(expr, timezone string, after time.Time) (time.Time, error) {
	sched, err := cron.ParseStandard(expr)
	if err != nil {
		return time.Time{}, fmt.Errorf("parse: %w", err)
	}
	loc, err := time.LoadLocation(timezone)
	if err != nil {
		return time.Time{}, fmt.Errorf("time zone: %w", err)
	}
	t := sched.Next(after.In(loc))
	if t.IsZero() {
		return time.Time{}, errNeverMatches
	}
	return t, nil
}
