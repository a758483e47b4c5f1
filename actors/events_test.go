package actors_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/actors"
	"github.com/pgrelay/pgrelay/events"
	"github.com/pgrelay/pgrelay/events/bus"
	"github.com/pgrelay/pgrelay/events/store"
	"github.com/pgrelay/pgrelay/internal/devenv"
	"github.com/pgrelay/pgrelay/internal/testenv"
)

// Status events on NATS (docs/events.md): real PostgreSQL, real in-process
// NATS servers with JetStream.

// startNATS starts an in-process NATS server for t, stopped when t ends.
func startNATS(t *testing.T, cfg devenv.NATSConfig) *devenv.NATS {
	t.Helper()
	n, err := devenv.StartNATS(cfg)
	require.NoError(t, err)
	t.Cleanup(n.Stop)
	return n
}

// natsClient connects a test client to url, closed when t ends.
func natsClient(t *testing.T, url string) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	return nc, js
}

// withNATS sets the Processor's NATS configuration.
func withNATS(url string) func(*actors.Config) {
	return func(c *actors.Config) {
		c.NATS = &actors.NATSConfig{URL: url, PublishInterval: 50 * time.Millisecond}
	}
}

// streamMsgs is the number of messages in stream (-1 while it cannot be read).
func streamMsgs(js jetstream.JetStream, stream string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return -1
	}
	info, err := s.Info(ctx)
	if err != nil {
		return -1
	}
	return int(info.State.Msgs)
}

// received is one message a consumer got.
type received struct {
	subject string
	msgID   string
	doc     map[string]any
	header  nats.Header
	data    []byte
}

// id is the document's id, a string in schema 2, a number in schema 1.
func (r received) id() int64 {
	switch v := r.doc["id"].(type) {
	case json.Number:
		n, _ := v.Int64()
		return n
	case string:
		n, _ := strconv.ParseInt(v, 10, 64)
		return n
	}
	return 0
}

// consumeAll reads every message of stream on subjects filter with a new
// durable pull consumer, acking each, until want arrived and a short wait
// brings no more.
func consumeAll(t *testing.T, js jetstream.JetStream, stream, durable, filter string, want int) []received {
	t.Helper()
	ctx := context.Background()
	cons, err := js.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{
		Durable: durable, AckPolicy: jetstream.AckExplicitPolicy, FilterSubject: filter,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	require.NoError(t, err)
	var out []received
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
			dec := json.NewDecoder(strings.NewReader(string(m.Data())))
			dec.UseNumber()
			var doc map[string]any
			require.NoError(t, dec.Decode(&doc), string(m.Data()))
			out = append(out, received{subject: m.Subject(), msgID: m.Headers().Get(jetstream.MsgIDHeader), doc: doc,
				header: m.Headers(), data: m.Data()})
			require.NoError(t, m.Ack())
		}
		if n == 0 && len(out) >= want {
			return out
		}
		require.True(t, time.Now().Before(deadline), "consumer got %d of %d messages", len(out), want)
	}
}

// logIDs returns the ids of the log rows, in id order.
func (e *env) logIDs(where string) []int64 {
	e.T.Helper()
	return e.IDs(`SELECT id FROM pgrelay.log ` + where + ` ORDER BY id`)
}

// requireLogPublishedOnce waits until the publisher has caught up with the
// log (its backlog is 0) and the stream holds n messages, then requires
// exactly one message per log row, none twice: stream messages = log rows.
func requireLogPublishedOnce(t *testing.T, e *env, js jetstream.JetStream, durable string, n int) {
	t.Helper()
	testenv.Eventually(e.T, time.Minute, "every event in the stream", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.log`) == n && streamMsgs(js, "PGRELAY_EVENTS") >= n &&
			e.Count(`SELECT backlog FROM pgrelay.publish_backlog() WHERE source = 'log'`) == 0
	})
	requireExactlyOnce(t, e, consumeAll(t, js, "PGRELAY_EVENTS", durable, "pgrelay.events.>", n))
	require.Equal(t, n, streamMsgs(js, "PGRELAY_EVENTS"), "stream message count = log row count")
}

// requireExactlyOnce checks that msgs hold exactly one message per log row,
// in log id order per channel and node (each node publishes its own rows).
func requireExactlyOnce(t *testing.T, e *env, msgs []received) {
	t.Helper()
	want := e.logIDs("")
	got := make([]int64, 0, len(msgs))
	seen := map[int64]bool{}
	last := map[string]int64{}
	for _, m := range msgs {
		id := m.id()
		require.False(t, seen[id], "log row %d published twice", id)
		seen[id] = true
		got = append(got, id)
		ch := fmt.Sprintf("%s (node %v)", m.doc["channel"], m.doc["node"])
		require.Greater(t, id, last[ch], "channel %s: events out of log order", ch)
		last[ch] = id
		require.Equal(t, strconv.FormatInt(id, 10), m.msgID, "Nats-Msg-Id is the log id")
	}
	sort.Slice(got, func(i, j int) bool { return got[i] < got[j] })
	require.Equal(t, len(want), len(got), "one message per log row")
	require.Equal(t, want, got, "the messages are the log rows, no gaps")
}

// 5 000 events through the Processor: a durable JetStream consumer receives
// exactly one message per log row, in log order per channel, with the
// documented fields; payloads only for the channel that opted in. Two
// Processors run on the node: the lease makes one of them the publisher.
func TestActorEventsToJetStream5000(t *testing.T) {
	t.Parallel()
	n := startNATS(t, devenv.NATSConfig{})
	_, js := natsClient(t, n.URL())
	e := newEnv(t)
	e.Exec(`CREATE FUNCTION public.fail(p text) RETURNS void LANGUAGE plpgsql AS
	$$ BEGIN RAISE EXCEPTION 'no luck for %', p; END $$`)
	e.Exec(`SELECT pgrelay.register('a', 'SELECT length($1)')`)
	e.Exec(`SELECT pgrelay.register('b', 'SELECT length($1)', p_concurrency_mode := 'channel')`)
	e.Exec(`SELECT pgrelay.register('f', 'SELECT public.fail($1)', p_max_attempts := 2, p_retry_delay := '10 milliseconds')`)
	e.Exec(`SELECT pgrelay.register('p', 'SELECT length($1)', p_publish_payload := true)`)
	p1 := e.startProcessor(withNATS(n.URL()))
	p2 := e.startProcessor(withNATS(n.URL()))
	e.Exec(`SELECT pgrelay.notify_many('a', $1)`, payloads("a", 3000))
	e.Exec(`SELECT pgrelay.notify_many('b', $1)`, payloads("b", 1000))
	e.Exec(`SELECT pgrelay.notify_many('f', $1)`, payloads("f", 200))
	e.Exec(`SELECT pgrelay.notify_many('p', $1)`, payloads("p", 600))
	// 'f' fails twice: failed, then gave_up. 5 000 log rows in all.
	testenv.Eventually(e.T, 3*time.Minute, "5 000 log rows", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.log`) == 5000
	})
	testenv.Eventually(e.T, time.Minute, "5 000 messages in the stream", func() bool {
		return streamMsgs(js, "PGRELAY_EVENTS") >= 5000
	})
	msgs := consumeAll(t, js, "PGRELAY_EVENTS", "test", "pgrelay.events.>", 5000)
	requireExactlyOnce(t, e, msgs)
	require.Equal(t, 5000, streamMsgs(js, "PGRELAY_EVENTS"), "no duplicate stored")

	kinds := map[string]int{}
	for _, m := range msgs {
		d := m.doc
		for _, f := range []string{"schema", "id", "queue_id", "origin_id", "channel", "attempt", "event", "error", "node", "at"} {
			require.Contains(t, d, f, "field %s", f)
		}
		require.Equal(t, json.Number(strconv.Itoa(events.SchemaVersion)), d["schema"])
		ch, ev := d["channel"].(string), d["event"].(string)
		require.Equal(t, "pgrelay.events."+ch+"."+ev, m.subject)
		kinds[ch+"/"+ev]++
		_, err := time.Parse(time.RFC3339Nano, d["at"].(string))
		require.NoError(t, err)
		require.Equal(t, json.Number("0"), d["node"])
		if ch == "p" {
			require.IsType(t, "", d["payload"], "channel p publishes payloads")
			require.True(t, strings.HasPrefix(d["payload"].(string), "p-"))
		} else {
			require.NotContains(t, d, "payload", "channel %s keeps its payloads off NATS", ch)
		}
		if ev == "succeeded" {
			require.Nil(t, d["error"])
		} else {
			// The default publish_errors: the class, no text.
			require.Nil(t, d["error"])
			require.Equal(t, "sqlstate_P0001", d["error_class"])
		}
	}
	require.Equal(t, map[string]int{"a/succeeded": 3000, "b/succeeded": 1000, "f/failed": 200, "f/gave_up": 200,
		"p/succeeded": 600}, kinds)

	// One of the two Processors published everything; the other stood by.
	// The counters move after the acks that the stream count already shows.
	published := func() float64 {
		return testutil.ToFloat64(p1.Metrics().Events.Published.WithLabelValues("log")) +
			testutil.ToFloat64(p2.Metrics().Events.Published.WithLabelValues("log"))
	}
	testenv.Eventually(e.T, 10*time.Second, "the published counters to reach 5000", func() bool { return published() >= 5000 })
	require.Equal(t, 5000.0, published())
	testenv.Eventually(e.T, 10*time.Second, "the backlog gauge to reach 0", func() bool {
		return testutil.ToFloat64(p1.Metrics().Events.Backlog.WithLabelValues("log"))+
			testutil.ToFloat64(p2.Metrics().Events.Backlog.WithLabelValues("log")) == 0
	})
	require.Equal(t, 1, e.Count(`SELECT count(*) FROM pgrelay.publish_cursors WHERE source = 'log'`))
	require.Equal(t, e.logIDs("")[4999], int64(e.Count(`SELECT last_id FROM pgrelay.publish_cursors WHERE source = 'log'`)))
}

// NATS shut down after about a third of the events, once some were in the
// stream, and started again after dispatch finished: dispatch went on at a
// fair share of its rate meanwhile, the backlog showed, and after the
// restart every log row's event arrives exactly once.
func TestActorEventsSurviveNATSOutage(t *testing.T) {
	t.Parallel()
	n := startNATS(t, devenv.NATSConfig{})
	_, js := natsClient(t, n.URL())
	e := newEnv(t)
	e.Exec(`CREATE FUNCTION public.work(p text) RETURNS void LANGUAGE sql AS $$ SELECT pg_sleep(0.001) $$`)
	e.Exec(`SELECT pgrelay.register('o', 'SELECT public.work($1)')`)
	p := e.startProcessor(withNATS(n.URL()))
	const total = 5000
	e.Exec(`SELECT pgrelay.notify_many('o', $1)`, payloads("o", total))
	succeeded := func() int { return e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'succeeded'`) }
	// The rate before the outage is taken from the first event on.
	var first time.Time
	testenv.Eventually(e.T, time.Minute, "the first event", func() bool { return succeeded() > 0 })
	first = time.Now()
	testenv.Eventually(e.T, time.Minute, "a third of the events, some of them in the stream", func() bool {
		return succeeded() >= total/3 && streamMsgs(js, "PGRELAY_EVENTS") > 0
	})
	n.Shutdown()
	down := time.Now()
	atOutage := succeeded()
	require.Less(t, atOutage, total, "the outage began before dispatch finished")
	testenv.Eventually(e.T, 2*time.Minute, "dispatch to finish while NATS is down", func() bool { return succeeded() == total })
	finished := time.Now()
	// Liveness, not speed: NATS being down must not hold dispatch back. The
	// bound is loose (a quarter of the rate before) so that a loaded machine
	// cannot fail it; a dispatch that waited on NATS would be far below.
	before := float64(atOutage) / down.Sub(first).Seconds()
	during := float64(total-atOutage) / finished.Sub(down).Seconds()
	t.Logf("NATS down after %d of %d events; %.0f events/s before, %.0f/s during the outage", atOutage, total,
		before, during)
	require.GreaterOrEqual(t, during, before/4, "dispatch slowed down while NATS was down")
	require.False(t, n.Running())

	// The backlog shows in the gauges (rows and age) and in publish_backlog().
	testenv.Eventually(e.T, 10*time.Second, "the backlog gauge to show the unpublished events", func() bool {
		return testutil.ToFloat64(p.Metrics().Events.Backlog.WithLabelValues("log")) > 0
	})
	backlog := e.Count(`SELECT backlog FROM pgrelay.publish_backlog() WHERE source = 'log'`)
	require.Greater(t, backlog, 0)
	require.Positive(t, testutil.ToFloat64(p.Metrics().Events.Lag.WithLabelValues("log")), "the lag gauge")
	require.Equal(t, 1, e.Count(`SELECT count(*) FROM pgrelay.publish_backlog() WHERE source = 'log'
		AND oldest_at <= now() - make_interval(secs => $1)`, time.Since(finished).Seconds()),
		"the oldest unpublished event is older than the end of dispatch")
	require.Equal(t, 0.0, testutil.ToFloat64(p.Metrics().Events.Connected))

	require.NoError(t, n.Start())
	testenv.Eventually(e.T, time.Minute, "every event in the stream", func() bool {
		return streamMsgs(js, "PGRELAY_EVENTS") >= total
	})
	msgs := consumeAll(t, js, "PGRELAY_EVENTS", "after-outage", "pgrelay.events.>", total)
	requireExactlyOnce(t, e, msgs)
	require.Equal(t, total, streamMsgs(js, "PGRELAY_EVENTS"), "stream message count = log row count")
	testenv.Eventually(e.T, 10*time.Second, "the backlog to drain", func() bool {
		return e.Count(`SELECT backlog FROM pgrelay.publish_backlog() WHERE source = 'log'`) == 0
	})
}

// Two Processors of a multi-master cluster (node ids 1 and 2, one database
// here) both publish: each publishes the log rows it wrote, under its own
// cursor, so the stream holds every row exactly once, each with the node
// that wrote it, and nothing was published twice.
func TestActorEventsMultiMaster(t *testing.T) {
	t.Parallel()
	n := startNATS(t, devenv.NATSConfig{})
	_, js := natsClient(t, n.URL())
	e := newEnv(t)
	e.Exec(`SELECT pgrelay.register('mm', 'SELECT length($1)')`)
	nats := alive(withNATS(n.URL()))
	p1 := e.startNode(1, actors.ModeMultiNode, nats)
	p2 := e.startNode(2, actors.ModeMultiNode, nats)
	e.enqueueOn(1, "mm", payloads("one", 700))
	e.enqueueOn(2, "mm", payloads("two", 500))
	testenv.Eventually(e.T, time.Minute, "1 200 log rows", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.log`) == 1200
	})
	testenv.Eventually(e.T, time.Minute, "1 200 messages in the stream", func() bool {
		return streamMsgs(js, "PGRELAY_EVENTS") >= 1200
	})
	msgs := consumeAll(t, js, "PGRELAY_EVENTS", "mm", "pgrelay.events.>", 1200)
	requireExactlyOnce(t, e, msgs)
	require.Equal(t, 1200, streamMsgs(js, "PGRELAY_EVENTS"), "no duplicate stored")

	// One cursor per node, each at the last row of its node.
	cursors := map[int]int64{}
	rows, err := e.Pool.Query(context.Background(),
		`SELECT node_id, last_id FROM pgrelay.publish_cursors WHERE source = 'log'`)
	require.NoError(t, err)
	for rows.Next() {
		var node int
		var last int64
		require.NoError(t, rows.Scan(&node, &last))
		cursors[node] = last
	}
	require.NoError(t, rows.Err())
	require.Len(t, cursors, 2, "one cursor per node: %v", cursors)
	// Each message's node wrote its log row; its node's cursor covers it.
	perNode := map[int]int{}
	for _, m := range msgs {
		node, err := m.doc["node"].(json.Number).Int64()
		require.NoError(t, err)
		require.Contains(t, cursors, int(node))
		require.LessOrEqual(t, m.id(), cursors[int(node)], "message %d beyond its node's cursor", m.id())
		require.Equal(t, int(node), e.Count(`SELECT node FROM pgrelay.log WHERE id = $1`, m.id()))
		perNode[int(node)]++
	}
	require.Equal(t, map[int]int{1: 700, 2: 500}, perNode)
	for node, p := range map[int]*actors.Processor{1: p1, 2: p2} {
		require.Equal(t, int64(e.Count(`SELECT max(id) FROM pgrelay.log WHERE node = $1`, node)), cursors[node])
		require.Equal(t, 0.0, testutil.ToFloat64(p.Metrics().Events.Duplicates), "node %d", node)
	}
	testenv.Eventually(e.T, 10*time.Second, "the published counters", func() bool {
		return testutil.ToFloat64(p1.Metrics().Events.Published.WithLabelValues("log")) == 700 &&
			testutil.ToFloat64(p2.Metrics().Events.Published.WithLabelValues("log")) == 500
	})
}

// A NATS URL nothing answers at start: the Processor starts, dispatches and
// reports the backlog; once a server appears there, the events arrive.
func TestActorEventsNATSUnreachableAtStart(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	e := newEnv(t)
	e.Exec(`SELECT pgrelay.register('u', 'SELECT length($1)')`)
	p := e.startProcessor(withNATS(fmt.Sprintf("nats://127.0.0.1:%d", port)))
	e.Exec(`SELECT pgrelay.notify_many('u', $1)`, payloads("u", 300))
	testenv.Eventually(e.T, time.Minute, "dispatch without NATS", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'succeeded'`) == 300
	})
	testenv.Eventually(e.T, 10*time.Second, "the backlog gauge to count the 300 events", func() bool {
		return testutil.ToFloat64(p.Metrics().Events.Backlog.WithLabelValues("log")) == 300
	})
	require.Equal(t, 300, e.Count(`SELECT backlog FROM pgrelay.publish_backlog() WHERE source = 'log'`))

	n := startNATS(t, devenv.NATSConfig{Port: port})
	_, js := natsClient(t, n.URL())
	testenv.Eventually(e.T, time.Minute, "the events once NATS is there", func() bool {
		return streamMsgs(js, "PGRELAY_EVENTS") == 300
	})
	requireExactlyOnce(t, e, consumeAll(t, js, "PGRELAY_EVENTS", "late", "pgrelay.events.>", 300))
}

// A long producer transaction holds publishing back (the horizon) and never
// loses its event: a log row written in a transaction that is still open
// while later rows commit is published once it commits, in id order.
func TestActorEventsLongTransactionNotSkipped(t *testing.T) {
	t.Parallel()
	n := startNATS(t, devenv.NATSConfig{})
	_, js := natsClient(t, n.URL())
	e := newEnv(t)
	e.Exec(`SELECT pgrelay.register('h', 'SELECT length($1)')`)
	p := e.startProcessor(withNATS(n.URL()))
	e.Exec(`SELECT pgrelay.notify_many('h', $1)`, payloads("before", 50))
	testenv.Eventually(e.T, time.Minute, "the first events", func() bool { return streamMsgs(js, "PGRELAY_EVENTS") == 50 })

	// An open transaction writes a log row (its id is taken now, below the
	// ids of the rows below).
	ctx := context.Background()
	tx, err := e.Pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	var held int64
	require.NoError(t, tx.QueryRow(ctx, `INSERT INTO pgrelay.log (queue_id, origin_id, channel, attempt, event)
		VALUES (1, 1, 'h', 1, 'succeeded') RETURNING id`).Scan(&held))

	// Later events run and commit meanwhile.
	e.Exec(`SELECT pgrelay.notify_many('h', $1)`, payloads("after", 50))
	testenv.Eventually(e.T, time.Minute, "the later events to run", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.log`) == 100
	})
	require.Equal(t, 50, e.Count(`SELECT count(*) FROM pgrelay.log WHERE id > $1`, held))
	// A round that saw them (the backlog counts them) did not publish them:
	// the cursor stays below the open transaction's row.
	testenv.Eventually(e.T, 30*time.Second, "a round to count the 50 later events as backlog", func() bool {
		return testutil.ToFloat64(p.Metrics().Events.Backlog.WithLabelValues("log")) == 50
	})
	require.Less(t, int64(e.Count(`SELECT last_id FROM pgrelay.publish_cursors WHERE source = 'log'`)), held,
		"the cursor passed a row of a transaction still open")
	require.Equal(t, 50, streamMsgs(js, "PGRELAY_EVENTS"))

	require.NoError(t, tx.Commit(ctx))
	testenv.Eventually(e.T, time.Minute, "every event, the held one included", func() bool {
		return streamMsgs(js, "PGRELAY_EVENTS") == 101
	})
	requireExactlyOnce(t, e, consumeAll(t, js, "PGRELAY_EVENTS", "all", "pgrelay.events.>", 101))
}

// lostAckNATS starts a NATS server whose events stream drops copies only
// within window, and returns with it a Processor option that loses the
// acknowledgements of the first batch the server stored: the server shuts
// down right after storing it, and the number stored is sent on the channel.
func lostAckNATS(t *testing.T, window time.Duration) (*devenv.NATS, jetstream.JetStream, func(*actors.Config), <-chan int) {
	t.Helper()
	n := startNATS(t, devenv.NATSConfig{})
	_, js := natsClient(t, n.URL())
	_, err := js.CreateStream(context.Background(), jetstream.StreamConfig{
		Name: "PGRELAY_EVENTS", Subjects: []string{"pgrelay.>"}, MaxAge: time.Hour, Duplicates: window,
	})
	require.NoError(t, err)
	lost := make(chan int, 1)
	opt := func(c *actors.Config) {
		withNATS(n.URL())(c)
		first := true
		actors.SetNATSBatchHook(c, func(res bus.BatchResult, err error) (bus.BatchResult, error) {
			if !first || err != nil || res.Acked == 0 {
				return res, err
			}
			first = false
			n.Shutdown()
			lost <- res.Acked
			return bus.BatchResult{Sent: res.Sent}, bus.ErrNotConnected
		})
	}
	return n, js, opt, lost
}

// storedWithoutAck waits for the batch lostAckNATS's option lost.
func storedWithoutAck(t *testing.T, lost <-chan int) int {
	t.Helper()
	select {
	case stored := <-lost:
		return stored
	case <-time.After(time.Minute):
		t.Fatal("no batch was published")
		return 0
	}
}

// A batch stored by JetStream whose acknowledgements were lost (the server
// went down right after storing it), and an outage longer than the stream's
// duplicate window: the server no longer drops the copies, so the publisher
// reads what the stream holds after its last acknowledged message and
// publishes only the rest, even though its database session broke meanwhile.
// Stream messages = log rows, none twice.
func TestActorEventsUnackedBatchOutlivesDuplicateWindow(t *testing.T) {
	t.Parallel()
	const window = time.Second
	n, js, loseAcks, lost := lostAckNATS(t, window)
	e := newEnv(t)
	e.Exec(`SELECT pgrelay.register('w', 'SELECT length($1)')`)
	p := e.startProcessor(loseAcks)
	e.Exec(`SELECT pgrelay.notify_many('w', $1)`, payloads("w", 300))
	stored := storedWithoutAck(t, lost)
	t.Logf("%d events stored without acknowledgement", stored)
	// The publisher's database session breaks meanwhile: it opens another
	// and still knows of the batch.
	var pid int
	require.NoError(t, e.Pool.QueryRow(context.Background(), `SELECT pid FROM pg_stat_activity
		WHERE datname = current_database() AND application_name = 'pgrelay-publisher'`).Scan(&pid))
	e.Exec(`SELECT pg_terminate_backend($1)`, pid)
	testenv.Eventually(e.T, time.Minute, "a new publisher session", func() bool {
		return e.Count(`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
			AND application_name = 'pgrelay-publisher' AND pid <> $1`, pid) == 1
	})
	e.Exec(`SELECT pgrelay.notify_many('w', $1)`, payloads("later", 200))
	// The outage outlasts the duplicate window.
	down := time.Now()
	testenv.Eventually(e.T, time.Minute, "the later events and an outage of twice the duplicate window", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.log`) == 500 && time.Since(down) > 2*window
	})
	require.NoError(t, n.Start())
	requireLogPublishedOnce(t, e, js, "window", 500)
	testenv.Eventually(e.T, 10*time.Second, "the passed-over events counted", func() bool {
		return testutil.ToFloat64(p.Metrics().Events.Duplicates) == float64(stored)
	})
}

// An event too large for the server's max payload even without payload and
// error (here: a long channel name and a tiny max payload) is logged as an
// error with its id, counted in pgrelay_events_oversize_total and passed
// over: the cursor moves past it and later events are still published.
func TestActorEventsTooLargeEvenBarePassedOver(t *testing.T) {
	t.Parallel()
	// 1000 bytes less the publisher's 512 of header room and the
	// CloudEvents headers (about 220 bytes, the channel's name among them):
	// an event of a one-letter channel fits, one of a 100-letter channel
	// does not.
	n := startNATS(t, devenv.NATSConfig{MaxPayload: 1000})
	_, js := natsClient(t, n.URL())
	e := newEnv(t)
	e.Exec(setEventSetting("cluster_name", "'t'"))
	long := strings.Repeat("L", 100)
	e.Exec(`SELECT pgrelay.register($1, 'SELECT length($1)')`, long)
	e.Exec(`SELECT pgrelay.register('s', 'SELECT length($1)')`)
	logs := &syncLog{}
	p := e.startProcessor(func(c *actors.Config) {
		withNATS(n.URL())(c)
		c.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})
	e.Exec(`SELECT pgrelay.notify($1, 'x')`, long)
	testenv.Eventually(e.T, time.Minute, "the long channel's event", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.log WHERE channel = $1`, long) == 1
	})
	tooLarge := e.logIDs(`WHERE channel = '` + long + `'`)[0]
	e.Exec(`SELECT pgrelay.notify_many('s', $1)`, payloads("s", 20))
	testenv.Eventually(e.T, time.Minute, "the later events in the stream", func() bool {
		return streamMsgs(js, "PGRELAY_EVENTS") == 20
	})
	msgs := consumeAll(t, js, "PGRELAY_EVENTS", "small", "pgrelay.events.>", 20)
	for _, m := range msgs {
		require.Equal(t, "s", m.doc["channel"])
	}
	testenv.Eventually(e.T, 10*time.Second, "the cursor past every row", func() bool {
		return int64(e.Count(`SELECT last_id FROM pgrelay.publish_cursors WHERE source = 'log'`)) ==
			e.logIDs("")[20]
	})
	require.Greater(t, int64(e.Count(`SELECT last_id FROM pgrelay.publish_cursors WHERE source = 'log'`)), tooLarge)
	require.Equal(t, 1.0, testutil.ToFloat64(p.Metrics().Events.Oversize.WithLabelValues("log")))
	require.Contains(t, logs.String(), "level=ERROR msg=\"event too large for the NATS server's max payload")
	require.Contains(t, logs.String(), "id="+strconv.FormatInt(tooLarge, 10))
}

// A Processor stopped while a batch it sent was stored without
// acknowledgement, and the node's next Processor starting after the stream's
// duplicate window: it knows nothing of that batch, but its first batch is
// older than half the window, so it looks in the stream from that batch's
// time on and does not store the copies.
func TestActorEventsRestartAfterDuplicateWindow(t *testing.T) {
	t.Parallel()
	const window = time.Second
	n, js, loseAcks, lost := lostAckNATS(t, window)
	e := newEnv(t)
	e.Exec(`SELECT pgrelay.register('r', 'SELECT length($1)')`)
	first := e.startProcessor(loseAcks)
	e.Exec(`SELECT pgrelay.notify_many('r', $1)`, payloads("r", 300))
	stored := storedWithoutAck(t, lost)
	require.NoError(t, first.Stop(context.Background()))
	require.Zero(t, e.Count(`SELECT last_id FROM pgrelay.publish_cursors WHERE source = 'log'`),
		"the stored batch is not recorded as published")
	t.Logf("stopped with %d events stored without acknowledgement", stored)
	// The stored batch outlives the duplicate window.
	time.Sleep(2 * window)
	require.NoError(t, n.Start())

	second := e.startProcessor(withNATS(n.URL()))
	requireLogPublishedOnce(t, e, js, "restart", 300)
	testenv.Eventually(e.T, 10*time.Second, "the passed-over events counted", func() bool {
		return testutil.ToFloat64(second.Metrics().Events.Duplicates) == float64(stored)
	})
}

// Each source of the publisher has its own floor (the stream sequence it
// reads after for its messages stored without acknowledgement), raised only
// by its own acknowledgements and not while one of its batches awaits them:
// the log source's acknowledgements, or a copy stored again past the
// duplicate window, must not lift the notifier source's floor over the
// messages it had stored without acknowledgement.
func TestActorEventsPerSourceFloor(t *testing.T) {
	t.Parallel()
	logSrc, notifier := actors.NewPubSource(events.SourceLog, 10), actors.NewPubSource(events.SourceNotifier, 10)
	now := time.Now()
	// The notifier's batch: two acknowledged (up to sequence 12), three
	// sent whose acknowledgements were lost (stored at 13-15, say).
	notifier.NoteBatch(bus.BatchResult{Acked: 2, Sent: 5, LastSeq: 12}, bus.ErrNotConnected, now, 105)
	require.True(t, notifier.Unacked())
	require.Equal(t, uint64(12), notifier.Floor())
	// The log source's batch is acknowledged up to 40: its floor, not the
	// notifier's.
	logSrc.NoteBatch(bus.BatchResult{Acked: 20, Sent: 20, LastSeq: 40}, nil, now, 220)
	require.Equal(t, uint64(40), logSrc.Floor())
	require.False(t, logSrc.Unacked())
	require.Equal(t, uint64(12), notifier.Floor(), "another source's acknowledgements leave the floor")
	// The notifier's batch sent again past the window, partly acknowledged
	// (copies stored at 41-42): the floor stays below what was stored
	// without acknowledgement.
	notifier.NoteBatch(bus.BatchResult{Acked: 2, Sent: 3, LastSeq: 42}, bus.ErrNotConnected, now, 105)
	require.Equal(t, uint64(12), notifier.Floor(), "no acknowledgement raises the floor while some are missing")
	// Everything acknowledged: the floor moves up.
	notifier.NoteBatch(bus.BatchResult{Acked: 1, Sent: 1, LastSeq: 43}, nil, now, 105)
	require.False(t, notifier.Unacked())
	require.Equal(t, uint64(43), notifier.Floor())
	require.Equal(t, uint64(40), logSrc.Floor())
}

// A batch stored without acknowledgement, an outage past the duplicate
// window, the stream read and the stored events passed over, and then the
// stream deleted and created again before the rest is acknowledged: what
// was read from the old stream does not hold for the new one, so every
// event is published to it (none is skipped as "stored").
func TestActorEventsStreamRecreatedAfterStoredRead(t *testing.T) {
	t.Parallel()
	const window = time.Second
	n, js, loseAcks, lost := lostAckNATS(t, window)
	e := newEnv(t)
	e.Exec(`SELECT pgrelay.register('x', 'SELECT length($1)')`)
	recreated := make(chan struct{})
	e.startProcessor(func(c *actors.Config) {
		loseAcks(c)
		lose := actors.NATSBatchHook(c)
		// found: a read of the stream found the events stored without
		// acknowledgement. (A publisher that starts late, its first rows
		// older than half the window, reads the stream before its first
		// batch too, and finds nothing: that read is not the one.)
		found, replaced := false, false
		actors.SetNATSStoredHook(c, func(ids map[string]bool, err error) (map[string]bool, error) {
			found = found || (err == nil && len(ids) > 0)
			return ids, err
		})
		actors.SetNATSBatchHook(c, func(res bus.BatchResult, err error) (bus.BatchResult, error) {
			res, err = lose(res, err)
			if !found || replaced || err != nil || res.Acked == 0 {
				return res, err
			}
			// The first batch after the read: the stream is replaced.
			replaced = true
			ctx := context.Background()
			require.NoError(t, js.DeleteStream(ctx, "PGRELAY_EVENTS"))
			_, cerr := js.CreateStream(ctx, jetstream.StreamConfig{
				Name: "PGRELAY_EVENTS", Subjects: []string{"pgrelay.>"}, MaxAge: time.Hour, Duplicates: window,
			})
			require.NoError(t, cerr)
			close(recreated)
			return bus.BatchResult{Sent: res.Sent}, errors.New("test: the stream was replaced")
		})
	})
	e.Exec(`SELECT pgrelay.notify_many('x', $1)`, payloads("x", 300))
	stored := storedWithoutAck(t, lost)
	t.Logf("%d events stored without acknowledgement", stored)
	e.Exec(`SELECT pgrelay.notify_many('x', $1)`, payloads("later", 200))
	down := time.Now()
	testenv.Eventually(e.T, time.Minute, "the later events and an outage of twice the duplicate window", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.log`) == 500 && time.Since(down) > 2*window
	})
	require.NoError(t, n.Start())
	select {
	case <-recreated:
	case <-time.After(time.Minute):
		t.Fatal("the stream was not replaced")
	}
	requireLogPublishedOnce(t, e, js, "new", 500)
}

// When the stream cannot be read for the events stored without
// acknowledgement (here: the read fails; in practice a NATS user without
// the permission to create consumers, or a stream too large to read in the
// budget), the publisher logs a warning saying what it looked for and
// publishes anyway: the stored events may be stored twice, but the
// publisher is not stuck.
func TestActorEventsStoredReadFailsPublishesAnyway(t *testing.T) {
	t.Parallel()
	const window = time.Second
	n, js, loseAcks, lost := lostAckNATS(t, window)
	e := newEnv(t)
	e.Exec(`SELECT pgrelay.register('f', 'SELECT length($1)')`)
	logs := &syncLog{}
	e.startProcessor(func(c *actors.Config) {
		loseAcks(c)
		c.Logger = slog.New(slog.NewTextHandler(logs, nil))
		actors.SetNATSStoredHook(c, func(map[string]bool, error) (map[string]bool, error) {
			return nil, errors.New("test: permissions violation for subscription")
		})
	})
	e.Exec(`SELECT pgrelay.notify_many('f', $1)`, payloads("f", 300))
	stored := storedWithoutAck(t, lost)
	e.Exec(`SELECT pgrelay.notify_many('f', $1)`, payloads("later", 200))
	down := time.Now()
	testenv.Eventually(e.T, time.Minute, "the later events and an outage of twice the duplicate window", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.log`) == 500 && time.Since(down) > 2*window
	})
	require.NoError(t, n.Start())
	testenv.Eventually(e.T, time.Minute, "every event published", func() bool {
		return e.Count(`SELECT backlog FROM pgrelay.publish_backlog() WHERE source = 'log'`) == 0
	})
	require.Equal(t, 500+stored, streamMsgs(js, "PGRELAY_EVENTS"), "the stored events published again")
	first := e.logIDs("")[0]
	require.Contains(t, logs.String(), "could not read the events stream for events stored without acknowledgement")
	require.Contains(t, logs.String(), "first_id="+strconv.FormatInt(first, 10))
	require.Contains(t, logs.String(), "source=log")
	require.Contains(t, logs.String(), "permissions violation")
}

// A batch of notifier status events stored without acknowledgement and an
// outage past the duplicate window, while log events wait too: after the
// outage the log source publishes first, and its acknowledgements must not
// raise the sequence the notifier source reads its stored events after (each
// source has its own floor). Every notifier event is stored once.
func TestActorEventsNotifierUnackedBatchOutlivesDuplicateWindow(t *testing.T) {
	t.Parallel()
	const window = time.Second
	n := startNATS(t, devenv.NATSConfig{})
	_, js := natsClient(t, n.URL())
	_, err := js.CreateStream(context.Background(), jetstream.StreamConfig{
		Name: "PGRELAY_EVENTS", Subjects: []string{"pgrelay.>"}, MaxAge: time.Hour, Duplicates: window,
	})
	require.NoError(t, err)
	e := newEnv(t)
	s := catcher(t, devenv.SMTPConfig{})
	e.Exec(`SELECT pgrelay_notifier.create_channel('mail', 'app@shop.example')`)
	e.Exec(`SELECT pgrelay.register('w', 'SELECT length($1)')`)
	lost := make(chan int, 1)
	e.startProcessor(func(c *actors.Config) {
		withNATS(n.URL())(c)
		c.SMTPURL = s.URL()
		first := true
		actors.SetNATSSourceBatchHook(c, func(src string, res bus.BatchResult, err error) (bus.BatchResult, error) {
			if src != events.SourceNotifier || !first || err != nil || res.Acked == 0 {
				return res, err
			}
			first = false
			n.Shutdown()
			lost <- res.Acked
			return bus.BatchResult{Sent: res.Sent}, bus.ErrNotConnected
		})
	})
	const mails = 10
	for i := range mails {
		e.Exec(`SELECT pgrelay_notifier.send('mail', ARRAY[$1], 's', 'b')`, fmt.Sprintf("u%d@example.org", i))
	}
	stored := storedWithoutAck(t, lost)
	t.Logf("%d notifier events stored without acknowledgement", stored)
	// Log events wait too: the log source publishes them first after the
	// outage.
	e.Exec(`SELECT pgrelay.notify_many('w', $1)`, payloads("w", 100))
	down := time.Now()
	testenv.Eventually(e.T, time.Minute, "every mail sent, and an outage of twice the duplicate window", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay_notifier.notifications WHERE status = 'sent'`) == mails &&
			time.Since(down) > 2*window
	})
	require.NoError(t, n.Start())
	testenv.Eventually(e.T, time.Minute, "every event published", func() bool {
		return e.Count(`SELECT coalesce(sum(backlog), 0) FROM pgrelay.publish_backlog()`) == 0
	})
	// queued, sending and sent for each mail, once each.
	msgs := consumeAll(t, js, "PGRELAY_EVENTS", "notifier", "pgrelay.notifier.>", 3*mails)
	seen := map[string]bool{}
	for _, m := range msgs {
		require.False(t, seen[m.msgID], "notifier event %s stored twice", m.msgID)
		seen[m.msgID] = true
	}
	require.Len(t, msgs, 3*mails)
}

// A publisher that loses the node's publisher lease (its session broke) and
// wins it back after another session of the node held it: that one may have
// stored a batch without acknowledgement (here the test plays it: it holds
// the lease and stores the next events itself, cursor unmoved), so the
// first batch after the lease is won back is checked against the stream
// like a first batch at start, and nothing is stored twice although the
// duplicate window has passed.
func TestActorEventsLeaseWonBackChecksStream(t *testing.T) {
	t.Parallel()
	const window = time.Second
	n := startNATS(t, devenv.NATSConfig{})
	nc, js := natsClient(t, n.URL())
	ctx := context.Background()
	_, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: "PGRELAY_EVENTS", Subjects: []string{"pgrelay.>"}, MaxAge: time.Hour, Duplicates: window,
	})
	require.NoError(t, err)
	e := newEnv(t)
	e.Exec(`SELECT pgrelay.register('l', 'SELECT length($1)')`)
	e.startProcessor(withNATS(n.URL()))
	e.Exec(`SELECT pgrelay.notify_many('l', $1)`, payloads("a", 10))
	testenv.Eventually(e.T, time.Minute, "the first events published", func() bool {
		return streamMsgs(js, "PGRELAY_EVENTS") == 10 &&
			e.Count(`SELECT backlog FROM pgrelay.publish_backlog() WHERE source = 'log'`) == 0
	})
	// The test's session takes the lease: the publisher's session is ended
	// until the test's gets it first.
	holder, err := pgx.Connect(ctx, e.URL)
	require.NoError(t, err)
	defer func() { _ = holder.Close(ctx) }()
	node := e.Count(`SELECT pgrelay._this_node()`)
	testenv.Eventually(e.T, time.Minute, "the test holding the publisher lease", func() bool {
		e.Exec(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			WHERE datname = current_database() AND application_name = 'pgrelay-publisher'`)
		ok, err := store.TryPublishLease(ctx, holder, node)
		require.NoError(t, err)
		return ok
	})
	e.Exec(`SELECT pgrelay.notify_many('l', $1)`, payloads("b", 50))
	testenv.Eventually(e.T, time.Minute, "the later events logged", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.log`) == 60
	})
	// The other publisher's batch, stored without the cursor moving.
	later := e.logIDs("")[10:]
	for _, id := range later {
		msg := nats.NewMsg("pgrelay.events.l.succeeded")
		msg.Data = fmt.Appendf(nil, `{"id": %d, "channel": "l", "node": %d}`, id, node)
		msg.Header.Set(jetstream.MsgIDHeader, strconv.FormatInt(id, 10))
		_, err := js.PublishMsg(ctx, msg)
		require.NoError(t, err)
	}
	require.NoError(t, nc.Flush())
	require.Equal(t, 60, streamMsgs(js, "PGRELAY_EVENTS"))
	stored := time.Now()
	testenv.Eventually(e.T, time.Minute, "twice the duplicate window", func() bool { return time.Since(stored) > 2*window })
	require.NoError(t, holder.Close(ctx)) // the lease is free again
	requireLogPublishedOnce(t, e, js, "lease", 60)
}
