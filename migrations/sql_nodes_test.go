package migrations_test

// Nodes: decommission and adoption (_adopt, decommission).

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/testenv"
)

// decommission hands the node's unrestricted rows (pending, or claimed by its
// Processors) to the live node that adopts, at once; rows of the node that
// arrive later (through replication, here enqueued as node 5) are adopted
// too. Its pinned rows, pending or in flight, are discarded (gave_up; an
// email's notification fails).
func TestDecommissionHandsUnrestrictedRowsToALiveNode(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("u", "")
	d.register("pin", "p_node_restricted := true")
	d.Exec(`SELECT pgrelay_notifier.create_channel('mail', 'app@example.com', p_node_restricted := true)`)
	n5, n1 := d.Conn(5), d.Conn(1)
	p5 := testenv.One[int64](t, n5, "SELECT pgrelay._processor_start('multi-node', 'host5', 5, 'test')")
	for _, p := range []string{"a", "b", "c"} {
		testenv.One[int64](t, n5, "SELECT pgrelay.notify('u', $1)", p)
	}
	require.Len(t, claimMode(t, n5, p5, "multi-node", false, 1, "sql"), 1) // one unrestricted row in flight
	mail := testenv.One[int64](t, n5, `SELECT pgrelay_notifier.send('mail', ARRAY['to@example.org'], 'Hi', 'Body')`)
	require.Len(t, claimMode(t, n5, p5, "multi-node", false, 10, "email"), 1)         // the pinned email in flight
	testenv.One[int64](t, n5, "SELECT pgrelay.notify_many('pin', ARRAY['p1', 'p2'])") // pinned rows pending
	testenv.One[int64](t, n1, "SELECT pgrelay._processor_start('multi-node', 'host1', 1, 'test')")
	d.Exec("UPDATE pgrelay.processors SET last_seen = now() - interval '1 hour' WHERE node_id = 5")
	d.Exec("UPDATE pgrelay.nodes SET last_seen = now() - interval '1 hour' WHERE node_id = 5")

	require.EqualValues(t, 3, testenv.One[int64](t, d.Pool, "SELECT pgrelay.decommission(5, '10 seconds')"),
		"the pinned rows, pending and in flight, are discarded")
	require.Equal(t, 3, d.Count(`SELECT count(*) FROM pgrelay.queue
	  WHERE channel = 'u' AND owner_node = 1 AND dispatched_at IS NULL`), "the unrestricted rows went to node 1")
	require.Zero(t, d.Count("SELECT count(*) FROM pgrelay.queue WHERE channel <> 'u'"))
	require.Equal(t, 3, d.Count(`SELECT count(*) FROM pgrelay.log
	  WHERE event = 'adopted' AND error LIKE 'node 5 was decommissioned; adopted by node 1%'`))
	require.Equal(t, 3, d.Count(`SELECT count(*) FROM pgrelay.log
	  WHERE event = 'gave_up' AND error LIKE 'node 5 was decommissioned%'`))
	require.Equal(t, "failed", testenv.One[string](t, d.Pool, "SELECT pgrelay_notifier.get_status($1)", mail))
	require.Zero(t, d.Count("SELECT count(*) FROM pgrelay.processors WHERE node_id = 5"))

	// A row of node 5 that arrives later is adopted at node 1's next look.
	late := testenv.One[int64](t, n5, "SELECT pgrelay.notify('u', 'late')")
	d.Exec("UPDATE pgrelay.nodes SET adopted_at = now() - interval '1 hour' WHERE node_id = 5") // the re-look is due
	require.EqualValues(t, 1, testenv.One[int32](t, n1, "SELECT pgrelay._adopt('10 seconds')"))
	require.Equal(t, 1, d.Count("SELECT count(*) FROM pgrelay.queue WHERE id = $1 AND owner_node = 1", late))
	require.Equal(t, 1, d.Count(`SELECT count(*) FROM pgrelay.log WHERE queue_id = $1 AND event = 'adopted'
	  AND error LIKE 'node 5 was decommissioned; adopted by node 1%'`, late))

	// A node that runs again under the id is no longer decommissioned.
	testenv.One[int64](t, n5, "SELECT pgrelay._processor_start('multi-node', 'host5', 7, 'test')")
	require.Equal(t, 1, d.Count("SELECT count(*) FROM pgrelay.nodes WHERE node_id = 5 AND decommissioned_at IS NULL"))
}

// Without a live node to adopt, decommission leaves the unrestricted rows to
// the first node that comes alive: the decommissioned node stays dead, even
// to an adopter that counts dead only after a longer --dead-after.
func TestDecommissionWithoutLiveNodeAdoptsLater(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("u", "")
	n5, n1 := d.Conn(5), d.Conn(1)
	testenv.One[int64](t, n5, "SELECT pgrelay._processor_start('multi-node', 'host5', 5, 'test')")
	testenv.One[int64](t, n5, "SELECT pgrelay.notify('u', 'a')")
	d.Exec("UPDATE pgrelay.nodes SET last_seen = now() - interval '2 minutes' WHERE node_id = 5")
	require.Zero(t, testenv.One[int64](t, d.Pool, "SELECT pgrelay.decommission(5, '1 minute')"))
	require.Equal(t, 1, d.Count("SELECT count(*) FROM pgrelay.queue WHERE owner_node = 5"), "no live node yet")

	testenv.One[int64](t, n1, "SELECT pgrelay._processor_start('multi-node', 'host1', 1, 'test')")
	require.EqualValues(t, 1, testenv.One[int32](t, n1, "SELECT pgrelay._adopt('1 hour')"))
	require.Equal(t, 1, d.Count("SELECT count(*) FROM pgrelay.queue WHERE owner_node = 1"))
}

// decommission refuses a p_dead_after that is NULL, zero or negative: with
// it every node counts as silent for long enough, and a live node would be
// decommissioned (its pinned rows discarded) while its Processors run.
func TestDecommissionRefusesNonPositiveDeadAfter(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("pin", "p_node_restricted := true")
	n5 := d.Conn(5)
	testenv.One[int64](t, n5, "SELECT pgrelay._processor_start('multi-node', 'host5', 5, 'test')")
	testenv.One[int64](t, n5, "SELECT pgrelay.notify('pin', 'a')")
	for _, bad := range []string{"'-1 hour'", "'-1 microsecond'", "'0'", "NULL"} {
		e := requireCode(t, d.Err("SELECT pgrelay.decommission(5, "+bad+")"), "PR023", bad)
		require.Contains(t, e.Message, "dead_after must be positive", bad)
	}
	require.Equal(t, 1, d.Count("SELECT count(*) FROM pgrelay.queue WHERE run_in_node = 5"), "the live node's rows are kept")
	require.Equal(t, 1, d.Count("SELECT count(*) FROM pgrelay.processors WHERE node_id = 5"))
	require.Zero(t, d.Count("SELECT count(*) FROM pgrelay.nodes WHERE decommissioned_at IS NOT NULL"))
	// A positive one judges the node by its heartbeat, as before.
	requireCode(t, d.Err("SELECT pgrelay.decommission(5, '1 minute')"), "PR022")
}

// In leader mode the leader runs every node's unrestricted rows whoever owns
// them: an adopter that is not the leader takes back only the dead node's
// claims (rows no one else touches until then) and writes no other row. A
// new owner for the pending rows, which the leader may be running and
// deleting at that moment, would reach the leader's node as updates of rows
// it no longer has (on Spock an apply error) or undo its claims (last update
// wins on the whole row).
func TestLeaderModeAdoptionTakesBackClaimsOnly(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("u", "")
	n5, n1 := d.Conn(5), d.Conn(1)
	p5 := testenv.One[int64](t, n5, "SELECT pgrelay._processor_start('leader', 'host5', 5, 'test')")
	for _, p := range []string{"a", "b", "c"} {
		testenv.One[int64](t, n5, "SELECT pgrelay.notify('u', $1)", p)
	}
	claimed := claimMode(t, n5, p5, "leader", true, 1, "sql")
	require.Len(t, claimed, 1)
	testenv.One[int64](t, n1, "SELECT pgrelay._processor_start('leader', 'host1', 1, 'test')")
	d.Exec("UPDATE pgrelay.processors SET last_seen = now() - interval '1 hour' WHERE node_id = 5")
	d.Exec("UPDATE pgrelay.nodes SET last_seen = now() - interval '1 hour' WHERE node_id = 5")
	pending := `SELECT string_agg(id || ':' || xmin || ':' || owner_node, ',' ORDER BY id) FROM pgrelay.queue WHERE id <> $1`
	before := testenv.One[string](t, d.Pool, pending, claimed[0].ID)

	require.EqualValues(t, 1, testenv.One[int32](t, n1, "SELECT pgrelay._adopt('10 seconds')"), "the claim taken back")
	require.Equal(t, 1, d.Count(`SELECT count(*) FROM pgrelay.queue
	  WHERE id = $1 AND dispatched_at IS NULL AND dispatched_by IS NULL AND owner_node = 5`, claimed[0].ID))
	require.Equal(t, before, testenv.One[string](t, d.Pool, pending, claimed[0].ID), "the pending rows are not written")
	require.Equal(t, 1, d.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'adopted'
	  AND queue_id = $1 AND error LIKE 'node 5 is dead%adopted by node 1 (its claim was taken back)'`, claimed[0].ID))
	require.Zero(t, d.Count("SELECT count(*) FROM pgrelay.processors WHERE node_id = 5"))
	require.Equal(t, 1, d.Count("SELECT count(*) FROM pgrelay.nodes WHERE node_id = 5 AND adopted_at IS NOT NULL"))
}
