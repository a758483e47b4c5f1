package migrations_test

// The rejoin proof: _sync_ask, _sync_answer, _sync_peers.

import (
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/testenv"
)

type syncPeer struct {
	Peer            int32
	Answered, Alive bool
}

func syncPeers(t *testing.T, c testenv.Querier, term int64) []syncPeer {
	t.Helper()
	rows, err := c.Query(t.Context(), "SELECT peer, answered, alive FROM pgrelay._sync_peers($1, '10 seconds')", term)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[syncPeer])
	require.NoError(t, err)
	return out
}

// A node asks; the peers it must hear from are the nodes that may adopt (not
// the lease row, single-mode or decommissioned nodes), and any node an
// answerer knew of; only answers to this ask count; an answer is written
// once per ask.
func TestSyncPeersAnswersAndKnownNodes(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	n1, n2, n3 := d.Conn(1), d.Conn(2), d.Conn(3)
	for _, c := range []struct {
		conn testenv.Querier
		mode string
	}{{n1, "multi-node"}, {n2, "multi-node"}, {n3, "single"}} {
		testenv.One[int64](t, c.conn, "SELECT pgrelay._processor_start($1, 'h', 1, 'test')", c.mode)
	}
	d.Exec(`INSERT INTO pgrelay.nodes (node_id, mode, last_seen, decommissioned_at)
	        VALUES (4, 'multi-node', now() - interval '1 hour', now()), (-1, 'lease', now(), NULL)`)

	require.Equal(t, []syncPeer{{1, false, true}}, syncPeers(t, n2, 1),
		"the peers: node 1 (not the lease row, single-mode node 3, decommissioned node 4), not answered")
	term := testenv.One[int64](t, n2, "SELECT pgrelay._sync_ask()")
	require.EqualValues(t, 1, term)
	require.Equal(t, []syncPeer{{1, false, true}}, syncPeers(t, n2, term))

	require.EqualValues(t, 1, testenv.One[int32](t, n1, "SELECT pgrelay._sync_answer()"))
	require.EqualValues(t, 0, testenv.One[int32](t, n1, "SELECT pgrelay._sync_answer()"), "answered once per ask")
	require.Equal(t, []syncPeer{{1, true, true}}, syncPeers(t, n2, term))
	require.Equal(t, []int32{1, 2}, testenv.One[[]int32](t, d.Pool,
		"SELECT knows FROM pgrelay.sync_answers WHERE node_id = 2 AND peer = 1"))

	// Node 1 knew of node 5, which node 2 has never heard of (it joined while
	// node 2 was away), and of node 4, which node 2 knows decommissioned.
	d.Exec("UPDATE pgrelay.sync_answers SET knows = '{1,2,4,5}' WHERE node_id = 2 AND peer = 1")
	require.Equal(t, []syncPeer{{1, true, true}, {5, false, false}}, syncPeers(t, n2, term))

	// A new ask: the answers to the old one no longer count, nor what their
	// answerers knew.
	term = testenv.One[int64](t, n2, "SELECT pgrelay._sync_ask()")
	require.EqualValues(t, 2, term)
	require.Equal(t, []syncPeer{{1, false, true}}, syncPeers(t, n2, term))
	require.EqualValues(t, 1, testenv.One[int32](t, n1, "SELECT pgrelay._sync_answer()"))
	require.Equal(t, []syncPeer{{1, true, true}}, syncPeers(t, n2, term))

	// A node does not answer itself, and a node silent for the dead-after
	// shows not alive.
	require.EqualValues(t, 0, testenv.One[int32](t, n2, "SELECT pgrelay._sync_answer()"))
	d.Exec("UPDATE pgrelay.nodes SET last_seen = now() - interval '1 hour' WHERE node_id = 1")
	require.Equal(t, []syncPeer{{1, true, false}}, syncPeers(t, n2, term))
}

// Only Processors answer and read; a producer can do neither.
func TestSyncFunctionsAreTheProcessors(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	for _, f := range []string{"pgrelay._sync_ask()", "pgrelay._sync_answer()", "pgrelay._sync_peers(bigint, interval)"} {
		require.True(t, testenv.One[bool](t, d.Pool, "SELECT has_function_privilege('pgrelay_processor', $1, 'EXECUTE')", f), f)
		require.False(t, testenv.One[bool](t, d.Pool, "SELECT has_function_privilege('pgrelay_producer', $1, 'EXECUTE')", f), f)
		require.False(t, testenv.One[bool](t, d.Pool, "SELECT has_function_privilege('public', $1, 'EXECUTE')", f), f)
	}
}
