package actors_test

import (
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/actors"
	"github.com/pgrelay/pgrelay/internal/devenv"
	"github.com/pgrelay/pgrelay/internal/testenv"
)

// An outage that begins at start: NATS is unreachable from the first round
// on. The rounds that cannot publish are counted in
// pgrelay_events_publish_errors_total, and the log says that publishing
// resumed only once NATS is back and the events were published.
func TestActorEventsPublishErrorsWhileNATSDownAtStart(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	e := newEnv(t)
	e.Exec(`SELECT pgrelay.register('d', 'SELECT length($1)')`)
	logs := &syncLog{}
	p := e.startProcessor(func(c *actors.Config) {
		withNATS(fmt.Sprintf("nats://127.0.0.1:%d", port))(c)
		c.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})
	e.Exec(`SELECT pgrelay.notify_many('d', $1)`, payloads("d", 50))
	testenv.Eventually(e.T, time.Minute, "the backlog gauge to count the 50 events", func() bool {
		return testutil.ToFloat64(p.Metrics().Events.Backlog.WithLabelValues("log")) == 50
	})
	require.Positive(t, testutil.ToFloat64(p.Metrics().Events.PublishErrors),
		"rounds that could not publish for want of NATS are publish errors")
	require.Equal(t, 0.0, testutil.ToFloat64(p.Metrics().Events.Connected))
	require.Contains(t, logs.String(), "event publisher: waiting for NATS")
	require.NotContains(t, logs.String(), "publishing events to NATS again", "NATS never answered")

	n := startNATS(t, devenv.NATSConfig{Port: port})
	_, js := natsClient(t, n.URL())
	testenv.Eventually(e.T, time.Minute, "the events once NATS is there", func() bool {
		return streamMsgs(js, "PGRELAY_EVENTS") == 50
	})
	testenv.Eventually(e.T, 10*time.Second, "the log to say publishing resumed", func() bool {
		return strings.Contains(logs.String(), "publishing events to NATS again")
	})
	out := logs.String()
	require.Less(t, strings.LastIndex(out, "event publisher: waiting for NATS"),
		strings.Index(out, "publishing events to NATS again"), "resumed only after the wait:\n%s", out)
}

// The notifier's source shows in the publisher's gauges only where the
// notifier is used: not without an email channel, and from the first email
// channel on.
func TestActorEventsNotifierGaugesOnlyWithEmailChannel(t *testing.T) {
	t.Parallel()
	n := startNATS(t, devenv.NATSConfig{})
	_, js := natsClient(t, n.URL())
	e := newEnv(t)
	e.Exec(`SELECT pgrelay.register('s', 'SELECT length($1)')`)
	p := e.startProcessor(withNATS(n.URL()))
	e.Exec(`SELECT pgrelay.notify_many('s', $1)`, payloads("s", 20))
	testenv.Eventually(e.T, time.Minute, "the events in the stream", func() bool {
		return streamMsgs(js, "PGRELAY_EVENTS") == 20
	})
	ev := p.Metrics().Events
	testenv.Eventually(e.T, 10*time.Second, "the log's backlog gauge at 0", func() bool {
		return testutil.CollectAndCount(ev.Backlog) > 0 && testutil.ToFloat64(ev.Backlog.WithLabelValues("log")) == 0
	})
	require.Equal(t, 1, testutil.CollectAndCount(ev.Backlog), "only source log: no email channel")
	require.Equal(t, 1, testutil.CollectAndCount(ev.Lag), "only source log: no email channel")

	e.Exec(`SELECT pgrelay_notifier.create_channel('mail', 'app@shop.example')`)
	testenv.Eventually(e.T, 10*time.Second, "the notifier's gauges", func() bool {
		return testutil.CollectAndCount(ev.Backlog) == 2 && testutil.CollectAndCount(ev.Lag) == 2
	})
}
