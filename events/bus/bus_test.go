package bus_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/events/bus"
	"github.com/pgrelay/pgrelay/internal/devenv"
)

func start(t *testing.T, cfg devenv.NATSConfig) (*devenv.NATS, *bus.Conn) {
	t.Helper()
	n, err := devenv.StartNATS(cfg)
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
	_, c := start(t, devenv.NATSConfig{})
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
	require.Equal(t, jetstream.LimitsPolicy, s.CachedInfo().Config.Retention)
	require.Equal(t, int64(-1), s.CachedInfo().Config.MaxBytes)

	// Retention and max bytes: applied when set, left alone when not.
	did, err = c.EnsureStream(ctx, bus.StreamConfig{Retention: bus.RetentionInterest, MaxBytes: 1 << 20})
	require.NoError(t, err)
	require.Equal(t, "updated", did)
	did, err = c.EnsureStream(ctx, bus.StreamConfig{})
	require.NoError(t, err)
	require.Equal(t, "ok", did)
	s, err = c.JetStream().Stream(ctx, bus.DefaultStream)
	require.NoError(t, err)
	require.Equal(t, jetstream.InterestPolicy, s.CachedInfo().Config.Retention)
	require.Equal(t, int64(1<<20), s.CachedInfo().Config.MaxBytes)
	require.Equal(t, time.Hour, s.CachedInfo().Config.MaxAge)
	did, err = c.EnsureStream(ctx, bus.StreamConfig{Retention: bus.RetentionLimits})
	require.NoError(t, err)
	require.Equal(t, "updated", did)
	_, err = c.EnsureStream(ctx, bus.StreamConfig{Retention: "workqueue"})
	require.ErrorContains(t, err, `retention "workqueue"`)
	_, err = c.EnsureStream(ctx, bus.StreamConfig{MaxBytes: -5})
	require.ErrorContains(t, err, "max bytes")

	// Replicas: one server keeps one; more are refused by JetStream, the
	// error naming the stream and what it takes.
	did, err = c.EnsureStream(ctx, bus.StreamConfig{Replicas: 1})
	require.NoError(t, err)
	require.Equal(t, "ok", did)
	_, err = c.EnsureStream(ctx, bus.StreamConfig{Replicas: 3})
	require.ErrorIs(t, err, bus.ErrStreamConfig)
	require.ErrorContains(t, err, "update stream "+bus.DefaultStream)
	require.ErrorContains(t, err, "replicas 3): ")
	require.ErrorContains(t, err, "(3 replicas take a NATS cluster of at least 3 servers with JetStream)")
	for _, n := range []int{-1, 6} {
		_, err = c.EnsureStream(ctx, bus.StreamConfig{Replicas: n})
		require.ErrorContains(t, err, "expected 1..5")
	}
	s, err = c.JetStream().Stream(ctx, bus.DefaultStream)
	require.NoError(t, err)
	require.Equal(t, 1, s.CachedInfo().Config.Replicas)

	// A new stream gets them at creation.
	_, err = c.EnsureStream(ctx, bus.StreamConfig{Name: "NEWONE", Retention: bus.RetentionInterest, MaxBytes: 4096})
	require.ErrorIs(t, err, bus.ErrStreamConfig, "the subjects overlap with the first stream")
	require.NoError(t, c.JetStream().DeleteStream(ctx, bus.DefaultStream))
	_, err = c.EnsureStream(ctx, bus.StreamConfig{Name: "NEWONE", Replicas: 3})
	require.ErrorIs(t, err, bus.ErrStreamConfig)
	require.ErrorContains(t, err, "create stream NEWONE")
	require.ErrorContains(t, err, "not supported in non-clustered mode")
	did, err = c.EnsureStream(ctx, bus.StreamConfig{Name: "NEWONE", Retention: bus.RetentionInterest, MaxBytes: 4096})
	require.NoError(t, err)
	require.Equal(t, "created", did)
	s, err = c.JetStream().Stream(ctx, "NEWONE")
	require.NoError(t, err)
	require.Equal(t, jetstream.InterestPolicy, s.CachedInfo().Config.Retention)
	require.Equal(t, int64(4096), s.CachedInfo().Config.MaxBytes)
	require.NoError(t, c.JetStream().DeleteStream(ctx, "NEWONE"))
	_, err = c.EnsureStream(ctx, bus.StreamConfig{})
	require.NoError(t, err)

	// A work-queue stream cannot be turned into one for events.
	_, err = c.JetStream().CreateStream(ctx, jetstream.StreamConfig{Name: "WQ", Subjects: []string{"wq.>"},
		Retention: jetstream.WorkQueuePolicy})
	require.NoError(t, err)
	_, err = c.EnsureStream(ctx, bus.StreamConfig{Name: "WQ", Retention: bus.RetentionLimits})
	require.ErrorIs(t, err, bus.ErrStreamConfig)
	require.Contains(t, err.Error(), "work-queue")

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
	_, c := start(t, devenv.NATSConfig{})
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
	require.Equal(t, uint64(2), st.LastSeq)
	require.Equal(t, bus.DuplicateWindow, st.Duplicates)
	require.WithinDuration(t, time.Now(), st.Created, time.Minute)
	_, err = c.PublishBatch(ctx, bus.DefaultStream, []bus.Msg{
		{Subject: "pgrelay.notifier.c.sent", Data: []byte(`{}`), ID: "n1"},
		{Subject: "pgrelay.events.c.failed", Data: []byte(`{}`), ID: "3"}})
	require.NoError(t, err)
	ids, err := c.StoredIDs(ctx, bus.DefaultStream, "pgrelay.events.>", 1, nil)
	require.NoError(t, err)
	require.Equal(t, map[string]bool{"2": true, "3": true}, ids)
	ids, err = c.StoredIDs(ctx, bus.DefaultStream, "pgrelay.notifier.>", 0, nil)
	require.NoError(t, err)
	require.Equal(t, map[string]bool{"n1": true}, ids)
	ids, err = c.StoredIDs(ctx, bus.DefaultStream, "pgrelay.events.>", 4, nil)
	require.NoError(t, err)
	require.Empty(t, ids)
	ids, err = c.StoredIDsSince(ctx, bus.DefaultStream, "pgrelay.events.>", time.Now().Add(-time.Minute), nil)
	require.NoError(t, err)
	require.Equal(t, map[string]bool{"1": true, "2": true, "3": true}, ids)
	// Only the ids keep accepts are held.
	ids, err = c.StoredIDsSince(ctx, bus.DefaultStream, "pgrelay.events.>", time.Now().Add(-time.Minute),
		func(id string) bool { return id != "2" })
	require.NoError(t, err)
	require.Equal(t, map[string]bool{"1": true, "3": true}, ids)
	ids, err = c.StoredIDs(ctx, bus.DefaultStream, "pgrelay.>", 0, func(id string) bool { return id == "n1" })
	require.NoError(t, err)
	require.Equal(t, map[string]bool{"n1": true}, ids)
	// A context that ends before the read: an error, not a partial set.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = c.StoredIDs(cctx, bus.DefaultStream, "pgrelay.events.>", 0, nil)
	require.Error(t, err)
	ids, err = c.StoredIDsSince(ctx, bus.DefaultStream, "pgrelay.events.>", time.Now().Add(time.Minute), nil)
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

	n, err := devenv.StartNATS(devenv.NATSConfig{Port: port})
	require.NoError(t, err)
	defer n.Stop()
	require.Eventually(t, c.Connected, 20*time.Second, 10*time.Millisecond)
	require.NoError(t, c.Publish(context.Background(), "a", []byte("x"), "1", nil))
}

// logBuffer collects a Conn's log output across goroutines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// connect connects with o to a server that must accept it, and checks that
// JetStream works over the connection.
func connectAndUse(t *testing.T, o bus.Options) {
	t.Helper()
	c, err := bus.Connect(o)
	require.NoError(t, err)
	defer func() { _ = c.Close() }()
	require.Eventually(t, c.Connected, 20*time.Second, 10*time.Millisecond)
	ctx := context.Background()
	_, err = c.EnsureStream(ctx, bus.StreamConfig{})
	require.NoError(t, err)
	res, err := c.PublishBatch(ctx, bus.DefaultStream, []bus.Msg{{Subject: "pgrelay.events.c.succeeded", Data: []byte(`{}`), ID: "1"}})
	require.NoError(t, err)
	require.Equal(t, 1, res.Acked)
}

// refused connects with o to a server that must refuse it: Connect itself
// succeeds (the connection keeps trying), it never comes up, and the reason
// is logged (once, not at every attempt).
func refused(t *testing.T, o bus.Options, reason string) {
	t.Helper()
	logs := &logBuffer{}
	o.Logger = slog.New(slog.NewTextHandler(logs, nil))
	o.ReconnectWait, o.ReconnectJitter = 20*time.Millisecond, time.Millisecond
	c, err := bus.Connect(o)
	require.NoError(t, err)
	defer func() { _ = c.Close() }()
	require.Eventually(t, func() bool { return strings.Count(logs.String(), "cannot connect to NATS") > 0 },
		20*time.Second, 10*time.Millisecond)
	require.False(t, c.Connected())
	require.Contains(t, strings.ToLower(logs.String()), reason)
	_, err = c.PublishBatch(context.Background(), bus.DefaultStream, []bus.Msg{{Subject: "pgrelay.events.c.x", ID: "1"}})
	require.ErrorIs(t, err, bus.ErrNotConnected)
	// Several attempts, one log line.
	// (Reconnects counts the attempts that reached the server.)
	seen := c.NATS().Stats().Reconnects
	require.Eventually(t, func() bool { return c.NATS().Stats().Reconnects >= seen+5 }, 30*time.Second,
		10*time.Millisecond)
	require.Equal(t, 1, strings.Count(logs.String(), "cannot connect to NATS"), logs.String())
}

// A server that requires TLS with client certificates: the client
// certificate, its key and the CA (--nats-tls-cert, --nats-tls-key,
// --nats-tls-ca) connect; without the client certificate, or without the
// CA to verify the server with, the connection is refused and says why.
func TestConnectTLS(t *testing.T) {
	t.Parallel()
	pki, err := devenv.NewNATSTLS(t.TempDir())
	require.NoError(t, err)
	n, err := devenv.StartNATS(devenv.NATSConfig{TLS: pki})
	require.NoError(t, err)
	t.Cleanup(n.Stop)
	for _, url := range []string{n.URL(), "tls://127.0.0.1:" + strconv.Itoa(n.Port())} {
		connectAndUse(t, bus.Options{URL: url, TLSCert: pki.ClientCert, TLSKey: pki.ClientKey, TLSCA: pki.CA})
	}
	t.Run("no client certificate", func(t *testing.T) {
		t.Parallel()
		refused(t, bus.Options{URL: n.URL(), TLSCA: pki.CA}, "tls")
	})
	t.Run("server not verified", func(t *testing.T) {
		t.Parallel()
		refused(t, bus.Options{URL: n.URL(), TLSCert: pki.ClientCert, TLSKey: pki.ClientKey},
			"certificate signed by unknown authority")
	})
	t.Run("invalid options", func(t *testing.T) {
		t.Parallel()
		_, err := bus.Connect(bus.Options{URL: n.URL(), TLSCert: pki.ClientCert})
		require.ErrorContains(t, err, "needs its key")
		_, err = bus.Connect(bus.Options{URL: n.URL(), TLSCert: pki.ClientCert, TLSKey: pki.CA, TLSCA: pki.CA})
		require.Error(t, err, "a key that is no key")
	})
}

// A server in operator mode (JWT authentication): the user's credentials
// file (--nats-creds) connects, and JetStream works for its account; without
// it, or with another operator's, the server refuses and the log says so.
func TestConnectCreds(t *testing.T) {
	t.Parallel()
	auth, err := devenv.NewNATSAuth(t.TempDir())
	require.NoError(t, err)
	n, err := devenv.StartNATS(devenv.NATSConfig{Auth: auth})
	require.NoError(t, err)
	t.Cleanup(n.Stop)
	connectAndUse(t, bus.Options{URL: n.URL(), CredsFile: auth.CredsFile})
	t.Run("no credentials", func(t *testing.T) {
		t.Parallel()
		refused(t, bus.Options{URL: n.URL()}, "authorization violation")
	})
	t.Run("another operator's user", func(t *testing.T) {
		t.Parallel()
		other, err := devenv.NewNATSAuth(t.TempDir())
		require.NoError(t, err)
		refused(t, bus.Options{URL: n.URL(), CredsFile: other.CredsFile}, "authorization violation")
	})
}

// The connection's log names the server without its credentials: a token in
// the URL (nats://TOKEN@host, a user without a password) is one too.
func TestConnectLogHidesToken(t *testing.T) {
	t.Parallel()
	n, err := devenv.StartNATS(devenv.NATSConfig{})
	require.NoError(t, err)
	t.Cleanup(n.Stop)
	const token = "s3cretT0KEN"
	logs := &logBuffer{}
	c, err := bus.Connect(bus.Options{URL: strings.Replace(n.URL(), "nats://", "nats://"+token+"@", 1),
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	require.NoError(t, err)
	defer func() { _ = c.Close() }()
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "connected to NATS") },
		10*time.Second, 10*time.Millisecond)
	require.NotContains(t, logs.String(), token)
	require.Contains(t, logs.String(), "nats://xxxxx@127.0.0.1:")
}

// A JetStream API request that no server answers (as one sent while a
// cluster elects a new leader) fails after the request timeout, not at the
// caller's much later deadline: the publisher's round, which has a minute,
// sends it again instead of waiting that minute out.
func TestAPIRequestUnanswered(t *testing.T) {
	n, err := devenv.StartNATS(devenv.NATSConfig{NoJetStream: true})
	require.NoError(t, err)
	t.Cleanup(n.Stop)
	sink, err := nats.Connect(n.URL())
	require.NoError(t, err)
	t.Cleanup(sink.Close)
	_, err = sink.Subscribe("$JS.API.>", func(*nats.Msg) {}) // heard, never answered
	require.NoError(t, err)
	require.NoError(t, sink.Flush())
	c, err := bus.Connect(bus.Options{URL: n.URL(), RequestTimeout: 200 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	require.Eventually(t, c.Connected, 10*time.Second, 10*time.Millisecond)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for name, call := range map[string]func() error{
		"JetStreamEnabled": func() error { _, err := c.JetStreamEnabled(ctx); return err },
		"EnsureStream":     func() error { _, err := c.EnsureStream(ctx, bus.StreamConfig{}); return err },
		"StreamState":      func() error { _, err := c.StreamState(ctx, bus.DefaultStream); return err },
	} {
		done := make(chan error, 1)
		go func() { done <- call() }()
		select {
		case err := <-done:
			require.ErrorIs(t, err, context.DeadlineExceeded, name)
		case <-time.After(30 * time.Second):
			t.Fatalf("%s still waits for an answer after 30s", name)
		}
	}
}
