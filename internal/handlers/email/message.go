package email

import (
	"fmt"
	"sort"
	"strconv"

	mail "github.com/wneessen/go-mail"

	"github.com/pgrelay/pgrelay/events/store"
)

// DefaultMessageIDDomain is the right-hand side of Message-IDs when none is
// configured.
const DefaultMessageIDDomain = "pgrelay"

// MessageID is the Message-ID header of notification id: derived from the id
// alone, so every send of one notification (a retry, a redelivery after a
// crash) carries the same one and a receiver can drop duplicates.
func MessageID(id int64, domain string) string {
	return "<" + strconv.FormatInt(id, 10) + "@" + domain + ">"
}

// buildMessage composes n: From, To, Cc (Bcc only in the envelope), Subject,
// Date (when the notification was composed, so a resend is the same
// message), Message-ID, the custom headers, and a text body with an optional
// HTML alternative.
func buildMessage(n *store.Notification, domain string) (*mail.Msg, envelope, error) {
	m := mail.NewMsg(mail.WithNoDefaultUserAgent())
	if err := m.From(n.From); err != nil {
		return nil, envelope{}, fmt.Errorf("from address %q: %w", n.From, err)
	}
	if err := m.To(n.To...); err != nil {
		return nil, envelope{}, fmt.Errorf("to addresses: %w", err)
	}
	if len(n.Cc) > 0 {
		if err := m.Cc(n.Cc...); err != nil {
			return nil, envelope{}, fmt.Errorf("cc addresses: %w", err)
		}
	}
	if len(n.Bcc) > 0 {
		if err := m.Bcc(n.Bcc...); err != nil {
			return nil, envelope{}, fmt.Errorf("bcc addresses: %w", err)
		}
	}
	m.Subject(n.Subject)
	m.SetGenHeader(mail.HeaderMessageID, MessageID(n.ID, domain))
	m.SetDateWithValue(n.CreatedAt)
	names := make([]string, 0, len(n.Headers))
	for k := range n.Headers {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		m.SetGenHeader(mail.Header(k), n.Headers[k])
	}
	m.SetBodyString(mail.TypeTextPlain, n.BodyText)
	if n.BodyHTML != nil {
		m.AddAlternativeString(mail.TypeTextHTML, *n.BodyHTML)
	}
	from, err := m.GetSender(false)
	if err != nil {
		return nil, envelope{}, fmt.Errorf("envelope sender: %w", err)
	}
	rcpts, err := m.GetRecipients()
	if err != nil {
		return nil, envelope{}, fmt.Errorf("envelope recipients: %w", err)
	}
	return m, envelope{from: from, rcpts: rcpts}, nil
}
