package migrations_test

// The hot statements inside _claim (and notify's and status()'s lookups) use
// their indexes on a large queue: as standalone SQL with literal values and
// with the generic plans PL/pgSQL caches, and inside _claim itself (plans
// captured with auto_explain).

import (
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/testenv"
)

// bigQueue fills a queue the way the planner must not be fooled by: 12 000
// pending rows in each of several channels, a few hundred in flight, many small
// payload lanes and one hot one; then ANALYZE, as autovacuum would.
func bigQueue(t *testing.T) *sqlDB {
	d := newSQLDB(t)
	d.register("none", "")
	d.register("ser", "p_concurrency_mode := 'channel'")
	d.register("pay", "p_concurrency_mode := 'payload'")
	d.register("dd", "p_deduplicate := true")
	d.register("other", "")
	for _, ch := range []string{"none", "ser", "pay", "dd", "other"} {
		testenv.Column[int64](t, d.Pool, "SELECT pgrelay.notify_many($1, array_agg((g % 3000)::text)) FROM generate_series(1, 12000) g", ch)
	}
	testenv.Column[int64](t, d.Pool, "SELECT pgrelay.notify_many('pay', array_agg('hot'::text)) FROM generate_series(1, 5000) g")
	d.Exec(`UPDATE pgrelay.queue SET dispatched_at = now(), dispatched_by = 1
		WHERE id IN (SELECT id FROM pgrelay.queue WHERE channel = 'other' ORDER BY id LIMIT 500)`)
	d.Exec("ANALYZE pgrelay.queue")
	return d
}

var fullSort = regexp.MustCompile(`(?m)^\s*(->\s*)?Sort\s+\(`)

// notInlined finds pgrelay._may_take called in a plan's conditions, or
// pgrelay._lane_head scanned as a function: the planner inlines both
// (LANGUAGE sql without SET clauses), so a plan shows their queries, never
// the calls.
var notInlined = regexp.MustCompile(`(?m)^\s*(Filter|Index Cond|Join Filter|Recheck Cond):.*_may_take|Function Scan on _lane_head`)

func TestExplainHotStatementsUseIndexes(t *testing.T) {
	t.Parallel()
	d := bigQueue(t)
	// c runs the claim's statements with _claim's settings, o the others.
	c, o := d.Conn(-1), d.Conn(-1)
	explainOn := func(q querier, sql string) string {
		t.Helper()
		return strings.Join(testenv.Column[string](t, q, "EXPLAIN "+sql), "\n")
	}
	explain := func(sql string) string { t.Helper(); return explainOn(c, sql) }
	requireIndex := func(plan, index string) {
		t.Helper()
		require.Contains(t, plan, index, plan)
		require.NotContains(t, plan, "Seq Scan", plan)
	}
	// The claim's statements read their rows in index order: no Sort that
	// would read a whole channel or lane first.
	requireOrdered := func(plan, index string) {
		t.Helper()
		requireIndex(plan, index)
		require.NotRegexp(t, fullSort, plan)
		require.NotContains(t, plan, "Bitmap Heap Scan", plan)
		require.NotRegexp(t, notInlined, plan, "the row rule is inlined")
	}

	const cand = `SELECT q.id FROM pgrelay.queue q
		 WHERE q.channel = %[1]s AND q.dispatched_at IS NULL AND q.not_before <= now()
		   AND pgrelay._may_take(q.run_in_node, q.owner_node, %[2]s, %[3]s, %[4]s)
		 ORDER BY q.not_before, q.id
		 LIMIT %[5]s
		 FOR UPDATE SKIP LOCKED`
	const head = `SELECT h.id FROM pgrelay._lane_head(%[1]s, %[2]s, %[3]s, %[4]s, %[5]s) h`
	const lanes = `SELECT q.lane FROM pgrelay.queue q
		 WHERE q.channel = %s AND q.dispatched_at IS NULL AND q.lane IS NOT NULL AND q.lane > %s
		 ORDER BY q.lane LIMIT 1`
	const dedup = `SELECT q.id, q.origin_id, q.attempt FROM pgrelay.queue q
		 WHERE q.channel = %s AND q.phash = %s AND q.dispatched_at IS NULL AND q.payload = %s
		   AND (NOT %s OR q.run_in_node = %s)
		 ORDER BY q.origin_id LIMIT 1`
	const status = `SELECT q.attempt FROM pgrelay.queue q
		 WHERE (q.id = %[1]s AND q.origin_id = %[1]s) OR (q.origin_id = %[1]s AND q.retry_of IS NOT NULL)
		 ORDER BY q.attempt DESC LIMIT 1`
	someID := testenv.One[int64](t, d.Pool, "SELECT max(id) FROM pgrelay.queue WHERE channel = 'none'")
	small := fmt.Sprint(testenv.One[int64](t, d.Pool, "SELECT hashtextextended('7', 0)"))
	hot := fmt.Sprint(testenv.One[int64](t, d.Pool, "SELECT hashtextextended('hot', 0)"))

	// The settings _claim runs its statements with (SET clauses of the function).
	for _, kv := range testenv.Column[string](t, c, "SELECT unnest(proconfig) FROM pg_proc WHERE oid = 'pgrelay._claim'::regproc") {
		k, v, _ := strings.Cut(kv, "=")
		_, err := c.Exec(bg, "SELECT set_config($1, $2, false)", k, v)
		require.NoError(t, err)
	}

	// With literals (custom plans).
	requireOrdered(explain(fmt.Sprintf(cand, "'none'", "0", "true", "false", "10")), "queue_ready")
	requireOrdered(explain(fmt.Sprintf(cand, "'none'", "0", "false", "true", "500")), "queue_ready")
	requireOrdered(explain(fmt.Sprintf(head, "'ser'", "0", "0", "true", "false")), "queue_lane")
	requireOrdered(explain(fmt.Sprintf(head, "'pay'", small, "0", "true", "false")), "queue_lane")
	requireOrdered(explain(fmt.Sprintf(head, "'pay'", hot, "0", "true", "false")), "queue_lane")
	requireOrdered(explain(fmt.Sprintf(lanes, "'pay'", "-9000000000000000000")), "queue_lane")
	requireIndex(explainOn(o, fmt.Sprintf(dedup, "'dd'", small, "'7'", "false", "0")), "queue_dedup")
	plan := explainOn(o, fmt.Sprintf(status, fmt.Sprint(someID)))
	requireIndex(plan, "queue_pkey")
	require.Contains(t, plan, "queue_retry_origin")

	// Generic plans, as PL/pgSQL reuses them: parameters instead of literals.
	for _, q := range []querier{c, o} {
		_, err := q.Exec(bg, "SET plan_cache_mode = force_generic_plan")
		require.NoError(t, err)
	}
	prepare := func(q querier, name, sql string) {
		t.Helper()
		_, err := q.Exec(bg, "PREPARE "+name+" AS "+sql)
		require.NoError(t, err, sql)
	}
	prepare(c, "cand(text, int, bool, bool, int)", fmt.Sprintf(cand, "$1", "$2", "$3", "$4", "$5"))
	prepare(c, "head(text, bigint, int, bool, bool)", fmt.Sprintf(head, "$1", "$2", "$3", "$4", "$5"))
	prepare(c, "lanes(text, bigint)", fmt.Sprintf(lanes, "$1", "$2"))
	prepare(o, "dedup(text, bigint, text, bool, int)", fmt.Sprintf(dedup, "$1", "$2", "$3", "$4", "$5"))
	prepare(o, "status(bigint)", fmt.Sprintf(status, "$1"))
	requireOrdered(explain("EXECUTE cand('none', 0, true, false, 10)"), "queue_ready")
	requireOrdered(explain("EXECUTE cand('none', 0, false, true, 100)"), "queue_ready")
	requireOrdered(explain("EXECUTE head('ser', 0, 0, true, false)"), "queue_lane")
	requireOrdered(explain("EXECUTE head('pay', "+hot+", 0, true, false)"), "queue_lane")
	requireOrdered(explain("EXECUTE lanes('pay', 0)"), "queue_lane")
	requireIndex(explainOn(o, "EXECUTE dedup('dd', "+small+", '7', false, 0)"), "queue_dedup")
	plan = explainOn(o, fmt.Sprintf("EXECUTE status(%d)", someID))
	requireIndex(plan, "queue_pkey")
	require.Contains(t, plan, "queue_retry_origin")
}

// explained is a session whose statements' plans, nested ones included,
// auto_explain sends it as notices.
type explained struct {
	*pgx.Conn
	mu      sync.Mutex
	notices []string
}

func explainedConn(t *testing.T, url string) *explained {
	t.Helper()
	e := &explained{}
	cfg, err := pgx.ParseConfig(url)
	require.NoError(t, err)
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		e.mu.Lock()
		e.notices = append(e.notices, n.Message)
		e.mu.Unlock()
	}
	e.Conn, err = pgx.ConnectConfig(bg, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Close(bg) })
	for _, s := range []string{
		"LOAD 'auto_explain'",
		"SET auto_explain.log_min_duration = 0",
		"SET auto_explain.log_nested_statements = on",
		"SET auto_explain.log_level = notice",
		"SET client_min_messages = notice",
	} {
		_, err := e.Exec(bg, s)
		require.NoError(t, err, s)
	}
	return e
}

// explainedGenericConn is explainedConn with generic plans only and
// analyzed plans logged.
func explainedGenericConn(t *testing.T, url string) *explained {
	t.Helper()
	c := explainedConn(t, url)
	for _, s := range []string{"SET plan_cache_mode = force_generic_plan", "SET auto_explain.log_analyze = on"} {
		_, err := c.Exec(bg, s)
		require.NoError(t, err, s)
	}
	return c
}

// plans returns the plans logged since the last call.
func (e *explained) plans() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	p := e.notices
	e.notices = nil
	return p
}

// The plans _claim (and _claim_channel, for a 'none' channel) really runs,
// custom and generic, captured by auto_explain (as notices) on a large queue.
func TestExplainClaimPlans(t *testing.T) {
	t.Parallel()
	d := bigQueue(t)
	c := explainedConn(t, d.URL)

	// claimOnly claims from channel alone (the others paused), with
	// _claim, or with _claim_channel when alone.
	claimOnly := func(channel, planMode string, alone bool) []string {
		t.Helper()
		_, err := c.Exec(bg, "SET plan_cache_mode = "+planMode)
		require.NoError(t, err)
		c.plans()
		inTx(t, c.Conn, func(tx pgx.Tx) {
			_, err := tx.Exec(bg, "UPDATE pgrelay.channels SET paused = (channel <> $1)", channel)
			require.NoError(t, err)
			var got []claimedRow
			if alone {
				rows, err := tx.Query(bg, `SELECT id, origin_id, channel, payload, attempt, dispatched_at, expired
					FROM pgrelay._claim_channel(1, 'single', false, 20, $1, '{sql}')`, channel)
				require.NoError(t, err)
				got, err = pgx.CollectRows(rows, pgx.RowToStructByPos[claimedRow])
				require.NoError(t, err)
			} else {
				got = claim(t, tx, 1, 20)
			}
			require.NotEmpty(t, got, channel)
			for _, g := range got {
				require.Equal(t, channel, g.Channel)
			}
		})
		var plans []string
		for _, n := range c.plans() {
			// The probe for rows of another priority (_claim_prioritised)
			// reads queue_priority alone: it is not the claim's scan.
			if strings.Contains(n, "q.priority <> 0") && strings.Contains(n, "using queue_priority on queue") {
				continue
			}
			// Nor is the list of channels with rows pending
			// (_pending_channels), from queue_ready alone.
			if strings.Contains(n, "WITH RECURSIVE pc(channel)") {
				require.Contains(t, n, "Index Only Scan using queue_ready on queue", n)
				require.NotContains(t, n, "Seq Scan", n)
				continue
			}
			if strings.Contains(n, "pgrelay.queue") && !strings.Contains(n, "Function Scan on _claim") {
				plans = append(plans, n)
			}
		}
		require.NotEmpty(t, plans, "auto_explain logged the claim's statements")
		return plans
	}
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		for _, ch := range []string{"none", "ser", "pay", "none alone"} {
			channel, alone := strings.CutSuffix(ch, " alone")
			for _, plan := range claimOnly(channel, mode, alone) {
				require.NotContains(t, plan, "Seq Scan on queue", "%s, %s:\n%s", ch, mode, plan)
				require.NotContains(t, plan, "Bitmap Heap Scan on queue", "%s, %s:\n%s", ch, mode, plan)
				require.NotRegexp(t, `Sort Key: q(_\d+)?\.origin_id`, plan, "%s, %s: the lane is sorted:\n%s", ch, mode, plan)
				require.NotRegexp(t, notInlined, plan, "%s, %s: the row rule is inlined", ch, mode)
				switch channel {
				case "none":
					require.Contains(t, plan, "queue_ready", "%s, %s:\n%s", ch, mode, plan)
				default:
					require.Contains(t, plan, "queue_lane", "%s, %s:\n%s", ch, mode, plan)
				}
			}
		}
	}
}

// The claim and _complete reach their rows by the queue's indexes, also with
// the plans PL/pgSQL cached while the queue was nearly empty (a Processor
// that starts idle) and then runs against a large queue, dead rows included
// between autovacuum's visits: a sequential scan there read the whole queue
// for every claim and every batch of outcomes.
func TestExplainCompletePlans(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("c", "")
	d.register("other", "")
	testenv.Column[int64](t, d.Pool, "SELECT pgrelay.notify_many('c', ARRAY['a', 'b', 'c', 'd', 'e', 'f'])")
	d.Exec("ANALYZE pgrelay.queue")
	// Analyzed plans say whether a statement was compiled (JIT).
	c := explainedGenericConn(t, d.URL)
	// A success beside a release, then a failure (whose retry goes back
	// into the queue), then a direct batch of successes (its own statement).
	end := func() []string {
		t.Helper()
		inTx(t, c.Conn, func(tx pgx.Tx) {
			rows := claim(t, tx, 1, 2)
			require.Len(t, rows, 2)
			require.Equal(t, 2, completeAll(t, tx, 1, outcome{c: rows[0], event: "succeeded"}, outcome{c: rows[1], event: "release"}))
			rows = claim(t, tx, 1, 2)
			require.NotEmpty(t, rows)
			msg := "boom"
			require.Equal(t, 1, completeAll(t, tx, 1, outcome{c: rows[0], event: "failed", err: &msg}))
			ids := testenv.Column[int64](t, tx, "SELECT id FROM pgrelay._claim_direct('c', 'single', false, NULL, 2)")
			require.Len(t, ids, 2)
			require.Equal(t, 2, testenv.One[int](t, tx, "SELECT pgrelay._complete(NULL, $1, NULL, '{succeeded,succeeded}', NULL)", ids))
		})
		var plans []string
		for _, p := range c.plans() {
			// A statement the settings leave no plan but a disabled
			// one (a table without a usable index) is costed high
			// enough for JIT, which compiled it on every call.
			require.NotContains(t, p, "JIT:", p)
			if strings.Contains(p, "on queue q") {
				plans = append(plans, p)
			}
		}
		require.NotEmpty(t, plans, "auto_explain logged the completion's statements")
		return plans
	}
	end() // the plans are made on the small queue
	testenv.Column[int64](t, d.Pool, "SELECT pgrelay.notify_many('other', array_agg(g::text)) FROM generate_series(1, 20000) g")
	deletes := 0
	for _, plan := range end() {
		require.NotContains(t, plan, "Seq Scan on queue", plan)
		if strings.Contains(plan, "Delete on queue") {
			require.Contains(t, plan, "queue_pkey", plan)
			deletes++
		}
	}
	require.Equal(t, 3, deletes, "the three completions' deletes were logged")
}

// inFlight registers channel c with n events, a Processor that claimed a
// thousand of them (as `pgrelay run` has in flight), and the queue analyzed
// with them; it returns the Processor and its claims.
func inFlight(t *testing.T, d *sqlDB, n int) (proc int64, rows []claimedRow) {
	t.Helper()
	d.register("c", "")
	testenv.Column[int64](t, d.Pool, "SELECT pgrelay.notify_many('c', array_agg(g::text)) FROM generate_series(1, $1) g", n)
	proc = startProcessor(t, d.Pool)
	rows = claim(t, d.Pool, proc, 1000)
	require.Len(t, rows, 1000)
	d.Exec("ANALYZE pgrelay.queue")
	return proc, rows
}

// The completion is planned once per session, not at every call: a claimed
// event's failure runs the general statement (its retries, dead letters
// and cancels), which PostgreSQL planned anew for every call with the
// call's values (a custom plan; TestExplainCompletePlans checks the generic
// one) — about 3 ms of planning for one event's completion, against 0.4 ms
// to run it. The plan logged at the seventh call, after the plan cache's
// five custom plans, uses the parameters: a generic plan.
func TestCompletionPlannedOnce(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	proc, rows := inFlight(t, d, 2000)
	c := explainedConn(t, d.URL)
	var last []string
	for i := range 7 {
		inTx(t, c.Conn, func(tx pgx.Tx) {
			require.Equal(t, 1, complete(t, tx, proc, rows[i], "failed", "boom"))
		})
		last = nil
		for _, p := range c.plans() {
			if strings.Contains(p, "Delete on queue") {
				last = append(last, p)
			}
		}
	}
	require.Len(t, last, 1, "the completion's delete was logged")
	filter := ""
	for _, line := range strings.Split(last[0], "\n") {
		if strings.Contains(line, "Filter:") && strings.Contains(line, "dispatched_by") {
			filter = strings.TrimSpace(line)
		}
	}
	require.Contains(t, filter, "CASE WHEN ($1 IS NULL)", "a generic plan keeps the processor a parameter")
}

// A claimed event's success (a transaction per event's _succeed, a batch of
// Go Handle or NATS outcomes) takes a statement that only deletes its rows and
// logs them, as a direct batch's successes do: the general statement's
// retries, dead letters and cancels cost about 200 µs a call to start and run
// for one event, three times the work itself. Its delete reaches each row by
// its id, also with a thousand claims of the processor in flight: a guard the
// planner could match to queue_inflight walked every claim of the processor
// and rescanned the ids for each. A claim taken back is still refused.
func TestClaimedSuccessOnlyDeletesAndLogs(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	proc, rows := inFlight(t, d, 3000)
	c := explainedGenericConn(t, d.URL)
	check := func(what string, f func(tx pgx.Tx)) {
		t.Helper()
		c.plans()
		inTxCommit(t, c.Conn, f)
		deletes := 0
		for _, p := range c.plans() {
			for _, general := range []string{"on dead_letters", "Insert on queue", "on cancels"} {
				require.NotContains(t, p, general, "%s ran the general statement:\n%s", what, p)
			}
			if strings.Contains(p, "Delete on queue") {
				require.Contains(t, p, "queue_pkey", "%s:\n%s", what, p)
				require.NotContains(t, p, "queue_inflight", "%s:\n%s", what, p)
				require.NotContains(t, p, "Rescan", "%s:\n%s", what, p)
				deletes++
			}
		}
		require.Equal(t, 1, deletes, "%s: one delete", what)
	}
	for i := range 3 { // the last with the plan cached
		check("_succeed", func(tx pgx.Tx) {
			_, err := tx.Exec(bg, "SELECT pgrelay._succeed($1, $2, $3)", proc, rows[i].ID, rows[i].DispatchedAt)
			require.NoError(t, err)
		})
	}
	check("a batch", func(tx pgx.Tx) {
		require.Equal(t, 3, completeAll(t, tx, proc, outcome{c: rows[3], event: "succeeded"},
			outcome{c: rows[4], event: "succeeded"}, outcome{c: rows[5], event: "succeeded"}))
	})
	require.Equal(t, 6, d.Count("SELECT count(*) FROM pgrelay.log WHERE event = 'succeeded' AND queue_id = ANY($1)",
		[]int64{rows[0].ID, rows[1].ID, rows[2].ID, rows[3].ID, rows[4].ID, rows[5].ID}))

	// Another processor's claim, another claim time, a row done already: none applies.
	moved := rows[6]
	moved.DispatchedAt = moved.DispatchedAt.Add(-time.Microsecond)
	require.Zero(t, completeAll(t, d.Pool, proc+1, outcome{c: rows[6], event: "succeeded"}))
	require.Zero(t, completeAll(t, d.Pool, proc, outcome{c: moved, event: "succeeded"}, outcome{c: rows[0], event: "succeeded"}))
	_, err := d.Pool.Exec(bg, "SELECT pgrelay._succeed($1, $2, $3)", proc, moved.ID, moved.DispatchedAt)
	requireCode(t, err, "PR030")
	require.Equal(t, 1, d.Count("SELECT count(*) FROM pgrelay.queue WHERE id = $1 AND dispatched_by = $2", rows[6].ID, proc))
}

// _succeed, a transaction per event, reaches the completion through
// PL/pgSQL, whose statements keep their plans for the session, and not
// through the SQL function _complete, whose body PostgreSQL parses and plans
// again in every transaction (10–20 µs an event).
func TestSucceedCallsNoSQLFunction(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("c", "")
	d.notify("c", "x")
	proc := startProcessor(t, d.Pool)
	rows := claim(t, d.Pool, proc, 1)
	require.Len(t, rows, 1)
	c := d.Conn(-1)
	inTxCommit(t, c, func(tx pgx.Tx) {
		_, err := tx.Exec(bg, "SET LOCAL track_functions = 'all'")
		require.NoError(t, err)
		_, err = tx.Exec(bg, "SELECT pgrelay._succeed($1, $2, $3)", proc, rows[0].ID, rows[0].DispatchedAt)
		require.NoError(t, err)
		called := testenv.Column[string](t, tx, `SELECT f.funcname::text FROM pg_catalog.pg_stat_xact_user_functions f
			WHERE f.schemaname = 'pgrelay' AND f.calls > 0 ORDER BY 1`)
		require.Contains(t, called, "_complete_outcomes")
		for _, f := range called {
			var lang string
			require.NoError(t, tx.QueryRow(bg, `SELECT l.lanname::text FROM pg_catalog.pg_proc p
				JOIN pg_catalog.pg_language l ON l.oid = p.prolang JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
				WHERE n.nspname = 'pgrelay' AND p.proname = $1`, f).Scan(&lang))
			require.NotEqual(t, "sql", lang, "_succeed called the SQL function %s", f)
		}
	})
	d.requireStatus(rows[0].ID, "succeeded")
}

// The claim too: a claimed channel's claim, planned anew at every call with
// its values, took about twice as long as with the generic plan that
// TestExplainClaimPlans checks beside the custom one.
func TestClaimPlannedOnce(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	proc, _ := inFlight(t, d, 2000)
	requireClaimPlannedOnce(t, explainedConn(t, d.URL), func(tx pgx.Tx) {
		require.Len(t, claim(t, tx, proc, 2), 2)
	})
}

// requireClaimPlannedOnce runs claim on c seven times, each in its own
// transaction, and requires the index scan of the last one's plan (after
// the plan cache's five custom plans) to keep the channel a parameter: a
// generic plan.
func requireClaimPlannedOnce(t *testing.T, c *explained, claim func(tx pgx.Tx)) {
	t.Helper()
	var cond string
	for range 7 {
		inTx(t, c.Conn, claim)
		cond = ""
		for _, p := range c.plans() {
			for _, line := range strings.Split(p, "\n") {
				if strings.Contains(line, "Index Cond:") && strings.Contains(line, "channel =") {
					cond = strings.TrimSpace(line)
				}
			}
		}
	}
	require.NotEmpty(t, cond, "the claim's index scan was logged")
	require.Regexp(t, `channel = (ANY \()?\$\d+`, cond, "a generic plan keeps the channel a parameter")
}

// And the direct batch's claim: planned anew at every batch with the
// batch's values, it cost about 0.3 ms of planning a batch; the generic plan
// is the one TestExplainBatchClaimPlans checks.
func TestClaimDirectPlannedOnce(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("c", "")
	testenv.Column[int64](t, d.Pool, "SELECT pgrelay.notify_many('c', array_agg(g::text)) FROM generate_series(1, 2000) g")
	d.Exec("ANALYZE pgrelay.queue")
	requireClaimPlannedOnce(t, explainedConn(t, d.URL), func(tx pgx.Tx) {
		require.Len(t, testenv.Column[int64](t, tx,
			"SELECT id FROM pgrelay._claim_direct('c', 'single', false, NULL, 2)"), 2)
	})
}

// A batch of successes — nearly every batch — deletes its rows and logs
// them without reading their channels: only a failure needs the channel's
// attempts, a retry its delay, a dead letter its kind.
func TestExplainCompleteReadsChannelsForFailuresOnly(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("c", "")
	testenv.Column[int64](t, d.Pool, "SELECT pgrelay.notify_many('c', array_agg(g::text)) FROM generate_series(1, 40) g")
	c := explainedGenericConn(t, d.URL)
	// completion is the analyzed plan of the statement that deletes the
	// claimed rows, completed with event.
	completion := func(event string) string {
		t.Helper()
		c.plans()
		inTx(t, c.Conn, func(tx pgx.Tx) {
			rows := claim(t, tx, 1, 10)
			require.Len(t, rows, 10)
			outs := make([]outcome, len(rows))
			msg := "boom"
			for i, r := range rows {
				outs[i] = outcome{c: r, event: event}
				if event == "failed" {
					outs[i].err = &msg
				}
			}
			require.Equal(t, len(rows), completeAll(t, tx, 1, outs...))
		})
		for _, p := range c.plans() {
			if strings.Contains(p, "Delete on queue") {
				return p
			}
		}
		require.Fail(t, "auto_explain logged no completion")
		return ""
	}
	channelScans := regexp.MustCompile(`(?m)^.* on channels c\w*\s.*$`)
	for range 3 { // the plan made on the first call, then reused
		plan := completion("succeeded")
		for _, scan := range channelScans.FindAllString(plan, -1) {
			require.Contains(t, scan, "(never executed)", "a success read its channel:\n%s", plan)
		}
	}
	// Not vacuous: failures read it.
	plan := completion("failed")
	require.Regexp(t, `on channels c\w*\s.*actual time`, plan)
}

// The rescue, once a heartbeat on one of the Processor's background
// connections, is planned once per session: with custom plans each of a
// connection's first five calls spent about 3.6 ms planning its statement
// (against under 1 ms to run it), a burst of CPU every second while the
// background connections took turns. Its generic plan reaches the claims in
// flight by queue_inflight, with the dead instances' ids a parameter.
func TestRescuePlannedOnce(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("c", "")
	// A backlog, and a Processor's claims in flight in it.
	testenv.Column[int64](t, d.Pool, "SELECT pgrelay.notify_many('c', array_agg(g::text)) FROM generate_series(1, 20000) g")
	proc := startProcessor(t, d.Pool)
	require.Len(t, claim(t, d.Pool, proc, 100), 100)
	d.Exec("ANALYZE pgrelay.queue")
	c := explainedConn(t, d.URL)
	require.Equal(t, []int32{0}, testenv.Column[int32](t, c.Conn, "SELECT pgrelay._rescue($1, '10 s', '1 min')", proc))
	var held string
	for _, p := range c.plans() {
		if strings.Contains(p, "WITH held AS") {
			held = p
		}
	}
	require.NotEmpty(t, held, "the rescue's statement was logged")
	require.Contains(t, held, "Index Scan using queue_inflight on queue q ", held)
	require.Regexp(t, `dispatched_by = ANY \(\$\d+\)`, held, "the first call's plan is the generic one: the dead instances a parameter")
}

// The lane claims reach each head by the primary key, also with the plans
// PL/pgSQL cached while the queue was nearly empty (a Processor that starts
// idle) and then run against a large queue: a plan that read queue_ready for
// every lane and filtered on the head's id would read every ready row once
// per lane.
func TestExplainLaneClaimPlansFromASmallQueue(t *testing.T) {
	t.Parallel()
	for _, prio := range []bool{false, true} {
		t.Run(fmt.Sprintf("priorities=%v", prio), func(t *testing.T) {
			t.Parallel()
			requireLaneClaimPlansFromASmallQueue(t, prio)
		})
	}
}

// requireLaneClaimPlansFromASmallQueue caches the lane claims' plans on a
// small queue, with rows of a priority above 0 or without, then runs them
// on a large one.
func requireLaneClaimPlansFromASmallQueue(t *testing.T, prio bool) {
	d := newSQLDB(t)
	d.register("ser", "p_concurrency_mode := 'channel'")
	d.register("pay", "p_concurrency_mode := 'payload'")
	d.Exec("SELECT pgrelay.notify_many('pay', ARRAY['a', 'b', 'c', 'd'])")
	d.Exec("SELECT pgrelay.notify_many('ser', ARRAY['a', 'b'])")
	prioritise := func() {
		if prio {
			d.Exec("UPDATE pgrelay.queue SET priority = 1 WHERE channel = 'pay' AND id % 7 = 0")
		}
	}
	prioritise()
	d.Exec("ANALYZE pgrelay.queue")
	proc := startProcessor(t, d.Pool)
	c := explainedGenericConn(t, d.URL)
	claims := func() []string {
		t.Helper()
		c.plans()
		inTx(t, c.Conn, func(tx pgx.Tx) {
			require.NotEmpty(t, testenv.Column[int64](t, tx, "SELECT id FROM pgrelay._claim_lanes_direct('single', false, NULL, 100, NULL, NULL)"))
		})
		inTx(t, c.Conn, func(tx pgx.Tx) {
			require.NotEmpty(t, claim(t, tx, proc, 100))
		})
		return c.plans()
	}
	claims() // the plans are made on the small queue
	d.Exec("SELECT pgrelay.notify_many('pay', array_agg(g::text)) FROM generate_series(1, 20000) g")
	prioritise()
	plans := claims()
	require.NotEmpty(t, plans)
	for _, plan := range plans {
		require.NotContains(t, plan, "Seq Scan on queue", plan)
		require.NotRegexp(t, `Join Filter: \(\w+\.id = \w+\.id\)`, plan, plan)
		require.NotRegexp(t, `Index Scan using queue_\w+ on queue \w+ .*\n\s+Filter: [^\n]*\bid = `, plan, plan)
	}
}
