package email

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	mail "github.com/wneessen/go-mail"

	"github.com/pgrelay/pgrelay/events/store"
	"github.com/pgrelay/pgrelay/internal/devenv"
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
	prepared := 0
	err = p.send(ctx, func(context.Context) (*mail.Msg, envelope, error) {
		prepared++
		return m, env, nil
	})
	if err == nil {
		// Even when a dead pooled connection was replaced.
		require.Equal(t, 1, prepared, "the message is prepared once per send")
	}
	return err
}

// One session carries message after message; a session the server dropped
// is replaced without losing the message.
func TestPoolReusesAndRedials(t *testing.T) {
	t.Parallel()
	s, err := devenv.StartSMTP(devenv.SMTPConfig{})
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
	s, err := devenv.StartSMTP(devenv.SMTPConfig{})
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
	s, err := devenv.StartSMTP(devenv.SMTPConfig{DataDelay: 2 * time.Second})
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

// A server slower than the target's timeout: with no deadline of its own the
// send is cut at ?timeout=, as a transient failure, and the session, out of
// step, is not reused.
func TestPoolTargetTimeoutCutsASlowReply(t *testing.T) {
	t.Parallel()
	const delay = 5 * time.Second
	s, err := devenv.StartSMTP(devenv.SMTPConfig{DataDelay: delay})
	require.NoError(t, err)
	defer s.Close()
	p := testPool(t, s.URL()+"?timeout=300ms")
	start := time.Now()
	err = sendOne(t, p, context.Background(), testMsg(t, 1, "a@example.org"))
	took := time.Since(start)
	require.Error(t, err)
	require.False(t, Permanent(err), "%v", err)
	require.Contains(t, err.Error(), "DATA")
	require.Less(t, took, delay, "cut by the target's timeout, not ended by the server's reply")

	s.SetDataDelay(0)
	require.NoError(t, sendOne(t, p, context.Background(), testMsg(t, 2, "a@example.org")))
	require.Equal(t, 2, s.Sessions(), "the session cut mid-DATA was closed, not reused")
}

// silentListener accepts connections and never says anything: no greeting.
func silentListener(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String()
}

// A server that accepts the connection but never greets: the session's
// opening is cut by the target's timeout, and by the caller's deadline when
// that comes first (go-mail's own timeout knows only the target's).
func TestPoolGreetingTimeout(t *testing.T) {
	t.Parallel()
	addr := silentListener(t)

	p := testPool(t, "smtp://"+addr+"?timeout=300ms")
	start := time.Now()
	err := sendOne(t, p, context.Background(), testMsg(t, 1, "a@example.org"))
	require.Error(t, err)
	var ce *connectError
	require.ErrorAs(t, err, &ce, "a failure to open the session")
	require.False(t, Permanent(err))
	require.Less(t, time.Since(start), 10*time.Second, "cut by ?timeout=300ms")

	long := testPool(t, "smtp://"+addr+"?timeout=1m")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start = time.Now()
	err = sendOne(t, long, ctx, testMsg(t, 2, "a@example.org"))
	require.Error(t, err)
	require.ErrorAs(t, err, &ce)
	require.ErrorIs(t, err, context.DeadlineExceeded, "%v", err)
	require.False(t, Permanent(err))
	require.Less(t, time.Since(start), 30*time.Second, "cut by the caller's deadline, not the target's minute")
}

// ?idle=: a pooled session idle for longer is closed and a new one dialled;
// a younger one is reused.
func TestPoolIdleSessionIsNotReused(t *testing.T) {
	t.Parallel()
	s, err := devenv.StartSMTP(devenv.SMTPConfig{})
	require.NoError(t, err)
	defer s.Close()
	p := testPool(t, s.URL()+"?idle=1m")
	require.Equal(t, time.Minute, p.t.IdleTimeout)
	ctx := context.Background()
	require.NoError(t, sendOne(t, p, ctx, testMsg(t, 1, "a@example.org")))
	age := func(d time.Duration) {
		p.mu.Lock()
		defer p.mu.Unlock()
		require.Len(t, p.idle, 1)
		p.idle[0].lastUsed = time.Now().Add(-d)
	}
	age(30 * time.Second)
	require.NoError(t, sendOne(t, p, ctx, testMsg(t, 2, "a@example.org")))
	require.Equal(t, 1, s.Sessions(), "idle for less than idle=: reused")
	age(2 * time.Minute)
	require.NoError(t, sendOne(t, p, ctx, testMsg(t, 3, "a@example.org")))
	require.Equal(t, 2, s.Sessions(), "idle for longer than idle=: a new session")
	require.Equal(t, 3, s.Count())
}

// batchRecorder prepares each job's own message and remembers the size of
// every batch it was given.
type batchRecorder struct {
	mu     sync.Mutex
	sizes  []int
	domain string
}

func (b *batchRecorder) prepare(_ context.Context, jobs []*job) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sizes = append(b.sizes, len(jobs))
	for _, j := range jobs {
		j.msg, j.env, j.perr = buildMessage(j.data.(*store.Notification), b.domain)
	}
}

// Many messages at once through a pool of 2: at most 2 sessions, each
// message prepared once and sent once, several prepared together once the
// sessions' pace is known; a slow session is given one at a time.
func TestPoolBatchesByPace(t *testing.T) {
	t.Parallel()
	s, err := devenv.StartSMTP(devenv.SMTPConfig{})
	require.NoError(t, err)
	defer s.Close()
	p := testPool(t, s.URL()+"?pool=2")
	b := &batchRecorder{domain: DefaultMessageIDDomain}
	const n = 300
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- p.submit(context.Background(), &job{prep: b, data: testMsg(t, int64(i), "a@example.org")})
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, n, s.Count(), "each message once")
	require.LessOrEqual(t, s.Sessions(), 2)
	total, most := 0, 0
	for _, k := range b.sizes {
		total += k
		most = max(most, k)
	}
	require.Equal(t, n, total, "each message prepared once")
	require.Greater(t, most, 1, "a fast session takes several at once")
	require.LessOrEqual(t, most, maxBatch)

	slow := testPool(t, s.URL()+"?pool=1")
	bs := &batchRecorder{domain: DefaultMessageIDDomain}
	s.SetDataDelay(60 * time.Millisecond) // over batchBudget per message
	errs = make(chan error, 6)
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- slow.submit(context.Background(), &job{prep: bs, data: testMsg(t, int64(1000+i), "a@example.org")})
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, []int{1, 1, 1, 1, 1, 1}, bs.sizes, "a slow session: one message at a time, none prepared ahead")
}
