package actors_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/actors"
	"github.com/pgrelay/pgrelay/internal/devenv"
	"github.com/pgrelay/pgrelay/internal/testenv"
)

// What NATS subscribers learn of a failure (docs/events.md, "Errors"): a
// handler whose exception message holds a payload fragment fails on three
// channels. The default channel publishes only the class of the error, the
// one set to 'text' its full text, the one set to 'none' neither; the
// fragment is in no message of the first and the last.
func TestActorEventsErrorTexts(t *testing.T) {
	t.Parallel()
	n := startNATS(t, devenv.NATSConfig{})
	_, js := natsClient(t, n.URL())
	e := newEnv(t)
	e.Exec(`CREATE FUNCTION public.charge(p text) RETURNS void LANGUAGE plpgsql AS
	$$ BEGIN RAISE EXCEPTION 'card declined for %', p; END $$`)
	e.Exec(`SELECT pgrelay.register('dflt', 'SELECT public.charge($1)', p_max_attempts := 2, p_retry_delay := '10 milliseconds')`)
	e.Exec(`SELECT pgrelay.register('txt', 'SELECT public.charge($1)', p_max_attempts := 2, p_retry_delay := '10 milliseconds',
		p_publish_errors := 'text')`)
	e.Exec(`SELECT pgrelay.register('nothing', 'SELECT public.charge($1)', p_max_attempts := 2, p_retry_delay := '10 milliseconds',
		p_publish_errors := 'none')`)
	e.startProcessor(withNATS(n.URL()))
	for _, ch := range []string{"dflt", "txt", "nothing"} {
		e.Exec(`SELECT pgrelay.notify_many($1, $2)`, ch, payloads("tok_SECRET_"+ch, 5))
	}
	requireLogPublishedOnce(t, e, js, "errors", 30)

	msgs := consumeAll(t, js, "PGRELAY_EVENTS", "errors2", "pgrelay.events.>", 30)
	require.Len(t, msgs, 30)
	for _, m := range msgs {
		raw, err := json.Marshal(m.doc)
		require.NoError(t, err)
		ch := m.doc["channel"].(string)
		require.Contains(t, []string{"failed", "gave_up"}, m.doc["event"])
		switch ch {
		case "dflt":
			require.NotContains(t, string(raw), "tok_SECRET", "no payload fragment from a channel publishing classes")
			require.NotContains(t, string(raw), "card declined")
			require.Contains(t, m.doc, "error")
			require.Nil(t, m.doc["error"])
			require.Equal(t, "sqlstate_P0001", m.doc["error_class"])
		case "txt":
			require.Contains(t, m.doc["error"], "card declined for tok_SECRET_txt-")
			require.Equal(t, "sqlstate_P0001", m.doc["error_class"])
		case "nothing":
			require.NotContains(t, string(raw), "tok_SECRET")
			require.Nil(t, m.doc["error"])
			require.NotContains(t, m.doc, "error_class")
		default:
			t.Fatalf("unexpected channel %s", ch)
		}
	}
}

// An email failure's notifier status event follows its channel's setting
// too: the SMTP server's reply (here a challenge holding a secret-looking
// fragment, quoted in the client's error) reaches NATS only from the channel
// set to 'text'.
func TestActorEventsNotifierErrorTexts(t *testing.T) {
	t.Parallel()
	n := startNATS(t, devenv.NATSConfig{})
	_, js := natsClient(t, n.URL())
	e := newEnv(t)
	broken := catcher(t, devenv.SMTPConfig{Username: "app", Password: "secret",
		LoginChallenge: []byte("tok_SECRET_reply")})
	e.Exec(`SELECT pgrelay_notifier.create_channel('mail', 'app@shop.example', p_max_attempts := 1)`)
	e.Exec(`SELECT pgrelay_notifier.create_channel('mailtxt', 'app@shop.example', p_max_attempts := 1,
		p_publish_errors := 'text')`)
	e.Exec(`SELECT pgrelay_notifier.send('mail', ARRAY['bob@rcpt.example'], 's', 'b')`)
	e.Exec(`SELECT pgrelay_notifier.send('mailtxt', ARRAY['bob@rcpt.example'], 's', 'b')`)
	url := strings.Replace(broken.URL(), "auth=plain", "auth=login", 1)
	e.startProcessor(func(c *actors.Config) {
		withNATS(n.URL())(c)
		c.SMTPURL = url
	})
	testenv.Eventually(e.T, time.Minute, "both mails failed and every event in the stream", func() bool {
		return e.statusCount("failed") == 2 && streamMsgs(js, "PGRELAY_EVENTS") >=
			e.Count(`SELECT (SELECT count(*) FROM pgrelay_notifier.status_events) + (SELECT count(*) FROM pgrelay.log)`)
	})
	require.Equal(t, 2, e.Count(`SELECT count(*) FROM pgrelay_notifier.status_events
		WHERE status = 'failed' AND error LIKE '%tok_SECRET_reply%'`), "the database keeps the full text")
	want := e.Count(`SELECT count(*) FROM pgrelay_notifier.status_events`)
	msgs := consumeAll(t, js, "PGRELAY_EVENTS", "notifier", "pgrelay.notifier.>", want)
	require.Len(t, msgs, want)
	failed := 0
	for _, m := range msgs {
		raw, err := json.Marshal(m.doc)
		require.NoError(t, err)
		if m.doc["status"] != "failed" {
			continue
		}
		failed++
		switch m.doc["channel"] {
		case "mail":
			require.NotContains(t, string(raw), "tok_SECRET")
			require.NotContains(t, string(raw), "rcpt.example")
			require.Nil(t, m.doc["error"])
			require.Equal(t, "smtp_connect", m.doc["error_class"])
		case "mailtxt":
			require.Contains(t, m.doc["error"], "tok_SECRET_reply")
			require.Equal(t, "smtp_connect", m.doc["error_class"])
		}
	}
	require.Equal(t, 2, failed)
}
