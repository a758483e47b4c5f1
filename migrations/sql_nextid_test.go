package migrations_test

// The snowflake id generator (pgrelay._next_id, _next_id_at, _id_floor) and
// the node id setting (pgrelay._this_node).

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/testenv"
)

func idMS(id int64) int64   { return id >> 22 }
func idNode(id int64) int64 { return (id >> 12) & 1023 }
func idSeq(id int64) int64  { return id & 4095 }

// A million ids from four concurrent sessions: all unique, and each session's
// strictly increasing.
func TestNextIDConcurrentUnique(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	const sessions, perSession = 4, 250000
	results := make([][]int64, sessions)
	errs := make(chan error, sessions)
	for s := range sessions {
		c := d.Conn(-1)
		go func() {
			rows, err := c.Query(bg, "SELECT pgrelay._next_id() FROM generate_series(1, $1)", perSession)
			if err != nil {
				errs <- err
				return
			}
			out := make([]int64, 0, perSession)
			for rows.Next() {
				var id int64
				if err := rows.Scan(&id); err != nil {
					errs <- err
					return
				}
				out = append(out, id)
			}
			results[s] = out
			errs <- rows.Err()
		}()
	}
	for range sessions {
		require.NoError(t, <-errs)
	}
	all := make([]int64, 0, sessions*perSession)
	for s, ids := range results {
		require.Len(t, ids, perSession)
		for i := 1; i < len(ids); i++ {
			if ids[i] <= ids[i-1] {
				t.Fatalf("session %d: id %d (%d) is not above the one before it (%d)", s, i, ids[i], ids[i-1])
			}
		}
		all = append(all, ids...)
	}
	slices.Sort(all)
	for i := 1; i < len(all); i++ {
		if all[i] == all[i-1] {
			t.Fatalf("id %d handed out twice", all[i])
		}
	}
	// Time-ordered: the ids carry (roughly) the time they were made.
	now := nowMS()
	require.InDelta(t, now, idMS(all[len(all)-1]), 60000)
	require.InDelta(t, now, idMS(all[0]), 60000)
}

// More than 4096 ids in one millisecond: they run into the next milliseconds,
// unique and increasing.
func TestNextIDBurstInOneMillisecond(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	ms := nowMS() + 1000 // ahead of anything the database generated so far
	got := testenv.Column[int64](t, d.Pool, "SELECT pgrelay._next_id_at($1) FROM generate_series(1, 10000)", ms)
	require.Len(t, got, 10000)
	perMS := map[int64]int{}
	for i, id := range got {
		if i > 0 {
			require.Greater(t, id, got[i-1])
		}
		require.GreaterOrEqual(t, idMS(id), ms)
		require.Zero(t, idNode(id))
		perMS[idMS(id)]++
	}
	require.Equal(t, ms, idMS(got[0]), "the counter jumped to the clock")
	require.Zero(t, idSeq(got[0]))
	require.Equal(t, 4096, perMS[ms])
	require.Equal(t, 4096, perMS[ms+1])
	require.Equal(t, 10000-2*4096, perMS[ms+2])
	// The next call at the same clock reading continues after them.
	next := testenv.One[int64](t, d.Pool, "SELECT pgrelay._next_id_at($1)", ms)
	require.Greater(t, next, got[len(got)-1])
}

// A clock that steps back never makes ids go back.
func TestNextIDClockStepsBack(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	now := nowMS()
	a := testenv.One[int64](t, d.Pool, "SELECT pgrelay._next_id_at($1)", now)
	b := testenv.One[int64](t, d.Pool, "SELECT pgrelay._next_id_at($1)", now-10000)
	require.Greater(t, b, a)
	require.Equal(t, now, idMS(b), "the counter stays where it was")
	c := testenv.One[int64](t, d.Conn(-1), "SELECT pgrelay._next_id_at($1)", now-3600000) // another session
	require.Greater(t, c, b)
	// A batch at a stepped-back clock, in one statement and across statements.
	batch := testenv.Column[int64](t, d.Pool, "SELECT pgrelay._next_id_at($1::bigint - g) FROM generate_series(1, 1000) g", now)
	prev := c
	for _, id := range batch {
		require.Greater(t, id, prev)
		prev = id
	}
	// When the clock moves forward again, the ids follow it.
	e := testenv.One[int64](t, d.Pool, "SELECT pgrelay._next_id_at($1)", now+5000)
	require.Equal(t, now+5000, idMS(e))
	require.Greater(t, e, prev)
}

// Layout: 41-bit milliseconds since 2026-01-01 UTC | 10-bit node | 12-bit sequence.
func TestNextIDLayout(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	for _, node := range []int{0, 1, 7, 1023} {
		c := d.Conn(node)
		before := nowMS()
		id := testenv.One[int64](t, c, "SELECT pgrelay._next_id()")
		after := nowMS()
		require.EqualValues(t, node, idNode(id), "node %d", node)
		// The counter may lag the clock by up to 100 ms before it is moved.
		require.GreaterOrEqual(t, idMS(id), before-150, "node %d", node)
		require.LessOrEqual(t, idMS(id), after+150, "node %d", node)
		require.Positive(t, id)
	}
	// Without the node setting the node part is 0.
	require.Zero(t, idNode(testenv.One[int64](t, d.Conn(-1), "SELECT pgrelay._next_id()")))
	// The queue and the log take their ids from it, with the session's node.
	d.register("c", "")
	c := d.Conn(5)
	id := testenv.One[int64](t, c, "SELECT pgrelay.notify('c', 'x')")
	require.EqualValues(t, 5, idNode(id))
	require.InDelta(t, nowMS(), idMS(id), 5000)

	// _id_floor: the smallest id a timestamp carries.
	at := time.Date(2026, 3, 4, 5, 6, 7, 891000000, time.UTC)
	floor := testenv.One[int64](t, d.Pool, "SELECT pgrelay._id_floor($1)", at)
	require.Equal(t, (at.UnixMilli()-idEpochMS)<<22, floor)
	require.Zero(t, testenv.One[int64](t, d.Pool, "SELECT pgrelay._id_floor('2020-01-01')"), "before the epoch: 0")
	id = testenv.One[int64](t, d.Pool, "SELECT pgrelay._next_id()")
	require.GreaterOrEqual(t, id, testenv.One[int64](t, d.Pool, "SELECT pgrelay._id_floor(now() - interval '1 second')"))
}

// A session that moved the counter to the clock inside a long transaction does
// not keep other sessions from moving it later: their ids keep the time.
func TestNextIDNotHeldBackByLongTransaction(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	long := d.Conn(-1)
	tx, err := long.Begin(bg)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(bg) }()
	ms := nowMS() + 100000
	first := testenv.One[int64](t, tx, "SELECT pgrelay._next_id_at($1)", ms)
	require.Equal(t, ms, idMS(first))

	// Ten seconds later, by another session's clock.
	later := testenv.One[int64](t, d.Pool, "SELECT pgrelay._next_id_at($1)", ms+10000)
	require.Equal(t, ms+10000, idMS(later), "the counter follows the clock while the first transaction is open")
	require.NoError(t, tx.Commit(bg))
	// And the first session's next id is above the other's.
	require.Greater(t, testenv.One[int64](t, long, "SELECT pgrelay._next_id_at($1)", ms), later)
	// No advisory lock is left behind.
	require.Zero(t, d.Count(`SELECT count(*) FROM pg_locks l JOIN pg_database db ON db.oid = l.database
		WHERE l.locktype = 'advisory' AND db.datname = current_database()`))
}

func TestThisNode(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	c := d.Conn(-1)
	get := func() (int32, error) {
		var n int32
		err := c.QueryRow(bg, "SELECT pgrelay._this_node()").Scan(&n)
		return n, err
	}
	set := func(v string) {
		_, err := c.Exec(bg, fmt.Sprintf("SET pg_relay.node_id = '%s'", v))
		require.NoError(t, err)
	}
	n, err := get()
	require.NoError(t, err)
	require.Zero(t, n, "unset: 0")

	for v, want := range map[string]int32{"": 0, "0": 0, "5": 5, "1023": 1023, " 12 ": 12, "007": 7} {
		set(v)
		n, err := get()
		require.NoError(t, err, "%q", v)
		require.Equal(t, want, n, "%q", v)
	}
	for _, v := range []string{"abc", "-1", "1024", "1.5", "99999999999", "1e3", "0x10"} {
		set(v)
		_, err := get()
		pgErr := requireCode(t, err, "PR020", v)
		require.Contains(t, pgErr.Message, v)
		_, err = c.Exec(bg, "SELECT pgrelay._next_id()")
		requireCode(t, err, "PR020", v)
	}
	// A database-wide default, as a DBA sets it.
	_, err = c.Exec(bg, "RESET pg_relay.node_id")
	require.NoError(t, err)
	d.Exec(fmt.Sprintf("ALTER DATABASE %s SET pg_relay.node_id = '9'", quoteIdent(d.Name())))
	require.EqualValues(t, 9, testenv.One[int32](t, d.Conn(-1), "SELECT pgrelay._this_node()"))
}
