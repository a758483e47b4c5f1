package events

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// SchemaVersion is the newest version of the JSON documents pgrelay
// publishes on NATS (the "schema" field). It grows only when a field changes
// meaning or goes away; new fields may appear in any version. Which version
// is published is a database setting (pgrelay.settings.event_schema, read
// each publishing round), so it does not change as the publisher's lease
// moves between Processors. See docs/events.md.
const SchemaVersion = 2

// The document versions.
const (
	// SchemaNumericIDs: ids are JSON numbers (63-bit: JavaScript's
	// JSON.parse and jq 1.6 round them).
	SchemaNumericIDs = 1
	// SchemaStringIDs: every id is a JSON string of decimal digits.
	SchemaStringIDs = 2
)

// Subject prefixes of what pgrelay publishes on NATS.
const (
	// SubjectRoot is the root of every pgrelay subject; the events stream
	// captures SubjectRoot + ".>".
	SubjectRoot = "pgrelay"
	// EventsPrefix prefixes log events: pgrelay.events.<channel>.<event>.
	EventsPrefix = SubjectRoot + ".events"
	// NotifierPrefix prefixes notifier status changes:
	// pgrelay.notifier.<channel>.<status>.
	NotifierPrefix = SubjectRoot + ".notifier"
	// StreamSubjects is what the events stream must capture.
	StreamSubjects = SubjectRoot + ".>"
)

// Sources the publisher follows, as named in pgrelay.publish_cursors.
const (
	SourceLog      = "log"
	SourceNotifier = "notifier"
)

// EventSubject is the subject a log event is published on.
func EventSubject(channel string, event Kind) string {
	return EventsPrefix + "." + token(channel) + "." + token(string(event))
}

// NotifierSubject is the subject a notifier status change is published on.
func NotifierSubject(channel, status string) string {
	return NotifierPrefix + "." + token(channel) + "." + token(status)
}

// FilterSubject is the subject filter for log events of channel and event,
// either of which may be empty for any.
func FilterSubject(prefix, channel, event string) string {
	c, e := "*", "*"
	if channel != "" {
		c = token(channel)
	}
	if event != "" {
		e = token(event)
	}
	return prefix + "." + c + "." + e
}

// token makes s one subject token. Channel names are already safe
// (register() allows letters, digits, '_' and '-'); anything else that would
// split or widen a subject becomes '_'.
func token(s string) string {
	if s == "" {
		return "_"
	}
	if ValidToken(s) {
		return s
	}
	return strings.Map(func(r rune) rune {
		if r == '.' || r == '*' || r == '>' || r <= ' ' || r == 0x7f {
			return '_'
		}
		return r
	}, s)
}

// ValidToken reports whether s is one literal subject token: not empty, no
// dots, wildcards, whitespace or control characters.
func ValidToken(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r == '.' || r == '*' || r == '>' || r <= ' ' || r == 0x7f {
			return false
		}
	}
	return true
}

// ValidSubject reports whether s is a literal subject one can publish to:
// dot-separated valid tokens (the rule pgrelay.register() applies to a nats
// channel's handler).
func ValidSubject(s string) bool {
	if s == "" {
		return false
	}
	for _, t := range strings.Split(s, ".") {
		if !ValidToken(t) {
			return false
		}
	}
	return true
}

// CheckChannelSubject returns why s cannot be a nats channel's subject, or
// nil: the rule pgrelay._check_channel applies to the handler of a nats
// channel, which the nats handler checks again before it publishes.
//
//   - s is a literal subject (ValidSubject);
//   - it is not under "pgrelay.", where pgrelay publishes its own events;
//   - it is outside what NATS keeps for itself: subjects starting with "$"
//     ($JS.API. would reach the JetStream API, $KV. and $O. the key-value
//     and object stores, $SYS. the system account, and NATS reserves every
//     "$" subject for system use), and the reply inboxes, "_INBOX" and
//     below.
func CheckChannelSubject(s string) error {
	switch {
	case !ValidSubject(s):
		return fmt.Errorf("%q is not a valid NATS subject (dot-separated tokens, no spaces, control characters or wildcards)", s)
	case strings.HasPrefix(s, SubjectRoot+"."):
		return fmt.Errorf("subject %q is under %q, where pgrelay publishes its own events", s, SubjectRoot+".")
	case strings.HasPrefix(s, "$"):
		return fmt.Errorf("subject %q is reserved: NATS keeps subjects starting with \"$\" ($JS, $KV, $O, $SYS, ...) for itself", s)
	case s == inboxToken || strings.HasPrefix(s, inboxToken+"."):
		return fmt.Errorf("subject %q is reserved: %s. holds the reply inboxes of NATS clients", s, inboxToken)
	}
	return nil
}

// inboxToken is the first token of NATS reply inboxes.
const inboxToken = "_INBOX"

// Published is the JSON document of a log event on NATS, version
// SchemaVersion: the pgrelay.log row (its fields are the log's columns) and
// what publishing adds. The log id is also the message's Nats-Msg-Id.
type Published struct {
	// Schema is SchemaVersion.
	Schema int `json:"schema"`
	LogEvent
	// ErrorClass is the class of the error (ErrorClass), for a failure of a
	// channel whose publish_errors is ErrorsClass or ErrorsText; Error is
	// nil but for ErrorsText (PublishedError).
	ErrorClass string `json:"error_class,omitempty"`
	// Payload is the event's payload, present only when the channel was
	// registered with p_publish_payload.
	Payload *string `json:"payload,omitempty"`
	// PayloadOmitted is true when the channel publishes payloads but this one
	// was left out: it was not kept, or the document would exceed the NATS
	// server's max payload.
	PayloadOmitted bool `json:"payload_omitted,omitempty"`
	// ErrorTruncated is true when Error was cut to fit the max payload.
	ErrorTruncated bool `json:"error_truncated,omitempty"`
}

// NewPublished is the document for a log event; payload is nil when the
// channel does not publish payloads.
func NewPublished(e LogEvent, payload *string) Published {
	e.At = e.At.UTC()
	return Published{Schema: SchemaVersion, LogEvent: e, Payload: payload}
}

// Subject is where p is published.
func (p Published) Subject() string { return EventSubject(p.Channel, p.Event) }

// NotifierStatus is the JSON document of a notifier status change on NATS,
// version SchemaVersion (a row of pgrelay_notifier.status_events).
type NotifierStatus struct {
	Schema         int       `json:"schema"`
	ID             int64     `json:"id"`
	NotificationID int64     `json:"notification_id"`
	Channel        string    `json:"channel"`
	Status         string    `json:"status"`
	Error          *string   `json:"error"`
	Node           int       `json:"node"`
	At             time.Time `json:"at"`
	ErrorTruncated bool      `json:"error_truncated,omitempty"`
	// ErrorClass: as Published's, by the publish_errors of the channel.
	ErrorClass string `json:"error_class,omitempty"`
}

// Subject is where s is published.
func (s NotifierStatus) Subject() string { return NotifierSubject(s.Channel, s.Status) }

// Fit encodes doc as JSON of at most limit bytes (limit <= 0: no limit). A
// document too large loses its payload first (PayloadOmitted), then has its
// error cut (ErrorTruncated). shrunk reports either; ok is false when even
// that does not fit.
func Fit(doc Published, limit int) (data []byte, shrunk, ok bool) {
	data = mustJSON(doc)
	if limit <= 0 || len(data) <= limit {
		return data, false, true
	}
	if doc.Payload != nil {
		doc.Payload, doc.PayloadOmitted = nil, true
		if data = mustJSON(doc); len(data) <= limit {
			return data, true, true
		}
	}
	if doc.Error != nil {
		doc.ErrorTruncated = true
		if data, ok = shrinkError(&doc, &doc.Error, limit); ok {
			return data, true, true
		}
	}
	return nil, true, false
}

// shrinkError cuts *msg to the longest prefix with which doc encodes within
// limit (a binary search: escaping makes the encoded length no simple
// function of the raw one).
func shrinkError(doc any, msg **string, limit int) ([]byte, bool) {
	full := **msg
	fits := func(n int) []byte {
		cut := cutTo(full, n)
		*msg = &cut
		if data := mustJSON(doc); len(data) <= limit {
			return data
		}
		return nil
	}
	best := fits(0)
	if best == nil {
		return nil, false
	}
	lo, hi := 0, len(full) // fits(lo) holds
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if data := fits(mid); data != nil {
			lo, best = mid, data
		} else {
			hi = mid - 1
		}
	}
	cut := cutTo(full, lo)
	*msg = &cut
	return best, true
}

// FitNotifier is Fit for a notifier status document.
func FitNotifier(doc NotifierStatus, limit int) (data []byte, shrunk, ok bool) {
	data = mustJSON(doc)
	if limit <= 0 || len(data) <= limit {
		return data, false, true
	}
	if doc.Error != nil {
		doc.ErrorTruncated = true
		if data, ok = shrinkError(&doc, &doc.Error, limit); ok {
			return data, true, true
		}
	}
	return nil, true, false
}

// cutTo cuts s to at most n bytes on a rune boundary.
func cutTo(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		// Only strings, numbers, bools and times: Marshal cannot fail.
		panic("events: encode: " + err.Error())
	}
	return b
}
