package actors_test

// Outcomes whose texts come from outside (an SMTP server's reply, a
// handler's error) and writes of outcomes the database refuses: every
// outcome is recorded, none stops the others, nothing runs twice.

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/actors"
	"github.com/pgrelay/pgrelay/internal/testenv"
)

// An SMTP server whose reply holds bytes that are not UTF-8 and a NUL byte
// (its AUTH LOGIN exchange goes wrong; the client's error quotes the reply as
// it came): the notifier's debug log, status and status history and
// pgrelay.log record the failures (invalid bytes as U+FFFD, NUL removed),
// and the other channel's messages, on a sound server, are each sent exactly
// once with every outcome written.
func TestActorEmailUnstorableReplyText(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	good := catcher(t, testenv.SMTPConfig{})
	broken := catcher(t, testenv.SMTPConfig{Username: "app", Password: "secret",
		LoginChallenge: []byte("no\xff entry\x00 here \xc3(")})
	e.exec(`SELECT pgrelay_notifier.create_channel('mail', 'app@shop.example')`)
	e.exec(`SELECT pgrelay_notifier.create_channel('broken', 'app@shop.example', p_max_attempts := 3,
		p_retry_delay := '50 milliseconds')`)
	e.exec(`SELECT pgrelay_notifier.send('mail', ARRAY['u' || g || '@good.example'], 's', 'b') FROM generate_series(1, 20) g`)
	e.exec(`SELECT pgrelay_notifier.send('broken', ARRAY['u' || g || '@good.example'], 's', 'b') FROM generate_series(1, 2) g`)
	e.startProcessor(func(c *actors.Config) {
		c.SMTPURL = good.URL()
		c.SMTPChannels = map[string]string{"broken": strings.Replace(broken.URL(), "auth=plain", "auth=login", 1)}
		c.LeaseGrace = 5 * time.Second // an outcome never written would have its claim rescued: a second send
	})

	e.eventually(time.Minute, "every event to end", func() bool {
		return e.count(`SELECT count(*) FROM pgrelay.queue`) == 0 &&
			e.count(`SELECT count(*) FROM pgrelay.log WHERE event IN ('succeeded', 'gave_up')`) == 22
	})
	require.Equal(t, 20, e.statusCount("sent"))
	require.Equal(t, 2, e.statusCount("failed"))
	require.Zero(t, broken.Count())
	require.Equal(t, 20, good.Count(), "no message was sent twice")
	require.Zero(t, e.count(`SELECT count(*) FROM pgrelay.log WHERE event IN ('rescued', 'failed', 'gave_up')
		AND channel = 'mail'`))

	// The reply as stored: U+FFFD for the invalid bytes, without the NUL.
	const reply = `'%no' || U&'\FFFD' || ' entry here ' || U&'\FFFD' || '(%'`
	for _, n := range e.notifications("WHERE status = 'failed'") {
		require.NotNil(t, n.LastError)
		require.Contains(t, *n.LastError, "no\uFFFD entry here \uFFFD(")
		require.NotContains(t, *n.LastError, "\x00")
	}
	require.Equal(t, 4, e.count(`SELECT count(*) FROM pgrelay.log WHERE channel = 'broken' AND event = 'failed'
		AND error LIKE `+reply))
	require.Equal(t, 2, e.count(`SELECT count(*) FROM pgrelay.log WHERE channel = 'broken' AND event = 'gave_up'
		AND attempt = 3 AND error LIKE `+reply))
	require.Equal(t, 2, e.count(`SELECT count(*) FROM pgrelay_notifier.status_events
		WHERE status = 'failed' AND error LIKE `+reply))
	require.Equal(t, 6, e.count(`SELECT count(*) FROM pgrelay_notifier.debug_log WHERE message LIKE `+reply),
		"one note per attempt")
}
