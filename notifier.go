package pgrelay

import (
	"context"
	"fmt"

	"github.com/pgrelay/pgrelay/events/store"
)

// Email is a message for Send. Addresses are RFC 5322 mailboxes,
// "local@domain" or "Display Name <local@domain>"; docs/notifier.md lists
// everything pgrelay_notifier.send() checks.
type Email struct {
	// To holds at least one address (ErrNoRecipients); To, Cc and Bcc
	// together at most 100 (ErrTooManyRecipients).
	To, Cc, Bcc []string
	// Subject: no CR or LF, at most 998 bytes (ErrInvalidSubject).
	Subject string
	// BodyText is the text/plain part, at most 1 MiB (ErrBodyTooLarge).
	BodyText string
	// BodyHTML, when not empty, adds a text/html alternative, at most 1 MiB.
	BodyHTML string
	// Headers are custom headers (Reply-To, X-...): at most 50, none of
	// those the notifier writes itself (From, To, Subject, Message-ID, ...)
	// (ErrInvalidHeaders).
	Headers map[string]string
}

// Send composes e on the email channel (pgrelay_notifier.send) in q's
// transaction and returns the notification's id, for EmailStatus and
// CancelEmail. The email is sent by a Processor with SMTP configured, and
// only if the transaction commits; nothing is stored when Send fails. Errors
// match the notifier's sentinels (ErrNotEmailChannel, ErrInvalidAddress, ...)
// with errors.Is.
func Send(ctx context.Context, q Querier, channel string, e Email) (int64, error) {
	var html, cc, bcc, headers any // NULL unless given
	if e.BodyHTML != "" {
		html = e.BodyHTML
	}
	if len(e.Cc) > 0 {
		cc = e.Cc
	}
	if len(e.Bcc) > 0 {
		bcc = e.Bcc
	}
	if len(e.Headers) > 0 {
		headers = e.Headers // pgx encodes a map as a JSON object
	}
	to := e.To
	if to == nil {
		to = []string{} // refused as empty (PR101)
	}
	var id int64
	err := q.QueryRow(ctx,
		`SELECT pgrelay_notifier.send($1::pg_catalog.text, $2::pg_catalog.text[], $3::pg_catalog.text,
			$4::pg_catalog.text, $5::pg_catalog.text, $6::pg_catalog.text[], $7::pg_catalog.text[],
			$8::pg_catalog.jsonb)`,
		channel, to, e.Subject, e.BodyText, html, cc, bcc, headers).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("pgrelay: send email on channel %q: %w", channel, Classify(err))
	}
	return id, nil
}

// EmailState is where an email stands (pgrelay_notifier.get_status()).
type EmailState string

// The states of an email; docs/notifier.md, "Statuses". Their values are
// those of pgrelay_notifier.get_status(), as the Processor's store names them.
const (
	// EmailQueued: stored by Send, not yet tried; CancelEmail can stop it.
	EmailQueued EmailState = store.NotificationQueued
	// EmailSending: an attempt started (transient failures are retried).
	EmailSending EmailState = store.NotificationSending
	// EmailSent: the SMTP server accepted the message.
	EmailSent EmailState = store.NotificationSent
	// EmailFailed: refused for good, out of attempts, or expired.
	EmailFailed EmailState = store.NotificationFailed
	// EmailCancelled: CancelEmail stopped it while queued.
	EmailCancelled EmailState = store.NotificationCancelled
)

// EmailStatus is the state of the email whose Send id is id. ErrNotFound for
// an unknown id and for an email the caller's role may not see: each role
// sees the emails it sent (members of pgrelay_admin see all).
func EmailStatus(ctx context.Context, q Querier, id int64) (EmailState, error) {
	var s *string
	if err := q.QueryRow(ctx, `SELECT pgrelay_notifier.get_status($1::pg_catalog.int8)`, id).Scan(&s); err != nil {
		return "", fmt.Errorf("pgrelay: status of email %d: %w", id, Classify(err))
	}
	if s == nil {
		return "", fmt.Errorf("pgrelay: status of email %d: %w", id, ErrNotFound)
	}
	return EmailState(*s), nil
}

// CancelEmail stops the email whose Send id is id from being sent, and
// reports whether it did: false once sending started or ended, and for an
// unknown id or one the caller may not see.
func CancelEmail(ctx context.Context, q Querier, id int64) (bool, error) {
	var ok bool
	if err := q.QueryRow(ctx, `SELECT pgrelay_notifier.cancel($1::pg_catalog.int8)`, id).Scan(&ok); err != nil {
		return false, fmt.Errorf("pgrelay: cancel email %d: %w", id, Classify(err))
	}
	return ok, nil
}
