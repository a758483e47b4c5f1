package actors_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/actors"
	"github.com/pgrelay/pgrelay/events"
	"github.com/pgrelay/pgrelay/internal/devenv"
	"github.com/pgrelay/pgrelay/internal/testenv"
)

// sequenced is one message of the events stream with its stream sequence.
type sequenced struct {
	seq uint64
	doc events.Published
}

// consumeSequenced reads every message of the events stream on filter with
// an ack-less consumer, with its stream sequence, until want arrived and a
// short wait brings no more.
func consumeSequenced(t *testing.T, js jetstream.JetStream, filter string, want int) []sequenced {
	t.Helper()
	cons, err := js.CreateConsumer(context.Background(), "PGRELAY_EVENTS", jetstream.ConsumerConfig{
		AckPolicy: jetstream.AckNonePolicy, FilterSubject: filter})
	require.NoError(t, err)
	var out []sequenced
	deadline := time.Now().Add(60 * time.Second)
	for {
		wait := 2 * time.Second
		if len(out) >= want {
			wait = 300 * time.Millisecond // anything beyond want is a duplicate
		}
		batch, err := cons.Fetch(1000, jetstream.FetchMaxWait(wait))
		require.NoError(t, err)
		n := 0
		for m := range batch.Messages() {
			n++
			meta, err := m.Metadata()
			require.NoError(t, err)
			var d events.Published
			require.NoError(t, json.Unmarshal(m.Data(), &d), string(m.Data()))
			require.Equal(t, events.EventSubject(d.Channel, d.Event), m.Subject())
			out = append(out, sequenced{seq: meta.Sequence.Stream, doc: d})
		}
		if n == 0 && len(out) >= want {
			return out
		}
		require.True(t, time.Now().Before(deadline), "got %d of %d messages", len(out), want)
	}
}

// A channel with publish_enqueued publishes an 'enqueued' document for each
// event, with the event's ids (and its payload when the channel publishes
// payloads), at a lower stream sequence than every other document of the
// event: enqueued → failed → gave_up, enqueued → succeeded. A channel
// without the setting publishes none.
func TestActorEventsEnqueuedFirst(t *testing.T) {
	t.Parallel()
	n := startNATS(t, devenv.NATSConfig{})
	_, js := natsClient(t, n.URL())
	e := newEnv(t)
	e.Exec(`CREATE FUNCTION public.fail(p text) RETURNS void LANGUAGE plpgsql AS
	$$ BEGIN RAISE EXCEPTION 'no luck for %', p; END $$`)
	e.Exec(`SELECT pgrelay.register('ok', 'SELECT length($1)', p_publish_enqueued := true, p_publish_payload := true)`)
	e.Exec(`SELECT pgrelay.register('f', 'SELECT public.fail($1)', p_publish_enqueued := true,
		p_max_attempts := 2, p_retry_delay := '10 milliseconds')`)
	e.Exec(`SELECT pgrelay.register('plain', 'SELECT length($1)')`)
	e.startProcessor(withNATS(n.URL()))
	enqueued := map[int64]string{}
	for ch, k := range map[string]int{"ok": 300, "f": 100, "plain": 200} {
		for _, id := range e.IDs(`SELECT pgrelay.notify_many($1, $2)`, ch, payloads(ch, k)) {
			enqueued[id] = ch
		}
	}
	// ok: enqueued, succeeded; f: enqueued, failed, gave_up; plain: succeeded.
	const total = 300*2 + 100*3 + 200
	testenv.Eventually(e.T, 3*time.Minute, "every log row", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.log`) == total
	})
	testenv.Eventually(e.T, time.Minute, "every event in the stream", func() bool {
		return streamMsgs(js, "PGRELAY_EVENTS") >= total
	})
	msgs := consumeSequenced(t, js, "pgrelay.events.>", total)
	require.Len(t, msgs, total)

	kinds := map[string]int{}
	first := map[int64]uint64{} // origin id -> stream sequence of its enqueued document
	for _, m := range msgs {
		d := m.doc
		kinds[d.Channel+"/"+string(d.Event)]++
		if d.Event != events.Enqueued {
			continue
		}
		require.NotContains(t, first, d.OriginID, "one enqueued document per event")
		first[d.OriginID] = m.seq
		require.Equal(t, d.OriginID, d.QueueID)
		require.Equal(t, 1, d.Attempt)
		require.Equal(t, 0, d.Node)
		require.Nil(t, d.Error)
		require.Empty(t, d.ErrorClass)
		if d.Channel == "ok" {
			require.NotNil(t, d.Payload, "the channel publishes payloads")
			require.Contains(t, *d.Payload, "ok-")
		}
	}
	require.Equal(t, map[string]int{"ok/enqueued": 300, "ok/succeeded": 300, "f/enqueued": 100, "f/failed": 100,
		"f/gave_up": 100, "plain/succeeded": 200}, kinds)
	for id, ch := range enqueued {
		if ch == "plain" {
			require.NotContains(t, first, id, "no enqueued document without the setting")
		} else {
			require.Contains(t, first, id, "the enqueued document names the id notify_many returned")
		}
	}
	for _, m := range msgs {
		if s, ok := first[m.doc.OriginID]; ok && m.doc.Event != events.Enqueued {
			require.Less(t, s, m.seq, "event %d: enqueued before %s", m.doc.OriginID, m.doc.Event)
		}
	}
}

// Events enqueued on two nodes of a cluster in leader mode all run on the
// leader: each event's enqueued document comes from the node that enqueued
// it, its outcome from the leader. An event the leader enqueued has its
// enqueued document first; one enqueued on the other node has the two
// documents published by two publishers, in no set order.
func TestActorEventsEnqueuedOnAnotherNode(t *testing.T) {
	t.Parallel()
	n := startNATS(t, devenv.NATSConfig{})
	_, js := natsClient(t, n.URL())
	e := newEnv(t)
	e.Exec(`SELECT pgrelay.register('u', 'SELECT length($1)', p_publish_enqueued := true)`)
	fast := func(c *actors.Config) {
		withNATS(n.URL())(c)
		c.HeartbeatInterval = 100 * time.Millisecond
		c.DeadAfter = time.Second
	}
	e.startNode(1, actors.ModeLeader, fast)
	testenv.Eventually(e.T, 10*time.Second, "node 1 to lead", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay._lease_holder(now()) WHERE leader_node = 1`) == 1
	})
	e.startNode(2, actors.ModeLeader, fast)
	e.enqueueOn(1, "u", payloads("one", 100))
	e.enqueueOn(2, "u", payloads("two", 100))
	const total = 400 // an enqueued and a succeeded row per event
	testenv.Eventually(e.T, time.Minute, "every log row", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.log`) == total
	})
	testenv.Eventually(e.T, time.Minute, "every event in the stream", func() bool {
		return streamMsgs(js, "PGRELAY_EVENTS") >= total
	})
	msgs := consumeSequenced(t, js, "pgrelay.events.>", total)
	require.Len(t, msgs, total)

	type life struct{ enqueued, succeeded *sequenced }
	lives := map[int64]*life{}
	for i := range msgs {
		m := &msgs[i]
		l := lives[m.doc.OriginID]
		if l == nil {
			l = &life{}
			lives[m.doc.OriginID] = l
		}
		switch m.doc.Event {
		case events.Enqueued:
			require.Nil(t, l.enqueued, "one enqueued document per event")
			l.enqueued = m
		case events.Succeeded:
			require.Nil(t, l.succeeded)
			l.succeeded = m
		default:
			t.Fatalf("unexpected %s document", m.doc.Event)
		}
	}
	require.Len(t, lives, 200)
	perNode := map[int]int{}
	for origin, l := range lives {
		require.NotNil(t, l.enqueued, "event %d", origin)
		require.NotNil(t, l.succeeded, "event %d", origin)
		from := events.ID(origin).Node()
		perNode[from]++
		require.Equal(t, from, l.enqueued.doc.Node, "the enqueuing node publishes enqueued")
		require.Equal(t, 1, l.succeeded.doc.Node, "the leader ran it and publishes its outcome")
		if from == 1 {
			require.Less(t, l.enqueued.seq, l.succeeded.seq, "event %d: one node, enqueued first", origin)
		}
	}
	require.Equal(t, map[int]int{1: 100, 2: 100}, perNode)
}
