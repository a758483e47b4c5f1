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
//
// Messages wait in a queue for one of up to PoolSize workers, each with one
// session. Once its session is open, a worker takes the next messages,
// has them prepared together (for the handler: one gate statement for all)
// and sends them one after the other: as many as the session is expected to
// send within batchBudget (batchSize), so a slow server takes them one at a
// time and the others stay unprepared, still queued, until it can send them.
type pool struct {
	t      *Target
	client *mail.Client // holds the options; dials connections
	log    *slog.Logger

	mu      sync.Mutex
	idle    []*conn
	closed  bool
	queue   []*job
	workers int
	// perMsg: the mean time of one message's SMTP exchange (an exponential
	// moving average); 0 before the first.
	perMsg time.Duration
}

// batchBudget and maxBatch bound how many messages a worker prepares at
// once: those it expects to send within batchBudget, at most maxBatch, at
// least one (one until a first message has been timed).
const (
	batchBudget = 25 * time.Millisecond
	maxBatch    = 16
)

// job is one message waiting for, or in the hands of, a worker. Whoever
// removes it from the queue (a worker, or submit once its context ended)
// completes it, once.
type job struct {
	ctx  context.Context
	prep preparer
	done chan error // buffered: the job's outcome, nil when sent
	// Set by prep.prepare: the message, or perr when there is nothing to
	// send (the job ends with perr, nothing sent).
	msg  *mail.Msg
	env  envelope
	perr error
	// data is the preparer's own.
	data any
	// opening: a worker is opening a session for it (under p.mu): its
	// outcome is that worker's, even once its context ends.
	opening bool
}

// preparer prepares the messages of a batch of jobs, all of its own, in
// place: each job's msg and env, or perr. ctx bounds the preparation.
type preparer interface {
	prepare(ctx context.Context, jobs []*job)
}

// prepareFunc prepares each job of a batch by itself (a pointer: jobs are
// batched by their preparer's identity).
type prepareFunc struct {
	f func(context.Context) (*mail.Msg, envelope, error)
}

func (p *prepareFunc) prepare(ctx context.Context, jobs []*job) {
	for _, j := range jobs {
		j.msg, j.env, j.perr = p.f(ctx)
	}
}

// conn is one open SMTP session.
type conn struct {
	c        *smtp.Client
	raw      net.Conn // for deadlines: the smtp client's own lock is held during a read
	lastUsed time.Time
	uses     int // transactions started on it
	// inStep: the session has just carried a transaction for the worker
	// that holds it, so the next needs no NOOP check; false once idle.
	inStep bool
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
	return &pool{t: t, client: client, log: log}, nil
}

// connectError is a failure to open a session (dial, greeting, EHLO,
// STARTTLS, AUTH): it says nothing about the message, so it is transient
// whatever the server's reply code.
type connectError struct{ err error }

func (e *connectError) Error() string { return "connect: " + e.err.Error() }
func (e *connectError) Unwrap() error { return e.err }

// errStale: a pooled connection did not answer NOOP; nothing was sent on it.
var errStale = errors.New("email: pooled SMTP connection is gone")

// acquire returns a connection: an idle one, or a new one. The caller (a
// worker) is one of at most PoolSize.
func (p *pool) acquire(ctx context.Context) (*conn, error) {
	p.mu.Lock()
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
	return p.dial(ctx)
}

// open returns a session ready for a transaction, before anything is
// prepared for it: one from the idle list is checked with NOOP first, and a
// dead one replaced by a new session (once).
func (p *pool) open(ctx context.Context) (*conn, error) {
	c, err := p.acquire(ctx)
	if err != nil || c.uses == 0 || c.inStep {
		return c, err
	}
	if err := c.check(ctx, p.t.Timeout); err == nil {
		c.inStep = true
		return c, nil
	}
	p.log.Debug("smtp: pooled connection gone; dialling a new one", "target", p.t.String())
	p.release(c, false)
	return p.dial(ctx)
}

// check says NOOP within the target's timeout and ctx.
func (c *conn) check(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := c.raw.SetDeadline(deadline); err != nil {
		return fmt.Errorf("set deadline: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { _ = c.raw.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	return c.c.Noop()
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
	c.inStep = false
	p.mu.Lock()
	if healthy && !p.closed {
		p.idle = append(p.idle, c)
		c = nil
	}
	p.mu.Unlock()
	if c != nil {
		c.close(time.Second)
	}
}

// close ends every idle connection and the jobs still queued; connections
// in use are closed when released.
func (p *pool) close() {
	p.mu.Lock()
	p.closed = true
	idle := p.idle
	p.idle = nil
	queued := p.queue
	p.queue = nil
	p.mu.Unlock()
	for _, j := range queued {
		j.done <- errClosed
	}
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

var errClosed = errors.New("email: handler closed")

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
// once, with the same message. prepare's error is returned as it is.
func (p *pool) send(ctx context.Context, prepare func(context.Context) (*mail.Msg, envelope, error)) error {
	return p.submit(ctx, &job{prep: &prepareFunc{f: prepare}})
}

// submit queues j and waits for its outcome: nil once the server accepted
// its message, else why not (j.perr as it is, when there was nothing to
// send). A job still queued when ctx ends is dropped, unprepared; one a
// worker has taken ends soon (its send honours ctx).
func (p *pool) submit(ctx context.Context, j *job) error {
	j.ctx = ctx
	j.done = make(chan error, 1)
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return errClosed
	}
	p.queue = append(p.queue, j)
	if p.workers < p.t.PoolSize {
		p.workers++
		go p.work()
	}
	p.mu.Unlock()
	select {
	case err := <-j.done:
		return err
	case <-ctx.Done():
	}
	p.mu.Lock()
	if !j.opening && p.unqueue(j) {
		p.mu.Unlock()
		return ctx.Err()
	}
	p.mu.Unlock()
	return <-j.done
}

// unqueue removes j from the queue; false when it is not there. p.mu held.
func (p *pool) unqueue(j *job) bool {
	for i, q := range p.queue {
		if q == j {
			p.queue = append(p.queue[:i], p.queue[i+1:]...)
			return true
		}
	}
	return false
}

// batchSize is how many messages a worker takes at once. p.mu held.
func (p *pool) batchSize() int {
	if p.perMsg <= 0 {
		return 1
	}
	return max(1, min(maxBatch, int(batchBudget/p.perMsg)))
}

// timed records how long one message's exchange took.
func (p *pool) timed(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.perMsg <= 0 {
		p.perMsg = d
		return
	}
	p.perMsg = (4*p.perMsg + d) / 5
}

// work is one worker: while jobs are queued, it opens (or takes) a session
// first, then takes a batch, has it prepared and sends it, message after
// message; it ends, putting its session back, once the queue is empty.
//
// On a fast session (a message takes at most batchBudget) the next batch is
// taken and prepared while the current one is sent, so the gate's round
// trip and commit overlap the SMTP exchanges: a notification is then gated
// at most about batchBudget before its session can send it. A slow session
// prepares nothing ahead.
func (p *pool) work() {
	var (
		c    *conn
		next []*job // prepared ahead
	)
	defer func() {
		if c != nil {
			p.release(c, true)
		}
	}()
	for {
		batch := next
		next = nil
		if batch == nil {
			p.mu.Lock()
			if len(p.queue) == 0 || p.closed {
				p.workers--
				p.mu.Unlock()
				return
			}
			head := p.queue[0]
			head.opening = c == nil
			p.mu.Unlock()
			if c == nil {
				// Nothing is prepared before a session is open (and a pooled
				// one answers NOOP): with the server down, each job fails on
				// its own dial, unprepared.
				var err error
				c, err = p.open(head.ctx)
				p.mu.Lock()
				head.opening = false
				mine := err != nil && p.unqueue(head)
				p.mu.Unlock()
				if err != nil {
					if mine {
						head.done <- err
					}
					continue
				}
			}
			if batch = p.take(); len(batch) == 0 {
				continue
			}
			prepare(batch)
		}
		var ahead chan []*job
		if p.fast() {
			ahead = make(chan []*job, 1)
			go func() {
				nb := p.take()
				if len(nb) > 0 {
					prepare(nb)
				}
				ahead <- nb
			}()
		}
		for i, j := range batch {
			var err error
			c, err = p.sendJob(c, j)
			if i == len(batch)-1 && ahead == nil && p.retire(c) {
				// The session is back in the idle list before the last
				// caller hears of its message, so a next one takes it.
				c = nil
				j.done <- err
				return
			}
			j.done <- err
		}
		if ahead != nil {
			if nb := <-ahead; len(nb) > 0 {
				next = nb
			}
		}
	}
}

// retire ends the worker when nothing is queued, putting its session (if
// any) back in the idle list; false when there is more to do.
func (p *pool) retire(c *conn) bool {
	p.mu.Lock()
	if len(p.queue) > 0 && !p.closed {
		p.mu.Unlock()
		return false
	}
	p.workers--
	p.mu.Unlock()
	if c != nil {
		p.release(c, true)
	}
	return true
}

// prepare has a batch prepared. The preparation (the gate) is bounded by
// bookkeeping, not by one job's context: each job's own context is checked
// before its send.
func prepare(batch []*job) {
	ctx, cancel := context.WithTimeout(context.Background(), bookkeeping)
	defer cancel()
	batch[0].prep.prepare(ctx, batch)
}

// fast reports whether the session's pace lets a worker prepare its next
// batch while it sends one: a timed message took at most batchBudget.
func (p *pool) fast() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.perMsg > 0 && p.perMsg <= batchBudget && len(p.queue) > 0 && !p.closed
}

// take removes the next jobs of the queue to prepare together: those of the
// head's preparer, at most batchSize. Jobs whose context has ended are
// completed with its error.
func (p *pool) take() []*job {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := p.batchSize()
	var batch []*job
	rest := p.queue[:0]
	for _, j := range p.queue {
		switch {
		case j.ctx.Err() != nil:
			j.done <- j.ctx.Err()
		case len(batch) < n && (len(batch) == 0 || j.prep == batch[0].prep):
			batch = append(batch, j)
		default:
			rest = append(rest, j)
		}
	}
	clear(p.queue[len(rest):])
	p.queue = rest
	return batch
}

// sendJob sends j's message on c (or on a new session when c is nil or
// found dead before anything was sent). It returns the session to go on
// with (nil when there is none) and j's outcome.
func (p *pool) sendJob(c *conn, j *job) (*conn, error) {
	if j.perr != nil {
		return c, j.perr
	}
	if err := j.ctx.Err(); err != nil {
		return c, err
	}
	for attempt := 0; ; attempt++ {
		if c == nil {
			var err error
			if c, err = p.open(j.ctx); err != nil {
				return nil, err
			}
		}
		reused := c.uses > 0 && !c.inStep
		c.uses++
		start := time.Now()
		err := c.transaction(j.ctx, j.msg, j.env, reused, p.t.Timeout)
		switch {
		case err == nil:
			p.timed(time.Since(start))
			c.inStep = true
			return c, nil
		case errors.Is(err, errStale) && attempt == 0:
			p.log.Debug("smtp: pooled connection gone; dialling a new one", "target", p.t.String())
			p.release(c, false)
			c = nil
			continue
		}
		// After a reply (4xx, 5xx) the session is still in step: RSET ended
		// the transaction. After anything else it is not.
		healthy := code(err) != 0 && !errors.Is(err, errStale)
		var re *rcptError
		if errors.As(err, &re) {
			healthy = true
		}
		if !healthy {
			p.release(c, false)
			c = nil
		}
		return c, err
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
