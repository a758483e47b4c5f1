package actors_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/actors"
	"github.com/pgrelay/pgrelay/events/bus"
	"github.com/pgrelay/pgrelay/internal/devenv"
	"github.com/pgrelay/pgrelay/internal/handlers"
	"github.com/pgrelay/pgrelay/internal/testenv"
)

// The nats handler kind and the publisher's faults.

// flakyNATS is the nats handler with injected faults on first attempts:
// events whose origin_id ends in 0 fail before publishing, those ending in 1
// publish and then fail, as when the ack is lost.
type flakyNATS struct {
	h      handlers.NATS
	mu     sync.Mutex
	before int
	after  int
}

func (f *flakyNATS) Handle(ctx context.Context, ev handlers.Event) (bool, error) {
	if ev.Attempt == 1 && ev.OriginID%10 == 0 {
		f.mu.Lock()
		f.before++
		f.mu.Unlock()
		return false, errors.New("injected: NATS unavailable")
	}
	committed, err := f.h.Handle(ctx, ev)
	if err == nil && ev.Attempt == 1 && ev.OriginID%10 == 1 {
		f.mu.Lock()
		f.after++
		f.mu.Unlock()
		return false, errors.New("injected: the ack was lost")
	}
	return committed, err
}

// 2 000 outbox events published to a subject of a JetStream stream: a
// consumer sees each origin_id exactly once, although the first attempt of a
// fifth of them failed, half of those after the message was stored.
func TestActorNATSHandler2000(t *testing.T) {
	t.Parallel()
	n := startNATS(t, devenv.NATSConfig{})
	_, js := natsClient(t, n.URL())
	_, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}})
	require.NoError(t, err)
	conn, err := bus.Connect(bus.Options{URL: n.URL()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	flaky := &flakyNATS{h: handlers.NATS{Bus: conn}}

	e := newEnv(t)
	e.Exec(`SELECT pgrelay.register('orders_out', 'orders.created', p_kind := 'nats',
		p_retry_delay := '10 milliseconds')`)
	e.startProcessor(func(c *actors.Config) {
		withNATS(n.URL())(c)
		c.Handlers = handlers.Registry{"nats": flaky}
	})
	var ids []int64
	rows, err := e.Pool.Query(context.Background(), `SELECT pgrelay.notify_many('orders_out', $1)`, payloads("order", 2000))
	require.NoError(t, err)
	for rows.Next() {
		var id int64
		require.NoError(t, rows.Scan(&id))
		ids = append(ids, id)
	}
	require.NoError(t, rows.Err())
	testenv.Eventually(e.T, 2*time.Minute, "2 000 events to succeed", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'succeeded'`) == 2000
	})
	flaky.mu.Lock()
	before, after := flaky.before, flaky.after
	flaky.mu.Unlock()
	require.Positive(t, before)
	require.Positive(t, after)
	require.Equal(t, before+after, e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'failed'`))
	t.Logf("first attempts failed: %d before publishing, %d after", before, after)

	msgs := consumeRaw(t, js, "ORDERS", 2000)
	require.Len(t, msgs, 2000)
	got := map[int64]string{}
	for _, m := range msgs {
		id, err := strconv.ParseInt(m.Headers().Get(jetstream.MsgIDHeader), 10, 64)
		require.NoError(t, err)
		require.Equal(t, m.Headers().Get(handlers.HeaderOriginID), strconv.FormatInt(id, 10))
		require.Equal(t, "orders_out", m.Headers().Get(handlers.HeaderChannel))
		require.Equal(t, "orders.created", m.Subject())
		_, dup := got[id]
		require.False(t, dup, "origin_id %d published twice", id)
		got[id] = string(m.Data())
	}
	for i, id := range ids {
		require.Equal(t, "order-"+strconv.Itoa(i), got[id], "origin_id %d", id)
	}
	require.Equal(t, 2000, streamMsgs(js, "ORDERS"))
}

// consumeRaw reads want messages of stream with an ephemeral consumer, and
// checks nothing follows.
func consumeRaw(t *testing.T, js jetstream.JetStream, stream string, want int) []jetstream.Msg {
	t.Helper()
	cons, err := js.CreateConsumer(context.Background(), stream, jetstream.ConsumerConfig{
		AckPolicy: jetstream.AckNonePolicy})
	require.NoError(t, err)
	var out []jetstream.Msg
	deadline := time.Now().Add(60 * time.Second)
	for {
		wait := 2 * time.Second
		if len(out) >= want {
			wait = 300 * time.Millisecond
		}
		batch, err := cons.Fetch(1000, jetstream.FetchMaxWait(wait))
		require.NoError(t, err)
		n := 0
		for m := range batch.Messages() {
			n++
			out = append(out, m)
		}
		if n == 0 && len(out) >= want {
			return out
		}
		require.True(t, time.Now().Before(deadline), "got %d of %d messages", len(out), want)
	}
}

// A nats channel whose subject no stream captures publishes on core NATS; a
// payload over the server's max payload gives up at once (not retried),
// counted; a status event over it is published without its payload.
func TestActorNATSCoreAndTooLarge(t *testing.T) {
	t.Parallel()
	n := startNATS(t, devenv.NATSConfig{MaxPayload: 8192})
	nc, js := natsClient(t, n.URL())
	sub, err := nc.SubscribeSync("plain.subject")
	require.NoError(t, err)
	require.NoError(t, nc.Flush())
	e := newEnv(t)
	e.Exec(`SELECT pgrelay.register('plain', 'plain.subject', p_kind := 'nats')`)
	e.Exec(`SELECT pgrelay.register('big', 'plain.big', p_kind := 'nats', p_retry_delay := '10 milliseconds')`)
	e.Exec(`SELECT pgrelay.register('bigp', 'SELECT length($1)', p_publish_payload := true)`)
	p := e.startProcessor(withNATS(n.URL()))
	e.Exec(`SELECT pgrelay.notify_many('plain', $1)`, payloads("plain", 20))
	for i := range 20 {
		m, err := sub.NextMsg(30 * time.Second)
		require.NoError(t, err, "message %d", i)
		require.True(t, strings.HasPrefix(string(m.Data), "plain-"))
		require.NotEmpty(t, m.Header.Get(jetstream.MsgIDHeader))
	}

	huge := strings.Repeat("x", 10000)
	e.Exec(`SELECT pgrelay.notify('big', $1)`, huge)
	e.Exec(`SELECT pgrelay.notify('bigp', $1)`, huge)
	testenv.Eventually(e.T, time.Minute, "the oversized nats event to give up", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.log WHERE channel = 'big'`) == 1
	})
	var ev, msg string
	require.NoError(t, e.Pool.QueryRow(context.Background(),
		`SELECT event, error FROM pgrelay.log WHERE channel = 'big'`).Scan(&ev, &msg))
	require.Equal(t, "gave_up", ev, "a payload too large is not retried")
	require.Contains(t, msg, "max payload")
	require.Equal(t, 1.0, testutil.ToFloat64(p.Metrics().Events.HandlerTooLarge.WithLabelValues("big")))

	// Every status event arrives, the big one without its payload.
	testenv.Eventually(e.T, time.Minute, "every status event", func() bool {
		return streamMsgs(js, "PGRELAY_EVENTS") == e.Count(`SELECT count(*) FROM pgrelay.log`)
	})
	msgs := consumeAll(t, js, "PGRELAY_EVENTS", "big", "pgrelay.events.bigp.>", 1)
	require.Len(t, msgs, 1)
	require.Equal(t, true, msgs[0].doc["payload_omitted"])
	require.NotContains(t, msgs[0].doc, "payload")
	// The counter moves after the acks that the stream count already shows.
	testenv.Eventually(e.T, 10*time.Second, "the oversize counter", func() bool {
		return testutil.ToFloat64(p.Metrics().Events.Oversize.WithLabelValues("log")) == 1
	})
}

// JetStream stream trouble: another stream already captures the events'
// subjects (a clear error, dispatch goes on, the backlog grows, and the
// events arrive once that is fixed); the stream deleted under a running
// Processor (created again); an existing stream with other subjects
// (pgrelay.> added, its own settings kept).
func TestActorEventsStreamConflictAndMissing(t *testing.T) {
	t.Parallel()
	n := startNATS(t, devenv.NATSConfig{})
	_, js := natsClient(t, n.URL())
	ctx := context.Background()
	_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "OTHER", Subjects: []string{"pgrelay.events.>"}})
	require.NoError(t, err)
	e := newEnv(t)
	e.Exec(`SELECT pgrelay.register('s', 'SELECT length($1)')`)
	p := e.startProcessor(withNATS(n.URL()))
	e.Exec(`SELECT pgrelay.notify_many('s', $1)`, payloads("s", 100))
	testenv.Eventually(e.T, time.Minute, "dispatch despite the conflict", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.log`) == 100
	})
	testenv.Eventually(e.T, 30*time.Second, "publish errors and the backlog", func() bool {
		return testutil.ToFloat64(p.Metrics().Events.PublishErrors) > 0 &&
			testutil.ToFloat64(p.Metrics().Events.Backlog.WithLabelValues("log")) == 100
	})
	_, err = js.Stream(ctx, "PGRELAY_EVENTS")
	require.ErrorIs(t, err, jetstream.ErrStreamNotFound)
	require.Equal(t, 0, streamMsgs(js, "OTHER"), "nothing went to the other stream")

	require.NoError(t, js.DeleteStream(ctx, "OTHER"))
	testenv.Eventually(e.T, time.Minute, "the events once the conflict is gone", func() bool {
		return streamMsgs(js, "PGRELAY_EVENTS") == 100
	})
	requireExactlyOnce(t, e, consumeAll(t, js, "PGRELAY_EVENTS", "c1", "pgrelay.events.>", 100))

	// Missing: deleted while the Processor runs, it is created again.
	require.NoError(t, js.DeleteStream(ctx, "PGRELAY_EVENTS"))
	e.Exec(`SELECT pgrelay.notify_many('s', $1)`, payloads("again", 100))
	testenv.Eventually(e.T, time.Minute, "the new events in a new stream", func() bool {
		return streamMsgs(js, "PGRELAY_EVENTS") == 100
	})
	after := consumeAll(t, js, "PGRELAY_EVENTS", "c2", "pgrelay.events.>", 100)
	require.Len(t, after, 100)
	for _, m := range after {
		require.Greater(t, m.id(), e.logIDs("")[99], "only the new events")
	}
}

// An existing events stream with its own subjects and max age: pgrelay adds
// pgrelay.> and keeps the rest.
func TestActorEventsStreamReconciled(t *testing.T) {
	t.Parallel()
	n := startNATS(t, devenv.NATSConfig{})
	_, js := natsClient(t, n.URL())
	ctx := context.Background()
	_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "PGRELAY_EVENTS", Subjects: []string{"app.>"},
		MaxAge: time.Hour, Storage: jetstream.MemoryStorage})
	require.NoError(t, err)
	e := newEnv(t)
	e.Exec(`SELECT pgrelay.register('r', 'SELECT length($1)')`)
	e.startProcessor(withNATS(n.URL()))
	e.Exec(`SELECT pgrelay.notify_many('r', $1)`, payloads("r", 10))
	testenv.Eventually(e.T, time.Minute, "the events", func() bool { return streamMsgs(js, "PGRELAY_EVENTS") == 10 })
	s, err := js.Stream(ctx, "PGRELAY_EVENTS")
	require.NoError(t, err)
	cfg := s.CachedInfo().Config
	require.ElementsMatch(t, []string{"app.>", "pgrelay.>"}, cfg.Subjects)
	require.Equal(t, time.Hour, cfg.MaxAge)
	require.Equal(t, jetstream.MemoryStorage, cfg.Storage)
}

// A server without JetStream: the events go out on core NATS.
func TestActorEventsCoreNATS(t *testing.T) {
	t.Parallel()
	n := startNATS(t, devenv.NATSConfig{NoJetStream: true})
	nc, _ := natsClient(t, n.URL())
	sub, err := nc.SubscribeSync("pgrelay.events.>")
	require.NoError(t, err)
	require.NoError(t, nc.Flush())
	e := newEnv(t)
	e.Exec(`SELECT pgrelay.register('c', 'SELECT length($1)')`)
	e.startProcessor(withNATS(n.URL()))
	e.Exec(`SELECT pgrelay.notify_many('c', $1)`, payloads("c", 200))
	seen := map[string]bool{}
	for range 200 {
		m, err := sub.NextMsg(30 * time.Second)
		require.NoError(t, err)
		var doc map[string]any
		require.NoError(t, json.Unmarshal(m.Data, &doc))
		require.Equal(t, "succeeded", doc["event"])
		require.False(t, seen[m.Header.Get(jetstream.MsgIDHeader)])
		seen[m.Header.Get(jetstream.MsgIDHeader)] = true
	}
	_, err = sub.NextMsg(300 * time.Millisecond)
	require.ErrorIs(t, err, nats.ErrTimeout)
}

// The notifier's status changes are published on
// pgrelay.notifier.<channel>.<status>, with a cursor of their own.
func TestActorNotifierStatusEvents(t *testing.T) {
	t.Parallel()
	n := startNATS(t, devenv.NATSConfig{})
	_, js := natsClient(t, n.URL())
	e := newEnv(t)
	e.Exec(`INSERT INTO pgrelay_notifier.status_events (notification_id, channel, status, error)
	        VALUES (7, 'mail', 'sending', NULL), (7, 'mail', 'failed', 'smtp: 550 no such user')`)
	e.startProcessor(withNATS(n.URL()))
	testenv.Eventually(e.T, time.Minute, "the status events", func() bool { return streamMsgs(js, "PGRELAY_EVENTS") == 2 })
	msgs := consumeAll(t, js, "PGRELAY_EVENTS", "n", "pgrelay.notifier.>", 2)
	require.Len(t, msgs, 2)
	require.Equal(t, "pgrelay.notifier.mail.sending", msgs[0].subject)
	require.Equal(t, "pgrelay.notifier.mail.failed", msgs[1].subject)
	for _, m := range msgs {
		for _, f := range []string{"schema", "id", "notification_id", "channel", "status", "error", "node", "at"} {
			require.Contains(t, m.doc, f)
		}
		require.Equal(t, "7", m.doc["notification_id"], "schema 2: a string")
		require.Equal(t, strconv.FormatInt(m.id(), 10), m.msgID)
	}
	require.Nil(t, msgs[0].doc["error"])
	// The channel (gone) counts as publishing error classes: no text.
	require.Nil(t, msgs[1].doc["error"])
	require.Equal(t, "smtp_5xx", msgs[1].doc["error_class"])
	require.Equal(t, 1, e.Count(`SELECT count(*) FROM pgrelay.publish_cursors WHERE source = 'notifier'
		AND last_id = (SELECT max(id) FROM pgrelay_notifier.status_events)`))
}

// The NATS settings are checked when the Processor is made.
func TestActorNATSConfigInvalid(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		n    actors.NATSConfig
		want string
	}{
		{actors.NATSConfig{PublishBatch: 4001}, "nats-publish-batch 4001: expected 1..4000"},
		{actors.NATSConfig{MaxAge: -time.Second}, "nats-max-age must not be negative"},
		{actors.NATSConfig{MaxBytes: -1}, "nats-max-bytes must not be negative"},
		{actors.NATSConfig{Replicas: 6}, "nats-replicas 6: expected 1..5"},
		{actors.NATSConfig{Replicas: -1}, "nats-replicas -1: expected 1..5"},
		{actors.NATSConfig{Retention: "workqueue"}, `nats-retention "workqueue": expected limits or interest`},
		{actors.NATSConfig{Stream: "a.b"}, "stream name"},
		{actors.NATSConfig{TLSCert: "c.pem"}, "needs its key"},
	} {
		c.n.URL = "nats://127.0.0.1:4222"
		_, err := actors.New(actors.Config{DatabaseURL: "postgres://127.0.0.1:1/x", NATS: &c.n})
		require.ErrorContains(t, err, c.want)
	}
	for _, r := range []string{"", "limits", "interest"} {
		_, err := actors.New(actors.Config{DatabaseURL: "postgres://127.0.0.1:1/x",
			NATS: &actors.NATSConfig{URL: "nats://127.0.0.1:4222", Retention: r, MaxBytes: 1 << 30, Replicas: 5}})
		require.NoError(t, err, r)
	}
}

// The nats handler with NATS really down (no injected fault): every attempt
// fails with the connection's error and is logged as failed; once NATS is
// back the retries publish each event, and the stream holds each origin_id
// exactly once.
func TestActorNATSHandlerNATSDown(t *testing.T) {
	t.Parallel()
	n := startNATS(t, devenv.NATSConfig{})
	_, js := natsClient(t, n.URL())
	_, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}})
	require.NoError(t, err)
	e := newEnv(t)
	e.Exec(`SELECT pgrelay.register('down_out', 'orders.down', p_kind := 'nats',
		p_max_attempts := 1000, p_retry_delay := '100 milliseconds')`)
	p := e.startProcessor(withNATS(n.URL()))
	testenv.Eventually(e.T, 30*time.Second, "the Processor connected to NATS", func() bool {
		return testutil.ToFloat64(p.Metrics().Events.Connected) == 1
	})
	n.Shutdown()
	// The events come once the Processor knows NATS is gone: one published
	// while its connection still looked up could fail with whatever the
	// dying connection said, not with the not-connected error this test is
	// about.
	testenv.Eventually(e.T, 30*time.Second, "the Processor to see NATS down", func() bool {
		return testutil.ToFloat64(p.Metrics().Events.Connected) == 0
	})

	const total = 50
	var ids []int64
	rows, err := e.Pool.Query(context.Background(), `SELECT pgrelay.notify_many('down_out', $1)`, payloads("down", total))
	require.NoError(t, err)
	for rows.Next() {
		var id int64
		require.NoError(t, rows.Scan(&id))
		ids = append(ids, id)
	}
	require.NoError(t, rows.Err())
	testenv.Eventually(e.T, time.Minute, "every event to have failed while NATS is down", func() bool {
		return e.Count(`SELECT count(DISTINCT origin_id) FROM pgrelay.log WHERE channel = 'down_out' AND event = 'failed'`) == total
	})
	require.Zero(t, e.Count(`SELECT count(*) FROM pgrelay.log WHERE channel = 'down_out' AND event <> 'failed'`))
	require.Empty(t, testenv.Column[string](t, e.Pool, `SELECT error FROM pgrelay.log WHERE channel = 'down_out'
		AND error NOT LIKE '%not connected to NATS%'`), "each failure says NATS is not connected")

	require.NoError(t, n.Start())
	testenv.Eventually(e.T, time.Minute, "every event to succeed once NATS is back", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.log WHERE channel = 'down_out' AND event = 'succeeded'`) == total
	})
	msgs := consumeRaw(t, js, "ORDERS", total)
	require.Len(t, msgs, total)
	got := map[int64]string{}
	for _, m := range msgs {
		id, err := strconv.ParseInt(m.Headers().Get(jetstream.MsgIDHeader), 10, 64)
		require.NoError(t, err)
		_, dup := got[id]
		require.False(t, dup, "origin_id %d published twice", id)
		got[id] = string(m.Data())
	}
	for i, id := range ids {
		require.Equal(t, "down-"+strconv.Itoa(i), got[id], "origin_id %d", id)
	}
	require.Equal(t, total, streamMsgs(js, "ORDERS"))
}

// A nats channel stored on a subject NATS keeps for itself (as register()
// accepted only by a direct write) is not published to: its events give up
// at once, naming the rule. Here the subject would delete the events stream
// through the JetStream API.
func TestActorNATSReservedSubject(t *testing.T) {
	t.Parallel()
	n := startNATS(t, devenv.NATSConfig{})
	nc, js := natsClient(t, n.URL())
	sub, err := nc.SubscribeSync("$JS.API.STREAM.DELETE.>")
	require.NoError(t, err)
	require.NoError(t, nc.Flush())
	e := newEnv(t)
	e.Exec(`SELECT pgrelay.register('api', 'app.placeholder', p_kind := 'nats')`)
	e.Exec(`UPDATE pgrelay.channels SET handler = '$JS.API.STREAM.DELETE.PGRELAY_EVENTS' WHERE channel = 'api'`)
	e.Exec(`SELECT pgrelay.register('plain', 'plain.subject', p_kind := 'nats')`)
	e.startProcessor(withNATS(n.URL()))
	// The publisher creates the events stream when it starts publishing:
	// it must exist before the event that could delete it, or the check at
	// the end would prove nothing (and fail on a slow start).
	testenv.Eventually(e.T, time.Minute, "the events stream", func() bool {
		_, err := js.Stream(context.Background(), "PGRELAY_EVENTS")
		return err == nil
	})
	e.Exec(`SELECT pgrelay.notify('api', '{}')`)
	testenv.Eventually(e.T, time.Minute, "the event on the reserved subject to end", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.log WHERE channel = 'api'`) == 1
	})
	var ev string
	var msg *string
	require.NoError(t, e.Pool.QueryRow(context.Background(),
		`SELECT event, error FROM pgrelay.log WHERE channel = 'api'`).Scan(&ev, &msg))
	require.Equal(t, "gave_up", ev, "no retry can make the subject allowed")
	require.NotNil(t, msg)
	require.Contains(t, *msg, "reserved")

	// A later event on an ordinary subject goes out on the same connection,
	// after the one refused: had that been published, it would be here first.
	plain, err := nc.SubscribeSync("plain.subject")
	require.NoError(t, err)
	require.NoError(t, nc.Flush())
	e.Exec(`SELECT pgrelay.notify('plain', 'after')`)
	_, err = plain.NextMsg(30 * time.Second)
	require.NoError(t, err)
	require.NoError(t, nc.Flush())
	got, _, err := sub.Pending()
	require.NoError(t, err)
	require.Zero(t, got, "nothing reached the JetStream API")
	_, err = js.Stream(context.Background(), "PGRELAY_EVENTS")
	require.NoError(t, err, "the events stream is still there")
}
