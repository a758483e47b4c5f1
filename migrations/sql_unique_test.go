package migrations_test

// The producer's options of issue 30: notify()'s and notify_many()'s
// p_priority, p_key and p_unique_for.

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/testenv"
)

// p_priority is stored in queue.priority; NULL takes the channel's default;
// out of a smallint's range is PR009, and nothing is enqueued.
func TestNotifyPriority(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("c", "")
	d.register("dedup", "p_deduplicate := true")
	d.Exec("SELECT pgrelay.update(c, p_priority := 3) FROM unnest(ARRAY['c', 'dedup']) c")

	priority := func(id int64) int {
		return d.Count("SELECT priority FROM pgrelay.queue WHERE id = $1", id)
	}
	require.Equal(t, 3, priority(d.notify("c", "default")), "NULL: the channel's default")
	require.Equal(t, 7, priority(testenv.One[int64](t, d.Pool, "SELECT pgrelay.notify('c', 'x', p_priority := 7)")))
	require.Equal(t, -2, priority(testenv.One[int64](t, d.Pool, "SELECT pgrelay.notify('c', 'x', p_priority := -2)")))
	require.Equal(t, 32767, priority(testenv.One[int64](t, d.Pool, "SELECT pgrelay.notify('c', 'x', p_priority := 32767)")))
	require.Equal(t, -32768, priority(testenv.One[int64](t, d.Pool, "SELECT pgrelay.notify('c', 'x', p_priority := -32768)")))
	require.Equal(t, 5, priority(testenv.One[int64](t, d.Pool, "SELECT pgrelay.notify('dedup', 'y', p_priority := 5)")),
		"the deduplicating path too")
	require.Equal(t, 9, priority(testenv.One[int64](t, d.Pool, "SELECT pgrelay.notify('c', 'k', p_priority := 9, p_key := 'k')")),
		"the unique-key path too")
	delayed := testenv.One[int64](t, d.Pool, "SELECT pgrelay.notify('c', 'x', p_delay := '1 hour', p_priority := 4)")
	require.Equal(t, 4, priority(delayed))

	many := testenv.Column[int64](t, d.Pool, "SELECT pgrelay.notify_many('c', ARRAY['a', 'b'], p_priority := 2)")
	require.Len(t, many, 2)
	for _, id := range many {
		require.Equal(t, 2, priority(id))
	}
	for _, id := range testenv.Column[int64](t, d.Pool, "SELECT pgrelay.notify_many('c', ARRAY['a', 'b'])") {
		require.Equal(t, 3, priority(id))
	}

	before := d.Count("SELECT count(*) FROM pgrelay.queue")
	requireCode(t, d.Err("SELECT pgrelay.notify('c', 'x', p_priority := 32768)"), "PR009")
	requireCode(t, d.Err("SELECT pgrelay.notify('c', 'x', p_priority := -32769)"), "PR009")
	requireCode(t, d.Err("SELECT pgrelay.notify('c', 'x', p_priority := 2147483647)"), "PR009")
	requireCode(t, d.Err("SELECT pgrelay.notify_many('c', ARRAY['a'], p_priority := 40000)"), "PR009")
	require.Equal(t, before, d.Count("SELECT count(*) FROM pgrelay.queue"), "nothing enqueued by a refused call")
}

// A key held by a pending, running or retrying event absorbs a call with the
// same channel and key; without p_unique_for the key is free once the event
// ends. Payloads do not matter, keys do.
func TestNotifyKeyWhileOpen(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("c", "p_max_attempts := 3, p_retry_delay := '0'")
	d.register("other", "")
	keyed := func(channel, payload, key string) int64 {
		return testenv.One[int64](t, d.Pool, "SELECT pgrelay.notify($1, $2, p_key := $3)", channel, payload, key)
	}

	first := keyed("c", "one", "k")
	require.Equal(t, first, keyed("c", "two", "k"), "same key, other payload: absorbed")
	require.NotEqual(t, first, keyed("c", "one", "k2"), "other key, same payload: enqueued")
	require.NotEqual(t, first, keyed("other", "one", "k"), "other channel: enqueued")
	require.NotEqual(t, first, d.notify("c", "one"), "a call without a key is not deduplicated")
	require.Equal(t, 1, d.Count("SELECT count(*) FROM pgrelay.log WHERE event = 'deduplicated' AND queue_id = $1", first))
	d.requireStatus(first, "pending")

	// Running, then retrying: still held.
	proc := startProcessor(t, d.Pool)
	rows := claim(t, d.Pool, proc, 100)
	var run claimedRow
	for _, r := range rows {
		if r.ID == first {
			run = r
		}
	}
	require.Equal(t, first, run.ID)
	require.Equal(t, first, keyed("c", "three", "k"), "held while running")
	complete(t, d.Pool, proc, run, "failed", "boom")
	d.requireStatus(first, "retrying")
	require.Equal(t, first, keyed("c", "four", "k"), "held while retrying")

	// Succeeded: free, and the next call holds it.
	retry := claim(t, d.Pool, proc, 100)
	var again claimedRow
	for _, r := range retry {
		if r.OriginID == first {
			again = r
		}
	}
	require.Equal(t, first, again.OriginID)
	complete(t, d.Pool, proc, again, "succeeded", "")
	second := keyed("c", "five", "k")
	require.NotEqual(t, first, second)
	require.Equal(t, second, keyed("c", "six", "k"))
}

// With p_unique_for the key is held for that period from the call, after a
// success too; gave_up, expired and cancelled release it at once. The
// window outlives the log's rows.
func TestNotifyUniqueFor(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("c", "p_max_attempts := 1")
	unique := func(payload string) int64 {
		return testenv.One[int64](t, d.Pool, "SELECT pgrelay.notify('c', $1, p_unique_for := '1 hour')", payload)
	}
	proc := startProcessor(t, d.Pool)
	end := func(id int64, event string) {
		t.Helper()
		for _, r := range claim(t, d.Pool, proc, 100) {
			if r.OriginID == id {
				require.Equal(t, 1, complete(t, d.Pool, proc, r, event, "e"))
				return
			}
		}
		t.Fatalf("event %d not claimed", id)
	}

	// The payload is the key by default.
	first := unique("x")
	require.Equal(t, first, unique("x"))
	require.NotEqual(t, first, unique("y"))
	end(first, "succeeded")
	d.requireStatus(first, "succeeded")
	require.Equal(t, first, unique("x"), "held after a success, within the window")
	d.Exec("DELETE FROM pgrelay.log WHERE origin_id = $1", first)
	require.Equal(t, first, unique("x"), "held after the log's rows are gone")

	// A call with p_key alone meets the window too; other keys do not.
	require.Equal(t, first, testenv.One[int64](t, d.Pool, "SELECT pgrelay.notify('c', 'z', p_key := 'x')"))

	// The window's end frees it (the clock moved on: until set back).
	d.Exec("UPDATE pgrelay.unique_keys SET until = now() - interval '1 second' WHERE origin_id = $1", first)
	second := unique("x")
	require.NotEqual(t, first, second)

	// gave_up releases it within the window.
	end(second, "failed")
	d.requireStatus(second, "gave_up")
	third := unique("x")
	require.NotEqual(t, second, third)

	// expired too.
	end(third, "expired")
	d.requireStatus(third, "expired")
	fourth := unique("x")
	require.NotEqual(t, third, fourth)

	// So does a 'cancelled' log row, whoever writes it (the log's CHECK
	// gains 'cancelled' with pgrelay.cancel; here the test widens it).
	d.Exec("ALTER TABLE pgrelay.log DROP CONSTRAINT log_event")
	d.Exec(`INSERT INTO pgrelay.log (queue_id, origin_id, channel, attempt, event) VALUES ($1, $1, 'c', 1, 'cancelled')`, fourth)
	require.NotEqual(t, fourth, unique("x"))

	// An absorbed call's 'deduplicated' row names the holder, under a fresh id.
	require.Equal(t, 4, d.Count("SELECT count(*) FROM pgrelay.log WHERE event = 'deduplicated' AND queue_id = $1", first))
}

// notify_many: one key per payload (NULL: the payload), duplicates within
// the call absorbed by the first; the window applies to each.
func TestNotifyManyKeys(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("c", "")

	got := testenv.Column[int64](t, d.Pool,
		"SELECT pgrelay.notify_many('c', ARRAY['a', 'b', 'c', 'k'], p_key := ARRAY['k', NULL, 'k', NULL])")
	require.Len(t, got, 4)
	require.Equal(t, got[0], got[2], "same key within the call")
	require.NotEqual(t, got[0], got[1])
	require.Equal(t, got[0], got[3], "a NULL key: the payload 'k' is the key")
	require.Equal(t, 2, d.Count("SELECT count(*) FROM pgrelay.queue"))

	// p_unique_for alone: each payload is its key.
	w := testenv.Column[int64](t, d.Pool,
		"SELECT pgrelay.notify_many('c', ARRAY['x', 'y', 'x'], p_unique_for := '1 day')")
	require.Equal(t, w[0], w[2])
	require.NotEqual(t, w[0], w[1])
	require.Equal(t, []int64{w[1]}, testenv.Column[int64](t, d.Pool,
		"SELECT pgrelay.notify_many('c', ARRAY['y'], p_unique_for := '1 day')"))

	before := d.Count("SELECT count(*) FROM pgrelay.queue")
	requireCode(t, d.Err("SELECT pgrelay.notify_many('c', ARRAY['a', 'b'], p_key := ARRAY['k'])"), "PR111")
	requireCode(t, d.Err("SELECT pgrelay.notify_many('c', ARRAY['a'], p_unique_for := '0')"), "PR024")
	require.Equal(t, before, d.Count("SELECT count(*) FROM pgrelay.queue"))
	require.Empty(t, testenv.Column[int64](t, d.Pool, "SELECT pgrelay.notify_many('c', '{}', p_key := '{}')"))
}

func TestNotifyUniqueRejects(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("c", "")
	requireCode(t, d.Err("SELECT pgrelay.notify('c', 'x', p_unique_for := '0')"), "PR024")
	requireCode(t, d.Err("SELECT pgrelay.notify('c', 'x', p_unique_for := '-1 second')"), "PR024")
	requireCode(t, d.Err("SELECT pgrelay.notify('c', 'x', p_unique_for := '3651 days')"), "PR024")
	requireCode(t, d.Err("SELECT pgrelay.notify('c', NULL, p_key := 'k')"), "PR005")
	require.Zero(t, d.Count("SELECT count(*) FROM pgrelay.queue"))
	require.Zero(t, d.Count("SELECT count(*) FROM pgrelay.unique_keys"))
	testenv.One[int64](t, d.Pool, "SELECT pgrelay.notify('c', 'x', p_unique_for := '3650 days')")
}

// Two producers of one key at once: the second waits for the first's commit
// and returns its id; under REPEATABLE READ it fails with 40001 instead of
// enqueueing a second event its snapshot cannot see.
func TestNotifyKeyConcurrently(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("c", "")
	c1, c2 := d.Conn(-1), d.Conn(-1)
	type result struct {
		id  int64
		err error
	}

	for _, iso := range []string{"READ COMMITTED", "REPEATABLE READ"} {
		key := "k " + iso
		tx1, err := c1.Begin(bg)
		require.NoError(t, err)
		id1 := testenv.One[int64](t, tx1, "SELECT pgrelay.notify('c', 'a', p_key := $1)", key)

		_, err = c2.Exec(bg, "BEGIN ISOLATION LEVEL "+iso)
		require.NoError(t, err)
		testenv.One[int32](t, c2, "SELECT 1") // the snapshot, before the first commits
		done := make(chan result, 1)
		go func() {
			var id int64
			err := c2.QueryRow(bg, "SELECT pgrelay.notify('c', 'b', p_key := $1)", key).Scan(&id)
			done <- result{id, err}
		}()
		waitUntilBlocked(t, d.Pool, c2.PgConn().PID())
		require.NoError(t, tx1.Commit(bg))
		r := <-done
		if iso == "READ COMMITTED" {
			require.NoError(t, r.err)
			require.Equal(t, id1, r.id)
			_, err = c2.Exec(bg, "COMMIT")
		} else {
			requireCode(t, r.err, "40001")
			_, err = c2.Exec(bg, "ROLLBACK")
		}
		require.NoError(t, err)
		require.Equal(t, 1, d.Count("SELECT count(*) FROM pgrelay.queue WHERE origin_id IN (SELECT origin_id FROM pgrelay.unique_keys WHERE key = $1)", key))
	}
}

// The table keeps the open keys and what the last calls left: a row whose
// window and event have both ended goes with a later keyed call of its node.
func TestUniqueKeysTrimmed(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("c", "")
	proc := startProcessor(t, d.Pool)
	ids := testenv.Column[int64](t, d.Pool, "SELECT pgrelay.notify_many('c', ARRAY['a', 'b', 'c'], p_key := ARRAY['a', 'b', 'c'])")
	require.Equal(t, 3, d.Count("SELECT count(*) FROM pgrelay.unique_keys"))
	for _, r := range claim(t, d.Pool, proc, 10) {
		if r.ID == ids[0] || r.ID == ids[1] {
			require.Equal(t, 1, complete(t, d.Pool, proc, r, "succeeded", ""))
		}
	}
	// Two new keyed calls look at the due rows: the ended ones go, the open
	// ones ('c', and each new one) stay.
	testenv.One[int64](t, d.Pool, "SELECT pgrelay.notify('c', 'd', p_key := 'd')")
	testenv.One[int64](t, d.Pool, "SELECT pgrelay.notify('c', 'e', p_key := 'e')")
	testenv.One[int64](t, d.Pool, "SELECT pgrelay.notify('c', 'f', p_key := 'f')")
	require.ElementsMatch(t, []string{"c", "d", "e", "f"},
		testenv.Column[string](t, d.Pool, "SELECT key FROM pgrelay.unique_keys"))
	require.Zero(t, d.Count("SELECT count(*) FROM pgrelay.unique_keys WHERE check_at <= now() AND key IN ('c')"),
		"an open row looked at is put off")
}

// On a cluster a keyed event is held until its node knows the other nodes'
// rows of ids below it (their answers' horizons), then released when it has
// the lowest id of its key, or ended deduplicated naming the one that has.
// Node 5 is simulated here: its heartbeat, its row and its answer are
// inserted as replication would bring them.
func TestUniqueKeysHeldOnACluster(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("c", "")
	d.Exec(`INSERT INTO pgrelay.nodes (node_id, mode) VALUES (0, 'multi-node'), (5, 'multi-node')`)
	// The heartbeat's call, as the Processor's role.
	proc := d.loginAs("processor", "pgrelay_processor")
	resolve := func() int {
		return int(testenv.One[int32](t, proc, "SELECT pgrelay._resolve_keys('1 hour')"))
	}
	held := func(id int64) bool {
		return testenv.One[bool](t, d.Pool, "SELECT not_before = 'infinity' FROM pgrelay.queue WHERE id = $1", id)
	}
	// peerEvent inserts node 5's event of key, with an id at ms.
	peerEvent := func(key string, ms int64) int64 {
		id := ms<<22 | 5<<12
		d.Exec(`INSERT INTO pgrelay.queue (id, origin_id, channel, payload, owner_node, not_before)
			VALUES ($1, $1, 'c', 'from 5', 5, 'infinity')`, id)
		d.Exec(`INSERT INTO pgrelay.unique_keys (origin_id, channel, key_hash, key, until, node, check_at, at, held, due)
			VALUES ($1, 'c', hashtextextended($2, 0), $2, now(), 5, now(), now(), true, now())`, id, key)
		return id
	}
	answer := func(horizon int64) {
		d.Exec(`INSERT INTO pgrelay.sync_answers (node_id, peer, term, knows, horizon)
			VALUES (0, 5, (SELECT term FROM pgrelay.sync_asks WHERE node_id = 0), '{0,5}', $1)
			ON CONFLICT (node_id, peer) DO UPDATE SET term = EXCLUDED.term, horizon = EXCLUDED.horizon`, horizon)
	}

	// Node 0 accepts k; node 5 had accepted it a second before, unseen.
	mine := testenv.One[int64](t, d.Pool, "SELECT pgrelay.notify('c', 'a', p_key := 'k')")
	require.True(t, held(mine))
	d.requireStatus(mine, "pending")
	require.Zero(t, resolve(), "no answer from node 5 yet")
	require.Equal(t, 1, d.Count("SELECT term FROM pgrelay.sync_asks WHERE node_id = 0"), "asked")
	early := peerEvent("k", nowMS()-1000)
	answer(early) // node 5's rows below early are here: not enough
	require.Zero(t, resolve())
	require.True(t, held(mine))
	require.Equal(t, 2, d.Count("SELECT term FROM pgrelay.sync_asks WHERE node_id = 0"), "asked again")
	answer(mine + 1)
	require.Equal(t, 1, resolve())
	require.Zero(t, d.Count("SELECT count(*) FROM pgrelay.queue WHERE id = $1", mine))
	require.Zero(t, d.Count("SELECT count(*) FROM pgrelay.unique_keys WHERE origin_id = $1", mine))
	d.requireStatus(mine, "deduplicated")
	require.Contains(t, d.Text("SELECT error FROM pgrelay.log WHERE origin_id = $1", mine), fmt.Sprint(early),
		"the log row names the survivor")
	require.True(t, held(early), "node 5 decides its own")

	// Node 5 accepts k2 a second after node 0: node 0's event survives.
	mine2 := testenv.One[int64](t, d.Pool, "SELECT pgrelay.notify('c', 'b', p_key := 'k2', p_delay := '1 hour')")
	peerEvent("k2", nowMS()+1000)
	answer(mine2 + 1)
	require.Equal(t, 1, resolve())
	require.True(t, testenv.One[bool](t, d.Pool,
		"SELECT not_before > now() + interval '59 minutes' AND not_before < 'infinity' FROM pgrelay.queue WHERE id = $1", mine2),
		"released to its due time")
	require.False(t, testenv.One[bool](t, d.Pool, "SELECT held FROM pgrelay.unique_keys WHERE origin_id = $1", mine2))
	require.Zero(t, resolve(), "nothing of node 0's own is held")

	// Without another node, nothing is held.
	d.Exec("DELETE FROM pgrelay.nodes WHERE node_id = 5")
	require.False(t, held(testenv.One[int64](t, d.Pool, "SELECT pgrelay.notify('c', 'c', p_key := 'k3')")))
}
