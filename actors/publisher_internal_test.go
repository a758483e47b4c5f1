package actors

import (
	"bytes"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/events/bus"
)

// The log line that says publishing resumed follows a round that
// published, never one that found NATS away: a failed round, then rounds
// without NATS, then one that published.
func TestPublisherResumeLoggedAfterPublishing(t *testing.T) {
	c, err := bus.Connect(bus.Options{URL: "nats://127.0.0.1:1", ReconnectWait: time.Hour})
	require.NoError(t, err)
	defer c.Close()
	m, err := NewMetrics(nil)
	require.NoError(t, err)
	var out bytes.Buffer
	p := &publisher{d: &deps{log: slog.New(slog.NewTextHandler(&out, nil)), metrics: m, bus: c}}

	p.record(roundResult{state: statePublishing, err: errors.New("publish: nats: timeout")})
	require.Contains(t, out.String(), "publishing events to NATS failed")
	p.record(roundResult{state: stateNoNATS, err: bus.ErrNotConnected})
	p.record(roundResult{state: stateNoNATS, err: bus.ErrNotConnected})
	require.NotContains(t, out.String(), "publishing events to NATS again", "NATS is still away")
	require.Contains(t, out.String(), "event publisher: waiting for NATS")
	require.Equal(t, 3.0, testutil.ToFloat64(m.Events.PublishErrors))

	p.record(roundResult{state: statePublishing, published: map[string]int{"log": 3}})
	require.Contains(t, out.String(), "publishing events to NATS again")
	require.Equal(t, 3.0, testutil.ToFloat64(m.Events.PublishErrors))
}

// A Processor on standby (another of the node holds the publisher lease)
// reports no backlog: a value of its own would stay as it was when it last
// published, and a publish-lag alert would hold on it.
func TestPublisherStandbyReportsNoBacklog(t *testing.T) {
	c, err := bus.Connect(bus.Options{URL: "nats://127.0.0.1:1", ReconnectWait: time.Hour})
	require.NoError(t, err)
	defer c.Close()
	m, err := NewMetrics(nil)
	require.NoError(t, err)
	p := &publisher{d: &deps{log: slog.New(slog.DiscardHandler), metrics: m, bus: c}}

	p.record(roundResult{state: statePublishing, backlog: map[string]int64{"log": 7},
		lag: map[string]time.Duration{"log": time.Hour}})
	require.Equal(t, 7.0, testutil.ToFloat64(m.Events.Backlog.WithLabelValues("log")))
	require.Equal(t, 3600.0, testutil.ToFloat64(m.Events.Lag.WithLabelValues("log")))
	p.record(roundResult{state: stateStandby})
	require.Equal(t, 0, testutil.CollectAndCount(m.Events.Backlog))
	require.Equal(t, 0, testutil.CollectAndCount(m.Events.Lag))
}
