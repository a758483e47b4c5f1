package actors_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/devenv"
	"github.com/pgrelay/pgrelay/internal/testenv"
)

// An event notified with a priority carries it in every document NATS gets
// of it: enqueued, succeeded, failed, gave_up, retried (its dead letter kept
// it), discarded, deduplicated (the call's) and cancelled. An event of
// priority 0 has no "priority" field at all.
func TestActorEventsCarryPriority(t *testing.T) {
	t.Parallel()
	n := startNATS(t, devenv.NATSConfig{})
	_, js := natsClient(t, n.URL())
	e := newEnv(t)
	e.Exec(`CREATE FUNCTION public.fail(p text) RETURNS void LANGUAGE plpgsql AS
	$$ BEGIN RAISE EXCEPTION 'no luck for %', p; END $$`)
	e.Exec(`SELECT pgrelay.register('ok', 'SELECT length($1)', p_publish_enqueued := true)`)
	e.Exec(`SELECT pgrelay.register('f', 'SELECT public.fail($1)', p_publish_enqueued := true,
		p_max_attempts := 2, p_retry_delay := '10 milliseconds')`)
	e.Exec(`SELECT pgrelay.register('dd', 'SELECT length($1)', p_deduplicate := true)`)

	high := map[int64]bool{} // origin ids of the events of priority 5
	notify := func(channel, payload, extra string) int64 {
		id := e.IDs(`SELECT pgrelay.notify($1, $2`+extra+`)`, channel, payload)[0]
		high[id] = extra != ""
		return id
	}
	notify("ok", "high", ", p_priority := 5")
	notify("ok", "low", "")
	fHigh := notify("f", "high", ", p_priority := 5")
	notify("f", "low", "")
	later := notify("ok", "later", ", p_priority := 5, p_delay := '1 hour'")
	require.True(t, testenv.One[bool](t, e.Pool, `SELECT pgrelay.cancel($1)`, later))
	// Two calls in one transaction: the second is absorbed by the first's row.
	tx, err := e.Pool.Begin(context.Background())
	require.NoError(t, err)
	dd := testenv.One[int64](t, tx, `SELECT pgrelay.notify('dd', 'x', p_priority := 5)`)
	require.Equal(t, dd, testenv.One[int64](t, tx, `SELECT pgrelay.notify('dd', 'x', p_priority := 5)`))
	require.NoError(t, tx.Commit(context.Background()))
	high[dd] = true

	e.startProcessor(withNATS(n.URL()))
	testenv.Eventually(e.T, time.Minute, "both events of f to give up", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.dead_letters`) == 2
	})
	e.Exec(`SELECT pgrelay.retry(id) FROM pgrelay.dead_letters WHERE origin_id = $1`, fHigh)
	testenv.Eventually(e.T, time.Minute, "the retried event to give up again", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'gave_up'`) == 3
	})
	e.Exec(`SELECT pgrelay.discard_all('f')`)

	// ok: enqueued, succeeded (2 × 2); later: enqueued, cancelled; f high:
	// enqueued, failed, gave_up, retried, failed, gave_up, discarded; f low:
	// enqueued, failed, gave_up, discarded; dd: deduplicated, succeeded.
	const total = 4 + 2 + 7 + 4 + 2
	requireLogPublishedOnce(t, e, js, "prio", total)
	msgs := consumeAll(t, js, "PGRELAY_EVENTS", "prio-check", "pgrelay.events.>", total)
	kinds := map[string]int{}
	for _, m := range msgs {
		ev := m.doc["event"].(string)
		origin, ok := m.doc["origin_id"].(string)
		require.True(t, ok, "schema 2: origin_id is a string")
		queue := m.doc["queue_id"].(string)
		wantHigh := high[mustID(t, origin)] || (ev == "deduplicated" && high[mustID(t, queue)])
		if wantHigh {
			require.Equal(t, json.Number("5"), m.doc["priority"], "%s of %s: %s", ev, origin, m.data)
			kinds["high/"+ev]++
		} else {
			require.NotContains(t, m.doc, "priority", "%s of %s: %s", ev, origin, m.data)
			kinds["low/"+ev]++
		}
	}
	require.Equal(t, map[string]int{
		"high/enqueued": 3, "high/succeeded": 2, "high/failed": 2, "high/gave_up": 2, "high/retried": 1,
		"high/discarded": 1, "high/deduplicated": 1, "high/cancelled": 1,
		"low/enqueued": 2, "low/succeeded": 1, "low/failed": 1, "low/gave_up": 1, "low/discarded": 1,
	}, kinds)
}

func mustID(t *testing.T, s string) int64 {
	t.Helper()
	var v int64
	require.NoError(t, json.Unmarshal([]byte(s), &v), s)
	return v
}
