package migrations_test

// What a login outside pgrelay's roles, or a producer, must not be able to
// do to pgrelay (docs/security.md, threat model).

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/testenv"
	"github.com/pgrelay/pgrelay/migrations"
)

// Advisory locks carry no permissions. A login with nothing but CONNECT
// holds every advisory key pgrelay ever used (the migration lock, the id
// generator's, a deduplicated payload's, a serialised lane's, the
// publisher lease's); none of migrate, notify() while the id counter lags,
// a deduplicated notify() or a lane claim waits for it or skips work.
func TestOutsiderAdvisoryLocksStallNothing(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("dedup", "p_deduplicate := true")
	d.register("lane", "p_concurrency_mode := 'channel'")
	outsider := d.loginAs("outsider", "")
	for _, key := range []string{
		"1886816817, 0", "1886816817, 1", "1886816820, 0",
		"1886816818, hashtext('dedup') # hashint8(hashtextextended('p', 0))",
		"1886816819, hashtext('lane') # hashint8(0)",
	} {
		require.True(t, testenv.One[bool](t, outsider, "SELECT pg_try_advisory_lock("+key+")"), key)
	}
	// Whatever waits on a lock gives up within seconds rather than hang.
	c := d.Conn(-1)
	_, err := c.Exec(bg, "SET lock_timeout = '5s'")
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(bg, 10*time.Second)
	defer cancel()
	_, err = migrations.Up(ctx, c)
	require.NoError(t, err, "migrate")

	// The counter far behind the clock: the next id moves it.
	_, err = c.Exec(bg, "SELECT setval('pgrelay._id_seq', 1)")
	require.NoError(t, err)
	id := testenv.One[int64](t, c, "SELECT pgrelay.notify('lane', 'x')")
	require.InDelta(t, nowMS(), idMS(id), 5000, "the id carries the clock")

	first := testenv.One[int64](t, c, "SELECT pgrelay.notify('dedup', 'p')")
	require.Equal(t, first, testenv.One[int64](t, c, "SELECT pgrelay.notify('dedup', 'p')"))

	proc := startProcessor(t, c)
	got := claim(t, c, proc, 10)
	require.ElementsMatch(t, []int64{id, first}, ids(got), "the lane's head and the deduplicated event are claimed")
}

// No function of pgrelay's schemas takes an advisory lock.
func TestNoAdvisoryLocksInFunctions(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	names := testenv.Column[string](t, d.Pool, `SELECT p.oid::regprocedure::text FROM pg_proc p
		WHERE p.pronamespace IN ('pgrelay'::regnamespace, 'pgrelay_notifier'::regnamespace)
		  AND p.prosrc ~* 'advisory' ORDER BY 1`)
	require.Empty(t, names)
}

// A producer that sets pg_relay.node_id in its session does not change the
// node its events are stamped with: notify() uses the node id the database
// records (migrate and every Processor record their own). Processors' and
// admins' sessions keep theirs.
func TestProducerCannotForgeNodeID(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("pinned", "p_node_restricted := true")
	// The node's id as a Processor of node 5 records it.
	require.Zero(t, testenv.One[int32](t, d.Conn(5), "SELECT pgrelay._record_node()"), "recorded before: the migration's 0")
	require.Equal(t, int32(5), testenv.One[int32](t, d.Pool, "SELECT node_id FROM pgrelay.this_node"))

	producer := d.loginAs("producer", "pgrelay_producer")
	stamped := func(id int64) string {
		t.Helper()
		return fmt.Sprint(idNode(id), "/", d.Count("SELECT run_in_node FROM pgrelay.queue WHERE id = $1", id),
			"/", d.Count("SELECT owner_node FROM pgrelay.queue WHERE id = $1", id))
	}
	require.Equal(t, "5/5/5", stamped(testenv.One[int64](t, producer, "SELECT pgrelay.notify('pinned', 'a')")))
	require.Equal(t, int32(5), testenv.One[int32](t, producer, "SELECT pgrelay._this_node()"))
	_, err := producer.Exec(bg, "SET pg_relay.node_id = '9'")
	require.NoError(t, err)
	require.Equal(t, "5/5/5", stamped(testenv.One[int64](t, producer, "SELECT pgrelay.notify('pinned', 'b')")))
	for _, id := range testenv.Column[int64](t, producer, "SELECT pgrelay.notify_many('pinned', ARRAY['c', 'd'])") {
		require.Equal(t, "5/5/5", stamped(id))
	}
	require.Equal(t, int32(5), testenv.One[int32](t, producer, "SELECT pgrelay._this_node()"))
	// Nor can it record its own.
	requireCode(t, execErr(producer, "SELECT pgrelay._record_node()"), insufficientPrivilege)

	// A Processor's session (a member of pgrelay_processor) keeps its own.
	processor := d.loginAs("processor", "pgrelay_processor")
	_, err = processor.Exec(bg, "SET pg_relay.node_id = '7'")
	require.NoError(t, err)
	require.Equal(t, int32(7), testenv.One[int32](t, processor, "SELECT pgrelay._this_node()"))
	require.Equal(t, int32(5), testenv.One[int32](t, d.Pool, "SELECT node_id FROM pgrelay.this_node"))
}
