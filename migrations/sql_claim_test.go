package migrations_test

// pgrelay._claim: serialisation per concurrency_mode across several claimers,
// strict order, fairness and the limit, and which rows are not claimed.

import (
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/testenv"
)

// 'channel': at most one row of the channel in flight, oldest notification
// first, even with two claimers in open transactions.
func TestClaimChannelModeTwoClaimers(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("ser", "p_concurrency_mode := 'channel', p_retry_delay := '1 hour'")
	var e []int64
	for i := range 4 {
		e = append(e, d.notify("ser", fmt.Sprint(i)))
	}
	ca, cb := d.Conn(-1), d.Conn(-1)
	txA, err := ca.Begin(bg)
	require.NoError(t, err)
	txB, err := cb.Begin(bg)
	require.NoError(t, err)

	gotA := claim(t, txA, 1, 10)
	require.Equal(t, []int64{e[0]}, ids(gotA), "one row, the oldest")
	require.Empty(t, claim(t, txB, 2, 10), "the other claimer gets nothing while A's claim is open")
	require.NoError(t, txA.Commit(bg))
	require.Empty(t, claim(t, txB, 2, 10), "nor once A's claim is committed: e0 is in flight")

	require.Equal(t, 1, complete(t, d.Pool, 1, gotA[0], "succeeded", ""))
	gotB := claim(t, txB, 2, 10)
	require.Equal(t, []int64{e[1]}, ids(gotB), "then the next in origin order")
	require.NoError(t, txB.Commit(bg))
	require.Empty(t, claim(t, d.Pool, 1, 10))

	// A failed head blocks the lane until its retry is due: strict order.
	require.Equal(t, 1, complete(t, d.Pool, 2, gotB[0], "failed", "boom"))
	require.Empty(t, claim(t, d.Pool, 1, 10), "e2 must not overtake e1's retry")
	d.Exec("UPDATE pgrelay.queue SET not_before = now() - interval '1 second' WHERE retry_of IS NOT NULL")
	got := claim(t, d.Pool, 1, 10)
	require.Len(t, got, 1)
	require.Equal(t, e[1], got[0].OriginID, "the retry comes first: it has the lowest origin id")
	require.Equal(t, 2, got[0].Attempt)
	require.Equal(t, 1, complete(t, d.Pool, 1, got[0], "succeeded", ""))
	require.Equal(t, []int64{e[2]}, ids(claim(t, d.Pool, 1, 10)))

	// A released head is claimed again before anything else.
	d.Exec("UPDATE pgrelay.queue SET dispatched_at = NULL, dispatched_by = NULL")
	require.Equal(t, []int64{e[2]}, ids(claim(t, d.Pool, 1, 10)))
}

// 'channel' under load: four claimers racing; never two in flight, processed
// in origin order.
func TestClaimChannelModeRace(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("ser", "p_concurrency_mode := 'channel'")
	d.register("noise", "")
	const n = 40
	want := testenv.Column[int64](t, d.Pool, "SELECT pgrelay.notify_many('ser', array_agg(g::text)) FROM generate_series(1, $1) g", n)
	testenv.Column[int64](t, d.Pool, "SELECT pgrelay.notify_many('noise', array_agg(g::text)) FROM generate_series(1, $1) g", n)

	var (
		mu        sync.Mutex
		order     []int64
		processed atomic.Int64
		wg        sync.WaitGroup
		failures  = make(chan string, 100)
	)
	for w := range 4 {
		c := d.Conn(-1)
		proc := int64(100 + w)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for processed.Load() < n {
				rows, err := c.Query(bg, `SELECT id, origin_id, channel, dispatched_at FROM pgrelay._claim($1, 'single', false, 5, '{sql}')`, proc)
				if err != nil {
					failures <- err.Error()
					return
				}
				var mine []claimedRow
				for rows.Next() {
					var r claimedRow
					if err := rows.Scan(&r.ID, &r.OriginID, &r.Channel, &r.DispatchedAt); err != nil {
						failures <- err.Error()
						return
					}
					mine = append(mine, r)
				}
				if rows.Err() != nil {
					failures <- rows.Err().Error()
					return
				}
				ser := 0
				for _, r := range mine {
					if r.Channel == "ser" {
						ser++
						var inFlight int64
						if err := c.QueryRow(bg, "SELECT count(*) FROM pgrelay.queue WHERE channel = 'ser' AND dispatched_at IS NOT NULL").Scan(&inFlight); err != nil {
							failures <- err.Error()
							return
						}
						if inFlight != 1 {
							failures <- fmt.Sprintf("%d rows of a 'channel' channel in flight", inFlight)
						}
						mu.Lock()
						order = append(order, r.OriginID)
						mu.Unlock()
						processed.Add(1)
					}
				}
				if ser > 1 {
					failures <- fmt.Sprintf("one claim returned %d rows of a 'channel' channel", ser)
				}
				for _, r := range mine {
					var applied int32
					err := c.QueryRow(bg, "SELECT pgrelay._complete($1, ARRAY[$2::bigint], ARRAY[$3::timestamptz], ARRAY['succeeded'], ARRAY[NULL::text])",
						proc, r.ID, r.DispatchedAt).Scan(&applied)
					if err != nil || applied != 1 {
						failures <- fmt.Sprintf("complete %d: %v (applied %d)", r.ID, err, applied)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(failures)
	for f := range failures {
		t.Error(f)
	}
	require.Equal(t, want, order, "processed strictly in origin order")
}

// 'payload': at most one in flight per (channel, payload), oldest first within
// it; different payloads are claimed in the same call.
func TestClaimPayloadMode(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("pay", "p_concurrency_mode := 'payload'")
	a1 := d.notify("pay", "a")
	b1 := d.notify("pay", "b")
	a2 := d.notify("pay", "a")
	c1 := d.notify("pay", "c")
	b2 := d.notify("pay", "b")

	ca, cb := d.Conn(-1), d.Conn(-1)
	txA, err := ca.Begin(bg)
	require.NoError(t, err)
	got := claim(t, txA, 1, 10)
	gotIDs := ids(got)
	sort.Slice(gotIDs, func(i, j int) bool { return gotIDs[i] < gotIDs[j] })
	require.Equal(t, []int64{a1, b1, c1}, gotIDs, "one per payload, the oldest of each")
	txB, err := cb.Begin(bg)
	require.NoError(t, err)
	require.Empty(t, claim(t, txB, 2, 10), "a second claimer while the first claim is open")
	require.NoError(t, txA.Commit(bg))
	require.Empty(t, claim(t, txB, 2, 10), "every lane has a row in flight")
	require.NoError(t, txB.Commit(bg))

	byID := map[int64]claimedRow{}
	for _, g := range got {
		byID[g.ID] = g
	}
	require.Equal(t, 1, complete(t, d.Pool, 1, byID[a1], "succeeded", ""))
	require.Equal(t, []int64{a2}, ids(claim(t, d.Pool, 2, 10)))
	require.Equal(t, 2, completeAll(t, d.Pool, 1, outcome{c: byID[b1], event: "succeeded"}, outcome{c: byID[c1], event: "succeeded"}))
	require.Equal(t, []int64{b2}, ids(claim(t, d.Pool, 2, 10)))
	require.Empty(t, claim(t, d.Pool, 2, 10))
}

// Many payload lanes: a claim takes one row per lane up to the limit, and the
// lanes' heads in a later claim.
func TestClaimPayloadModeManyLanes(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("pay", "p_concurrency_mode := 'payload'")
	// 30 lanes, 3 rows each.
	testenv.Column[int64](t, d.Pool, "SELECT pgrelay.notify_many('pay', array_agg((g % 30)::text ORDER BY g)) FROM generate_series(0, 89) g")
	seen := map[string]int{}
	last := map[string]int64{}
	total := 0
	for range 40 {
		got := claim(t, d.Pool, 1, 7)
		require.LessOrEqual(t, len(got), 7)
		lanes := map[string]bool{}
		for _, g := range got {
			require.False(t, lanes[g.Payload], "two rows of lane %s in one claim", g.Payload)
			lanes[g.Payload] = true
			seen[g.Payload]++
			require.Greater(t, g.OriginID, last[g.Payload], "lane %s in origin order", g.Payload)
			last[g.Payload] = g.OriginID
			require.Equal(t, 1, complete(t, d.Pool, 1, g, "succeeded", ""))
		}
		total += len(got)
		if total == 90 {
			break
		}
	}
	require.Equal(t, 90, total, "every row claimed")
	for lane, n := range seen {
		require.Equal(t, 3, n, lane)
	}
}

// 'none': p_limit is respected and channels with a backlog share it fairly.
func TestClaimNoneLimitAndFairness(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	for _, ch := range []string{"n1", "n2", "n3"} {
		d.register(ch, "")
		testenv.Column[int64](t, d.Pool, "SELECT pgrelay.notify_many($1, array_agg(g::text)) FROM generate_series(1, 20) g", ch)
	}
	c := d.Conn(-1)
	perChannel := func(rows []claimedRow) map[string]int {
		m := map[string]int{}
		for _, r := range rows {
			m[r.Channel]++
		}
		return m
	}
	for range 5 {
		inTx(t, c, func(tx pgx.Tx) {
			got := claim(t, tx, 1, 9)
			require.Len(t, got, 9)
			require.Equal(t, map[string]int{"n1": 3, "n2": 3, "n3": 3}, perChannel(got), "each channel gets its share")
		})
		inTx(t, c, func(tx pgx.Tx) {
			got := claim(t, tx, 1, 10)
			require.Len(t, got, 10)
			for ch, n := range perChannel(got) {
				require.GreaterOrEqual(t, n, 2, ch)
			}
		})
		inTx(t, c, func(tx pgx.Tx) {
			require.Len(t, claim(t, tx, 1, 2), 2)
		})
	}
	// Oldest first within a channel.
	inTx(t, c, func(tx pgx.Tx) {
		got := claim(t, tx, 1, 3)
		for _, g := range got {
			require.Equal(t, g.ID, testenv.One[int64](t, tx, "SELECT min(id) FROM pgrelay.queue WHERE channel = $1", g.Channel))
		}
	})

	// When some channels run dry, the others fill the limit.
	d.Exec("DELETE FROM pgrelay.queue WHERE channel = 'n3'")
	d.Exec("DELETE FROM pgrelay.queue WHERE channel = 'n2' AND payload::int > 1")
	inTx(t, c, func(tx pgx.Tx) {
		got := claim(t, tx, 1, 12)
		require.Len(t, got, 12)
		require.Equal(t, map[string]int{"n1": 11, "n2": 1}, perChannel(got))
	})
	// A limit larger than the backlog takes all of it; zero or less takes nothing.
	require.Empty(t, claim(t, d.Pool, 1, 0))
	require.Empty(t, claim(t, d.Pool, 1, -1))
	require.Len(t, claim(t, d.Pool, 1, 100), 21)
	require.Empty(t, claim(t, d.Pool, 1, 100))
}

// With serialised channels in the mix the limit still holds, whichever order
// the channels are visited in (random).
func TestClaimLimitWithSerialisedChannels(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("n", "")
	d.register("pay", "p_concurrency_mode := 'payload'")
	testenv.Column[int64](t, d.Pool, "SELECT pgrelay.notify_many('n', array_agg(g::text)) FROM generate_series(1, 20) g")
	testenv.Column[int64](t, d.Pool, "SELECT pgrelay.notify_many('pay', array_agg(g::text)) FROM generate_series(1, 20) g")
	c := d.Conn(-1)
	for range 30 {
		inTx(t, c, func(tx pgx.Tx) {
			got := claim(t, tx, 1, 5)
			require.Len(t, got, 5, "limit 5 over two channels with a backlog")
		})
	}
}

// Rows that must not be claimed: paused channels, kinds the Processor cannot
// run, rows not yet due, rows pinned to another node; expired rows come back
// flagged.
func TestClaimSkips(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("paused", "")
	d.register("later", "")
	d.register("expiring", "p_expire_after := '1 hour'")
	d.register("pinned", "p_node_restricted := true")
	d.register("ser", "p_concurrency_mode := 'channel'")
	d.Exec("SELECT pgrelay.register('mail', 'default', p_kind := 'email')")
	d.Exec("SELECT pgrelay.register('pub', 'orders.created', p_kind := 'nats')")

	d.notify("paused", "x")
	d.Exec("SELECT pgrelay.update('paused', p_paused := true)")
	mail := d.notify("mail", "1")
	pub := d.notify("pub", "1")
	later := d.notify("later", "x")
	d.Exec("UPDATE pgrelay.queue SET not_before = now() + interval '1 minute' WHERE id = $1", later)
	serLater := d.notify("ser", "x")
	d.Exec("UPDATE pgrelay.queue SET not_before = now() + interval '1 minute' WHERE id = $1", serLater)
	expired := d.notify("expiring", "old")
	d.Exec("UPDATE pgrelay.queue SET expires_at = now() - interval '1 second' WHERE id = $1", expired)
	fresh := d.notify("expiring", "new")
	on2 := testenv.One[int64](t, d.Conn(2), "SELECT pgrelay.notify('pinned', 'x')")
	on3 := testenv.One[int64](t, d.Conn(3), "SELECT pgrelay.notify('pinned', 'x')")

	n2 := d.Conn(2)
	c := d.Conn(-1)
	inTx(t, c, func(tx pgx.Tx) {
		got := claim(t, tx, 1, 100) // node 0, kinds {sql}
		flags := map[int64]bool{}
		for _, g := range got {
			flags[g.ID] = g.Expired
		}
		require.Equal(t, map[int64]bool{expired: true, fresh: false}, flags)
	})
	inTx(t, c, func(tx pgx.Tx) {
		got := claim(t, tx, 1, 100, "sql", "email")
		require.ElementsMatch(t, []int64{expired, fresh, mail}, ids(got))
	})
	inTx(t, c, func(tx pgx.Tx) {
		got := claim(t, tx, 1, 100, "nats")
		require.Equal(t, []int64{pub}, ids(got))
	})
	inTx(t, n2, func(tx pgx.Tx) {
		got := claim(t, tx, 1, 100)
		require.ElementsMatch(t, []int64{expired, fresh, on2}, ids(got), "node 2 also takes the row pinned to it")
	})
	// Due rows become claimable; the paused channel's only when resumed.
	d.Exec("UPDATE pgrelay.queue SET not_before = now() WHERE id IN ($1, $2)", later, serLater)
	inTx(t, c, func(tx pgx.Tx) {
		require.ElementsMatch(t, []int64{expired, fresh, later, serLater}, ids(claim(t, tx, 1, 100)))
	})
	d.Exec("SELECT pgrelay.update('paused', p_paused := false)")
	require.Len(t, claim(t, d.Pool, 1, 100), 5)
	require.Len(t, claim(t, d.Conn(3), 1, 100), 1)
	require.Equal(t, 1, d.Count("SELECT count(*) FROM pgrelay.queue WHERE id = $1 AND dispatched_at IS NOT NULL", on3))

	// Bad arguments.
	requireCode(t, d.Err("SELECT * FROM pgrelay._claim(1, 'cluster', false, 10, '{sql}')"), "PR021")
	requireCode(t, d.Err("SELECT * FROM pgrelay._claim(1, NULL, false, 10, '{sql}')"), "PR021")
	require.Empty(t, testenv.Column[int64](t, d.Pool, "SELECT id FROM pgrelay._claim(1, 'single', false, NULL, '{sql}')"))
}

// Modes: which unrestricted rows a Processor may take.
func TestClaimModes(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("c", "")
	d.register("pinned", "p_node_restricted := true")
	d.register("ser", "p_concurrency_mode := 'channel', p_node_restricted := true")
	own1 := testenv.One[int64](t, d.Conn(1), "SELECT pgrelay.notify('c', 'x')")
	own2 := testenv.One[int64](t, d.Conn(2), "SELECT pgrelay.notify('c', 'x')")
	pin1 := testenv.One[int64](t, d.Conn(1), "SELECT pgrelay.notify('pinned', 'x')")
	pin2 := testenv.One[int64](t, d.Conn(2), "SELECT pgrelay.notify('pinned', 'x')")
	ser1 := testenv.One[int64](t, d.Conn(1), "SELECT pgrelay.notify('ser', 'x')")
	ser2 := testenv.One[int64](t, d.Conn(2), "SELECT pgrelay.notify('ser', 'x')")

	n1 := d.Conn(1)
	cases := []struct {
		mode   string
		leader bool
		want   []int64
	}{
		{"single", false, []int64{own1, own2, pin1, ser1}},
		{"multi-node", false, []int64{own1, pin1, ser1}},
		{"leader", false, []int64{pin1, ser1}},
		{"leader", true, []int64{own1, own2, pin1, ser1}},
	}
	for _, tc := range cases {
		inTx(t, n1, func(tx pgx.Tx) {
			require.ElementsMatch(t, tc.want, ids(claimMode(t, tx, 1, tc.mode, tc.leader, 100)), "%s leader=%v", tc.mode, tc.leader)
		})
	}
	// 'channel' serialises per node: with node 1's row in flight, node 2's lane
	// is its own.
	require.ElementsMatch(t, []int64{own1, pin1, ser1}, ids(claimMode(t, n1, 1, "multi-node", false, 100)))
	got := claimMode(t, d.Conn(2), 2, "multi-node", false, 100)
	require.ElementsMatch(t, []int64{own2, pin2, ser2}, ids(got))
}

// An UNRESTRICTED 'channel'-mode channel in multi-node mode ranks within each
// node's own rows: each node takes the head of its rows, even while the
// other node's head is in flight; the leader ranks cluster-wide.
func TestClaimModesUnrestrictedChannelPerNode(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("cu", "p_concurrency_mode := 'channel'")
	n1, n2 := d.Conn(1), d.Conn(2)
	a1 := testenv.One[int64](t, n1, "SELECT pgrelay.notify('cu', 'a1')")
	a2 := testenv.One[int64](t, n1, "SELECT pgrelay.notify('cu', 'a2')")
	b1 := testenv.One[int64](t, n2, "SELECT pgrelay.notify('cu', 'b1')")
	b2 := testenv.One[int64](t, n2, "SELECT pgrelay.notify('cu', 'b2')")
	inTx(t, n1, func(tx pgx.Tx) {
		require.Equal(t, []int64{a1}, ids(claimMode(t, tx, 1, "leader", true, 100)),
			"the leader: one head cluster-wide, the oldest")
	})
	require.Equal(t, []int64{a1}, ids(claimMode(t, n1, 1, "multi-node", false, 100)), "node 1: the head of its own rows")
	require.Equal(t, []int64{b1}, ids(claimMode(t, n2, 2, "multi-node", false, 100)),
		"node 2: the head of its own rows, while node 1's is in flight")
	require.Empty(t, ids(claimMode(t, n1, 1, "multi-node", false, 100)), "node 1's lane is busy until a1 ends")
	require.Empty(t, ids(claimMode(t, n1, 1, "leader", true, 100)), "cluster-wide, the lane is busy")
	d.Exec(`DELETE FROM pgrelay.queue WHERE id = $1`, a1)
	require.Equal(t, []int64{a2}, ids(claimMode(t, n1, 1, "multi-node", false, 100)), "then node 1's next, in order")
	require.Empty(t, ids(claimMode(t, n2, 2, "multi-node", false, 100)), "node 2's lane still busy")
	d.Exec(`DELETE FROM pgrelay.queue WHERE id = $1`, b1)
	require.Equal(t, []int64{b2}, ids(claimMode(t, n2, 2, "multi-node", false, 100)))
}

// A deduplicated notify() absorbed by a pending row is covered by a run that
// starts after the absorbed transaction commits, on the classic claim path
// of every concurrency mode (email, nats, and sql without direct batches).
//
// Producer first: while the absorbed producer's transaction is open, the
// row is not claimed (before, a 'channel' or 'payload' lane's head was, and
// its run started before the producer's change was committed). Claim first:
// while the claim's transaction is open, a notify() of the same payload is
// not absorbed by the row being claimed; it gets a row of its own.
func TestClaimWaitsForAnAbsorbedNotify(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	for _, mode := range []string{"none", "channel", "payload"} {
		ch := "dedup_" + mode
		d.register(ch, fmt.Sprintf("p_deduplicate := true, p_concurrency_mode := '%s'", mode))
		first := d.notify(ch, "x")

		// Producer first.
		p := d.Conn(-1)
		tx, err := p.Begin(bg)
		require.NoError(t, err)
		require.Equal(t, first, testenv.One[int64](t, tx, "SELECT pgrelay.notify($1, 'x')", ch), "%s: absorbed", mode)
		require.Empty(t, claim(t, d.Pool, 1, 10), "%s: no run starts before the absorbed producer commits", mode)
		require.NoError(t, tx.Commit(bg))
		got := claim(t, d.Pool, 1, 10)
		require.Equal(t, []int64{first}, ids(got), "%s: the run starts after the commit", mode)
		require.Equal(t, 1, complete(t, d.Pool, 1, got[0], "succeeded", ""))

		// Claim first.
		second := d.notify(ch, "y")
		c := d.Conn(-1)
		tx, err = c.Begin(bg)
		require.NoError(t, err)
		require.Equal(t, []int64{second}, ids(claim(t, tx, 1, 10)), mode)
		third := d.notify(ch, "y")
		require.NotEqual(t, second, third, "%s: a row being claimed absorbs nothing", mode)
		require.NoError(t, tx.Commit(bg))
		require.Equal(t, 2, d.Count("SELECT count(*) FROM pgrelay.queue WHERE channel = $1 AND payload = 'y'", ch), mode)
		d.Exec("DELETE FROM pgrelay.queue WHERE channel = $1", ch)
	}
}

// _claim_channel: _claim for one 'none' channel that _claim visits, and
// nothing for any other channel.
func TestClaimOneChannel(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("a", "")
	d.register("b", "")
	d.register("ser", "p_concurrency_mode := 'channel'")
	d.register("paused", "")
	d.register("pinned", "p_node_restricted := true")
	d.Exec("SELECT pgrelay.register('mail', 'default', p_kind := 'email')")
	d.Exec("SELECT pgrelay.register('g', 'charge', p_kind := 'go')")
	var a []int64
	for i := range 3 {
		a = append(a, d.notify("a", fmt.Sprint(i)))
	}
	b := d.notify("b", "x")
	d.notify("ser", "x")
	d.notify("paused", "x")
	d.Exec("SELECT pgrelay.update('paused', p_paused := true)")
	mail := d.notify("mail", "1")
	g := d.notify("g", "1")
	on2 := testenv.One[int64](t, d.Conn(2), "SELECT pgrelay.notify('pinned', 'x')")

	claimOf := func(q querier, channel string, limit int, kinds []string, direct bool, directKinds []string) []int64 {
		t.Helper()
		return testenv.Column[int64](t, q, `SELECT id FROM pgrelay._claim_channel(1, 'single', false, $1, $2, $3,
			p_direct := $4, p_direct_kinds := $5)`, limit, channel, kinds, direct, directKinds)
	}
	sql := []string{"sql"}
	c := d.Conn(-1)
	inTx(t, c, func(tx pgx.Tx) {
		require.Equal(t, a[:2], claimOf(tx, "a", 2, sql, false, nil), "the oldest, up to the limit")
		require.Equal(t, []int64{a[2]}, claimOf(tx, "a", 10, sql, false, nil), "then the rest")
		require.Empty(t, claimOf(tx, "a", 10, sql, false, nil), "claimed already")
	})
	inTx(t, c, func(tx pgx.Tx) {
		require.Empty(t, claimOf(tx, "a", 10, sql, true, nil), "left to direct batches")
		require.Empty(t, claimOf(tx, "ser", 10, sql, false, nil), "serialised: _claim's lanes")
		require.Empty(t, claimOf(tx, "paused", 10, sql, false, nil))
		require.Empty(t, claimOf(tx, "nope", 10, sql, false, nil))
		require.Empty(t, claimOf(tx, "a", 0, sql, false, nil))
		require.Empty(t, claimOf(tx, "mail", 10, sql, false, nil), "not a kind of the Processor's")
		require.Equal(t, []int64{mail}, claimOf(tx, "mail", 10, []string{"sql", "email"}, false, nil))
		require.Empty(t, claimOf(tx, "g", 10, []string{"go:charge"}, false, []string{"go:charge"}), "left to direct batches")
		require.Equal(t, []int64{g}, claimOf(tx, "g", 10, []string{"go:charge"}, false, nil))
		require.Empty(t, claimOf(tx, "pinned", 10, sql, false, nil), "pinned to node 2")
	})
	inTx(t, d.Conn(2), func(tx pgx.Tx) {
		require.Equal(t, []int64{on2}, claimOf(tx, "pinned", 10, sql, false, nil))
	})
	require.Equal(t, 1, d.Count("SELECT count(*) FROM pgrelay.queue WHERE id = $1 AND dispatched_at IS NULL", b),
		"another channel's row is left alone")
	requireCode(t, d.Err("SELECT * FROM pgrelay._claim_channel(1, 'cluster', false, 10, 'a', '{sql}')"), "PR021")
}

// A claim visits the channels that have rows pending, not every channel
// registered: with 300 channels and one event it ran a statement for each
// channel (10 000 channels: 370-450 ms a claim; 0.4-0.5 ms visiting the
// one). _ready_direct looks at those channels alone too.
func TestClaimVisitsPendingChannelsOnly(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.Exec(`SELECT pgrelay.register(pg_catalog.format('v%s', g), 'SELECT $1',
		p_concurrency_mode := (ARRAY['none', 'channel', 'payload'])[g % 3 + 1])
		FROM pg_catalog.generate_series(1, 300) g`)
	d.notify("v150", "only")
	d.notify("v151", "delayed")
	d.Exec(`UPDATE pgrelay.queue SET not_before = now() + interval '1 hour' WHERE channel = 'v151'`)
	proc := startProcessor(t, d.Pool)
	c := explainedConn(t, d.URL)
	c.plans()
	var got []claimedRow
	inTx(t, c.Conn, func(tx pgx.Tx) {
		got = claim(t, tx, proc, 100)
	})
	require.Len(t, got, 1)
	require.Equal(t, "only", got[0].Payload)
	require.LessOrEqual(t, len(c.plans()), 20, "statements of a claim over 300 channels, two of them with rows")
	require.Equal(t, []string{"v150"}, testenv.Column[string](t, d.Pool, "SELECT * FROM pgrelay._ready_direct('single', false)"))
}
