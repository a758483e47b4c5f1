package email

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/textproto"
	"strings"
	"sync"
	"time"

	mail "github.com/wneessen/go-mail"
	"github.com/wneessen/go-mail/smtp"
)

// pool keeps up to Target.PoolSize SMTP connections to one target open and
// reuses them for message after message: a connection is dialled (greeting,
// EHLO, STARTTLS, AUTH) once, not per message. A connection that fails is
// closed and a new one dialled on next use.
type pool struct {
	t      *Target
	client *mail.Client // holds the options; dials connections
	log    *slog.Logger
	slots  chan struct{} // one token per connection in use (idle ones hold none)

	mu     sync.Mutex
	idle   []*conn
	closed bool
}

// conn is one open SMTP session.
type conn struct {
	c        *smtp.Client
	raw      net.Conn // for deadlines: the smtp client's own lock is held during a read
	lastUsed time.Time
	uses     int // transactions started on it
}

type connKey struct{}

// connHolder receives the net.Conn the dial function made, and the
// connection under it whose deadlines the channel's deadline bounds while
// the session opens.
type connHolder struct {
	c  net.Conn
	mu sync.Mutex
	bc *boundedConn
	// cut: the caller's context ended before the connection was made.
	cut bool
}

// set records the connection the dial function made; false when the
// caller's context has already ended (the connection is then cut at once).
func (h *connHolder) set(bc *boundedConn, c net.Conn) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.bc, h.c = bc, c
	if h.cut {
		bc.cutNow()
	}
	return !h.cut
}

// cutNow ends the session's opening: the caller's context is done.
func (h *connHolder) cutNow() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.cut = true
	if h.bc != nil {
		h.bc.cutNow()
	}
}

// boundedConn caps the deadlines set on a connection while its session opens
// (greeting, EHLO, STARTTLS, AUTH) at the caller's deadline: go-mail sets its
// own from the target's timeout, which knows nothing of the channel's. When
// the caller's context ends, every deadline is in the past, so whatever read
// or write is waiting returns at once. Once the session is open, release
// lifts the cap: each transaction sets its own deadline.
type boundedConn struct {
	net.Conn
	mu    sync.Mutex
	limit time.Time // zero: none
	cut   bool
}

// past is a deadline long gone: whatever waits on the connection returns.
func past() time.Time { return time.Unix(1, 0) }

func (c *boundedConn) capped(t time.Time) time.Time {
	switch {
	case c.cut:
		return past()
	case !c.limit.IsZero() && (t.IsZero() || t.After(c.limit)):
		return c.limit
	}
	return t
}

func (c *boundedConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.Conn.SetDeadline(c.capped(t))
}

func (c *boundedConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.Conn.SetReadDeadline(c.capped(t))
}

func (c *boundedConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.Conn.SetWriteDeadline(c.capped(t))
}

func (c *boundedConn) cutNow() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cut = true
	_ = c.Conn.SetDeadline(past())
}

func (c *boundedConn) release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.limit, c.cut = time.Time{}, false
}

func newPool(t *Target, log *slog.Logger) (*pool, error) {
	tlsCfg := &tls.Config{ServerName: t.Host, MinVersion: tls.VersionTLS12, InsecureSkipVerify: t.InsecureSkipVerify}
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		raw, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		// ctx's deadline is the earlier of the caller's and the target's
		// timeout (go-mail adds the latter).
		bc := &boundedConn{Conn: raw}
		bc.limit, _ = ctx.Deadline()
		var c net.Conn = bc
		if h, ok := ctx.Value(connKey{}).(*connHolder); ok && !h.set(bc, c) {
			_ = raw.Close()
			return nil, context.Cause(ctx)
		}
		if t.ImplicitTLS {
			tc := tls.Client(c, tlsCfg.Clone())
			if err := tc.HandshakeContext(ctx); err != nil {
				_ = raw.Close()
				return nil, err
			}
			c = tc
			if h, ok := ctx.Value(connKey{}).(*connHolder); ok {
				h.set(bc, c)
			}
		}
		return c, nil
	}
	opts := []mail.Option{
		mail.WithPort(t.Port),
		mail.WithTimeout(t.Timeout),
		mail.WithTLSConfig(tlsCfg),
		mail.WithDialContextFunc(dial),
		mail.WithSMTPAuth(t.Auth),
	}
	if t.ImplicitTLS && t.Auth == mail.SMTPAuthAutoDiscover {
		// go-mail's discovery cannot see that our own dialer already did TLS
		// and would rule out PLAIN and LOGIN: name the order ourselves.
		opts = append(opts, mail.WithOpportunisticSMTPAuth(mail.SMTPAuthSCRAMSHA256, mail.SMTPAuthSCRAMSHA1,
			mail.SMTPAuthCramMD5, mail.SMTPAuthPlain, mail.SMTPAuthLogin))
	}
	if t.ImplicitTLS {
		opts = append(opts, mail.WithSSL()) // no STARTTLS on top; the dial function did TLS
	} else {
		opts = append(opts, mail.WithTLSPolicy(t.TLSPolicy))
	}
	if t.Username != "" {
		opts = append(opts, mail.WithUsername(t.Username), mail.WithPassword(t.password))
	}
	if t.HELO != "" {
		opts = append(opts, mail.WithHELO(t.HELO))
	}
	client, err := mail.NewClient(t.Host, opts...)
	if err != nil {
		return nil, fmt.Errorf("email: SMTP client for %s: %w", t, err)
	}
	return &pool{t: t, client: client, log: log, slots: make(chan struct{}, t.PoolSize)}, nil
}

// connectError is a failure to open a session (dial, greeting, EHLO,
// STARTTLS, AUTH): it says nothing about the message, so it is transient
// whatever the server's reply code.
type connectError struct{ err error }

func (e *connectError) Error() string { return "connect: " + e.err.Error() }
func (e *connectError) Unwrap() error { return e.err }

// errStale: a pooled connection did not answer NOOP; nothing was sent on it.
var errStale = errors.New("email: pooled SMTP connection is gone")

// acquire returns a connection for one message: an idle one, or a new one
// while fewer than PoolSize are in use; otherwise it waits.
func (p *pool) acquire(ctx context.Context) (*conn, error) {
	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		<-p.slots
		return nil, errors.New("email: handler closed")
	}
	var c *conn
	for len(p.idle) > 0 && c == nil {
		c = p.idle[len(p.idle)-1]
		p.idle = p.idle[:len(p.idle)-1]
		if time.Since(c.lastUsed) > p.t.IdleTimeout {
			// Servers drop idle sessions (RFC 5321 allows after 5 minutes,
			// many sooner): rather dial than find out mid-message.
			go c.close(time.Second)
			c = nil
		}
	}
	p.mu.Unlock()
	if c != nil {
		return c, nil
	}
	c, err := p.dial(ctx)
	if err != nil {
		<-p.slots
		return nil, err
	}
	return c, nil
}

// dial opens a session within the target's timeout and the caller's
// deadline; cancelling ctx interrupts it.
func (p *pool) dial(ctx context.Context) (*conn, error) {
	h := &connHolder{}
	dctx := context.WithValue(ctx, connKey{}, h)
	stop := context.AfterFunc(ctx, h.cutNow)
	sc, err := p.client.DialToSMTPClientWithContext(dctx)
	stop()
	h.mu.Lock()
	c, bc := h.c, h.bc
	h.mu.Unlock()
	if err != nil {
		// go-mail leaves the connection open when EHLO, STARTTLS or AUTH fail.
		if c != nil {
			_ = c.Close()
		}
		return nil, &connectError{err: withContextErr(ctx, err)}
	}
	if c == nil { // cannot happen: the dial function always records it
		_ = sc.Close()
		return nil, &connectError{err: errors.New("no connection recorded")}
	}
	bc.release()
	p.log.Debug("smtp: connected", "target", p.t.String())
	return &conn{c: sc, raw: c, lastUsed: time.Now()}, nil
}

// release puts a healthy connection back, or closes it.
func (p *pool) release(c *conn, healthy bool) {
	c.lastUsed = time.Now()
	p.mu.Lock()
	if healthy && !p.closed {
		p.idle = append(p.idle, c)
		c = nil
	}
	p.mu.Unlock()
	if c != nil {
		c.close(time.Second)
	}
	<-p.slots
}

// close ends every idle connection; connections in use are closed when
// released.
func (p *pool) close() {
	p.mu.Lock()
	p.closed = true
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range idle {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.close(2 * time.Second)
		}()
	}
	wg.Wait()
}

// close says QUIT (bounded by wait) and closes the connection.
func (c *conn) close(wait time.Duration) {
	_ = c.raw.SetDeadline(time.Now().Add(wait))
	_ = c.c.Quit()
	_ = c.raw.Close()
}

// envelope is the SMTP envelope of a message: MAIL FROM and RCPT TO.
type envelope struct {
	from  string
	rcpts []string
}

// rcptError is the refusal of one or more recipients.
type rcptError struct {
	rcpts []string
	errs  []error
}

func (e *rcptError) Error() string {
	parts := make([]string, len(e.rcpts))
	for i := range e.rcpts {
		parts[i] = fmt.Sprintf("%s: %v", e.rcpts[i], e.errs[i])
	}
	return "RCPT TO " + strings.Join(parts, "; ")
}

// permanent: every refusal is a 5xx reply.
func (e *rcptError) permanent() bool {
	for _, err := range e.errs {
		if code(err)/100 != 5 {
			return false
		}
	}
	return len(e.errs) > 0
}

// code is the SMTP reply code carried by err, 0 when there is none.
func code(err error) int {
	var tp *textproto.Error
	if errors.As(err, &tp) {
		return tp.Code
	}
	return 0
}

// send sends one message on a pooled connection. The message is had from
// prepare only once a connection is free, and only once: a pooled
// connection found dead before anything was sent (NOOP fails) is replaced
// once, with the same message. prepare's error is returned as it is, with
// the connection put back unused.
func (p *pool) send(ctx context.Context, prepare func(context.Context) (*mail.Msg, envelope, error)) error {
	var (
		msg *mail.Msg
		env envelope
	)
	for attempt := 0; ; attempt++ {
		c, err := p.acquire(ctx)
		if err != nil {
			return err
		}
		if msg == nil {
			if msg, env, err = prepare(ctx); err != nil {
				// Unused; the next user checks it with NOOP first, as it
				// may have waited here.
				c.uses = max(c.uses, 1)
				p.release(c, true)
				return err
			}
		}
		reused := c.uses > 0
		c.uses++
		err = c.transaction(ctx, msg, env, reused, p.t.Timeout)
		switch {
		case err == nil:
			p.release(c, true)
			return nil
		case errors.Is(err, errStale) && attempt == 0:
			p.log.Debug("smtp: pooled connection gone; dialling a new one", "target", p.t.String())
			p.release(c, false)
			continue
		}
		// After a reply (4xx, 5xx) the session is still in step: RSET ended
		// the transaction. After anything else it is not.
		healthy := code(err) != 0 && !errors.Is(err, errStale)
		var re *rcptError
		if errors.As(err, &re) {
			healthy = true
		}
		p.release(c, healthy)
		return err
	}
}

// transaction runs MAIL, RCPT..., DATA on c within the channel's deadline
// (ctx) and the target's timeout; cancelling ctx interrupts it.
func (c *conn) transaction(ctx context.Context, msg *mail.Msg, env envelope, reused bool, timeout time.Duration) (err error) {
	deadline := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := c.raw.SetDeadline(deadline); err != nil {
		return fmt.Errorf("set deadline: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { _ = c.raw.SetDeadline(time.Unix(1, 0)) })
	defer func() {
		stop()
		if err != nil {
			err = withContextErr(ctx, err)
		}
	}()
	if reused {
		if err := c.c.Noop(); err != nil {
			return errStale
		}
	}
	if err := c.c.Mail(env.from); err != nil {
		c.reset()
		return fmt.Errorf("MAIL FROM %s: %w", env.from, err)
	}
	var re rcptError
	for _, r := range env.rcpts {
		if err := c.c.Rcpt(r); err != nil {
			if code(err) == 0 { // not a reply: the session is broken
				return fmt.Errorf("RCPT TO %s: %w", r, err)
			}
			re.rcpts = append(re.rcpts, r)
			re.errs = append(re.errs, err)
		}
	}
	if len(re.errs) > 0 {
		c.reset()
		return &re
	}
	w, err := c.c.Data()
	if err != nil {
		if code(err) != 0 {
			c.reset()
		}
		return fmt.Errorf("DATA: %w", err)
	}
	if _, err := msg.WriteTo(w); err != nil {
		return fmt.Errorf("DATA: write the message: %w", err)
	}
	if err := w.Close(); err != nil {
		if code(err) == 0 {
			// No reply to the end of the message: the server may have
			// taken it.
			return fmt.Errorf("DATA: end of message: %w", &InDoubtError{err: err})
		}
		return fmt.Errorf("DATA: end of message: %w", err)
	}
	return nil
}

// InDoubtError is a send whose outcome is unknown: the whole message went
// out, and the server's reply to its end never came (the connection broke
// or timed out). The server may have accepted it; sending it again could
// deliver it twice. Every other failed send handed nothing over.
type InDoubtError struct{ err error }

func (e *InDoubtError) Error() string {
	return "no reply to the end of the message, which the server may have accepted: " + e.err.Error()
}

func (e *InDoubtError) Unwrap() error { return e.err }

// withContextErr names ctx's end as the cause of err when ctx has ended: a
// read cut by the caller's deadline says only "i/o timeout".
func withContextErr(ctx context.Context, err error) error {
	cerr := ctx.Err()
	if d, ok := ctx.Deadline(); ok && cerr == nil && !time.Now().Before(d) {
		// The connection's deadline was the context's; its timer may not
		// have fired yet.
		cerr = context.DeadlineExceeded
	}
	if cerr == nil {
		return err
	}
	return fmt.Errorf("%w (%w)", cerr, err)
}

// reset ends a refused transaction so the session can carry the next one.
func (c *conn) reset() { _ = c.c.Reset() }
