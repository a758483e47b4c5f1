package migrations_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/testenv"
)

// A row that arrives by replication wakes this node's Processors only when
// they may run it: one pinned here, or an unrestricted one unless this node
// runs in multi-node mode and another node owns it, and only while nothing
// has claimed it. A multi-node peer's rows, and every claim made on another
// node, used to wake this node's Processor for a claim that found nothing.
func TestReplicaWakesOnlyForRowsThisNodeRuns(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("c", "")
	listener := d.Conn(1)
	_, err := listener.Exec(bg, "LISTEN pgrelay")
	require.NoError(t, err)
	apply := d.Conn(1)
	_, err = apply.Exec(bg, "SET session_replication_role = replica")
	require.NoError(t, err)
	d.Exec("INSERT INTO pgrelay.nodes (node_id, mode) VALUES (1, 'multi-node')")
	hint := testenv.One[string](t, apply, "SELECT pgrelay._wake_hint('c')")

	// woke runs sql as the apply worker would, then a sentinel from another
	// session: notifications arrive in commit order, so the first one the
	// listener gets says whether sql woke it.
	woke := func(sql string, args ...any) bool {
		t.Helper()
		_, err := apply.Exec(bg, sql, args...)
		require.NoError(t, err)
		d.Exec("SELECT pg_notify('pgrelay', 'sentinel')")
		ctx, cancel := context.WithTimeout(bg, time.Minute)
		defer cancel()
		n, err := listener.WaitForNotification(ctx)
		require.NoError(t, err)
		if n.Payload == "sentinel" {
			return false
		}
		require.Equal(t, hint, n.Payload, "a wake-up names the row's channel")
		n, err = listener.WaitForNotification(ctx)
		require.NoError(t, err)
		require.Equal(t, "sentinel", n.Payload, "one wake-up per transaction")
		return true
	}
	// A row enqueued on node 7: an id it drew.
	of7 := func() int64 {
		return testenv.One[int64](t, d.Pool, "SELECT (pgrelay._next_id() & ~(1023::bigint << 12)) | (7 << 12)")
	}
	insert := `INSERT INTO pgrelay.queue (id, origin_id, channel, payload, owner_node, run_in_node)
		VALUES ($1, $1, 'c', 'x', 7, $2)`

	free := of7()
	require.False(t, woke(insert, free, nil), "a multi-node peer's own row")
	require.False(t, woke(insert, of7(), 2), "a row pinned to another node")
	pinned := of7()
	require.True(t, woke(insert, pinned, 1), "a row pinned here")
	require.False(t, woke("UPDATE pgrelay.queue SET dispatched_at = now(), dispatched_by = 5 WHERE id = $1", pinned),
		"a claim")
	require.True(t, woke("UPDATE pgrelay.queue SET dispatched_at = NULL, dispatched_by = NULL WHERE id = $1", pinned),
		"a release of a row this node runs")
	require.True(t, woke("UPDATE pgrelay.queue SET owner_node = 1 WHERE id = $1", free), "a row adopted by this node")
	many := []int64{of7(), of7(), of7()}
	require.True(t, woke(`INSERT INTO pgrelay.queue (id, origin_id, channel, payload, owner_node, run_in_node)
		SELECT i, i, 'c', 'x', 7, 1 FROM unnest($1::bigint[]) i`, many))

	// In leader mode (a leader runs every node's rows), and on a node whose
	// mode is not known yet, every unclaimed row wakes.
	d.Exec("UPDATE pgrelay.nodes SET mode = 'leader' WHERE node_id = 1")
	require.True(t, woke(insert, of7(), nil))
	d.Exec("DELETE FROM pgrelay.nodes")
	require.True(t, woke(insert, of7(), nil))
}
