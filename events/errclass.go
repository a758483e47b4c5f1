package events

import (
	"regexp"
	"strings"
)

// What a channel publishes of its errors on NATS (channels.publish_errors,
// register()'s p_publish_errors). An error text may hold payload fragments,
// recipients or an SMTP host, so the default is a class without free text.
const (
	// ErrorsClass: error_class only (ErrorClass of the text); error is null.
	ErrorsClass = "class"
	// ErrorsText: error_class and the full error text.
	ErrorsText = "text"
	// ErrorsNone: neither.
	ErrorsNone = "none"
)

// The error classes ErrorClass returns, besides "sqlstate_" followed by a
// five-character SQLSTATE.
const (
	ClassTimeout        = "timeout"
	ClassSMTP4xx        = "smtp_4xx"
	ClassSMTP5xx        = "smtp_5xx"
	ClassSMTPConnect    = "smtp_connect"
	ClassNATS           = "nats_error"
	ClassNotSent        = "not_sent"
	ClassConnectionLost = "connection_lost"
	ClassHandler        = "handler_error"
	ClassUnknown        = "unknown"
)

var (
	sqlstateRe = regexp.MustCompile(`\(SQLSTATE ([0-9A-Z]{5})\)`)
	// An SMTP reply as net/textproto quotes it ("550 5.1.1 no such user"),
	// after the command or step that got it.
	smtpReplyRe = regexp.MustCompile(`(?:^|: )([45])[0-9]{2}[ -]`)
)

// ErrorClass is the class of an error text of pgrelay.log or of a notifier
// status event: a fixed word, or sqlstate_XXXXX for a database error, never
// text of the error itself. It is what a channel with publish_errors 'class'
// publishes (docs/events.md lists the classes).
//
// The SQLSTATE decides first: an error that carries one (a database error,
// "(SQLSTATE XXXXX)" as pgx writes it) is sqlstate_XXXXX, or timeout for
// 57014 (a statement cancelled: the channel's timeout or a
// statement_timeout), whatever its message says ("RAISE EXCEPTION 'payment
// gateway timed out'" is sqlstate_P0001). Only the Processor's own timeout
// ("handler timed out after ...") comes before it. The text is read only for
// errors without a SQLSTATE (SMTP, NATS, connections, Go handlers' own
// errors).
func ErrorClass(text string) string {
	lower := strings.ToLower(text)
	if strings.TrimSpace(text) == "" {
		return ClassUnknown
	}
	if strings.HasPrefix(text, HandlerTimeoutPrefix) {
		return ClassTimeout
	}
	if m := sqlstateRe.FindAllStringSubmatch(text, -1); m != nil {
		// The last one: an error wrapping a database error ends with it.
		code := m[len(m)-1][1]
		if code == "57014" {
			return ClassTimeout
		}
		return "sqlstate_" + code
	}
	switch {
	case strings.Contains(lower, "timed out") || strings.Contains(lower, "deadline exceeded") ||
		strings.Contains(lower, "i/o timeout") || strings.HasSuffix(lower, ": timeout"):
		return ClassTimeout
	case strings.HasPrefix(text, "not sent:") || strings.Contains(text, ": not sent: "):
		return ClassNotSent
	}
	email := strings.HasPrefix(text, "email") || strings.Contains(lower, "smtp") ||
		strings.Contains(text, "MAIL FROM") || strings.Contains(text, "RCPT TO") || strings.Contains(text, "DATA:")
	if email {
		if m := smtpReplyRe.FindStringSubmatch(text); m != nil {
			if m[1] == "4" {
				return ClassSMTP4xx
			}
			return ClassSMTP5xx
		}
		if strings.Contains(text, "connect: ") || strings.Contains(lower, "connection refused") ||
			strings.Contains(lower, "no such host") || strings.Contains(lower, "connection is gone") {
			return ClassSMTPConnect
		}
	}
	switch {
	case strings.HasPrefix(text, "nats channel") || strings.HasPrefix(lower, "nats:"):
		return ClassNATS
	case strings.Contains(lower, "connection lost") || strings.Contains(lower, "conn closed") ||
		strings.Contains(lower, "connection reset") || strings.Contains(lower, "broken pipe") ||
		strings.Contains(lower, "unexpected eof"):
		return ClassConnectionLost
	case strings.HasPrefix(text, "handler panicked") || strings.HasPrefix(text, "ERROR:"):
		return ClassHandler
	case email:
		return ClassHandler
	}
	return ClassUnknown
}

// HandlerTimeoutPrefix starts the error the Processor records when a
// handler ran past its channel's timeout.
const HandlerTimeoutPrefix = "handler timed out after "

// PublishedError is what a channel whose publish_errors is policy publishes
// of text (nil for a success): the error text (nil but for ErrorsText) and
// its class ("" for a success and for ErrorsNone). An unknown policy is
// taken as ErrorsClass, the one that publishes no free text.
func PublishedError(text *string, policy string) (*string, string) {
	if text == nil || policy == ErrorsNone {
		return nil, ""
	}
	if policy == ErrorsText {
		return text, ErrorClass(*text)
	}
	return nil, ErrorClass(*text)
}

// PublishedNote is PublishedError for the log row of event k: the text of
// an admin's action (Retried, Discarded), a snooze or a cancel is a note,
// not an error (Kind.Note), so it has no class; its text is published as an
// error's would be.
func PublishedNote(k Kind, text *string, policy string) (*string, string) {
	e, class := PublishedError(text, policy)
	if k.Note() {
		class = ""
	}
	return e, class
}
