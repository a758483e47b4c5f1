package store

import (
	"context"
	"fmt"
	"time"
)

// Notification is one email to send, as pgrelay_notifier.fetch() returns it.
type Notification struct {
	ID       int64
	Channel  string
	From     string
	To       []string
	Cc       []string
	Bcc      []string
	Subject  string
	BodyText string
	BodyHTML *string
	// Headers are the custom headers (name -> value) given to send().
	Headers   map[string]string
	Status    string
	Attempts  int
	CreatedAt time.Time
}

// The statuses of a notification (pgrelay_notifier.get_status()).
const (
	NotificationQueued    = "queued"
	NotificationSending   = "sending"
	NotificationSent      = "sent"
	NotificationFailed    = "failed"
	NotificationCancelled = "cancelled"
)

// The verdicts of pgrelay_notifier.start_sending(): whether an event may
// send its notification now.
const (
	// VerdictSend: the event holds the notification; the message follows.
	VerdictSend = "send"
	// VerdictSent: this event already sent it (a redelivery).
	VerdictSent = "sent"
	// VerdictCancelled: cancel() stopped it.
	VerdictCancelled = "cancelled"
	// VerdictMissing: no such notification on this node (yet).
	VerdictMissing = "missing"
	// VerdictRefused: never to be sent by this event (another channel's
	// notification, or held or ended by another event).
	VerdictRefused = "refused"
	// VerdictInDoubt: an earlier attempt of this event may have handed the
	// message to the SMTP server and its outcome was never recorded: not
	// sent again, so that it is never delivered twice.
	VerdictInDoubt = "in_doubt"
)

// Gate is what pgrelay_notifier.start_sending() decided for one event.
type Gate struct {
	Verdict string
	// Reason says why for every verdict but VerdictSend.
	Reason string
	// Notification is the message to send, with VerdictSend only.
	Notification *Notification
}

// GateRequest names one queue event asking the gate for its notification.
type GateRequest struct {
	ID      int64  // the notification
	Channel string // the event's channel
	Event   int64  // the event's origin_id
}

// StartSending calls the gate for one event: StartSendingMany with one
// request.
func (s *Store) StartSending(ctx context.Context, id int64, channel string, event int64) (Gate, error) {
	gates, err := s.StartSendingMany(ctx, []GateRequest{{ID: id, Channel: channel, Event: event}})
	if err != nil {
		return Gate{}, err
	}
	return gates[0], nil
}

// StartSendingMany calls pgrelay_notifier.start_sending_many(): the gate of
// each request's queue event on its notification, in one round trip and
// one transaction; gates[i] answers reqs[i]. With VerdictSend the
// notification is now 'sending', held by that event, its attempt counted,
// and the message comes with it. The row locks come first, so a cancel() or
// DELETE that commits meanwhile wins whole.
func (s *Store) StartSendingMany(ctx context.Context, reqs []GateRequest) ([]Gate, error) {
	ids := make([]int64, len(reqs))
	channels := make([]string, len(reqs))
	evs := make([]int64, len(reqs))
	for i, r := range reqs {
		ids[i], channels[i], evs[i] = r.ID, r.Channel, r.Event
	}
	describe := func() string {
		if len(reqs) == 1 {
			return fmt.Sprintf("start sending notification %d for event %d of channel %q", ids[0], evs[0], channels[0])
		}
		return fmt.Sprintf("start sending %d notifications (%d for event %d of channel %q, ...)", len(reqs), ids[0], evs[0], channels[0])
	}
	rows, err := s.hot.Query(ctx, `SELECT ord, verdict, reason, notification_id, channel, from_addr, to_addrs, cc_addrs,
		bcc_addrs, subject, body_text, body_html, headers, status, attempts, created_at
		FROM pgrelay_notifier.start_sending_many($1::bigint[], $2::pg_catalog.text[], $3::bigint[])`, ids, channels, evs)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", describe(), err)
	}
	defer rows.Close()
	gates := make([]Gate, len(reqs))
	seen := 0
	for rows.Next() {
		var (
			ord     int32
			g       Gate
			reason  *string
			n       Notification
			nid     *int64
			chn     *string
			from    *string
			subject *string
			body    *string
			status  *string
			att     *int
			created *time.Time
		)
		if err := rows.Scan(&ord, &g.Verdict, &reason, &nid, &chn, &from, &n.To, &n.Cc, &n.Bcc, &subject, &body,
			&n.BodyHTML, &n.Headers, &status, &att, &created); err != nil {
			return nil, fmt.Errorf("%s: %w", describe(), err)
		}
		i := int(ord) - 1
		if i < 0 || i >= len(reqs) || gates[i].Verdict != "" {
			return nil, fmt.Errorf("%s: unexpected element %d", describe(), ord)
		}
		if reason != nil {
			g.Reason = *reason
		}
		if g.Verdict == VerdictSend {
			if nid == nil || chn == nil || from == nil || subject == nil || body == nil || status == nil ||
				att == nil || created == nil {
				return nil, fmt.Errorf("start sending notification %d for event %d: incomplete message", ids[i], evs[i])
			}
			n.ID, n.Channel, n.From, n.Subject, n.BodyText = *nid, *chn, *from, *subject, *body
			n.Status, n.Attempts, n.CreatedAt = *status, *att, *created
			g.Notification = &n
		}
		gates[i] = g
		seen++
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", describe(), err)
	}
	if seen != len(reqs) {
		// Cannot happen: one row per element; say so rather than send
		// nothing silently.
		return nil, fmt.Errorf("%s: %d verdicts for %d events", describe(), seen, len(reqs))
	}
	return gates, nil
}

// SetNotificationsSent calls pgrelay_notifier.set_status_many(ids, 'sent')
// in one round trip and one transaction, and returns the ids whose status
// changed (those not queued or sending any more keep theirs).
func (s *Store) SetNotificationsSent(ctx context.Context, ids []int64) ([]int64, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	var moved []int64
	if err := s.hot.QueryRow(ctx, "SELECT pgrelay_notifier.set_status_many($1::bigint[], 'sent')", ids).Scan(&moved); err != nil {
		return nil, fmt.Errorf("set status of %d notifications (%d, ...) to sent: %w", len(ids), ids[0], err)
	}
	return moved, nil
}

// SetNotificationStatus calls pgrelay_notifier.set_status(): moves the
// notification forward (never back) and reports whether its status changed.
// errText is recorded with a 'failed' status (through StorableText); empty
// means none.
func (s *Store) SetNotificationStatus(ctx context.Context, id int64, status, errText string) (bool, error) {
	var e *string
	if errText != "" {
		t := StorableText(errText)
		e = &t
	}
	var changed bool
	if err := s.hot.QueryRow(ctx, "SELECT pgrelay_notifier.set_status($1::bigint, $2::pg_catalog.text, $3::pg_catalog.text)", id, status, e).Scan(&changed); err != nil {
		return false, fmt.Errorf("set status of notification %d to %s: %w", id, status, err)
	}
	return changed, nil
}

// FailNotificationForEvent calls pgrelay_notifier.fail_for_event(): fails
// notification id for queue event event of channel, only where that event
// could still send it (queued and of channel, or sending held by it), and
// reports whether the status changed.
func (s *Store) FailNotificationForEvent(ctx context.Context, id int64, channel string, event int64, reason string) (bool, error) {
	var changed bool
	if err := s.hot.QueryRow(ctx, "SELECT pgrelay_notifier.fail_for_event($1::bigint, $2::pg_catalog.text, $3::bigint, $4::pg_catalog.text)",
		id, channel, event, StorableText(reason)).Scan(&changed); err != nil {
		return false, fmt.Errorf("fail notification %d for event %d of channel %q: %w", id, event, channel, err)
	}
	return changed, nil
}

// NotSent calls pgrelay_notifier.not_sent(): the attempt of event (its
// origin id) certainly handed nothing to the SMTP server, so a later attempt
// may send the notification.
func (s *Store) NotSent(ctx context.Context, id, event int64) error {
	if _, err := s.hot.Exec(ctx, "SELECT pgrelay_notifier.not_sent($1::bigint, $2::bigint)", id, event); err != nil {
		return fmt.Errorf("clear the doubt of notification %d for event %d: %w", id, event, err)
	}
	return nil
}

// NotificationDebugLog calls pgrelay_notifier.debug_log(): a note kept in the
// notification's bounded history (through StorableText).
func (s *Store) NotificationDebugLog(ctx context.Context, id int64, message string) error {
	if _, err := s.hot.Exec(ctx, "SELECT pgrelay_notifier.debug_log($1::bigint, $2::pg_catalog.text)", id, StorableText(message)); err != nil {
		return fmt.Errorf("debug log of notification %d: %w", id, err)
	}
	return nil
}
