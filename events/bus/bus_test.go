package bus_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/events/bus"
	"github.com/pgrelay/pgrelay/internal/testenv"
)

func start(t *testing.T, cfg testenv.NATSConfig) (*testenv.NATS, *bus.Conn) {
	t.Helper()
	n, err := testenv.StartNATS(cfg)
	require.NoError(t, err)
	t.Cleanup(n.Stop)
	c, err := bus.Connect(bus.Options{URL: n.URL()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	require.Eventually(t, c.Connected, 10*time.Second, 10*time.Millisecond)
	return n, c
}

// The events stream: created, left alone, or refused with ErrStreamConfig
// when pgrelay cannot publish to it.
func TestEnsureStream(t *testing.T) {
	_, c := start(t, testenv.NATSConfig{})
	ctx := context.Background()
	did, err := c.EnsureStream(ctx, bus.StreamConfig{})
	require.NoError(t, err)
	require.Equal(t, "created", did)
	did, err = c.EnsureStream(ctx, bus.StreamConfig{})
	require.NoError(t, err)
	require.Equal(t, "ok", did)
	did, err = c.EnsureStream(ctx, bus.StreamConfig{MaxAge: time.Hour})
	require.NoError(t, err)
	require.Equal(t, "updated", did)
	s, err := c.JetStream().Stream(ctx, bus.DefaultStream)
	require.NoError(t, err)
	require.Equal(t, time.Hour, s.CachedInfo().Config.MaxAge)
	require.Equal(t, []string{"pgrelay.>"}, s.CachedInfo().Config.Subjects)

	_, err = c.JetStream().CreateStream(ctx, jetstream.StreamConfig{Name: "NOACK", Subjects: []string{"x.>"}, NoAck: true})
	require.NoError(t, err)
	_, err = c.EnsureStream(ctx, bus.StreamConfig{Name: "NOACK"})
	require.ErrorIs(t, err, bus.ErrStreamConfig)
	require.Contains(t, err.Error(), "no_ack")

	// Another stream holds the subjects: creating ours fails clearly.
	_, err = c.EnsureStream(ctx, bus.StreamConfig{Name: "SECOND"})
	require.ErrorIs(t, err, bus.ErrStreamConfig)
	require.Contains(t, err.Error(), "overlap")
}

// Batches are acknowledged in order; a replay is reported as duplicates.
func TestPublishBatch(t *testing.T) {
	_, c := start(t, testenv.NATSConfig{})
	ctx := context.Background()
	_, err := c.EnsureStream(ctx, bus.StreamConfig{})
	require.NoError(t, err)
	msgs := []bus.Msg{{Subject: "pgrelay.events.c.succeeded", Data: []byte(`{}`), ID: "1"},
		{Subject: "pgrelay.events.c.succeeded", Data: []byte(`{}`), ID: "2"}}
	res, err := c.PublishBatch(ctx, bus.DefaultStream, msgs)
	require.NoError(t, err)
	require.Equal(t, bus.BatchResult{Acked: 2, Sent: 2, LastSeq: 2}, res)
	res, err = c.PublishBatch(ctx, bus.DefaultStream, msgs)
	require.NoError(t, err)
	require.Equal(t, bus.BatchResult{Acked: 2, Duplicates: 2, Sent: 2, LastSeq: 2}, res)

	// The stream's state, and the ids stored after a sequence (headers
	// only, the subjects asked for, up to the end).
	st, err := c.StreamState(ctx, bus.DefaultStream)
	require.NoError(t, err)
	require.Equal(t, bus.StreamState{LastSeq: 2, Duplicates: bus.DuplicateWindow}, st)
	_, err = c.PublishBatch(ctx, bus.DefaultStream, []bus.Msg{
		{Subject: "pgrelay.notifier.c.sent", Data: []byte(`{}`), ID: "n1"},
		{Subject: "pgrelay.events.c.failed", Data: []byte(`{}`), ID: "3"}})
	require.NoError(t, err)
	ids, err := c.StoredIDs(ctx, bus.DefaultStream, "pgrelay.events.>", 1)
	require.NoError(t, err)
	require.Equal(t, map[string]bool{"2": true, "3": true}, ids)
	ids, err = c.StoredIDs(ctx, bus.DefaultStream, "pgrelay.notifier.>", 0)
	require.NoError(t, err)
	require.Equal(t, map[string]bool{"n1": true}, ids)
	ids, err = c.StoredIDs(ctx, bus.DefaultStream, "pgrelay.events.>", 4)
	require.NoError(t, err)
	require.Empty(t, ids)
	s, err := c.JetStream().Stream(ctx, bus.DefaultStream)
	require.NoError(t, err)
	info, err := s.Info(ctx)
	require.NoError(t, err)
	require.Zero(t, info.State.Consumers, "StoredIDs deletes its consumers")

	// The wrong stream expected: not acknowledged.
	res, err = c.PublishBatch(ctx, "ELSEWHERE", msgs[:1])
	require.Error(t, err)
	require.Zero(t, res.Acked)

	// Too large for the server.
	big := []bus.Msg{{Subject: "pgrelay.events.c.x", Data: []byte(strings.Repeat("x", c.MaxPayload()+1)), ID: "3"}}
	_, err = c.PublishBatch(ctx, bus.DefaultStream, big)
	require.ErrorIs(t, err, bus.ErrTooLarge)
	err = c.Publish(ctx, "plain", big[0].Data, "3", nil)
	require.ErrorIs(t, err, bus.ErrTooLarge)
}

// An unreachable server: Connect succeeds, publishing fails fast with
// ErrNotConnected, and the connection comes up when the server does.
func TestUnreachableThenUp(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	c, err := bus.Connect(bus.Options{URL: "nats://127.0.0.1:" + strconv.Itoa(port), ReconnectWait: 50 * time.Millisecond})
	require.NoError(t, err)
	defer func() { _ = c.Close() }()
	require.False(t, c.Connected())
	_, err = c.PublishBatch(context.Background(), "", []bus.Msg{{Subject: "a", ID: "1"}})
	require.True(t, errors.Is(err, bus.ErrNotConnected), "%v", err)
	require.ErrorIs(t, c.Publish(context.Background(), "a", nil, "1", nil), bus.ErrNotConnected)

	n, err := testenv.StartNATS(testenv.NATSConfig{Port: port})
	require.NoError(t, err)
	defer n.Stop()
	require.Eventually(t, c.Connected, 20*time.Second, 10*time.Millisecond)
	require.NoError(t, c.Publish(context.Background(), "a", []byte("x"), "1", nil))
}
