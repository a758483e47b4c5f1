package migrations_test

// Flow control in the claim: priorities, max_in_flight and the rate limit
// (register/update's p_priority, p_max_in_flight, p_rate_limit,
// p_rate_period). An event's own priority is set here by an UPDATE of its
// row after notify(), as a producer's p_priority would store it.

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/testenv"
)

// queueSort: a Sort of the queue's rows themselves (alias q), which would
// read them all first; the claimed rows (u) may be sorted.
var queueSort = regexp.MustCompile(`Sort Key: q(_\d+)?\.`)

// notifyPriority enqueues payloads on channel with priority, in one
// statement.
func (d *sqlDB) notifyPriority(channel string, priority int, payloads ...string) []int64 {
	d.T.Helper()
	return testenv.Column[int64](d.T, d.Pool, "SELECT pgrelay.notify_many($1, $2, p_priority := $3)", channel, payloads, priority)
}

func payloads(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = prefix + strconv.Itoa(i)
	}
	return out
}

// 1 000 low then 10 high events on one channel's backlog, 20 low ones
// already claimed (a running batch) when the high ones commit: the next
// claims take the 10 high ones before any other low one, in every claim path.
func TestSQLClaimTakesHigherPrioritiesFirst(t *testing.T) {
	t.Parallel()
	for _, path := range []string{"claim", "channel", "direct"} {
		t.Run(path, func(t *testing.T) {
			t.Parallel()
			d := newSQLDB(t)
			d.register("c", "")
			d.notifyPriority("c", 0, payloads("low", 1000)...)
			running := claim(t, d.Pool, 1, 20)
			require.Len(t, running, 20)
			high := d.notifyPriority("c", 10, payloads("high", 10)...)
			take := func(n int) []int64 {
				t.Helper()
				switch path {
				case "channel":
					return testenv.Column[int64](t, d.Pool, `SELECT id FROM pgrelay._claim_channel(1, 'single', false, $1, 'c', '{sql}')`, n)
				case "direct":
					// A direct batch's claim locks its rows: mark them as a
					// batch would have run them, to take the next ones.
					got := testenv.Column[int64](t, d.Pool, `SELECT id FROM pgrelay._claim_direct('c', 'single', false, NULL, $1)`, n)
					d.Exec("UPDATE pgrelay.queue SET dispatched_at = now(), dispatched_by = 1 WHERE id = ANY ($1)", got)
					return got
				}
				return ids(claim(t, d.Pool, 1, n))
			}
			first := take(7)
			second := take(7)
			require.Equal(t, high[:7], first, "the high events, oldest first")
			require.Equal(t, high[7:], second[:3])
			low := testenv.Column[int64](t, d.Pool, "SELECT id FROM pgrelay.queue WHERE payload LIKE 'low%' AND id <> ALL ($1) ORDER BY id LIMIT 4", ids(running))
			require.Equal(t, low, second[3:], "then the low ones, oldest first")
		})
	}
}

// Negative priorities run after those of 0; a delayed high event waits for
// its time.
func TestSQLClaimPriorityBands(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("c", "")
	neg := d.notifyPriority("c", -5, "n1", "n2")
	zero := d.notifyPriority("c", 0, "z1")
	later := d.notifyPriority("c", 9, "later")
	d.Exec("UPDATE pgrelay.queue SET not_before = now() + interval '1 hour' WHERE id = $1", later[0])
	pos := d.notifyPriority("c", 3, "p1")
	require.Equal(t, append(append(pos, zero...), neg...), ids(claim(t, d.Pool, 1, 10)))
}

// A serialised lane stays FIFO whatever its events' priorities: priority
// chooses among the lanes' heads.
func TestSQLClaimPriorityKeepsLanesFIFO(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("p", "p_concurrency_mode := 'payload'")
	a1 := d.notifyPriority("p", 0, "a")
	b1 := d.notifyPriority("p", 5, "b")
	a2 := d.notifyPriority("p", 9, "a")
	c1 := d.notifyPriority("p", 1, "c")
	// The heads: a1 (0), b1 (5), c1 (1). a2, of 9, waits behind a1.
	got := claim(t, d.Pool, 1, 2)
	require.Equal(t, []int64{b1[0], c1[0]}, ids(got))
	got = claim(t, d.Pool, 1, 10)
	require.Equal(t, []int64{a1[0]}, ids(got), "lane a's head; a2 waits for it")
	require.Equal(t, 1, complete(t, d.Pool, 1, got[0], "succeeded", ""))
	require.Equal(t, a2, ids(claim(t, d.Pool, 1, 10)))

	d.register("s", "p_concurrency_mode := 'channel'")
	s1 := d.notifyPriority("s", 0, "x")
	d.notifyPriority("s", 9, "y")
	require.Equal(t, s1, ids(claim(t, d.Pool, 1, 10)), "one lane: FIFO")
}

// A channel's default priority orders the claim's visits: its rows come
// first in every claim; equal priorities are visited in a random order.
func TestSQLClaimVisitsChannelsByPriority(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("lo", "")
	d.register("hi", "p_priority := 5")
	d.Exec("SELECT pgrelay.notify_many('lo', ARRAY(SELECT g::text FROM generate_series(1, 200) g))")
	d.Exec("SELECT pgrelay.notify_many('hi', ARRAY(SELECT g::text FROM generate_series(1, 200) g))")
	for range 10 {
		got := claim(t, d.Pool, 1, 4)
		require.Len(t, got, 4)
		require.Equal(t, []string{"hi", "hi", "lo", "lo"},
			[]string{got[0].Channel, got[1].Channel, got[2].Channel, got[3].Channel}, "fair shares, hi visited first")
	}
}

// max_in_flight counts the channel's rows in flight of every Processor, in
// each mode of the channel.
func TestSQLClaimMaxInFlight(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"none", "payload"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			d := newSQLDB(t)
			d.register("c", "p_max_in_flight := 3, p_concurrency_mode := '"+mode+"'")
			d.register("free", "")
			d.Exec("SELECT pgrelay.notify_many('c', ARRAY(SELECT g::text FROM generate_series(1, 50) g))")
			d.Exec("SELECT pgrelay.notify_many('free', ARRAY(SELECT g::text FROM generate_series(1, 50) g))")
			count := func(rows []claimedRow, ch string) int {
				n := 0
				for _, r := range rows {
					if r.Channel == ch {
						n++
					}
				}
				return n
			}
			p1 := claim(t, d.Pool, 1, 2)
			require.Equal(t, 1, count(p1, "c"))
			p2 := claim(t, d.Pool, 2, 40)
			require.Equal(t, 2, count(p2, "c"), "another Processor takes what is left of the limit")
			require.Equal(t, 0, count(claim(t, d.Pool, 3, 40), "c"))
			require.Equal(t, 0, countOf(testenv.Column[string](t, d.Pool,
				"SELECT channel FROM pgrelay._claim_channel(3, 'single', false, 10, 'c', '{sql}')"), "c"))
			var done claimedRow
			for _, r := range p2 {
				if r.Channel == "c" {
					done = r
				}
			}
			require.Equal(t, 1, complete(t, d.Pool, 2, done, "succeeded", ""))
			require.Equal(t, 1, count(claim(t, d.Pool, 3, 10), "c"), "one ended: one more starts")

			// update(p_max_in_flight := 0) removes the limit.
			d.Exec("SELECT pgrelay.update('c', p_max_in_flight := 0)")
			require.Nil(t, testenv.One[*int32](t, d.Pool, "SELECT max_in_flight FROM pgrelay.channels WHERE channel = 'c'"))
			require.Greater(t, count(claim(t, d.Pool, 3, 100), "c"), 3)
		})
	}
}

func countOf[T comparable](xs []T, x T) int {
	n := 0
	for _, y := range xs {
		if y == x {
			n++
		}
	}
	return n
}

// The rate limit counts the claims of its period: rate_limit starts, then
// none until the period has passed since them.
func TestSQLClaimRateLimit(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("r", "p_rate_limit := 5, p_rate_period := '1 hour'")
	d.Exec("SELECT pgrelay.notify_many('r', ARRAY(SELECT g::text FROM generate_series(1, 50) g))")
	got := claim(t, d.Pool, 1, 3)
	require.Len(t, got, 3)
	require.Len(t, claim(t, d.Pool, 2, 10), 2)
	// Ended events still count: the limit is on starts.
	require.Equal(t, 1, complete(t, d.Pool, 1, got[0], "succeeded", ""))
	require.Empty(t, claim(t, d.Pool, 1, 10))
	// A claim that finds the window full, with rows left, says when it has
	// room: a period after the first of the 5 starts (both claims' time here,
	// one transaction's each); _claim_channel too.
	for _, sql := range []string{
		"SELECT id, channel, rate_wait_ms FROM pgrelay._claim(1, 'single', false, 10, '{sql}')",
		"SELECT id, channel, rate_wait_ms FROM pgrelay._claim_channel(1, 'single', false, 10, 'r', '{sql}')",
	} {
		var id *int64
		var channel string
		var wait int64
		require.NoError(t, d.Pool.QueryRow(bg, sql).Scan(&id, &channel, &wait), sql)
		require.Nil(t, id, sql)
		require.Equal(t, "r", channel, sql)
		first := testenv.One[time.Time](t, d.Pool, "SELECT min(started_at) FROM pgrelay.flow_starts WHERE channel = 'r'")
		require.InDelta(t, time.Until(first.Add(time.Hour)).Milliseconds(), wait, 60000, sql)
	}
	// Once the period has passed since the starts, the next ones start.
	d.Exec("UPDATE pgrelay.flow_starts SET started_at = started_at - interval '1 hour'")
	require.Len(t, claim(t, d.Pool, 1, 10), 5)
	d.Exec("UPDATE pgrelay.flow_starts SET started_at = started_at - interval '1 minute' WHERE started_at < now() - interval '1 hour'")
	require.Empty(t, claim(t, d.Pool, 1, 10))
	// A full window without rows left says nothing.
	d.Exec("UPDATE pgrelay.queue SET not_before = now() + interval '3 hours' WHERE channel = 'r' AND dispatched_at IS NULL")
	require.Empty(t, testenv.Column[*int64](t, d.Pool, "SELECT rate_wait_ms FROM pgrelay._claim(1, 'single', false, 10, '{sql}')"))
	d.Exec("UPDATE pgrelay.queue SET not_before = now() WHERE channel = 'r' AND dispatched_at IS NULL")
	require.Equal(t, 1, d.Count("SELECT count(*) FROM pgrelay.flow_starts WHERE channel = 'r'"),
		"the claims older than the period (and a minute) are forgotten")

	d.Exec("SELECT pgrelay.update('r', p_rate_period := '2 hours')")
	require.Equal(t, "5 02:00:00", d.Text("SELECT rate_limit || ' ' || rate_period FROM pgrelay.channels WHERE channel = 'r'"))
	// update(p_rate_limit := 0) removes the limit, its period with it.
	d.Exec("SELECT pgrelay.update('r', p_rate_limit := 0)")
	require.Equal(t, 1, d.Count("SELECT count(*) FROM pgrelay.channels WHERE channel = 'r' AND rate_limit IS NULL AND rate_period IS NULL"))
	require.Len(t, claim(t, d.Pool, 1, 100), 40)
}

// A limited channel is claimed, never run in direct batches (whose locked
// rows no count sees).
func TestSQLLimitedChannelsLeaveDirectBatches(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("lim", "p_max_in_flight := 2")
	d.register("lanes", "p_concurrency_mode := 'payload', p_rate_limit := 10")
	d.register("plain", "")
	for _, ch := range []string{"lim", "lanes", "plain"} {
		d.Exec("SELECT pgrelay.notify_many($1, ARRAY['a', 'b', 'c'])", ch)
	}
	require.Equal(t, []string{"plain"}, testenv.Column[string](t, d.Pool,
		"SELECT channel FROM pgrelay._ready_direct('single', false, '{sql}') WHERE channel <> '' ORDER BY 1"))
	require.Zero(t, d.Count("SELECT count(*) FROM pgrelay._ready_direct('single', false, '{sql}') WHERE channel = ''"))
	require.Empty(t, testenv.Column[int64](t, d.Pool, "SELECT id FROM pgrelay._claim_direct('lim', 'single', false, NULL, 10)"))
	require.Empty(t, testenv.Column[int64](t, d.Pool, "SELECT id FROM pgrelay._claim_lanes_direct('single', false, NULL, 10, NULL, NULL)"))
	got := testenv.Column[string](t, d.Pool, "SELECT channel FROM pgrelay._claim(1, 'single', false, 100, '{sql}', NULL, true, '{}')")
	require.Equal(t, 2, countOf(got, "lim"))
	require.Equal(t, 3, countOf(got, "lanes"))
	require.Zero(t, countOf(got, "plain"), "left to direct batches")
}

// The settings' checks, register's and update's, and create_channel's.
func TestSQLFlowSettings(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	bad := map[string]string{
		"p_priority := 32768":                             "PR009",
		"p_priority := -32769":                            "PR009",
		"p_max_in_flight := -1":                           "PR019",
		"p_rate_limit := -1":                              "PR019",
		"p_rate_limit := 5, p_rate_period := '0'":         "PR019",
		"p_rate_limit := 5, p_rate_period := '-1 second'": "PR019",
		"p_rate_limit := 5, p_rate_period := '2 days'":    "PR019",
		"p_rate_period := '1 second'":                     "PR019",
		"p_rate_limit := 0, p_rate_period := '1 second'":  "PR019",
	}
	for args, code := range bad {
		requireCode(t, d.Err("SELECT pgrelay.register('c', 'SELECT 1', "+args+")"), code, args)
	}
	d.register("c", "p_priority := 32767, p_max_in_flight := 0, p_rate_limit := 7")
	require.Equal(t, "32767 <nil> 7 00:00:01", d.Text(`SELECT priority || ' ' || COALESCE(max_in_flight::text, '<nil>') || ' ' || rate_limit || ' ' || rate_period
		FROM pgrelay.channels WHERE channel = 'c'`), "0 sets no limit; the period defaults to 1 second")
	d.register("c", "p_priority := 32767, p_rate_limit := 7, p_rate_period := '1 second'") // identical: a no-op
	requireCode(t, d.Err("SELECT pgrelay.register('c', 'SELECT length($1)', p_priority := 1)"), "PR003")

	for args, code := range map[string]string{
		"p_priority := 40000":                         "PR009",
		"p_max_in_flight := -2":                       "PR019",
		"p_rate_limit := 0, p_rate_period := '1 min'": "PR019",
		"p_rate_period := '0'":                        "PR019",
	} {
		requireCode(t, d.Err("SELECT pgrelay.update('c', "+args+")"), code, args)
	}
	d.register("n", "")
	requireCode(t, d.Err("SELECT pgrelay.update('n', p_rate_period := '1 minute')"), "PR019", "no rate limit to give a period")
	d.Exec("SELECT pgrelay.update('n', p_priority := -3, p_max_in_flight := 4, p_rate_limit := 9, p_rate_period := '1 minute')")
	require.Equal(t, "-3 4 9 00:01:00", d.Text(`SELECT priority || ' ' || max_in_flight || ' ' || rate_limit || ' ' || rate_period
		FROM pgrelay.channels WHERE channel = 'n'`))
	d.Exec("SELECT pgrelay.update('n', p_paused := false)")
	require.Equal(t, "-3 4 9 00:01:00", d.Text(`SELECT priority || ' ' || max_in_flight || ' ' || rate_limit || ' ' || rate_period
		FROM pgrelay.channels WHERE channel = 'n'`), "NULL keeps each")
	d.Exec("SELECT pgrelay.update('n', p_max_in_flight := 0, p_rate_limit := 0)")
	require.Equal(t, 1, d.Count(`SELECT count(*) FROM pgrelay.channels WHERE channel = 'n'
		AND max_in_flight IS NULL AND rate_limit IS NULL AND rate_period IS NULL`))

	d.Exec(`SELECT pgrelay_notifier.create_channel('mail', 'from@example.com', p_priority := 2,
		p_max_in_flight := 5, p_rate_limit := 100, p_rate_period := '1 minute')`)
	require.Equal(t, "2 5 100 00:01:00", d.Text(`SELECT priority || ' ' || max_in_flight || ' ' || rate_limit || ' ' || rate_period
		FROM pgrelay.channels WHERE channel = 'mail'`))
}

// fillQueue inserts rows straight into the queue with insert, as a replica
// would (its triggers only wake Processors), then analyzes it.
func fillQueue(t *testing.T, d *sqlDB, insert string) {
	t.Helper()
	tx, err := d.Pool.Begin(bg)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(bg) }()
	_, err = tx.Exec(bg, `SET LOCAL session_replication_role = replica`)
	require.NoError(t, err)
	_, err = tx.Exec(bg, insert)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(bg))
	d.Exec("ANALYZE pgrelay.queue")
}

// Each new path of the claim reads a 1 000 000-row queue by its indexes:
// the priorities of a 'none' channel (queue_priority, then queue_ready), the
// heads of a 'payload' channel's lanes with priorities, and the count of a
// limited channel's rows in flight (queue_inflight), in custom and generic
// plans.
func TestExplainFlowClaimPlans(t *testing.T) {
	start := time.Now()
	t.Parallel()
	d := newSQLDB(t)
	d.register("pri", "")
	d.register("lim", "p_max_in_flight := 100000, p_rate_limit := 1000000")
	d.register("pay", "p_concurrency_mode := 'payload'")
	d.register("plain", "")
	fillQueue(t, d, `INSERT INTO pgrelay.queue (id, origin_id, owner_node, channel, payload, lane, priority, not_before,
		dispatched_at, dispatched_by)
	  SELECT g, g, 0, ch, g::text,
	         CASE WHEN ch = 'pay' THEN hashtextextended((g % 5000)::text, 0) END,
	         CASE WHEN ch IN ('pri', 'pay') AND g % 10 = 0 THEN (g % 7) - 3 ELSE 0 END,
	         now() - interval '1 hour' + CASE WHEN g % 13 = 0 THEN interval '2 hours' ELSE interval '0' END,
	         CASE WHEN ch = 'lim' AND g % 49 = 0 THEN now() END,
	         CASE WHEN ch = 'lim' AND g % 49 = 0 THEN g % 4 + 1 END
	    FROM generate_series(1, 1000000) g,
	         LATERAL (SELECT (ARRAY['pri', 'lim', 'pay', 'plain'])[g % 4 + 1] AS ch) c`)
	t.Log("built and analyzed", time.Since(start))
	c := explainedConn(t, d.URL)
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		_, err := c.Exec(bg, "SET plan_cache_mode = "+mode)
		require.NoError(t, err)
		for _, ch := range []string{"pri", "lim", "pay", "pri alone", "lim alone"} {
			channel, alone := strings.CutSuffix(ch, " alone")
			c.plans()
			inTx(t, c.Conn, func(tx pgx.Tx) {
				_, err := tx.Exec(bg, "UPDATE pgrelay.channels SET paused = (channel <> $1)", channel)
				require.NoError(t, err)
				var got []string
				if alone {
					got = testenv.Column[string](t, tx, `SELECT channel FROM pgrelay._claim_channel(9, 'single', false, 20, $1, '{sql}')`, channel)
				} else {
					got = testenv.Column[string](t, tx, `SELECT channel FROM pgrelay._claim(9, 'single', false, 20, '{sql}')`)
				}
				require.NotEmpty(t, got, ch)
			})
			var plans []string
			for _, n := range c.plans() {
				if (strings.Contains(n, "pgrelay.queue") || strings.Contains(n, "pgrelay.flow_starts")) &&
					!strings.Contains(n, "Function Scan on _claim") {
					plans = append(plans, n)
				}
			}
			require.NotEmpty(t, plans, "auto_explain logged the claim's statements")
			t.Log(ch, mode, time.Since(start))
			seen := ""
			for _, plan := range plans {
				require.NotContains(t, plan, "Seq Scan on queue", "%s, %s:\n%s", ch, mode, plan)
				require.NotContains(t, plan, "Seq Scan on flow_starts", "%s, %s:\n%s", ch, mode, plan)
				require.NotContains(t, plan, "Bitmap Heap Scan on queue", "%s, %s:\n%s", ch, mode, plan)
				require.NotRegexp(t, queueSort, plan, "%s, %s: no queue rows sorted:\n%s", ch, mode, plan)
				require.NotRegexp(t, notInlined, plan, "%s, %s: the row rule is inlined", ch, mode)
				seen += plan
			}
			switch channel {
			case "pri":
				require.Contains(t, seen, "queue_priority", ch)
			case "lim":
				require.Contains(t, seen, "queue_inflight", ch)
				require.Contains(t, seen, "flow_starts_channel", ch)
			case "pay":
				require.Contains(t, seen, "queue_priority", ch)
				require.Contains(t, seen, "queue_lane", ch)
			}
		}
	}
}

// The batch claims read a 1 000 000-row queue by its indexes: a direct
// batch of a 'none' channel with a few rows of a priority above 0
// (_claim_direct through _claim_pick: queue_priority, then queue_ready for
// the rest of the batch) and without, and a lane
// batch over serialised channels with priorities (_claim_lanes_direct: the
// heads above and below 0 by queue_priority and queue_lane, the walk by
// queue_lane), from the start and from a place in the walk, in custom and
// generic plans (_claim_direct, and what it calls, plans generically whatever
// the session asks). No plan scans or sorts the queue; the one Sort allowed is
// _claim_direct's of the rows _claim_pick returned (at most its limit),
// which it reads by primary key.
func TestExplainBatchClaimPlans(t *testing.T) {
	start := time.Now()
	t.Parallel()
	d := newSQLDB(t)
	d.register("pri", "")
	d.register("plain", "")
	d.register("ser", "p_concurrency_mode := 'channel'")
	d.register("pay", "p_concurrency_mode := 'payload'")
	fillQueue(t, d, `INSERT INTO pgrelay.queue (id, origin_id, owner_node, channel, payload, lane, priority, not_before,
		dispatched_at, dispatched_by)
	  SELECT g, g, 0, ch, g::text,
	         CASE ch WHEN 'pay' THEN hashtextextended((g % 5000)::text, 0) WHEN 'ser' THEN 0 END,
	         CASE WHEN ch IN ('ser', 'pay') AND g % 10 = 0 THEN (g % 7) - 3
	              WHEN ch = 'pri' AND g % 40000 = 0 THEN 1 + g % 3 ELSE 0 END,
	         now() - interval '1 hour' + CASE WHEN g % 13 = 0 THEN interval '2 hours' ELSE interval '0' END,
	         CASE WHEN ch = 'pay' AND g % 4999 = 0 THEN now() END,
	         CASE WHEN ch = 'pay' AND g % 4999 = 0 THEN 1 END
	    FROM generate_series(1, 1000000) g,
	         LATERAL (SELECT (ARRAY['pri', 'plain', 'ser', 'pay'])[g % 4 + 1] AS ch) c`)
	t.Log("built and analyzed", time.Since(start))
	after := fmt.Sprint(testenv.One[int64](t, d.Pool, "SELECT hashtextextended('2500', 0)"))

	c := explainedConn(t, d.URL)
	claims := []struct{ name, sql string }{
		{"direct pri", `SELECT id FROM pgrelay._claim_direct('pri', 'single', false, NULL, 100)`},
		{"direct plain", `SELECT id FROM pgrelay._claim_direct('plain', 'single', false, NULL, 100)`},
		{"lanes", `SELECT id FROM pgrelay._claim_lanes_direct('single', false, NULL, 100, NULL, NULL)`},
		{"lanes after", `SELECT id FROM pgrelay._claim_lanes_direct('single', false, NULL, 100, 'pay', ` + after + `)`},
	}
	planDuration := regexp.MustCompile(`duration: ([0-9.]+) ms`)
	// The direct batch's last statement: the rows _claim_pick locked, by
	// primary key, in priority order.
	pickSort := regexp.MustCompile(`(?s)Sort Key: q\.priority DESC, q\.not_before, q\.id\n.*Index Scan using queue_pkey on queue q [^\n]*\n\s*Index Cond: \(id = ANY`)
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		_, err := c.Exec(bg, "SET plan_cache_mode = "+mode)
		require.NoError(t, err)
		for _, cl := range claims {
			c.plans()
			inTx(t, c.Conn, func(tx pgx.Tx) {
				require.Len(t, testenv.Column[int64](t, tx, cl.sql), 100, cl.name)
			})
			var plans []string
			for _, n := range c.plans() {
				if strings.Contains(n, "pgrelay.queue") && !strings.Contains(n, "Function Scan on _claim") {
					plans = append(plans, n)
				}
			}
			require.NotEmpty(t, plans, "auto_explain logged the claim's statements")
			slowest := 0.0
			for _, plan := range plans {
				if m := planDuration.FindStringSubmatch(plan); m != nil {
					ms, err := strconv.ParseFloat(m[1], 64)
					require.NoError(t, err)
					slowest = max(slowest, ms)
				}
			}
			t.Logf("%s, %s: %d statements, the slowest %.1f ms (%s)", cl.name, mode, len(plans), slowest, time.Since(start))
			seen := ""
			for _, plan := range plans {
				require.NotContains(t, plan, "Seq Scan on queue", "%s, %s:\n%s", cl.name, mode, plan)
				require.NotContains(t, plan, "Bitmap Heap Scan on queue", "%s, %s:\n%s", cl.name, mode, plan)
				if !pickSort.MatchString(plan) {
					require.NotRegexp(t, queueSort, plan, "%s, %s: no queue rows sorted:\n%s", cl.name, mode, plan)
				}
				require.NotRegexp(t, notInlined, plan, "%s, %s: the row rule is inlined", cl.name, mode)
				seen += plan
			}
			switch cl.name {
			case "direct pri":
				require.Contains(t, seen, "queue_priority", cl.name)
				require.Contains(t, seen, "queue_ready", cl.name)
			case "direct plain":
				require.Contains(t, seen, "queue_ready", cl.name)
			default:
				require.Contains(t, seen, "queue_priority", cl.name)
				require.Contains(t, seen, "queue_lane", cl.name)
			}
		}
	}
}
