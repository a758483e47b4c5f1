package events_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/events"
)

// The class of each kind of error text pgrelay records: a fixed word or a
// SQLSTATE, never a fragment of the text.
func TestErrorClass(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ text, want string }{
		{"handler timed out after 30s: ERROR: canceling statement due to statement timeout (SQLSTATE 57014)", "timeout"},
		{"ERROR: canceling statement due to statement timeout (SQLSTATE 57014)", "timeout"},
		{"nats channel orders: not published: nats: timeout", "timeout"},
		{"email channel \"mail\": connect: dial tcp 10.0.0.7:25: i/o timeout", "timeout"},
		{"ERROR: card 4111-1111 declined for alice@example.com (SQLSTATE P0001)", "sqlstate_P0001"},
		// The SQLSTATE decides before the words of the message.
		{"ERROR: payment gateway timed out (SQLSTATE P0001)", "sqlstate_P0001"},
		{"ERROR: connection reset by the gateway, not sent: broken pipe (SQLSTATE 23514)", "sqlstate_23514"},
		{"ERROR: canceling statement due to user request (SQLSTATE 57014)", "timeout"},
		{"handler timed out after 30s: ERROR: server closed the connection (SQLSTATE 08006)", "timeout"},
		{"send invoice 42: ERROR: deadline exceeded in app.invoice() (SQLSTATE P0001)", "sqlstate_P0001"},
		// Errors without a SQLSTATE: the text.
		{"handler timed out after 5s: context deadline exceeded", "timeout"},
		{"call the billing API: context deadline exceeded", "timeout"},
		{"ERROR: duplicate key value violates unique constraint \"orders_pkey\" (SQLSTATE 23505)", "sqlstate_23505"},
		{"email channel \"mail\": RCPT TO <bob@example.com>: 550 5.1.1 no such user", "smtp_5xx"},
		{"email channel \"mail\": MAIL FROM <app@shop.example>: 451 4.7.1 try again later", "smtp_4xx"},
		{"email channel \"mail\": DATA: 554 rejected: spam", "smtp_5xx"},
		{"email channel \"mail\": connect: SMTP AUTH failed: 535 5.7.8 bad credentials", "smtp_5xx"},
		{"RCPT TO <bob@example.com>: 452 4.2.2 mailbox full", "smtp_4xx"},
		{"email channel \"mail\": connect: dial tcp 10.0.0.7:25: connect: connection refused", "smtp_connect"},
		{"email channel \"mail\": connect: dial tcp: lookup smtp.internal: no such host", "smtp_connect"},
		{"not sent: the notification was cancelled", "not_sent"},
		{"email channel \"mail\": not sent: recipient bob@example.com is suppressed", "not_sent"},
		{"nats channel orders: not published: nats: no responders available for request", "nats_error"},
		{"nats: connection closed", "nats_error"},
		{"database connection lost while running the handler", "connection_lost"},
		{"write: broken pipe", "connection_lost"},
		{"handler panicked: runtime error: index out of range [3] with length 2", "handler_error"},
		{"ERROR: something without a code", "handler_error"},
		{"email channel \"mail\": build the message: bad header", "handler_error"},
		{"no reason recorded", "unknown"},
		{"", "unknown"},
	} {
		require.Equal(t, tc.want, events.ErrorClass(tc.text), tc.text)
	}
}

// An admin's note on retried and discarded rows is no error: no class,
// whatever it says; the other events keep theirs.
func TestPublishedNoteOfAdminActions(t *testing.T) {
	t.Parallel()
	note := "ERROR: retried by alice after the gateway timed out (SQLSTATE P0001)"
	for _, k := range []events.Kind{events.Retried, events.Discarded} {
		for _, policy := range []string{events.ErrorsClass, events.ErrorsText, events.ErrorsNone} {
			_, class := events.PublishedNote(k, &note, policy)
			require.Empty(t, class, "%s %s", k, policy)
		}
		e, _ := events.PublishedNote(k, &note, events.ErrorsText)
		require.Equal(t, &note, e, "the note's text is published as an error's would be")
	}
	_, class := events.PublishedNote(events.Failed, &note, events.ErrorsClass)
	require.Equal(t, "sqlstate_P0001", class)
}

// What each publish_errors setting publishes of an error text.
func TestPublishedError(t *testing.T) {
	t.Parallel()
	text := "ERROR: secret token abc123 (SQLSTATE P0001)"
	e, c := events.PublishedError(&text, events.ErrorsClass)
	require.Nil(t, e)
	require.Equal(t, "sqlstate_P0001", c)
	e, c = events.PublishedError(&text, events.ErrorsText)
	require.Equal(t, &text, e)
	require.Equal(t, "sqlstate_P0001", c)
	e, c = events.PublishedError(&text, events.ErrorsNone)
	require.Nil(t, e)
	require.Empty(t, c)
	e, c = events.PublishedError(&text, "bogus")
	require.Nil(t, e, "an unknown setting publishes no text")
	require.Equal(t, "sqlstate_P0001", c)
	e, c = events.PublishedError(nil, events.ErrorsText)
	require.Nil(t, e)
	require.Empty(t, c, "a success has no class")
}
