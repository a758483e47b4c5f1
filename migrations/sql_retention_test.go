package migrations_test

// Retention and the NATS publisher: _trim_log never deletes a log row the
// publisher of its node has not published, up to the cap.

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/testenv"
)

// insertLog inserts n log rows of node, age old, with ids in id order, and
// returns their ids.
func insertLog(t *testing.T, d *sqlDB, node int, age string, n int) []int64 {
	t.Helper()
	return testenv.Column[int64](t, d.Pool, `INSERT INTO pgrelay.log (id, queue_id, origin_id, channel, attempt, event, node, at)
		SELECT pgrelay._id_floor(now() - $2::interval) + ($1::bigint << 12) + g, g, g, 'c', 1, 'succeeded', $1, now() - $2::interval
		  FROM generate_series(0, $3 - 1) g
		RETURNING id`, node, age, n)
}

// A node whose publisher has a cursor keeps its unpublished rows past the
// retention; a node without one (no publisher configured) is trimmed as
// before. Unpublished rows older than the cap are deleted all the same and
// recorded in pgrelay.log_dropped (node, count, id and time range).
func TestTrimLogKeepsUnpublishedRows(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	noPublisher := insertLog(t, d, 0, "10 days", 3)
	published := insertLog(t, d, 1, "10 days", 4)
	unpublished := insertLog(t, d, 1, "9 days", 2)
	ancient := insertLog(t, d, 2, "40 days", 5)
	old2 := insertLog(t, d, 2, "10 days", 2)
	recent := insertLog(t, d, 1, "1 hour", 2)
	d.Exec(`INSERT INTO pgrelay.publish_cursors (node_id, source, last_id) VALUES (1, 'log', $1), (2, 'log', 0)`,
		published[len(published)-1])

	type trim struct {
		Deleted, Dropped          int32
		DroppedFirst, DroppedLast *int64
	}
	run := func(batch int) trim {
		var r trim
		require.NoError(t, d.Pool.QueryRow(bg, `SELECT deleted, dropped, dropped_first, dropped_last
			FROM pgrelay._trim_log('1 day', $1, '30 days')`, batch).Scan(&r.Deleted, &r.Dropped, &r.DroppedFirst, &r.DroppedLast))
		return r
	}
	total := trim{}
	for {
		r := run(4)
		require.LessOrEqual(t, r.Deleted, int32(4))
		total.Deleted += r.Deleted
		total.Dropped += r.Dropped
		if r.Deleted == 0 {
			break
		}
	}
	require.EqualValues(t, 3+4+5, total.Deleted)
	require.EqualValues(t, 5, total.Dropped)
	left := testenv.Column[int64](t, d.Pool, "SELECT id FROM pgrelay.log ORDER BY id")
	require.ElementsMatch(t, append(append(append([]int64{}, unpublished...), old2...), recent...), left)
	for _, id := range append(append(noPublisher, published...), ancient...) {
		require.NotContains(t, left, id)
	}
	type dropped struct {
		Node               int32
		Rows               int64
		FirstID, LastID    int64
		FirstOld, LastOlds bool
	}
	var got dropped
	require.NoError(t, d.Pool.QueryRow(bg, `SELECT node, sum(rows), min(first_id), max(last_id),
		  bool_and(first_at < now() - interval '39 days'), bool_and(last_at < now() - interval '39 days')
		  FROM pgrelay.log_dropped GROUP BY node`).
		Scan(&got.Node, &got.Rows, &got.FirstID, &got.LastID, &got.FirstOld, &got.LastOlds))
	require.Equal(t, dropped{Node: 2, Rows: 5, FirstID: ancient[0], LastID: ancient[4], FirstOld: true, LastOlds: true}, got)

	// Once published, the rows go at the retention.
	d.Exec(`UPDATE pgrelay.publish_cursors SET last_id = $1 WHERE node_id = 1`, unpublished[1])
	d.Exec(`UPDATE pgrelay.publish_cursors SET last_id = $1 WHERE node_id = 2`, old2[1])
	r := run(100)
	require.EqualValues(t, 4, r.Deleted)
	require.Zero(t, r.Dropped)
	require.ElementsMatch(t, recent, testenv.Column[int64](t, d.Pool, "SELECT id FROM pgrelay.log"))
}

// Kept payloads stay while a publisher may still need them: those of events
// not older than every publisher's cursor, up to the cap.
func TestTrimEventPayloadsKeepsUnpublished(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.Exec(`INSERT INTO pgrelay.event_payloads (queue_id, payload)
		SELECT pgrelay._id_floor(now() - a) + g, a::text FROM unnest(ARRAY[interval '40 days', interval '10 days']) a,
		       generate_series(0, 1) g`)
	// A publisher that published nothing: only what is past the cap goes.
	d.Exec(`INSERT INTO pgrelay.publish_cursors (node_id, source, last_id) VALUES (1, 'log', 0)`)
	require.EqualValues(t, 2, testenv.One[int32](t, d.Pool, "SELECT pgrelay._trim_event_payloads('1 day', 100, '30 days')"))
	require.Equal(t, []string{"10 days", "10 days"}, testenv.Column[string](t, d.Pool, "SELECT payload FROM pgrelay.event_payloads"))
	require.Zero(t, testenv.One[int32](t, d.Pool, "SELECT pgrelay._trim_event_payloads('1 day', 100, '30 days')"))
	// Once published, the rest goes at the retention.
	d.Exec(`UPDATE pgrelay.publish_cursors SET last_id = pgrelay._id_floor(now())`)
	require.EqualValues(t, 2, testenv.One[int32](t, d.Pool, "SELECT pgrelay._trim_event_payloads('1 day', 100, '30 days')"))
}

// _trim_log's statements (copied here) read the (node, id) index, also with
// the generic plans PL/pgSQL caches: a long backlog held for the publisher
// (or another node's rows) is not read at every call.
func TestExplainTrimLogUsesNodeIndex(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	for node := range 3 {
		insertLog(t, d, node, "10 days", 10000)
	}
	d.Exec("ANALYZE pgrelay.log")
	c := d.Conn(-1)
	_, err := c.Exec(bg, "SET plan_cache_mode = force_generic_plan")
	require.NoError(t, err)
	for name, sql := range map[string]string{
		"published": `DELETE FROM pgrelay.log l WHERE l.id = ANY (ARRAY(SELECT x.id FROM pgrelay.log x
			WHERE (x.node, x.id) >= ($1, 0) AND (x.node, x.id) < ($1, $2) ORDER BY x.node, x.id LIMIT $3))`,
		"unpublished": `DELETE FROM pgrelay.log l WHERE l.id = ANY (ARRAY(SELECT x.id FROM pgrelay.log x
			WHERE (x.node, x.id) > ($1, $2) AND (x.node, x.id) < ($1, $3) ORDER BY x.node, x.id LIMIT $4))`,
		"nodes": `SELECT (SELECT min(l.node) FROM pgrelay.log l WHERE l.node > $1)`,
	} {
		_, err := c.Exec(bg, "PREPARE "+name+" AS "+sql)
		require.NoError(t, err, name)
		args := map[string]string{"published": "(1, 5, 100)", "unpublished": "(1, 1, 5, 100)", "nodes": "(1)"}[name]
		plan := strings.Join(testenv.Column[string](t, c, "EXPLAIN EXECUTE "+name+args), "\n")
		require.Contains(t, plan, "log_node_id", name+"\n"+plan)
		require.NotContains(t, plan, "Seq Scan", name+"\n"+plan)
		require.NotRegexp(t, fullSort, plan, name)
	}
}
