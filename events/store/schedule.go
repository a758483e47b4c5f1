package store

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
)

// DueSchedule is a schedule a scheduler pass locked (pgrelay._schedules_due):
// due, or a cron schedule whose first tick is not computed yet.
type DueSchedule struct {
	Name string
	// Cron is the cron expression; nil for an interval schedule, whose ticks
	// the database computes.
	Cron     *string
	Timezone string
	// NextFire is the tick due; nil when a cron schedule's first tick is
	// still to compute (the first after Anchor).
	NextFire *time.Time
	Anchor   time.Time
	// Now is the pass's transaction time, the time each fire of it counts
	// from.
	Now time.Time
}

// CronTick returns the first tick of cron expression expr in time zone
// timezone after after.
type CronTick func(expr, timezone string, after time.Time) (time.Time, error)

// FireSchedules runs one scheduler pass in one transaction: it locks up to
// limit due schedules this node may fire in scope and fires each
// (pgrelay._schedule_fire: the event enqueued and next_fire advanced under
// the row lock), computing cron ticks with tick. A schedule another pass has
// locked is skipped. It returns how many events it enqueued.
func (s *Store) FireSchedules(ctx context.Context, scope ClaimScope, limit int, tick CronTick) (int, error) {
	leader, term := scope.args()
	fired := 0
	err := pgx.BeginFunc(ctx, s.bg, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT name, cron, timezone, next_fire, anchor, now
			FROM pgrelay._schedules_due($1::pg_catalog.text, $2::pg_catalog.bool, $3::pg_catalog.int8, $4::pg_catalog.int4)`,
			scope.Mode, leader, term, limit)
		if err != nil {
			return err
		}
		due, err := pgx.CollectRows(rows, pgx.RowToStructByPos[DueSchedule])
		if err != nil {
			return err
		}
		for _, d := range due {
			var first, next *time.Time
			var why *string
			if d.Cron != nil {
				first, next, why = cronTicks(d, tick)
			}
			var id *int64
			if err := tx.QueryRow(ctx, `SELECT pgrelay._schedule_fire($1::pg_catalog.text, $2::pg_catalog.timestamptz,
				$3::pg_catalog.timestamptz, $4::pg_catalog.text)`, d.Name, first, next, why).Scan(&id); err != nil {
				return fmt.Errorf("schedule %q: %w", d.Name, err)
			}
			if id != nil {
				fired++
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("fire schedules (%s mode): %w", scope.Mode, err)
	}
	return fired, nil
}

// cronTicks computes a due cron schedule's ticks: its first (when not
// computed yet) and the first after the pass's time, or why it cannot.
func cronTicks(d DueSchedule, tick CronTick) (first, next *time.Time, why *string) {
	fail := func(err error) (*time.Time, *time.Time, *string) {
		msg := fmt.Sprintf("cron expression %q in %s: %v", *d.Cron, d.Timezone, err)
		return nil, nil, &msg
	}
	if d.NextFire == nil {
		t, err := tick(*d.Cron, d.Timezone, d.Anchor)
		if err != nil {
			return fail(err)
		}
		first = &t
	}
	t, err := tick(*d.Cron, d.Timezone, d.Now)
	if err != nil {
		return fail(err)
	}
	return first, &t, nil
}

// ScheduleWake returns how long until the next tick this node may fire in
// scope (zero or less: one is due), and false when it may fire none.
func (s *Store) ScheduleWake(ctx context.Context, scope ClaimScope) (time.Duration, bool, error) {
	leader, term := scope.args()
	var secs *float64
	if err := s.bg.QueryRow(ctx, `SELECT pgrelay._schedules_wake($1::pg_catalog.text, $2::pg_catalog.bool, $3::pg_catalog.int8)`,
		scope.Mode, leader, term).Scan(&secs); err != nil {
		return 0, false, fmt.Errorf("read the next schedule tick (%s mode): %w", scope.Mode, err)
	}
	if secs == nil {
		return 0, false, nil
	}
	if *secs > float64(math.MaxInt64/int64(time.Second)) {
		return math.MaxInt64, true, nil
	}
	return time.Duration(*secs * float64(time.Second)), true, nil
}

// Schedule is a row of pgrelay.schedules as `pgrelay stats` shows it.
type Schedule struct {
	Name, Channel string
	// Timing is the interval (PostgreSQL's text) or the cron expression.
	Timing    string
	Cron      bool
	Timezone  string
	Node      int
	NextFire  *time.Time
	Never     bool // a cron expression no date matches (next_fire 'infinity')
	LastFire  *time.Time
	Fires     int64
	LastError *string
}

// Schedules reads pgrelay.schedules by name.
func Schedules(ctx context.Context, q Querier) ([]Schedule, error) {
	rows, err := q.Query(ctx, `SELECT s.name, s.channel, COALESCE(s.every::pg_catalog.text, s.cron), s.cron IS NOT NULL,
		s.timezone, s.node, CASE WHEN pg_catalog.isfinite(s.next_fire) THEN s.next_fire END,
		s.next_fire = 'infinity', s.last_fire, s.fires, s.last_error
		FROM pgrelay.schedules s ORDER BY s.name`)
	if err != nil {
		return nil, fmt.Errorf("read pgrelay.schedules: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Schedule, error) {
		var s Schedule
		var node int32
		var never *bool
		err := r.Scan(&s.Name, &s.Channel, &s.Timing, &s.Cron, &s.Timezone, &node, &s.NextFire, &never,
			&s.LastFire, &s.Fires, &s.LastError)
		s.Node, s.Never = int(node), never != nil && *never
		return s, err
	})
	if err != nil {
		return nil, fmt.Errorf("read pgrelay.schedules: %w", err)
	}
	return out, nil
}
