package migrations_test

// The leader lease of --mode leader (_lease, _lease_release, _holds_lease).

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/testenv"
	"github.com/pgrelay/pgrelay/migrations"
)

// leaseStep is what pgrelay._lease returned to one node.
type leaseStep struct {
	leader *int32
	term   *int64
	mine   bool
	taken  bool
}

// written is a row a transaction wrote: its table and its node_id (-2 when
// the table has none).
type written struct {
	table string
	node  int32
}

// writtenBy runs step in a transaction on c, commits it and returns every
// row of pgrelay's replicated tables that the transaction wrote.
func writtenBy(t *testing.T, c *pgx.Conn, step func(tx pgx.Tx)) []written {
	t.Helper()
	tx, err := c.Begin(bg)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(bg) }()
	step(tx)
	tables := testenv.Column[string](t, tx, `SELECT c.relname::text FROM pg_catalog.pg_class c
		 JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = 'pgrelay' AND c.relkind = 'r' AND c.relpersistence = 'p'
		  AND NOT c.relname = ANY ($1::text[]) ORDER BY 1`, migrations.NodeLocalTables())
	var out []written
	for _, table := range tables {
		node := "-2"
		if testenv.One[bool](t, tx, `SELECT EXISTS (SELECT FROM pg_catalog.pg_attribute
			 WHERE attrelid = $1::regclass AND attname = 'node_id' AND NOT attisdropped)`, "pgrelay."+table) {
			node = "node_id"
		}
		for _, n := range testenv.Column[int32](t, tx, fmt.Sprintf(
			`SELECT %s::int FROM pgrelay.%s WHERE xmin = pg_catalog.pg_current_xact_id()::xid`, node, pgx.Identifier{table}.Sanitize())) {
			out = append(out, written{table, n})
		}
	}
	require.NoError(t, tx.Commit(bg))
	return out
}

func lease(t *testing.T, q testenv.Querier, duration string) leaseStep {
	t.Helper()
	var s leaseStep
	require.NoError(t, q.QueryRow(bg, "SELECT leader_node, term, mine, taken FROM pgrelay._lease($1::interval)", duration).
		Scan(&s.leader, &s.term, &s.mine, &s.taken))
	return s
}

// holder is the node holding the lease as q's node sees it, nil for none.
func holder(t *testing.T, q testenv.Querier) *int32 {
	t.Helper()
	var n *int32
	err := q.QueryRow(bg, "SELECT leader_node FROM pgrelay._lease_holder(now())").Scan(&n)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	require.NoError(t, err)
	return n
}

// A lease step writes no row another node writes: on a cluster, two nodes
// writing the same row at the same moment is a replication conflict (two
// first steps each inserting one shared lease row reached the other node as
// a duplicate key, which Spock logs in spock.exception_log and, under
// sub_disable, stops the subscription for). Every node's take, renewal,
// read and release writes only rows of its own node.
func TestLeaseStepsWriteOnlyTheirOwnNodesRows(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	n2, n3 := d.Conn(2), d.Conn(3)
	for _, c := range []*pgx.Conn{n2, n3} {
		testenv.One[int64](t, c, "SELECT pgrelay._processor_start('leader', 'host', 1, 'test')")
	}
	own := func(t *testing.T, node int32, rows []written) {
		t.Helper()
		for _, r := range rows {
			require.Equal(t, node, r.node, "node %d's lease step wrote a row of %s of another node", node, r.table)
		}
	}
	var s leaseStep
	var term int64

	own(t, 2, writtenBy(t, n2, func(tx pgx.Tx) { s = lease(t, tx, "10 seconds") })) // the first take
	require.True(t, s.taken && s.mine, "node 2 takes the free lease: %+v", s)
	require.NotNil(t, s.term)
	term = *s.term

	own(t, 3, writtenBy(t, n3, func(tx pgx.Tx) { s = lease(t, tx, "10 seconds") })) // a take refused
	require.False(t, s.taken || s.mine, "node 3 leaves node 2's lease alone: %+v", s)
	require.Equal(t, int32(2), *s.leader)

	own(t, 2, writtenBy(t, n2, func(tx pgx.Tx) { s = lease(t, tx, "10 seconds") })) // a renewal
	require.True(t, s.mine && !s.taken && *s.term == term, "node 2 renews term %d: %+v", term, s)

	var read *int32
	own(t, 3, writtenBy(t, n3, func(tx pgx.Tx) { read = holder(t, tx) })) // a read
	require.Equal(t, int32(2), *read)

	own(t, 2, writtenBy(t, n2, func(tx pgx.Tx) {
		require.True(t, testenv.One[bool](t, tx, "SELECT pgrelay._lease_release($1)", term))
	}))
	own(t, 3, writtenBy(t, n3, func(tx pgx.Tx) { s = lease(t, tx, "10 seconds") })) // a take after the release
	require.True(t, s.taken && s.mine && *s.term > term, "node 3 takes the released lease with a later term: %+v", s)
	require.Equal(t, int32(3), *holder(t, n2))
}

// Two nodes that take the lease at the same moment, each before the other's
// take has reached it, bid the same term; once each has the other's bid both
// name the same holder, the lower node id, whatever order the bids arrived
// in. A later term wins over a lower node id.
func TestLeaseSimultaneousTakesNameOneHolder(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	n2, n3 := d.Conn(2), d.Conn(3)
	tx3, err := n3.Begin(bg)
	require.NoError(t, err)
	defer func() { _ = tx3.Rollback(bg) }()
	s3 := lease(t, tx3, "10 seconds") // node 3 takes; node 2 does not see it yet
	s2 := lease(t, n2, "10 seconds")
	require.NoError(t, tx3.Commit(bg))
	require.True(t, s2.taken && s3.taken && *s2.term == *s3.term, "both took term 1: %+v %+v", s2, s3)
	for _, c := range []*pgx.Conn{n2, n3} {
		require.Equal(t, int32(2), *holder(t, c), "the lower node id holds an equal term")
	}
	require.True(t, lease(t, n2, "10 seconds").mine, "node 2 renews")
	s3 = lease(t, n3, "10 seconds")
	require.False(t, s3.mine || s3.taken, "node 3 leaves it: %+v", s3)

	d.bid(3, 9, "10 seconds") // a take of node 3's of a later term arrives
	require.Equal(t, int32(3), *lease(t, n2, "10 seconds").leader)
	require.False(t, testenv.One[bool](t, n2, "SELECT pgrelay._holds_lease(1, now())"), "node 2's term 1 is deposed")
	require.True(t, testenv.One[bool](t, n3, "SELECT pgrelay._holds_lease(9, now())"))
	require.Equal(t, 0, d.Count("SELECT count(*) FROM pgrelay.leader_leases WHERE node_id = 2 AND lease_until > now()"),
		"node 2's step ended its deposed bid")
	d.Exec("UPDATE pgrelay.leader_leases SET lease_until = now() WHERE node_id = 3") // node 3 releases
	require.Nil(t, holder(t, n2), "no bid runs: the deposed one does not come back")
	s2 = lease(t, n2, "10 seconds")
	require.True(t, s2.taken && *s2.term == 10, "node 2 takes above every term it has seen: %+v", s2)

	for _, d := range []any{nil, "0 seconds", "-1 second"} {
		_, err := n2.Exec(bg, "SELECT pgrelay._lease($1::interval)", d)
		requireCode(t, err, "22023", "a lease step of %v", d)
	}
}
