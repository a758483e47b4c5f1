// Package email is the handler of email channels (kind 'email', the
// notifier): each event waits for a pooled SMTP session; a session's worker
// passes the notifier's gate for its next events in one statement
// (start_sending_many, which also returns the messages), builds the messages
// with go-mail and sends them one after the other; accepted messages are
// recorded sent in batches (set_status_many), failures per event
// (not_sent, fail_for_event, debug_log). Those interface calls are all it
// does in the database.
//
// Failure classes: a 5xx reply to the message (MAIL, RCPT, DATA) is
// permanent: the notification is failed at once with the reply as reason and
// the event gives up. 4xx replies, network errors and failures to open a
// session (dial, STARTTLS, AUTH) are transient: the event is retried with the
// channel's backoff, the reason goes to debug_log(), and the last attempt
// fails the notification.
package email

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"sort"
	"strconv"
	"time"

	"github.com/pgrelay/pgrelay/events/store"
	"github.com/pgrelay/pgrelay/internal/handlers"
)

// Config configures the email handler. Zero values mean defaults.
type Config struct {
	// Default is the SMTP URL of every email channel not in Channels (see
	// Target for the forms); empty means none.
	Default string
	// Channels maps a channel to its own SMTP URL.
	Channels map[string]string
	// MessageIDDomain is the right-hand side of Message-IDs (default "pgrelay").
	MessageIDDomain string
	// Logger receives the handler's logs (default slog.Default()).
	Logger *slog.Logger
}

var dotAtom = regexp.MustCompile(`^[A-Za-z0-9!#$%&'*+/=?^_` + "`" + `{|}~-]+(\.[A-Za-z0-9!#$%&'*+/=?^_` + "`" + `{|}~-]+)*$`)

// Validate checks cfg without connecting anything. Its errors never contain
// a password.
func (cfg Config) Validate() error {
	if cfg.MessageIDDomain != "" && !dotAtom.MatchString(cfg.MessageIDDomain) {
		return fmt.Errorf("email: Message-ID domain %q is not a domain name", cfg.MessageIDDomain)
	}
	if cfg.Default != "" {
		if _, err := ParseTarget(cfg.Default); err != nil {
			return fmt.Errorf("default SMTP target: %w", err)
		}
	}
	for _, ch := range sortedKeys(cfg.Channels) {
		if _, err := ParseTarget(cfg.Channels[ch]); err != nil {
			return fmt.Errorf("SMTP target of channel %q: %w", ch, err)
		}
	}
	return nil
}

// Enabled reports whether cfg names any SMTP target.
func (cfg Config) Enabled() bool { return cfg.Default != "" || len(cfg.Channels) > 0 }

// Handler sends the events of email channels. It is safe for concurrent use.
type Handler struct {
	store    *store.Store
	sent     *sentRecorder
	log      *slog.Logger
	domain   string
	def      *pool
	channels map[string]*pool
	pools    []*pool
}

// New returns a handler over st; it dials nothing until the first message.
// Channels that share a URL share a pool.
func New(st *store.Store, cfg Config) (*Handler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	h := &Handler{store: st, sent: &sentRecorder{st: st}, log: cfg.Logger, domain: cfg.MessageIDDomain,
		channels: map[string]*pool{}}
	if h.log == nil {
		h.log = slog.Default()
	}
	if h.domain == "" {
		h.domain = DefaultMessageIDDomain
	}
	byURL := map[string]*pool{}
	get := func(raw string) (*pool, error) {
		if p, ok := byURL[raw]; ok {
			return p, nil
		}
		t, err := ParseTarget(raw)
		if err != nil {
			return nil, err
		}
		p, err := newPool(t, h.log)
		if err != nil {
			return nil, err
		}
		byURL[raw] = p
		h.pools = append(h.pools, p)
		return p, nil
	}
	var err error
	if cfg.Default != "" {
		if h.def, err = get(cfg.Default); err != nil {
			return nil, err
		}
	}
	for _, ch := range sortedKeys(cfg.Channels) {
		if h.channels[ch], err = get(cfg.Channels[ch]); err != nil {
			return nil, err
		}
	}
	return h, nil
}

// Close ends the pooled SMTP sessions.
func (h *Handler) Close() error {
	for _, p := range h.pools {
		p.close()
	}
	return nil
}

func (h *Handler) poolFor(channel string) *pool {
	if p, ok := h.channels[channel]; ok {
		return p
	}
	return h.def
}

// bookkeeping bounds the status writes that follow a send: they must happen
// even when the handler's context ended meanwhile.
const bookkeeping = 10 * time.Second

// Handle sends the notification the event names (its payload is the
// notification_id). It waits for an open SMTP session first; only then does
// the session's worker pass the gate for it, with the session's next events
// (pgrelay_notifier.start_sending_many(): the move queued -> sending, won by
// one event) and fetch the message, so a notification stays queued, and
// cancellable, while its event waits for a session, and no message is held
// in memory long before it can be sent. Once the server accepted it, the
// message is recorded sent together with those accepted meanwhile.
//
// An event that may not send ends without sending, and says why: its
// notification was cancelled, or already sent by this same event (a
// redelivery) — the event succeeds; it does not exist on this node — a
// failed attempt, retried with the channel's backoff (replication may bring
// it), given up on the last; it was created for another channel, or another
// event holds or ended it — the event gives up at once.
func (h *Handler) Handle(ctx context.Context, ev handlers.Event) (bool, error) {
	id, err := strconv.ParseInt(ev.Payload, 10, 64)
	if err != nil {
		return false, handlers.Permanent(fmt.Errorf("email channel %q: payload %q is not a notification id", ev.Channel, ev.Payload))
	}
	p := h.poolFor(ev.Channel)
	if p == nil {
		return false, h.transient(ctx, ev, id, fmt.Errorf("no SMTP target for channel %q: set --smtp-url or map the channel in the --config file", ev.Channel))
	}
	gj := &gateJob{ev: ev, id: id}
	err = p.submit(ctx, &job{prep: h, data: gj})
	switch {
	case gj.dbErr != nil:
		return false, gj.dbErr
	case gj.gate.Verdict != "" && gj.gate.Verdict != store.VerdictSend:
		return false, h.notSent(ev, id, gj.gate)
	case gj.buildErr != nil:
		return false, h.permanent(ctx, ev, id, fmt.Errorf("build the message: %w", gj.buildErr))
	case err == nil:
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bookkeeping)
		defer cancel()
		if err := h.sent.record(wctx, id); err != nil {
			// The notification stays in doubt: the event's next attempt
			// does not send it again (start_sending says in_doubt) and
			// fails it, saying it may have been delivered.
			return false, fmt.Errorf("notification %d was sent but recording it failed: %w", id, err)
		}
		return false, nil
	}
	// Only a send whose end went unanswered may have delivered the message;
	// every other failure handed nothing over, and the next attempt may send.
	var doubt *InDoubtError
	if gj.gate.Verdict == store.VerdictSend && !errors.As(err, &doubt) {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bookkeeping)
		defer cancel()
		if nerr := h.store.NotSent(wctx, id, ev.OriginID); nerr != nil {
			h.log.Warn("email: could not record that nothing was sent; the next attempt will not send it",
				"notification", id, "err", nerr)
		}
	}
	failure := &SendError{msg: fmt.Sprintf("%s: %v", p.t, err), permanent: Permanent(err)}
	for _, cerr := range []error{context.DeadlineExceeded, context.Canceled} {
		if errors.Is(err, cerr) {
			failure.ctxErr = cerr
		}
	}
	if failure.permanent {
		return false, h.permanent(ctx, ev, id, failure)
	}
	return false, h.transient(ctx, ev, id, failure)
}

// errNothingToSend: the gate said this event sends nothing.
var errNothingToSend = errors.New("email: nothing to send")

// gateJob is an event's part of a pool job: what the gate said, and why
// nothing was sent when the gate or the message failed.
type gateJob struct {
	ev       handlers.Event
	id       int64
	gate     store.Gate
	dbErr    error
	buildErr error
}

// prepare passes the gate for a batch of events in one statement
// (pgrelay_notifier.start_sending_many()) and builds the messages of those
// that may send. Called by a pool worker once it holds an open session.
func (h *Handler) prepare(ctx context.Context, jobs []*job) {
	reqs := make([]store.GateRequest, len(jobs))
	for i, j := range jobs {
		g := j.data.(*gateJob)
		reqs[i] = store.GateRequest{ID: g.id, Channel: g.ev.Channel, Event: g.ev.OriginID}
	}
	gates, err := h.store.StartSendingMany(ctx, reqs)
	for i, j := range jobs {
		g := j.data.(*gateJob)
		if err != nil {
			g.dbErr, j.perr = err, err
			continue
		}
		g.gate = gates[i]
		if g.gate.Verdict != store.VerdictSend {
			j.perr = errNothingToSend
			continue
		}
		j.msg, j.env, g.buildErr = buildMessage(g.gate.Notification, h.domain)
		j.perr = g.buildErr
	}
}

// notSent ends an event the gate did not let send, with the reason: nil (the
// event succeeds) for a cancelled notification or a redelivery of the event
// that sent it; a failed attempt for a notification missing on this node;
// a permanent failure for any other.
func (h *Handler) notSent(ev handlers.Event, id int64, g store.Gate) error {
	switch g.Verdict {
	case store.VerdictCancelled:
		// pgrelay_notifier.cancel asked to cancel the event too: it ends
		// cancelled (the completion turns this failure into it), never
		// succeeded beside a cancelled email.
		h.log.Debug("email: cancelled; not sent", "channel", ev.Channel, "notification", id,
			"event", ev.OriginID, "reason", g.Reason)
		return handlers.Permanent(fmt.Errorf("not sent: %s", g.Reason))
	case store.VerdictSent:
		h.log.Debug("email: nothing to send; skipped", "channel", ev.Channel, "notification", id,
			"event", ev.OriginID, "reason", g.Reason)
		return nil
	case store.VerdictMissing:
		err := fmt.Errorf("not sent: %s", g.Reason)
		h.log.Warn("email: attempt failed: the notification is not on this node; retried with the channel's backoff "+
			"until the last attempt", "channel", ev.Channel, "notification", id, "event", ev.OriginID,
			"attempt", ev.Attempt, "max_attempts", ev.MaxAttempts, "err", err)
		return err
	case store.VerdictInDoubt:
		reason := "not sent again: " + g.Reason
		wctx, cancel := context.WithTimeout(context.Background(), bookkeeping)
		defer cancel()
		if _, err := h.store.FailNotificationForEvent(wctx, id, ev.Channel, ev.OriginID, reason); err != nil {
			return fmt.Errorf("%s; recording it failed: %w", reason, err)
		}
		h.log.Warn("email: not sent again, its earlier attempt's outcome is unknown", "channel", ev.Channel,
			"notification", id, "event", ev.OriginID)
		return handlers.Permanent(errors.New(reason))
	default:
		h.log.Info("email: event ends without sending", "channel", ev.Channel, "notification", id,
			"event", ev.OriginID, "reason", g.Reason)
		return handlers.Permanent(fmt.Errorf("not sent: %s", g.Reason))
	}
}

// SendError is a failed SMTP send as the Processor sees it: the text of the
// cause without the cause itself, so that a network error of the SMTP
// connection never passes for a lost database connection (which would
// release the event instead of counting a failed attempt). Only the end of
// the handler's context, when that cut the send, is kept as a cause: the
// Processor names its timeout.
type SendError struct {
	msg       string
	permanent bool
	ctxErr    error
}

func (e *SendError) Error() string { return e.msg }

// Unwrap is context.DeadlineExceeded or context.Canceled when the handler's
// context cut the send, else nil.
func (e *SendError) Unwrap() error { return e.ctxErr }

// IsPermanent reports whether the failure was a 5xx reply to the message.
func (e *SendError) IsPermanent() bool { return e.permanent }

// Permanent reports whether a send error is a 5xx reply to the message:
// retrying cannot help. Session set-up failures are never permanent.
func Permanent(err error) bool {
	var ce *connectError
	if errors.As(err, &ce) {
		return false
	}
	var re *rcptError
	if errors.As(err, &re) {
		return re.permanent()
	}
	return code(err)/100 == 5
}

// permanent fails the notification with err as reason; the event gives up.
func (h *Handler) permanent(ctx context.Context, ev handlers.Event, id int64, err error) error {
	h.log.Warn("email: not sent, for good: the notification is failed", "channel", ev.Channel,
		"notification", id, "event", ev.OriginID, "attempt", ev.Attempt, "max_attempts", ev.MaxAttempts, "err", err)
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bookkeeping)
	defer cancel()
	if _, serr := h.store.FailNotificationForEvent(wctx, id, ev.Channel, ev.OriginID, err.Error()); serr != nil {
		h.log.Warn("email: could not record a permanent failure", "notification", id, "err", serr)
	}
	return handlers.Permanent(err)
}

// transient notes err in the notification's debug log; the event is retried
// with its channel's backoff. When the attempt is recorded as the last
// (pgrelay decides it, by the channel's max_attempts then), the Processor
// fails the notification through EndedFailing.
func (h *Handler) transient(ctx context.Context, ev handlers.Event, id int64, err error) error {
	if errors.Is(ctx.Err(), context.Canceled) {
		// The Processor is stopping: the event is released, not failed.
		return err
	}
	h.warnAttempt(ev, id, err)
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bookkeeping)
	defer cancel()
	note := fmt.Sprintf("attempt %d of %d failed: %v", ev.Attempt, ev.MaxAttempts, err)
	if lerr := h.store.NotificationDebugLog(wctx, id, note); lerr != nil {
		h.log.Warn("email: could not write the debug log", "notification", id, "err", lerr)
	}
	return err
}

// warnAttempt logs a failed attempt: retried with the channel's backoff
// unless it is recorded as the last. err names the SMTP target without its
// credentials.
func (h *Handler) warnAttempt(ev handlers.Event, id int64, err error) {
	h.log.Warn("email: attempt failed; retried with the channel's backoff unless it was the last (then the notification is failed)",
		"channel", ev.Channel, "notification", id, "event", ev.OriginID, "attempt", ev.Attempt,
		"max_attempts", ev.MaxAttempts, "err", err)
}

// EndedFailing fails the notification of an event that pgrelay core ended
// for good without success, for reason: expired before it ran (the
// channel's expire_after), or given up at its last attempt for a cause
// outside the handler's own bookkeeping (an actor failure, a database error
// before the send). Without it get_status() would say queued or sending
// forever. fail_for_event() only fails a notification this event could
// still have sent (queued, or sending held by it): one already sent,
// failed or cancelled keeps its status, and so does one another event
// holds or another channel's, so a call after the handler's own, or for an
// event that lost the gate, is harmless.
func (h *Handler) EndedFailing(ctx context.Context, ev handlers.Event, reason string) error {
	id, err := strconv.ParseInt(ev.Payload, 10, 64)
	if err != nil {
		return nil // not a notification: nothing to fail
	}
	changed, err := h.store.FailNotificationForEvent(ctx, id, ev.Channel, ev.OriginID, reason)
	if err != nil {
		return fmt.Errorf("email channel %q: %w", ev.Channel, err)
	}
	if changed {
		h.log.Info("email: notification failed without being sent", "channel", ev.Channel, "notification", id,
			"reason", reason)
	}
	return nil
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
