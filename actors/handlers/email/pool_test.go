package email

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/events/store"
	"github.com/pgrelay/pgrelay/internal/testenv"
)

func testPool(t *testing.T, url string) *pool {
	t.Helper()
	tg, err := ParseTarget(url)
	require.NoError(t, err)
	p, err := newPool(tg, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	t.Cleanup(p.close)
	return p
}

func testMsg(t *testing.T, id int64, to ...string) *store.Notification {
	t.Helper()
	return &store.Notification{ID: id, From: "app@shop.example", To: to, Subject: fmt.Sprint("s", id),
		BodyText: "b", CreatedAt: time.Now()}
}

func sendOne(t *testing.T, p *pool, ctx context.Context, n *store.Notification) error {
	t.Helper()
	m, env, err := buildMessage(n, DefaultMessageIDDomain)
	require.NoError(t, err)
	return p.send(ctx, m, env)
}

// One session carries message after message; a session the server dropped
// is replaced without losing the message.
func TestPoolReusesAndRedials(t *testing.T) {
	t.Parallel()
	s, err := testenv.StartSMTP(testenv.SMTPConfig{})
	require.NoError(t, err)
	defer s.Close()
	p := testPool(t, s.URL())
	ctx := context.Background()
	for i := range 20 {
		require.NoError(t, sendOne(t, p, ctx, testMsg(t, int64(i), "a@example.org")))
	}
	require.Equal(t, 20, s.Count())
	require.Equal(t, 1, s.Sessions(), "sequential sends share one session")

	require.NoError(t, s.Stop())
	err = sendOne(t, p, ctx, testMsg(t, 99, "a@example.org"))
	require.Error(t, err, "the server is down")
	require.False(t, Permanent(err))
	require.NoError(t, s.Start())
	require.NoError(t, sendOne(t, p, ctx, testMsg(t, 100, "a@example.org")))
	require.Equal(t, 21, s.Count())
	require.Equal(t, 2, s.Sessions())
}

// Recipient refusals: all 5xx is permanent, any 4xx makes it transient, and
// the session stays usable after either.
func TestPoolRecipientReplies(t *testing.T) {
	t.Parallel()
	s, err := testenv.StartSMTP(testenv.SMTPConfig{})
	require.NoError(t, err)
	defer s.Close()
	s.RejectDomain("gone.example", 550, "no such user")
	s.RejectDomain("busy.example", 452, "mailbox busy")
	p := testPool(t, s.URL())
	ctx := context.Background()

	err = sendOne(t, p, ctx, testMsg(t, 1, "x@gone.example"))
	require.True(t, Permanent(err), "%v", err)
	require.Contains(t, err.Error(), "550")
	err = sendOne(t, p, ctx, testMsg(t, 2, "x@gone.example", "y@busy.example"))
	require.False(t, Permanent(err), "%v", err)
	require.Contains(t, err.Error(), "452")
	require.NoError(t, sendOne(t, p, ctx, testMsg(t, 3, "z@example.org")))
	require.Equal(t, 1, s.Count(), "refused messages are not sent to anyone")
	require.Equal(t, 1, s.Sessions(), "the session survives refusals")
}

// The handler's deadline cuts a send that hangs.
func TestPoolSendHonoursTheDeadline(t *testing.T) {
	t.Parallel()
	s, err := testenv.StartSMTP(testenv.SMTPConfig{DataDelay: 2 * time.Second})
	require.NoError(t, err)
	defer s.Close()
	p := testPool(t, s.URL())
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err = sendOne(t, p, ctx, testMsg(t, 1, "a@example.org"))
	require.Error(t, err)
	require.True(t, errors.Is(err, context.DeadlineExceeded), "%v", err)
	require.False(t, Permanent(err))
}
