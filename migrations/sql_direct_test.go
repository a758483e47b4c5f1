package migrations_test

// Direct batches: _claim_direct locks ready rows of a 'none' sql
// channel for the caller's transaction, _complete with a NULL processor
// records the outcomes of the rows it holds, _ready_direct lists the channels
// with rows ready, and _next_ids hands out a batch of ids.

import (
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/testenv"
)

func TestDirectClaimAndComplete(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("d", "")
	d.register("ser", "p_concurrency_mode := 'channel'")
	for i := range 5 {
		d.notify("d", string(rune('a'+i)))
	}
	d.notify("ser", "x")
	require.Equal(t, []string{"d", ""}, testenv.Column[string](t, d.Pool, "SELECT * FROM pgrelay._ready_direct('single', false)"),
		"the 'none' sql channel by name, the serialised ones as ''")
	a, b := d.Conn(0), d.Conn(0)
	// Two transactions lock disjoint rows, oldest first.
	var first, second []int64
	tx, err := a.Begin(bg)
	require.NoError(t, err)
	first = testenv.Column[int64](t, tx, "SELECT id FROM pgrelay._claim_direct('d', 'single', false, NULL, 3)")
	require.Len(t, first, 3)
	inTx(t, b, func(tx2 pgx.Tx) {
		second = testenv.Column[int64](t, tx2, "SELECT id FROM pgrelay._claim_direct('d', 'single', false, NULL, 10)")
		require.Len(t, second, 2, "locked rows are skipped")
	})
	require.Less(t, first[2], second[0])
	// Nothing is written to claim: the rows look pending.
	require.Equal(t, 5, d.Count("SELECT count(*) FROM pgrelay.queue WHERE channel = 'd' AND dispatched_at IS NULL"))
	require.Equal(t, 3, testenv.One[int](t, tx, `SELECT pgrelay._complete(NULL, $1, NULL,
		ARRAY['succeeded', 'failed', 'expired'], ARRAY[NULL, 'boom', NULL])`, first))
	require.NoError(t, tx.Commit(bg))
	require.Equal(t, 3, d.Count("SELECT count(*) FROM pgrelay.log WHERE event IN ('succeeded', 'failed', 'expired')"))
	require.Equal(t, 1, d.Count("SELECT count(*) FROM pgrelay.queue WHERE retry_of = $1 AND attempt = 2", first[1]),
		"the failed event is retried")
	require.Equal(t, "boom", testenv.One[string](t, d.Pool, "SELECT error FROM pgrelay.log WHERE queue_id = $1", first[1]))

	// A claimed row (classic claim) is never completed as a direct one.
	proc := startProcessor(t, d.Pool)
	claimed := claim(t, d.Pool, proc, 10, "sql")
	require.NotEmpty(t, claimed)
	require.Zero(t, testenv.One[int](t, d.Pool, `SELECT pgrelay._complete(NULL, $1, NULL,
		array_fill('succeeded'::text, ARRAY[cardinality($1::bigint[])]), NULL)`, ids(claimed)))
	require.Empty(t, testenv.Column[int64](t, d.Pool, "SELECT id FROM pgrelay._claim_direct('d', 'single', false, NULL, 10)"),
		"claimed rows are not direct rows")
}

func TestDirectClaimRules(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("d", "")
	d.register("p", "p_node_restricted := true")
	n1 := d.Conn(1)
	_, err := n1.Exec(bg, "SELECT pgrelay.notify('d', 'from-1'), pgrelay.notify('p', 'pinned-1')")
	require.NoError(t, err)
	d.notify("d", "from-0")
	claimOn := func(node int, mode string, leader bool, channel string) []string {
		c := d.Conn(node)
		var got []string
		inTx(t, c, func(tx pgx.Tx) {
			got = testenv.Column[string](t, tx, "SELECT payload FROM pgrelay._claim_direct($1, $2, $3, NULL, 10)", channel, mode, leader)
		})
		return got
	}
	require.ElementsMatch(t, []string{"from-0", "from-1"}, claimOn(0, "single", false, "d"))
	require.Equal(t, []string{"from-1"}, claimOn(1, "multi-node", false, "d"), "multi-node: own rows only")
	require.Empty(t, claimOn(2, "leader", false, "d"), "leader mode: only the leader takes unrestricted rows")
	require.Len(t, claimOn(2, "leader", true, "d"), 2)
	require.Equal(t, []string{"pinned-1"}, claimOn(1, "leader", false, "p"), "pinned rows run on their node")
	require.Empty(t, claimOn(0, "single", false, "p"), "and nowhere else")
	// A stale term gets pinned rows only.
	require.Empty(t, testenv.Column[string](t, d.Pool, "SELECT payload FROM pgrelay._claim_direct('d', 'leader', true, 42, 10)"))
	// A paused channel is not batched.
	d.Exec("UPDATE pgrelay.channels SET paused = true WHERE channel = 'd'")
	require.Empty(t, claimOn(0, "single", false, "d"))
	require.Empty(t, testenv.Column[string](t, d.Pool, "SELECT * FROM pgrelay._ready_direct('single', false)"))
	// Every claim knows the same modes (_claim_scope).
	requireCode(t, d.Err("SELECT * FROM pgrelay._claim_direct('d', 'cluster', false, NULL, 1)"), "PR021")
	requireCode(t, d.Err("SELECT * FROM pgrelay._claim_lanes_direct('cluster', false, NULL, 1, NULL, NULL)"), "PR021")
	requireCode(t, d.Err("SELECT * FROM pgrelay._ready_direct(NULL, false)"), "PR021")
}

func TestNextIDsBatch(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	got := testenv.Column[int64](t, d.Pool, "SELECT unnest(pgrelay._next_ids(5000))")
	require.Len(t, got, 5000)
	for i := 1; i < len(got); i++ {
		require.Greater(t, got[i], got[i-1])
	}
	after := testenv.One[int64](t, d.Pool, "SELECT pgrelay._next_id()")
	require.Greater(t, after, got[len(got)-1])
	require.Empty(t, testenv.Column[int64](t, d.Pool, "SELECT unnest(pgrelay._next_ids(0))"))
	n1 := d.Conn(7)
	id := testenv.One[int64](t, n1, "SELECT (pgrelay._next_ids(3))[2]")
	require.EqualValues(t, 7, (id>>12)&1023, "the node id is in the id")
}

// A row a direct batch holds may be running its handler: a notify of the
// same payload on a deduplicating channel gets a row of its own, while an
// unlocked pending row still absorbs it.
func TestDirectDedupSkipsBatchRows(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("dd", "p_deduplicate := true")
	first := d.notify("dd", "x")
	a := d.Conn(0)
	inTx(t, a, func(tx pgx.Tx) {
		require.Equal(t, []int64{first}, testenv.Column[int64](t, tx, "SELECT id FROM pgrelay._claim_direct('dd', 'single', false, NULL, 10)"))
		second := d.notify("dd", "x")
		require.NotEqual(t, first, second, "the batch's row absorbed a new notify")
		require.Equal(t, second, d.notify("dd", "x"), "a pending row absorbs the same payload")
		require.Equal(t, 1, d.Count("SELECT count(*) FROM pgrelay.log WHERE event = 'deduplicated'"))
	})
	// The batch rolled back: the first row is pending again and absorbs.
	require.Equal(t, first, d.notify("dd", "x"))
	require.Equal(t, 2, d.Count("SELECT count(*) FROM pgrelay.queue WHERE channel = 'dd'"))
}

// Lane batches: _claim_lanes_direct takes the head of each serialised lane,
// one row per lane, never a lane's second row, and holds the lanes for its
// transaction.
func TestDirectClaimLanes(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("c1", "p_concurrency_mode := 'channel'")
	d.register("c2", "p_concurrency_mode := 'channel'")
	d.register("p", "p_concurrency_mode := 'payload'")
	d.register("n", "")
	for _, ch := range []string{"c1", "c2"} {
		for i := range 3 {
			d.notify(ch, fmt.Sprintf("%s-%d", ch, i))
		}
	}
	for _, p := range []string{"k1", "k2", "k1"} {
		d.notify("p", p)
	}
	d.notify("n", "none")
	heads := func(q querier, limit int, afterCh *string, afterLane *int64) []string {
		return testenv.Column[string](t, q, `SELECT payload FROM pgrelay._claim_lanes_direct('single', false, NULL, $1, $2, $3)`,
			limit, afterCh, afterLane)
	}
	a, b := d.Conn(0), d.Conn(0)
	inTx(t, a, func(tx pgx.Tx) {
		got := heads(tx, 10, nil, nil)
		require.ElementsMatch(t, []string{"c1-0", "c2-0", "k1", "k2"}, got, "one head per lane, 'none' channels not")
		inTx(t, b, func(tx2 pgx.Tx) {
			require.Empty(t, heads(tx2, 10, nil, nil), "held lanes are passed over, not their second rows")
		})
	})
	// The walk goes on after a lane and wraps around.
	inTx(t, a, func(tx pgx.Tx) {
		rows := testenv.Column[string](t, tx, `SELECT channel || ':' || lane FROM pgrelay._claim_lanes_direct('single', false, NULL, 1, NULL, NULL)`)
		require.Equal(t, []string{"c1:0"}, rows)
		after := "c1"
		var lane int64
		require.Equal(t, []string{"c2-0"}, heads(tx, 1, &after, &lane))
	})
	inTx(t, a, func(tx pgx.Tx) {
		after := "p"
		var lane int64 = 1 << 62
		got := heads(tx, 10, &after, &lane)
		require.Len(t, got, 4, "from the end it wraps around to every lane: %v", got)
	})
	// A lane whose event is in flight under a classic claim, or whose head
	// waits for its backoff, gives nothing.
	proc := startProcessor(t, d.Pool)
	d.Exec(`UPDATE pgrelay.queue SET dispatched_at = now(), dispatched_by = $1 WHERE payload = 'c1-0'`, proc)
	d.Exec(`UPDATE pgrelay.queue SET not_before = now() + interval '1 hour'
	         WHERE id = (SELECT id FROM pgrelay.queue WHERE channel = 'c2' ORDER BY origin_id LIMIT 1)`)
	inTx(t, a, func(tx pgx.Tx) {
		got := heads(tx, 10, nil, nil)
		require.ElementsMatch(t, []string{"k1", "k2"}, got, "the claimed lane and the waiting lane gave nothing")
	})
}

// A lane batch's claim walks its lanes in one statement, not in a few
// statements for each lane, and takes the heads of a priority other than 0
// in one more: each statement has its own executor start and
// end, which cost about twice what the statements did (10 000 'channel'
// channels drained at 14 000 events/s with one statement per lane, 25 000
// with one per batch, bench channels). It takes the heads in the walk's
// order, each lane's oldest event.
func TestDirectClaimLanesInOneStatement(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.Exec(`SELECT pgrelay.register(pg_catalog.format('s%s', pg_catalog.lpad(g::text, 3, '0')), 'SELECT $1',
		p_concurrency_mode := 'channel') FROM pg_catalog.generate_series(1, 300) g`)
	d.Exec(`SELECT pgrelay.notify_many(pg_catalog.format('s%s', pg_catalog.lpad(g::text, 3, '0')), ARRAY[g || '-1', g || '-2'])
		FROM pg_catalog.generate_series(1, 300) g`)
	c := explainedConn(t, d.URL)
	want := make([]string, 200)
	for i := range want {
		want[i] = fmt.Sprintf("%d-1", i+1)
	}
	for _, prio := range []bool{false, true} {
		if prio {
			// The first 150 lanes' heads have a priority above 0: taken
			// first (oldest first), then the walk takes the rest.
			d.Exec(`UPDATE pgrelay.queue SET priority = 1 WHERE channel <= 's150'`)
		}
		c.plans()
		var got []string
		inTx(t, c.Conn, func(tx pgx.Tx) {
			got = testenv.Column[string](t, tx, `SELECT payload FROM pgrelay._claim_lanes_direct('single', false, NULL, 200, NULL, NULL)`)
		})
		require.Equal(t, want, got, "priorities: %v", prio)
		queue := readingQueue(c.plans())
		require.LessOrEqual(t, len(queue), 3, "statements reading the queue for 200 lanes (priorities: %v):\n%s",
			prio, strings.Join(queue, "\n"))
	}
}

// readingQueue returns the logged plans of the statements that read the
// queue.
func readingQueue(plans []string) []string {
	var queue []string
	for _, p := range plans {
		if strings.Contains(p, "on queue") {
			queue = append(queue, p)
		}
	}
	return queue
}

// And the classic claim of a 'payload' channel takes its lanes' heads in
// one statement, not one for each lane (a claim of 205 heads out of 10 000
// lanes took 20 ms with one a lane, 8 ms with one in all). The heads come in
// the lanes' order, each lane's oldest event, marked in flight.
func TestClaimLanesInOneStatement(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("pay", "p_concurrency_mode := 'payload'")
	d.Exec(`SELECT pgrelay.notify_many('pay', ARRAY(SELECT 'k' || (g % 300) FROM pg_catalog.generate_series(0, 599) g))`)
	proc := startProcessor(t, d.Pool)
	c := explainedConn(t, d.URL)
	c.plans()
	var got []claimedRow
	var plans []string
	inTx(t, c.Conn, func(tx pgx.Tx) {
		got = claim(t, tx, proc, 200)
		plans = c.plans()
		require.Equal(t, 200, testenv.One[int](t, tx, "SELECT count(*) FROM pgrelay.queue WHERE dispatched_by = $1", proc))
	})
	require.Len(t, got, 200)
	lanes := map[string]bool{}
	for _, r := range got {
		require.False(t, lanes[r.Payload], "one head a lane: %s twice", r.Payload)
		lanes[r.Payload] = true
	}
	queue := readingQueue(plans)
	require.LessOrEqual(t, len(queue), 5, "statements reading the queue for 200 lanes:\n%s", strings.Join(queue, "\n"))
}

// _batch_fence lets a leader's batch commit only while the lease still says
// it holds its term, read at the moment of the check.
func TestDirectBatchFence(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.bid(1, 5, "1 minute")
	n1, n2 := d.Conn(1), d.Conn(2)
	fence := func(c *pgx.Conn, mode string, term any) error {
		_, err := c.Exec(bg, "SELECT pgrelay._batch_fence($1, $2)", mode, term)
		return err
	}
	require.NoError(t, fence(n1, "leader", 5), "the leader holding its term")
	require.NoError(t, fence(n2, "leader", nil), "a follower's batch (pinned rows) is not fenced")
	require.NoError(t, fence(n2, "multi-node", 5), "other modes are not fenced")
	require.ErrorContains(t, fence(n1, "leader", 4), "PR031", "an older term")
	require.ErrorContains(t, fence(n2, "leader", 5), "PR031", "another node")
	// The lease runs out in the middle of a transaction: the check reads the
	// clock, not the transaction's start.
	d.Exec(`UPDATE pgrelay.leader_leases SET lease_until = clock_timestamp() + interval '300 milliseconds' WHERE node_id = 1`)
	inTx(t, n1, func(tx pgx.Tx) {
		_, err := tx.Exec(bg, "SELECT pg_sleep(0.5)")
		require.NoError(t, err)
		_, err = tx.Exec(bg, "SELECT pgrelay._batch_fence('leader', 5)")
		require.ErrorContains(t, err, "PR031")
	})
}

// _lease_release ends the lease only of the node holding the term it names,
// judged on the bids as they are once its own is locked: a bid of a later
// term that commits while the release waits is left alone, and so is the
// lease, now that node's.
func TestLeaseRelease(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.bid(1, 5, "1 minute")
	n1, n2 := d.Conn(1), d.Conn(2)
	release := func(c *pgx.Conn, term int64) bool {
		t.Helper()
		return testenv.One[bool](t, c, "SELECT pgrelay._lease_release($1)", term)
	}
	held := func() bool {
		return testenv.One[bool](t, d.Pool, "SELECT EXISTS (SELECT FROM pgrelay._lease_holder(now()))")
	}
	require.False(t, release(n2, 5), "another node")
	require.False(t, release(n1, 4), "an older term")
	require.True(t, held())

	// Node 2's bid of term 6 (taken where node 1's lease looked run out)
	// arrives in the transaction that holds node 1's bid (a renewal by
	// another Processor of node 1) while node 1 releases term 5.
	tx, err := n2.Begin(bg)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(bg) }()
	_, err = tx.Exec(bg, `UPDATE pgrelay.leader_leases SET lease_until = now() + interval '1 minute' WHERE node_id = 1;
		INSERT INTO pgrelay.leader_leases (node_id, term, lease_until, taken_at) VALUES (2, 6, now() + interval '1 minute', now())`)
	require.NoError(t, err)
	done := make(chan bool, 1)
	go func() {
		var ok bool
		if err := n1.QueryRow(bg, "SELECT pgrelay._lease_release(5)").Scan(&ok); err != nil {
			t.Error(err)
		}
		done <- ok
	}()
	waitUntilBlocked(t, d.Pool, n1.PgConn().PID())
	require.NoError(t, tx.Commit(bg))
	require.False(t, <-done, "the term was taken meanwhile")
	require.True(t, held(), "the new leader's lease stands")

	// Node 1's next lease step ends its deposed bid.
	require.False(t, testenv.One[bool](t, n1, "SELECT mine FROM pgrelay._lease('1 minute')"))
	require.True(t, release(n2, 6), "the leader releases its term")
	require.False(t, held())
	require.False(t, release(n2, 6), "once")
}

// Lane batches take their rows by the node rules of every mode: multi-node
// ranks each lane within the node's own rows (so a 'channel' lane serialises
// per node), the leader takes the heads of every unrestricted lane, a
// follower and a fenced leader only the lanes of rows pinned to it, and a
// pinned lane is its node's alone.
func TestDirectClaimLanesModes(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("cu", "p_concurrency_mode := 'channel'")
	d.register("cp", "p_concurrency_mode := 'channel', p_node_restricted := true")
	d.register("pu", "p_concurrency_mode := 'payload'")
	n1, n2 := d.Conn(1), d.Conn(2)
	notify := func(c *pgx.Conn, ch, p string) int64 {
		return testenv.One[int64](t, c, "SELECT pgrelay.notify($1, $2)", ch, p)
	}
	a1 := notify(n1, "cu", "a1")
	notify(n1, "cu", "a2")
	b1 := notify(n2, "cu", "b1")
	notify(n2, "cu", "b2")
	p1, p2 := notify(n1, "cp", "p1"), notify(n2, "cp", "p2")
	k1, k2 := notify(n1, "pu", "k"), notify(n2, "pu", "k")
	d.bid(1, 3, "1 minute")
	heads := func(c *pgx.Conn, mode string, leader bool, term any) []int64 {
		var got []int64
		inTx(t, c, func(tx pgx.Tx) {
			got = testenv.Column[int64](t, tx, `SELECT id FROM pgrelay._claim_lanes_direct($1, $2, $3, 100, NULL, NULL)`,
				mode, leader, term)
		})
		return got
	}
	require.ElementsMatch(t, []int64{a1, p1, k1}, heads(n1, "multi-node", false, nil), "node 1: its own rows' heads")
	require.ElementsMatch(t, []int64{b1, p2, k2}, heads(n2, "multi-node", false, nil), "node 2: its own rows' heads")
	require.ElementsMatch(t, []int64{a1, p1, k1}, heads(n1, "leader", true, 3),
		"the leader: the head of every unrestricted lane, wherever enqueued, and its pinned rows")
	require.ElementsMatch(t, []int64{p2}, heads(n2, "leader", false, nil), "a follower: its pinned rows only")
	require.ElementsMatch(t, []int64{p2}, heads(n2, "leader", true, 3), "a leader whose term is not the lease's: pinned only")
	require.ElementsMatch(t, []int64{p1}, heads(n1, "leader", true, 2), "a stale term: pinned only")

	// Node 1's heads in flight (claimed): in multi-node, node 2's lanes are
	// its own and still give their heads; for the leader, the lanes are busy
	// cluster-wide.
	proc := startProcessor(t, n1)
	d.Exec(`UPDATE pgrelay.queue SET dispatched_at = now(), dispatched_by = $1 WHERE id = ANY ($2)`, proc, []int64{a1, p1, k1})
	require.Empty(t, heads(n1, "multi-node", false, nil), "node 1's lanes are busy")
	require.ElementsMatch(t, []int64{b1, p2, k2}, heads(n2, "multi-node", false, nil), "per node: node 2's lanes are free")
	require.Empty(t, heads(n1, "leader", true, 3), "cluster-wide: every unrestricted lane and node 1's pinned lane are busy")
	require.ElementsMatch(t, []int64{p2}, heads(n2, "leader", false, nil), "node 2's pinned lane is its own")
}

// Go direct batches: _ready_direct and _claim_direct take the kinds a
// Processor runs in direct batches ('go:<name>' for a Go handler it has);
// _claim leaves the 'none' channels of its p_direct_kinds to them, and still
// claims a serialised go channel of the same handler. The two-argument
// _ready_direct of earlier releases lists the sql channels only.
func TestDirectGoKinds(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("s", "")
	d.Exec("SELECT pgrelay.register('g', 'ship', p_kind := 'go')")
	d.Exec("SELECT pgrelay.register('other', 'bill', p_kind := 'go')")
	d.Exec("SELECT pgrelay.register('gser', 'ship', p_kind := 'go', p_concurrency_mode := 'channel')")
	for _, ch := range []string{"s", "g", "other", "gser"} {
		d.notify(ch, "x")
	}
	type ready struct {
		Channel string
		Kind    string
	}
	readyOf := func(kinds ...string) []ready {
		rows, err := d.Pool.Query(bg, "SELECT channel, kind FROM pgrelay._ready_direct('single', false, $1) ORDER BY channel", kinds)
		require.NoError(t, err)
		out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[ready])
		require.NoError(t, err)
		return out
	}
	require.Equal(t, []ready{{"g", "go"}, {"s", "sql"}}, readyOf("sql", "go:ship"),
		"a serialised go channel is no lane of a lane batch")
	require.Equal(t, []ready{{"g", "go"}}, readyOf("go:ship"))
	require.Equal(t, []string{"s"}, testenv.Column[string](t, d.Pool, "SELECT * FROM pgrelay._ready_direct('single', false)"))

	inTx(t, d.Conn(0), func(tx pgx.Tx) {
		require.Empty(t, testenv.Column[int64](t, tx, "SELECT id FROM pgrelay._claim_direct('g', 'single', false, NULL, 10)"),
			"a go channel is not an sql one")
		require.Equal(t, []string{"go"}, testenv.Column[string](t, tx,
			"SELECT kind FROM pgrelay._claim_direct('g', 'single', false, NULL, 10, '{sql,go:ship}')"))
		require.Empty(t, testenv.Column[int64](t, tx, "SELECT id FROM pgrelay._claim_direct('other', 'single', false, NULL, 10, '{go:ship}')"),
			"a handler the caller does not name")
	})

	proc := startProcessor(t, d.Pool)
	got := testenv.Column[string](t, d.Pool, `SELECT channel FROM pgrelay._claim($1, 'single', false, 10,
		'{sql,go:ship,go:bill}', NULL, true, '{go:ship}') ORDER BY channel`, proc)
	require.Equal(t, []string{"gser", "other"}, got, "sql and g are left to direct batches")
}

// A direct batch whose events all succeeded takes _complete's statement for
// successes alone; its log rows are those the general statement writes for
// the successes of a batch with another outcome.
func TestCompleteDirectSuccessesLogAsTheGeneralPathDoes(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("d", "")
	for i := range 6 {
		d.notify("d", fmt.Sprint("p", i))
	}
	c := explainedConn(t, d.URL)
	// complete claims three rows and completes them with events, returning
	// the plans of the completion's statements.
	complete := func(events ...string) (ids []int64, plans []string) {
		t.Helper()
		c.plans()
		inTxCommit(t, c.Conn, func(tx pgx.Tx) {
			ids = testenv.Column[int64](t, tx, "SELECT id FROM pgrelay._claim_direct('d', 'single', false, NULL, 3)")
			require.Len(t, ids, 3)
			require.Equal(t, 3, testenv.One[int](t, tx, "SELECT pgrelay._complete(NULL, $1, NULL, $2, NULL)", ids, events))
		})
		return ids, c.plans()
	}
	general := func(plans []string) bool {
		for _, p := range plans {
			if strings.Contains(p, "Insert on dead_letters") {
				return true
			}
		}
		return false
	}
	fast, plans := complete("succeeded", "succeeded", "succeeded")
	require.False(t, general(plans), "a batch of successes ran the general statement")
	mixed, plans := complete("succeeded", "expired", "succeeded")
	require.True(t, general(plans))

	// What a success's log row holds, and whether the log ids follow the
	// queue ids.
	logged := func(ids []int64) []string {
		t.Helper()
		return testenv.Column[string](t, d.Pool, `SELECT format('%s %s %s %s %s %s', l.channel, l.attempt, l.event,
				COALESCE(l.error, '-'), l.node = pgrelay._this_node(), l.origin_id = l.queue_id)
			  FROM pgrelay.log l WHERE l.queue_id = ANY ($1) AND l.event = 'succeeded' ORDER BY l.id`, ids)
	}
	inOrder := func(ids []int64) bool {
		return testenv.One[bool](t, d.Pool, `SELECT bool_and(queue_id > prev) FROM (
			SELECT queue_id, lag(queue_id, 1, 0::bigint) OVER (ORDER BY id) AS prev
			  FROM pgrelay.log WHERE queue_id = ANY ($1)) s`, ids)
	}
	require.Equal(t, []string{"d 1 succeeded - t t", "d 1 succeeded - t t", "d 1 succeeded - t t"}, logged(fast))
	require.Equal(t, logged(fast)[:2], logged(mixed))
	require.True(t, inOrder(fast))
	require.True(t, inOrder(mixed))
	require.Zero(t, d.Count("SELECT count(*) FROM pgrelay.queue WHERE id = ANY ($1) OR id = ANY ($2)", fast, mixed))
}
