package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
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

// FetchNotificationForSending calls pgrelay_notifier.fetch() (the message to
// send, or nil when there is nothing to send: deleted, cancelled, already
// sent or failed) after set_status('sending'), in one round trip and one
// transaction: the attempt is counted when there is something to send, and
// set_status changes nothing when there is not (a cancelled, sent or failed
// notification never goes back to sending).
func (s *Store) FetchNotificationForSending(ctx context.Context, id int64) (*Notification, error) {
	b := &pgx.Batch{}
	// set_status first: its UPDATE waits for a cancel() or DELETE in
	// progress, so fetch (a new snapshot) sees what it committed and returns
	// no row; fetched first, the message would be sent although cancel()
	// had returned true.
	b.Queue("SELECT pgrelay_notifier.set_status($1, 'sending')", id)
	var n Notification
	found := false
	b.Queue(`SELECT notification_id, channel, from_addr, to_addrs, cc_addrs, bcc_addrs,
		subject, body_text, body_html, headers, status, attempts, created_at
		FROM pgrelay_notifier.fetch($1)`, id).QueryRow(func(r pgx.Row) error {
		err := r.Scan(&n.ID, &n.Channel, &n.From, &n.To, &n.Cc, &n.Bcc, &n.Subject, &n.BodyText, &n.BodyHTML,
			&n.Headers, &n.Status, &n.Attempts, &n.CreatedAt)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		found = err == nil
		return err
	})
	if err := s.hot.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("fetch notification %d for sending: %w", id, err)
	}
	if !found {
		return nil, nil
	}
	return &n, nil
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
	if err := s.hot.QueryRow(ctx, "SELECT pgrelay_notifier.set_status($1, $2, $3)", id, status, e).Scan(&changed); err != nil {
		return false, fmt.Errorf("set status of notification %d to %s: %w", id, status, err)
	}
	return changed, nil
}

// NotificationDebugLog calls pgrelay_notifier.debug_log(): a note kept in the
// notification's bounded history (through StorableText).
func (s *Store) NotificationDebugLog(ctx context.Context, id int64, message string) error {
	if _, err := s.hot.Exec(ctx, "SELECT pgrelay_notifier.debug_log($1, $2)", id, StorableText(message)); err != nil {
		return fmt.Errorf("debug log of notification %d: %w", id, err)
	}
	return nil
}
