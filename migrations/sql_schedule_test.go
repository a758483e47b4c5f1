package migrations_test

// Periodic events: pgrelay.schedule(), unschedule(), the schedules view, and
// the scheduler's functions (_schedules_due, _schedule_fire): checks at
// schedule() time, the cron grammar against the library the Processor
// computes with, one fire per tick, one catch-up fire after a downtime.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/robfig/cron/v3"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/prcodes"
	"github.com/pgrelay/pgrelay/internal/testenv"
)

// cronError is pgrelay._cron_error(expr): "" when the expression is accepted.
func cronError(t *testing.T, q querier, expr string) string {
	t.Helper()
	why := testenv.One[*string](t, q, "SELECT pgrelay._cron_error($1)", expr)
	if why == nil {
		return ""
	}
	return *why
}

// What schedule() accepts as a cron expression the library parses, and the
// library's laxities are refused: the SQL check is never wider than
// cron.ParseStandard, so no Processor meets an expression it cannot compute.
func TestScheduleCronGrammarWithinTheLibrary(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	accepted := []string{
		"* * * * *", "0 3 * * *", "*/15 * * * *", "0 9-17/2 * * mon-fri", "30 4 1,15 * *",
		"0 0 1 jan *", "0 0 * * SUN", "5/10 * * * *", "0 12 ? * ?", "0-59/7 0-23 1-31 1-12 0-6",
		" 1  2\t3 4 5 ", "0 0 29 feb *", "@yearly", "@annually", "@monthly", "@weekly", "@daily",
		"@midnight", "@hourly", "0 0 * DEC sat", "00 07 * * *",
	}
	for _, e := range accepted {
		require.Empty(t, cronError(t, d.Pool, e), "%q", e)
		_, err := cron.ParseStandard(e)
		require.NoError(t, err, "the library parses %q", e)
	}
	// Refused by both.
	both := []string{
		"", "* * * *", "* * * * * *", "60 * * * *", "* 24 * * *", "* * 0 * *", "* * 32 * *",
		"* * * 13 *", "* * * * 7", "5-1 * * * *", "*/0 * * * *", "x * * * *", "* * * * mon-sun",
		"@reboot", "@Daily", "1-2-3 * * * *", "1/2/3 * * * *", "* * * jan-foo *",
		"99999999999 * * * *",
	}
	for _, e := range both {
		require.NotEmpty(t, cronError(t, d.Pool, e), "%q", e)
		_, err := cron.ParseStandard(e)
		require.Error(t, err, "the library refuses %q", e)
	}
	// Refused here, parsed by the library: its laxities, and what a
	// schedule's other arguments give.
	for _, e := range []string{"@every 1h", "1,,2 * * * *", ",5 * * * *", "*-5 * * * *", "+5 * * * *", "TZ=UTC 0 3 * * *",
		"CRON_TZ=Europe/Paris 0 3 * * *", "* * * * * \n", "0 3 * * 1\u00a0"} {
		require.NotEmpty(t, cronError(t, d.Pool, e), "%q", e)
	}

	// Generated expressions from the grammar's pieces: every one accepted
	// here, the library parses; and each refused here that the library
	// parses is one of the laxities above.
	// Good in every field, and the rest.
	good := []string{"*", "?", "1", "5", "1-5", "*/2", "3/4", "2-6/3", "06"}
	atoms := []string{"0", "7", "12", "31", "59", "60", "5-1", "1-10/3", "jan", "mon", "tue-fri", "0/0", "", "-",
		"1-", "*/x", "007", "*-2", "1,", "jan-mar/2"}
	r := rand.New(rand.NewPCG(1, 2))
	exprs := make([]string, 0, 2000)
	for range 2000 {
		fields := make([]string, 5)
		for i := range fields {
			items := make([]string, 1+r.IntN(2))
			for j := range items {
				if r.IntN(10) < 8 {
					items[j] = good[r.IntN(len(good))]
				} else {
					items[j] = atoms[r.IntN(len(atoms))]
				}
			}
			fields[i] = strings.Join(items, ",")
		}
		exprs = append(exprs, strings.Join(fields, " "))
	}
	rows, err := d.Pool.Query(bg, "SELECT e, pgrelay._cron_error(e) IS NULL FROM unnest($1::text[]) e", exprs)
	require.NoError(t, err)
	type verdict struct {
		Expr string
		OK   bool
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[verdict])
	require.NoError(t, err)
	nOK := 0
	for _, v := range got {
		_, perr := cron.ParseStandard(v.Expr)
		if v.OK {
			nOK++
			require.NoError(t, perr, "accepted here, refused by the library: %q", v.Expr)
		} else if perr == nil {
			// strings.Fields drops empty fields, FieldsFunc empty items.
			require.True(t, strings.Contains(v.Expr, ",,") || strings.HasPrefix(v.Expr, ",") ||
				strings.Contains(v.Expr, " ,") || strings.Contains(v.Expr, ", ") || strings.HasSuffix(v.Expr, ",") ||
				strings.Contains(v.Expr, "  ") || strings.HasPrefix(v.Expr, " ") || strings.HasSuffix(v.Expr, " ") ||
				strings.Contains(v.Expr, "*-") || strings.Contains(v.Expr, "?-"),
				"refused here, parsed by the library, and not one of its laxities: %q (%s)", v.Expr,
				cronError(t, d.Pool, v.Expr))
		}
	}
	require.Greater(t, nOK, 100, "the generated expressions include valid ones")
}

// schedule() refuses what it cannot fire, when it is called.
func TestScheduleRefusesInvalidArguments(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("c", "")
	for _, c := range []struct {
		args string
		code string
	}{
		{"'', 'c', 'p', p_every := '1 minute'", prcodes.InvalidScheduleName},
		{"'a b', 'c', 'p', p_every := '1 minute'", prcodes.InvalidScheduleName},
		{"NULL, 'c', 'p', p_every := '1 minute'", prcodes.InvalidScheduleName},
		{"'s', 'nope', 'p', p_every := '1 minute'", prcodes.UnknownChannel},
		{"'s', 'c', NULL, p_every := '1 minute'", prcodes.NullPayload},
		{"'s', 'c', 'p'", prcodes.InvalidScheduleTiming},
		{"'s', 'c', 'p', p_every := '1 minute', p_cron := '* * * * *'", prcodes.InvalidScheduleTiming},
		{"'s', 'c', 'p', p_every := '0.5 seconds'", prcodes.InvalidEvery},
		{"'s', 'c', 'p', p_every := '-1 hour'", prcodes.InvalidEvery},
		{"'s', 'c', 'p', p_every := '1 day -1 hour'", prcodes.InvalidEvery},
		{"'s', 'c', 'p', p_every := '1 month -3 days'", prcodes.InvalidEvery},
		{"'s', 'c', 'p', p_cron := '61 * * * *'", prcodes.InvalidCron},
		{"'s', 'c', 'p', p_cron := '@every 1m'", prcodes.InvalidCron},
		{"'s', 'c', 'p', p_cron := '0 3 * *'", prcodes.InvalidCron},
		{"'s', 'c', 'p', p_every := '1 hour', p_timezone := 'Mars/Olympus'", prcodes.InvalidTimezone},
		{"'s', 'c', 'p', p_cron := '0 3 * * *', p_timezone := NULL", prcodes.InvalidTimezone},
		{"'s', 'c', 'p', p_cron := '0 3 * * *', p_timezone := 'UTC+3'", prcodes.InvalidTimezone},
	} {
		_, err := d.Pool.Exec(bg, "SELECT pgrelay.schedule("+c.args+")")
		requireCode(t, err, c.code, c.args)
	}
	require.Zero(t, testenv.One[int64](t, d.Pool, "SELECT count(*) FROM pgrelay.schedules"))
}

// A schedule again with the same name changes it; its ticks stay where they
// were while its timing is the same. unschedule() removes it.
func TestScheduleChangeAndUnschedule(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("c", "")
	d.register("other", "")
	d.Exec("SELECT pgrelay.schedule('tick', 'c', 'p1', p_every := '1 hour')")
	type sched struct {
		Channel, Payload string
		Every, Cron      *string
		Timezone         string
		Node             int
		NextIn           *string
	}
	read := func() sched {
		rows, err := d.Pool.Query(bg, `SELECT channel, payload, every::text, cron, timezone, node,
			(next_fire - updated_at)::text FROM pgrelay.schedules WHERE name = 'tick'`)
		require.NoError(t, err)
		s, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByPos[sched])
		require.NoError(t, err)
		return s
	}
	hour := "01:00:00"
	require.Equal(t, sched{Channel: "c", Payload: "p1", Every: &hour, Timezone: "UTC", NextIn: &hour}, read())
	next := testenv.One[time.Time](t, d.Pool, "SELECT next_fire FROM pgrelay.schedules WHERE name = 'tick'")

	// The same timing: the next tick stays (a deployment script may run
	// schedule() again at each release).
	d.Exec("SELECT pgrelay.schedule('tick', 'other', 'p2', p_every := '1 hour')")
	s := read()
	require.Equal(t, "other", s.Channel)
	require.Equal(t, "p2", s.Payload)
	require.True(t, next.Equal(testenv.One[time.Time](t, d.Pool, "SELECT next_fire FROM pgrelay.schedules WHERE name = 'tick'")))

	// Another timing counts from now; a cron schedule's first tick is the
	// Processor's to compute.
	d.Exec("SELECT pgrelay.schedule('tick', 'c', 'p3', p_cron := '0 3 * * *', p_timezone := 'Europe/Paris')")
	cronExpr := "0 3 * * *"
	require.Equal(t, sched{Channel: "c", Payload: "p3", Cron: &cronExpr, Timezone: "Europe/Paris"}, read())
	require.Equal(t, int64(1), testenv.One[int64](t, d.Pool, "SELECT count(*) FROM pgrelay.schedules"))

	require.True(t, testenv.One[bool](t, d.Pool, "SELECT pgrelay.unschedule('tick')"))
	require.False(t, testenv.One[bool](t, d.Pool, "SELECT pgrelay.unschedule('tick')"))
	require.Zero(t, testenv.One[int64](t, d.Pool, "SELECT count(*) FROM pgrelay.schedules"))
}

// Admins schedule; producers and the Processor's role may not; viewers read
// the view.
func TestScheduleRoles(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("c", "")
	admin := d.loginAs("admin", "pgrelay_admin")
	_, err := admin.Exec(bg, "SELECT pgrelay.schedule('a', 'c', 'p', p_every := '1 hour')")
	require.NoError(t, err)
	for _, who := range []string{"pgrelay_producer", "pgrelay_processor", "pgrelay_viewer"} {
		c := d.loginAs(strings.TrimPrefix(who, "pgrelay_"), who)
		requireCode(t, execErr(c, "SELECT pgrelay.schedule('b', 'c', 'p', p_every := '1 hour')"), insufficientPrivilege, who)
		requireCode(t, execErr(c, "SELECT pgrelay.unschedule('a')"), insufficientPrivilege, who)
	}
	viewer := d.loginAs("viewer2", "pgrelay_viewer")
	var n int
	require.NoError(t, viewer.QueryRow(bg, "SELECT count(*) FROM pgrelay.schedules").Scan(&n))
	require.Equal(t, 1, n)
	require.NoError(t, admin.QueryRow(bg, "SELECT count(*) FROM pgrelay.schedules WHERE created_by = current_user").Scan(&n))
	require.Equal(t, 1, n)
}

// fireDue runs one scheduler pass in one transaction, as the Processor's
// scheduler does (single mode), with the cron ticks given: first for a
// schedule whose first tick is not computed, next for the tick after now.
// It returns the ids of the events fired.
func fireDue(t *testing.T, q interface {
	Begin(context.Context) (pgx.Tx, error)
}, first, next *time.Time) []int64 {
	t.Helper()
	tx, err := q.Begin(bg)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(bg) }()
	names := testenv.Column[string](t, tx, "SELECT name FROM pgrelay._schedules_due('single', false, NULL, 100)")
	var fired []int64
	for _, n := range names {
		if id := testenv.One[*int64](t, tx, "SELECT pgrelay._schedule_fire($1, $2, $3, NULL)", n, first, next); id != nil {
			fired = append(fired, *id)
		}
	}
	require.NoError(t, tx.Commit(bg))
	return fired
}

// A tick fires once, in the transaction that advances next_fire; after a
// downtime of many ticks a schedule fires once and continues from the first
// tick after now. A second pass in progress skips the locked schedule and,
// once the first commits, finds it advanced.
func TestScheduleFiresOncePerTickAndCatchesUpOnce(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("c", "")
	d.Exec("SELECT pgrelay.schedule('s', 'c', 'tick', p_every := '1 minute')")
	require.Empty(t, fireDue(t, d.Pool, nil, nil), "not due yet")
	// 10 minutes and a half of downtime.
	d.Exec("UPDATE pgrelay.schedule_defs SET anchor = anchor - interval '630 seconds', next_fire = next_fire - interval '630 seconds'")
	anchor := testenv.One[time.Time](t, d.Pool, "SELECT anchor FROM pgrelay.schedule_defs")

	a, b := d.Conn(-1), d.Conn(-1)
	txA, err := a.Begin(bg)
	require.NoError(t, err)
	require.Equal(t, []string{"s"}, testenv.Column[string](t, txA, "SELECT name FROM pgrelay._schedules_due('single', false, NULL, 100)"))
	id := testenv.One[*int64](t, txA, "SELECT pgrelay._schedule_fire('s', NULL, NULL, NULL)")
	require.NotNil(t, id)
	require.Empty(t, fireDue(t, b, nil, nil), "locked by the pass in progress")
	txB, err := b.Begin(bg)
	require.NoError(t, err)
	require.NoError(t, txA.Commit(bg))
	require.Empty(t, testenv.Column[string](t, txB, "SELECT name FROM pgrelay._schedules_due('single', false, NULL, 100)"),
		"a pass that began before the fire committed sees it advanced")
	require.NoError(t, txB.Rollback(bg))

	require.Equal(t, int64(1), testenv.One[int64](t, d.Pool, "SELECT count(*) FROM pgrelay.queue WHERE channel = 'c'"))
	type after struct {
		Ticks     float64
		Fires     int64
		LastEvent int64
	}
	rows, err := d.Pool.Query(bg, `SELECT date_part('epoch', next_fire - $1) / 60, fires, last_event FROM pgrelay.schedules`, anchor)
	require.NoError(t, err)
	got, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByPos[after])
	require.NoError(t, err)
	require.Equal(t, after{Ticks: 11, Fires: 1, LastEvent: *id}, got, "one catch-up fire; the next tick is the 11th")
	require.Empty(t, fireDue(t, d.Pool, nil, nil))
}

// A cron schedule: the Processor gives its first tick (computed from the
// anchor) and the tick after now; a tick that never comes (the library
// finds none) leaves it at 'infinity' with the error.
func TestScheduleCronTicksFromTheProcessor(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("c", "")
	d.Exec("SELECT pgrelay.schedule('s', 'c', 'p', p_cron := '0 3 * * *')")
	later := time.Now().Add(time.Hour)
	require.Empty(t, fireDue(t, d.Pool, &later, nil), "the first tick, in an hour")
	require.True(t, later.Truncate(time.Microsecond).Equal(testenv.One[time.Time](t, d.Pool, "SELECT next_fire FROM pgrelay.schedules")))
	d.Exec("UPDATE pgrelay.schedule_defs SET next_fire = now() - interval '1 day'")
	next := time.Now().Add(2 * time.Hour)
	require.Len(t, fireDue(t, d.Pool, nil, &next), 1)
	require.True(t, next.Truncate(time.Microsecond).Equal(testenv.One[time.Time](t, d.Pool, "SELECT next_fire FROM pgrelay.schedules")))
	// A channel unregistered meanwhile: the tick passes, with the error.
	d.Exec("UPDATE pgrelay.schedule_defs SET next_fire = now() - interval '1 second', channel = 'gone'")
	require.Empty(t, fireDue(t, d.Pool, nil, &next))
	require.Contains(t, testenv.One[string](t, d.Pool, "SELECT last_error FROM pgrelay.schedules"), "SQLSTATE PR001")
	require.Equal(t, int64(1), testenv.One[int64](t, d.Pool, "SELECT fires FROM pgrelay.schedules"))
}

// An interval of days or months ticks on the schedule's time zone's wall
// clock: across a daylight saving change, '1 day' keeps the time of day.
func TestEveryNextOnTheWallClock(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	for _, c := range []struct{ anchor, every, tz, after, want string }{
		{"2026-03-28 09:00+01", "1 day", "Europe/Paris", "2026-03-29 09:30+02", "2026-03-30 09:00+02"},
		{"2026-03-28 09:00+01", "1 day", "UTC", "2026-03-29 09:30+02", "2026-03-29 08:00+00"},
		{"2026-01-31 00:00+00", "1 month", "UTC", "2026-02-15 00:00+00", "2026-02-28 00:00+00"},
		{"2026-01-31 00:00+00", "1 month", "UTC", "2027-01-01 00:00+00", "2027-01-31 00:00+00"},
		{"2026-01-01 00:00+00", "1 second", "UTC", "2026-01-01 00:00:09.5+00", "2026-01-01 00:00:10+00"},
		{"2026-01-01 00:00+00", "1 second", "UTC", "2026-01-01 00:00:10+00", "2026-01-01 00:00:11+00"},
		{"2026-01-01 00:00+00", "90 minutes", "UTC", "2025-12-01 00:00+00", "2026-01-01 01:30+00"},
		{"2020-01-01 00:00+00", "1 day 1 hour", "UTC", "2026-01-01 00:00+00", "2026-01-01 17:00+00"},
	} {
		got := testenv.One[bool](t, d.Pool, "SELECT pgrelay._every_next($1::timestamptz, $2::interval, $3, $4::timestamptz) = $5::timestamptz",
			c.anchor, c.every, c.tz, c.after, c.want)
		require.True(t, got, fmt.Sprintf("%+v: %s", c, testenv.One[string](t, d.Pool,
			"SELECT pgrelay._every_next($1::timestamptz, $2::interval, $3, $4::timestamptz)::text", c.anchor, c.every, c.tz, c.after)))
	}
}

// The schedule functions' parameters, as SPEC.md names them (callers pass
// them by name).
func TestScheduleSignaturesMatchSpec(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	require.Equal(t, "p_name text, p_channel text, p_payload text, p_every interval, p_cron text, p_timezone text",
		identityArgs(t, d.Pool, "pgrelay.schedule"))
	args := arguments(t, d.Pool, "pgrelay.schedule")
	require.Equal(t, "interval DEFAULT NULL::interval", args["p_every"])
	require.Equal(t, "text DEFAULT NULL::text", args["p_cron"])
	require.Equal(t, "text DEFAULT 'UTC'::text", args["p_timezone"])
	require.Equal(t, "p_name text", identityArgs(t, d.Pool, "pgrelay.unschedule"))
	require.Equal(t, []string{"name", "channel", "payload", "every", "cron", "timezone", "anchor", "node", "next_fire",
		"last_due", "last_fire", "last_event", "fires", "last_error", "created_by", "created_at", "updated_at"},
		testenv.Column[string](t, d.Pool, `SELECT attname::text FROM pg_attribute
			WHERE attrelid = 'pgrelay.schedules'::regclass AND attnum > 0 ORDER BY attnum`))
}
