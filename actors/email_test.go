package actors_test

// The email handler run by the Processor against real SMTP servers (the
// in-process catcher of internal/devenv on 127.0.0.1:0).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/mail"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/actors"
	"github.com/pgrelay/pgrelay/internal/devenv"
	"github.com/pgrelay/pgrelay/internal/handlers/email"
	"github.com/pgrelay/pgrelay/internal/testenv"
)

// catcher starts an SMTP catcher, closed when t ends.
func catcher(t *testing.T, cfg devenv.SMTPConfig) *devenv.SMTP {
	t.Helper()
	s, err := devenv.StartSMTP(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// notification is a row of pgrelay_notifier.notifications.
type notification struct {
	ID            int64
	Channel, From string
	To, Cc, Bcc   []string
	Subject, Text string
	HTML          *string
	Headers       map[string]string
	Status        string
	Attempts      int
	LastError     *string
	CreatedAt     time.Time
}

func (e *env) notifications(where string, args ...any) map[int64]notification {
	e.T.Helper()
	rows, err := e.Pool.Query(context.Background(), `SELECT notification_id, channel, from_addr, to_addrs, cc_addrs,
		bcc_addrs, subject, body_text, body_html, headers, status, attempts, last_error, created_at
		FROM pgrelay_notifier.notifications `+where, args...)
	require.NoError(e.T, err)
	defer rows.Close()
	out := map[int64]notification{}
	for rows.Next() {
		var n notification
		require.NoError(e.T, rows.Scan(&n.ID, &n.Channel, &n.From, &n.To, &n.Cc, &n.Bcc, &n.Subject, &n.Text,
			&n.HTML, &n.Headers, &n.Status, &n.Attempts, &n.LastError, &n.CreatedAt))
		out[n.ID] = n
	}
	require.NoError(e.T, rows.Err())
	return out
}

func (e *env) statusCount(status string) int {
	e.T.Helper()
	return e.Count(`SELECT count(*) FROM pgrelay_notifier.notifications WHERE status = $1`, status)
}

// idOf is the notification id of a Message-ID <id@pgrelay>.
func idOf(t *testing.T, msgID string) int64 {
	t.Helper()
	s := strings.TrimSuffix(strings.TrimPrefix(msgID, "<"), "@pgrelay>")
	id, err := strconv.ParseInt(s, 10, 64)
	require.NoError(t, err, "Message-ID %q", msgID)
	return id
}

func bare(addr string) string {
	a, err := mail.ParseAddress(addr)
	if err != nil {
		return strings.Trim(addr, "<>")
	}
	return a.Address
}

// 500 notifications through 2 channels on 2 SMTP servers (the default target
// and a per-channel one): each arrives exactly once with the right envelope,
// headers and bodies, over a few reused connections; every status ends sent.
func TestActorEmail500ThroughTwoChannels(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s1 := catcher(t, devenv.SMTPConfig{})
	s2 := catcher(t, devenv.SMTPConfig{})
	e.Exec(`SELECT pgrelay_notifier.create_channel('orders', 'Orders <orders@shop.example>')`)
	e.Exec(`SELECT pgrelay_notifier.create_channel('alerts', 'alerts@shop.example', p_concurrency_mode := 'payload')`)
	const per = 250
	for _, ch := range []string{"orders", "alerts"} {
		e.Exec(`SELECT pgrelay_notifier.send($1, ARRAY['User ' || g || ' <user' || g || '@example.org>'],
			$1 || ' #' || g || ' Grüße', 'Hello ' || g || E'\nline two',
			CASE WHEN g % 2 = 0 THEN '<p>Hello <b>' || g || '</b></p>' END,
			CASE WHEN g % 3 = 0 THEN ARRAY['cc' || g || '@example.org', 'cc2-' || g || '@example.net'] END,
			CASE WHEN g % 5 = 0 THEN ARRAY['bcc' || g || '@example.org'] END,
			jsonb_build_object('X-Seq', g::text, 'Reply-To', 'help@shop.example'))
			FROM generate_series(1, $2::int) g`, ch, per)
	}
	e.startProcessor(func(c *actors.Config) {
		c.SMTPURL = s1.URL()
		c.SMTPChannels = map[string]string{"alerts": s2.URL()}
	})
	testenv.Eventually(e.T, 2*time.Minute, "500 notifications to be sent", func() bool {
		return e.statusCount("sent") == 2*per
	})
	want := e.notifications("")
	require.Len(t, want, 2*per)
	for name, s := range map[string]*devenv.SMTP{"orders": s1, "alerts": s2} {
		msgs := s.Messages()
		require.Len(t, msgs, per, "%s: every notification once, no duplicates", name)
		seen := map[int64]bool{}
		for _, m := range msgs {
			id := idOf(t, m.MessageID())
			require.False(t, seen[id], "message %d arrived twice", id)
			seen[id] = true
			n, ok := want[id]
			require.True(t, ok, "unknown Message-ID %s", m.MessageID())
			require.Equal(t, name, n.Channel, "message %d went to the channel's own server", id)
			require.Equal(t, bare(n.From), strings.Trim(m.From, "<>"))
			var rcpts []string
			for _, a := range append(append(append([]string{}, n.To...), n.Cc...), n.Bcc...) {
				rcpts = append(rcpts, bare(a))
			}
			var got []string
			for _, a := range m.To {
				got = append(got, strings.Trim(a, "<>"))
			}
			require.ElementsMatch(t, rcpts, got, "envelope recipients of %d", id)
			require.Equal(t, n.Subject, m.Subject())
			to, err := m.Header.AddressList("To")
			require.NoError(t, err)
			require.Equal(t, bare(n.To[0]), to[0].Address)
			if len(n.Cc) > 0 {
				cc, err := m.Header.AddressList("Cc")
				require.NoError(t, err)
				require.Len(t, cc, len(n.Cc))
			} else {
				require.Empty(t, m.Header.Get("Cc"))
			}
			require.Empty(t, m.Header.Get("Bcc"), "Bcc is never a header")
			require.Equal(t, n.Headers["X-Seq"], m.Header.Get("X-Seq"))
			require.Equal(t, "help@shop.example", m.Header.Get("Reply-To"))
			date, err := m.Header.Date()
			require.NoError(t, err)
			require.WithinDuration(t, n.CreatedAt, date, time.Second, "Date is when the notification was composed")
			text, html, err := m.Bodies()
			require.NoError(t, err)
			require.Equal(t, n.Text, strings.TrimRight(text, "\n"))
			if n.HTML != nil {
				require.Equal(t, *n.HTML, strings.TrimRight(html, "\n"))
			} else {
				require.Empty(t, html)
			}
		}
		// Connection reuse: a handful of pooled sessions carried all of them
		// (pool=4 per target by default).
		assert.LessOrEqual(t, s.Sessions(), 8, "%s: SMTP sessions", name)
	}
	for id := range want {
		require.Equal(t, "sent", e.notifierStatus(id))
	}
	testenv.Eventually(e.T, time.Minute, "500 successes in the log", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'succeeded'`) == 2*per
	})
	require.Equal(t, 2*per, e.Count(`SELECT count(DISTINCT notification_id) FROM pgrelay_notifier.status_events WHERE status = 'sent'`))
	require.Equal(t, 3*2*per, e.Count(`SELECT count(*) FROM pgrelay_notifier.status_events`), "queued, sending, sent: one event each")
}

func (e *env) notifierStatus(id int64) string {
	e.T.Helper()
	var s *string
	require.NoError(e.T, e.Pool.QueryRow(context.Background(), "SELECT pgrelay_notifier.get_status($1)", id).Scan(&s))
	if s == nil {
		return "<nil>"
	}
	return *s
}

// concurrency_mode = 'channel': never two SMTP transactions of the channel
// at once, even with two Processors, while a 'none' channel beside it sends
// in parallel; and the channel's emails go out in send() order. The 'none'
// channel is the control: its overlaps prove the server sees overlapping
// transactions when there are any (every DATA is held a little to widen the
// window).
func TestActorEmailChannelModeNeverOverlaps(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := catcher(t, devenv.SMTPConfig{DataDelay: 20 * time.Millisecond})
	e.Exec(`SELECT pgrelay_notifier.create_channel('serial', 'serial@shop.example', p_concurrency_mode := 'channel')`)
	e.Exec(`SELECT pgrelay_notifier.create_channel('bulk', 'bulk@shop.example')`)
	var ids []int64
	rows, err := e.Pool.Query(context.Background(), `SELECT pgrelay_notifier.send('serial', ARRAY['u' || g || '@example.org'], 's' || g, 'b')
		FROM generate_series(1, 80) g`)
	require.NoError(t, err)
	ids, err = pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)
	e.Exec(`SELECT pgrelay_notifier.send('bulk', ARRAY['u' || g || '@example.org'], 's', 'b') FROM generate_series(1, 200) g`)
	mod := func(c *actors.Config) { c.SMTPURL = s.URL() + "?pool=8" }
	e.startProcessor(mod)
	e.startProcessor(mod)
	testenv.Eventually(e.T, 2*time.Minute, "280 notifications to be sent", func() bool { return e.statusCount("sent") == 280 })
	require.Equal(t, 1, s.MaxConcurrent("serial@shop.example"), "two SMTP transactions of a 'channel' channel at once")
	var order []int64
	for _, m := range s.Messages() {
		if strings.Contains(m.From, "serial@") {
			order = append(order, idOf(t, m.MessageID()))
		}
	}
	require.Equal(t, ids, order, "serial emails out of send() order")
	bulk := s.MaxConcurrent("bulk@shop.example")
	t.Logf("bulk channel: up to %d transactions at once", bulk)
	require.Greater(t, bulk, 1, "the 'none' channel's transactions never overlapped: the test could not see an overlap")
}

// The SMTP server goes down while pooled connections are open and comes back
// later: every notification is sent, attempts and reasons are recorded.
func TestActorEmailServerDownThenBack(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := catcher(t, devenv.SMTPConfig{})
	e.Exec(`SELECT pgrelay_notifier.create_channel('mail', 'app@shop.example', p_max_attempts := 50,
		p_retry_delay := '100 milliseconds')`)
	e.startProcessor(func(c *actors.Config) { c.SMTPURL = s.URL() + "?timeout=2s" })
	e.Exec(`SELECT pgrelay_notifier.send('mail', ARRAY['early' || g || '@example.org'], 's', 'b') FROM generate_series(1, 20) g`)
	testenv.Eventually(e.T, time.Minute, "the first 20 to be sent", func() bool { return e.statusCount("sent") == 20 })

	require.NoError(t, s.Stop()) // the pooled connections drop with it
	e.Exec(`SELECT pgrelay_notifier.send('mail', ARRAY['late' || g || '@example.org'], 's', 'b') FROM generate_series(1, 30) g`)
	testenv.Eventually(e.T, time.Minute, "failed attempts while the server is down", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'failed'`) >= 30 &&
			e.Count(`SELECT count(*) FROM (SELECT notification_id FROM pgrelay_notifier.debug_log
				GROUP BY notification_id HAVING count(*) >= 2) d`) >= 10
	})
	require.Zero(t, e.statusCount("failed"), "a transient failure does not fail the notification")
	// The late ones met the pooled sessions the server dropped: a session
	// whose NOOP was still answered as the server stopped carried a batch
	// of them (each an attempt) before it failed. By now every pooled
	// session was found dead: without a connection no attempt reaches a
	// notification, which stays queued (and cancellable) while the server
	// is down, its handler failing on the dial.
	e.Exec(`SELECT pgrelay_notifier.send('mail', ARRAY['down' || g || '@example.org'], 's', 'b') FROM generate_series(1, 10) g`)
	testenv.Eventually(e.T, time.Minute, "every notification sent while down to have failed a dial", func() bool {
		return e.Count(`SELECT count(DISTINCT d.notification_id) FROM pgrelay_notifier.debug_log d
			JOIN pgrelay_notifier.notifications n ON n.notification_id = d.notification_id WHERE n.to_addrs[1] LIKE 'down%'`) == 10
	})
	require.Zero(t, e.Count(`SELECT count(*) FROM pgrelay_notifier.notifications
		WHERE to_addrs[1] LIKE 'down%' AND (status <> 'queued' OR attempts > 0)`))
	require.NoError(t, s.Start())
	testenv.Eventually(e.T, time.Minute, "all 60 to be sent", func() bool { return e.statusCount("sent") == 60 })

	require.Equal(t, 60, s.Count())
	for _, n := range e.notifications("WHERE to_addrs[1] LIKE 'late%' OR to_addrs[1] LIKE 'down%'") {
		require.Equal(t, "sent", n.Status)
		if strings.HasPrefix(n.To[0], "down") {
			require.Equal(t, 1, n.Attempts, "attempts count only those that had a connection: %s", n.To[0])
		}
	}
	notes := e.Count(`SELECT count(*) FROM pgrelay_notifier.debug_log WHERE message LIKE 'attempt % failed: smtp://127.0.0.1:%'`)
	require.Positive(t, notes, "the reasons of failed attempts are in the debug log")
	testenv.Eventually(e.T, time.Minute, "60 successes in the log", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'succeeded'`) == 60
	})
}

// A permanent 5xx for one recipient domain: those notifications fail at
// once with the reason and are not retried; the rest are sent. A 4xx domain
// is retried until the server accepts it.
func TestActorEmailPermanentAndTransientReplies(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := catcher(t, devenv.SMTPConfig{})
	s.RejectDomain("bad.example", 550, "no such domain here")
	s.RejectDomain("later.example", 451, "try again later")
	e.Exec(`SELECT pgrelay_notifier.create_channel('mail', 'app@shop.example', p_max_attempts := 20,
		p_retry_delay := '100 milliseconds')`)
	e.Exec(`SELECT pgrelay_notifier.send('mail', ARRAY['u' || g || CASE WHEN g % 4 = 0 THEN '@bad.example' ELSE '@good.example' END],
		's', 'b', p_cc := CASE WHEN g % 4 = 0 THEN ARRAY['fine@good.example'] END) FROM generate_series(1, 40) g`)
	e.Exec(`SELECT pgrelay_notifier.send('mail', ARRAY['u@later.example'], 's', 'b')`)
	e.startProcessor(func(c *actors.Config) { c.SMTPURL = s.URL() })
	testenv.Eventually(e.T, time.Minute, "30 sent and 10 failed", func() bool {
		return e.statusCount("sent") == 30 && e.statusCount("failed") == 10
	})
	for _, n := range e.notifications("WHERE status = 'failed'") {
		require.True(t, strings.HasSuffix(n.To[0], "@bad.example"), n.To[0])
		require.Equal(t, 1, n.Attempts, "a 5xx is not retried")
		require.NotNil(t, n.LastError)
		require.Contains(t, *n.LastError, "550")
		require.Contains(t, *n.LastError, "no such domain here")
	}
	testenv.Eventually(e.T, time.Minute, "10 give-ups at the first attempt in the log", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'gave_up' AND attempt = 1 AND error LIKE '%550%'`) == 10
	})
	require.Equal(t, 10, e.Count(`SELECT count(*) FROM pgrelay_notifier.status_events WHERE status = 'failed' AND error LIKE '%550%'`))

	testenv.Eventually(e.T, time.Minute, "the 4xx recipient to be retried", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay_notifier.notifications WHERE to_addrs[1] = 'u@later.example' AND attempts >= 3`) == 1
	})
	require.Equal(t, "sending", e.Text(`SELECT status FROM pgrelay_notifier.notifications WHERE to_addrs[1] = 'u@later.example'`))
	s.RejectDomain("later.example", 0, "")
	testenv.Eventually(e.T, time.Minute, "the 4xx recipient to be sent", func() bool { return e.statusCount("sent") == 31 })
	require.Equal(t, 31, s.Count())
	for _, m := range s.Messages() {
		for _, to := range m.To {
			require.NotContains(t, to, "bad.example")
		}
	}
}

// A notification cancelled before it is sent is not sent, and its event
// ends cancelled with it. A deleted one is missing: its event is retried
// and gives up naming it (cancel() is the way to stop an email).
func TestActorEmailSkipsCancelledAndDeleted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := catcher(t, devenv.SMTPConfig{})
	e.Exec(`SELECT pgrelay_notifier.create_channel('mail', 'app@shop.example', p_max_attempts := 2,
		p_retry_delay := '10 milliseconds')`)
	send := func(to string) int64 {
		var id int64
		require.NoError(t, e.Pool.QueryRow(context.Background(),
			`SELECT pgrelay_notifier.send('mail', ARRAY[$1], 's', 'b')`, to).Scan(&id))
		return id
	}
	keep, cancel, del := send("keep@example.org"), send("cancel@example.org"), send("delete@example.org")
	e.Exec(`SELECT pgrelay_notifier.cancel($1)`, cancel)
	e.Exec(`DELETE FROM pgrelay_notifier.notifications WHERE notification_id = $1`, del)
	e.startProcessor(func(c *actors.Config) { c.SMTPURL = s.URL() })
	testenv.Eventually(e.T, time.Minute, "1 event to succeed, 1 to give up", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'succeeded'`) == 1 &&
			e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'gave_up'`) == 1
	})
	require.Equal(t, 1, e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'cancelled'`),
		"the cancelled email's event ended cancelled")
	require.Contains(t, e.Text(`SELECT error FROM pgrelay.log WHERE event = 'gave_up'`),
		fmt.Sprintf("not sent: notification %d does not exist", del))
	require.Equal(t, 1, s.Count())
	m, _ := s.Last()
	require.Equal(t, keep, idOf(t, m.MessageID()))
	require.Equal(t, "sent", e.notifierStatus(keep))
	require.Equal(t, "cancelled", e.notifierStatus(cancel))
	require.Equal(t, "<nil>", e.notifierStatus(del))
}

// syncLog collects log output from several goroutines.
type syncLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// AUTH PLAIN, LOGIN, CRAM-MD5 and auto over STARTTLS, and PLAIN and auto
// over implicit TLS, all work, each with the mechanism it names (as the
// server saw it); the TLS policies hold as the server sees them: the default
// uses STARTTLS when offered and goes on in clear when not, tls=none never
// uses it, tls=mandatory refuses a server without it. A wrong password fails
// its notifications after max_attempts, and no password shows up in any log
// line, error, database row or status event.
func TestActorEmailAuthTLSAndNoCredentialLeaks(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tlsCfg, err := devenv.SelfSignedTLS()
	require.NoError(t, err)
	const pw = "Sup3r-s3cret-PW"
	const wrong = "Wr0ng-s3cret-PW"
	starttls := catcher(t, devenv.SMTPConfig{Username: "relay", Password: pw, TLS: tlsCfg})
	implicit := catcher(t, devenv.SMTPConfig{Username: "relay", Password: pw, TLS: tlsCfg, ImplicitTLS: true})
	offers := catcher(t, devenv.SMTPConfig{TLS: tlsCfg}) // STARTTLS offered, no AUTH
	noTLS := catcher(t, devenv.SMTPConfig{})             // no STARTTLS
	base := func(s *devenv.SMTP, scheme, pass, query string) string {
		return fmt.Sprintf("%s://relay:%s@%s?insecure_skip_verify=true&%s", scheme, pass, s.Addr(), query)
	}
	targets := map[string]string{
		"plain":     base(starttls, "smtp", pw, "auth=plain&tls=mandatory"),
		"login":     base(starttls, "smtp", pw, "auth=login&tls=mandatory"),
		"cram":      base(starttls, "smtp", pw, "auth=cram-md5&tls=mandatory"),
		"implicit":  base(implicit, "smtps", pw, "auth=plain"),
		"autotls":   base(implicit, "smtps", pw, "auth=auto"),
		"autostart": base(starttls, "smtp", pw, "auth=auto&tls=mandatory"),
		"wrong":     base(starttls, "smtp", wrong, "auth=plain&tls=mandatory"),
		// TLS policies, without AUTH.
		"opportunistic": "smtp://" + offers.Addr() + "?insecure_skip_verify=true",
		"notls":         "smtp://" + offers.Addr() + "?insecure_skip_verify=true&tls=none",
		"cleartext":     "smtp://" + noTLS.Addr(),
		"mandatory":     "smtp://" + noTLS.Addr() + "?tls=mandatory",
	}
	// What the servers must see of each channel's sessions.
	type seen struct {
		tls  bool
		mech string
	}
	want := map[string]seen{
		"plain": {true, "PLAIN"}, "login": {true, "LOGIN"}, "cram": {true, "CRAM-MD5"},
		"implicit": {true, "PLAIN"}, "autotls": {true, "CRAM-MD5"}, "autostart": {true, "CRAM-MD5"},
		"opportunistic": {true, ""}, "notls": {false, ""}, "cleartext": {false, ""},
	}
	names := make([]string, 0, len(targets))
	for ch := range targets {
		names = append(names, ch)
		e.Exec(`SELECT pgrelay_notifier.create_channel($1, $1 || '@shop.example', p_max_attempts := 2,
			p_retry_delay := '50 milliseconds')`, ch)
		e.Exec(`SELECT pgrelay_notifier.send($1, ARRAY['u' || g || '@example.org'], 's', 'b') FROM generate_series(1, 3) g`, ch)
	}
	sort.Strings(names)
	logs := &syncLog{}
	e.startProcessor(func(c *actors.Config) {
		c.SMTPChannels = targets
		c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	testenv.Eventually(e.T, time.Minute, "27 sent and 6 failed", func() bool {
		return e.statusCount("sent") == 27 && e.statusCount("failed") == 6
	})
	require.Equal(t, 12, starttls.Count())
	require.Equal(t, 6, implicit.Count())
	require.Equal(t, 6, offers.Count())
	require.Equal(t, 3, noTLS.Count())
	perChannel := map[string]int{}
	for _, m := range slices.Concat(starttls.Messages(), implicit.Messages(), offers.Messages(), noTLS.Messages()) {
		ch, _, _ := strings.Cut(strings.Trim(m.From, "<>"), "@")
		w, ok := want[ch]
		require.True(t, ok, "a message of channel %q", ch)
		perChannel[ch]++
		require.Equal(t, w.tls, m.TLS, "%s: session over TLS", ch)
		require.Equal(t, w.mech, m.AuthMech, "%s: AUTH mechanism", ch)
		if w.mech != "" {
			require.Equal(t, "relay", m.AuthUser, ch)
		} else {
			require.Empty(t, m.AuthUser, ch)
		}
	}
	for ch := range want {
		require.Equal(t, 3, perChannel[ch], "%s: every notification once", ch)
	}
	for _, n := range e.notifications("WHERE status = 'failed'") {
		require.Zero(t, n.Attempts, "no session opened: no attempt reached the notification")
		require.Contains(t, *n.LastError, "gave up after 2 attempts", n.Channel)
		switch n.Channel {
		case "wrong":
			require.Contains(t, *n.LastError, "535")
		case "mandatory":
			require.Contains(t, *n.LastError, "STARTTLS")
		default:
			t.Fatalf("channel %s: unexpected failure: %s", n.Channel, *n.LastError)
		}
	}

	// Nowhere: not in logs (debug level), not in any table the Processor or
	// the notifier writes, not in errors.
	for _, secret := range []string{pw, wrong} {
		require.NotContains(t, logs.String(), secret)
		for _, q := range []string{
			`SELECT count(*) FROM pgrelay.log WHERE error LIKE '%' || $1 || '%'`,
			`SELECT count(*) FROM pgrelay_notifier.notifications WHERE last_error LIKE '%' || $1 || '%'`,
			`SELECT count(*) FROM pgrelay_notifier.debug_log WHERE message LIKE '%' || $1 || '%'`,
			`SELECT count(*) FROM pgrelay_notifier.status_events WHERE error LIKE '%' || $1 || '%'`,
			`SELECT count(*) FROM pgrelay.processors WHERE hostname LIKE '%' || $1 || '%'`,
		} {
			require.Zero(t, e.Count(q, secret), q)
		}
	}
	require.Contains(t, logs.String(), "smtp://127.0.0.1:", "targets are named, without credentials")

	// A configuration mistake is reported without the password.
	_, err = actors.New(actors.Config{DatabaseURL: e.URL, SMTPURL: "smtp://relay:" + pw + "@host:bad"})
	require.Error(t, err)
	require.NotContains(t, err.Error(), pw)
	require.ErrorIs(t, err, email.ErrInvalidTarget)
}

// With NATS configured every status change of a notification is published
// on pgrelay.notifier.<channel>.<status>, in order, and no NATS event (of the
// notifier or of the log) carries the SMTP password.
func TestActorEmailStatusEventsOnNATS(t *testing.T) {
	t.Parallel()
	n := startNATS(t, devenv.NATSConfig{})
	_, js := natsClient(t, n.URL())
	e := newEnv(t)
	const pw = "Nats-leak-s3cret"
	s := catcher(t, devenv.SMTPConfig{Username: "relay", Password: pw})
	s.RejectDomain("bad.example", 550, "no such user")
	e.Exec(`SELECT pgrelay_notifier.create_channel('mail', 'app@shop.example')`)
	e.Exec(`SELECT pgrelay_notifier.create_channel('locked', 'locked@shop.example', p_max_attempts := 1)`)
	var ok int64
	require.NoError(t, e.Pool.QueryRow(context.Background(),
		`SELECT pgrelay_notifier.send('mail', ARRAY['a@example.org'], 's', 'b')`).Scan(&ok))
	e.Exec(`SELECT pgrelay_notifier.send('mail', ARRAY['b@bad.example'], 's', 'b')`)
	e.Exec(`SELECT pgrelay_notifier.send('locked', ARRAY['c@example.org'], 's', 'b')`)
	u := s.URL() // smtp://relay:<pw>@127.0.0.1:port?auth=plain
	e.startProcessor(func(c *actors.Config) {
		withNATS(n.URL())(c)
		c.SMTPURL = u
		c.SMTPChannels = map[string]string{"locked": strings.Replace(u, pw, "Wrong-"+pw, 1)}
	})
	// 8 notifier events (queued, sending, sent or failed; the locked
	// channel's notification never reaches sending: its session never
	// opens) and 3 log events.
	testenv.Eventually(e.T, time.Minute, "11 events on NATS", func() bool { return streamMsgs(js, "PGRELAY_EVENTS") == 11 })
	msgs := consumeAll(t, js, "PGRELAY_EVENTS", "all", "pgrelay.>", 11)
	bySubject := map[string][]int64{}
	for _, m := range msgs {
		raw, err := json.Marshal(m.doc)
		require.NoError(t, err)
		require.NotContains(t, string(raw), pw, m.subject)
		if strings.HasPrefix(m.subject, "pgrelay.notifier.") {
			id, err := strconv.ParseInt(m.doc["notification_id"].(string), 10, 64) // schema 2
			require.NoError(t, err)
			bySubject[m.subject] = append(bySubject[m.subject], id)
		}
	}
	require.Len(t, bySubject["pgrelay.notifier.mail.queued"], 2)
	require.Len(t, bySubject["pgrelay.notifier.mail.sending"], 2)
	require.Equal(t, []int64{ok}, bySubject["pgrelay.notifier.mail.sent"])
	require.Len(t, bySubject["pgrelay.notifier.mail.failed"], 1)
	require.Len(t, bySubject["pgrelay.notifier.locked.queued"], 1)
	require.Empty(t, bySubject["pgrelay.notifier.locked.sending"])
	require.Len(t, bySubject["pgrelay.notifier.locked.failed"], 1)
	for _, m := range msgs {
		if m.subject == "pgrelay.notifier.mail.failed" {
			require.Equal(t, "smtp_5xx", m.doc["error_class"])
		}
		if m.subject == "pgrelay.notifier.locked.failed" {
			require.Equal(t, "smtp_5xx", m.doc["error_class"])
		}
	}
}

// A channel's p_timeout shorter than the server's reply to the end of DATA:
// the attempt is cut while the server may already have the message (here it
// does: the catcher keeps it after its delay). Sending it again could deliver
// it twice, so the next attempt does not: the event gives up and the
// notification ends failed, saying it may have been delivered — and it is
// delivered exactly once. A failure before the end of DATA (the server down)
// is retried as usual.
func TestActorEmailCutDataIsNotSentAgain(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := catcher(t, devenv.SMTPConfig{DataDelay: 3 * time.Second})
	e.Exec(`SELECT pgrelay_notifier.create_channel('slow', 'app@shop.example', p_timeout := '300 milliseconds',
		p_max_attempts := 50, p_retry_delay := '100 milliseconds')`)
	var id int64
	require.NoError(t, e.Pool.QueryRow(context.Background(),
		`SELECT pgrelay_notifier.send('slow', ARRAY['a@example.org'], 's', 'b')`).Scan(&id))
	e.startProcessor(func(c *actors.Config) { c.SMTPURL = s.URL() })
	defer func() {
		if t.Failed() {
			for _, l := range testenv.Column[string](t, e.Pool, `SELECT event || ' ' || attempt || ' ' || COALESCE(error, '') FROM pgrelay.log ORDER BY id`) {
				t.Log(l)
			}
		}
	}()
	testenv.Eventually(e.T, time.Minute, "the event to give up", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'gave_up'`) == 1
	})
	const cutAtData = `event = 'failed' AND error LIKE '%timed out after 300ms%'
		AND error LIKE '%which the server may have accepted%'`
	require.Equal(t, 1, e.Count(`SELECT count(*) FROM pgrelay.log WHERE `+cutAtData),
		"one attempt, cut at the channel's deadline while waiting for the reply")
	// Attempts cut before the end of DATA (a loaded machine can take the
	// whole timeout before it) were retried as usual; the one after the
	// attempt cut at the end of DATA gives up.
	cut := e.Count(`SELECT attempt FROM pgrelay.log WHERE ` + cutAtData)
	require.Equal(t, cut-1, e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'failed' AND attempt < $1
		AND error NOT LIKE '%which the server may have accepted%'`, cut), "the attempts before it were cut before the end of DATA")
	require.Equal(t, 1, e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'gave_up' AND attempt = $1
		AND error LIKE '%not sent again:%may have handed notification%'`, cut+1))
	require.Equal(t, "failed", e.notifierStatus(id))
	require.Contains(t, e.Text(`SELECT last_error FROM pgrelay_notifier.notifications WHERE notification_id = $1`, id),
		"it may have been delivered")
	testenv.Eventually(e.T, time.Minute, "the catcher to keep the cut message after its delay", func() bool { return s.Count() == 1 })
	require.Equal(t, id, idOf(t, s.Messages()[0].MessageID()))
	require.Equal(t, 1, e.Count(`SELECT count(*) FROM pgrelay.log WHERE event IN ('succeeded', 'gave_up')`),
		"nothing more ran")
}

// An email event that pgrelay core ends without running it (expired: the
// channel's p_expire_after passed before a Processor claimed it) fails its
// notification with the reason, so get_status() does not say queued forever;
// nothing is sent. A channel without expiry beside it sends as usual.
func TestActorEmailExpiredFailsTheNotification(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := catcher(t, devenv.SMTPConfig{})
	e.Exec(`SELECT pgrelay_notifier.create_channel('brief', 'brief@shop.example', p_expire_after := '50 milliseconds')`)
	e.Exec(`SELECT pgrelay_notifier.create_channel('lasting', 'lasting@shop.example')`)
	rows, err := e.Pool.Query(context.Background(),
		`SELECT pgrelay_notifier.send('brief', ARRAY['u' || g || '@example.org'], 's', 'b') FROM generate_series(1, 5) g`)
	require.NoError(t, err)
	expired, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)
	var kept int64
	require.NoError(t, e.Pool.QueryRow(context.Background(),
		`SELECT pgrelay_notifier.send('lasting', ARRAY['k@example.org'], 's', 'b')`).Scan(&kept))
	testenv.Eventually(e.T, time.Minute, "the brief channel's events to expire", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.queue WHERE channel = 'brief' AND expires_at < now()`) == 5
	})
	e.startProcessor(func(c *actors.Config) { c.SMTPURL = s.URL() })
	testenv.Eventually(e.T, time.Minute, "the expired notifications to be failed", func() bool {
		return e.statusCount("failed") == 5 && e.notifierStatus(kept) == "sent"
	})
	for _, id := range expired {
		require.Equal(t, "failed", e.notifierStatus(id))
		n := e.notifications("WHERE notification_id = $1", id)[id]
		require.NotNil(t, n.LastError)
		require.Contains(t, *n.LastError, "expired: the channel's expire_after passed before attempt 1 could run")
		require.Zero(t, n.Attempts, "never tried")
	}
	require.Equal(t, 5, e.Count(`SELECT count(*) FROM pgrelay_notifier.status_events WHERE status = 'failed'
		AND error LIKE 'expired:%'`))
	testenv.Eventually(e.T, time.Minute, "5 expiries in the log", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'expired' AND channel = 'brief'`) == 5
	})
	require.Equal(t, 1, s.Count(), "an expired email is never sent")
	m, _ := s.Last()
	require.Equal(t, kept, idOf(t, m.MessageID()))
}

// An email event given up for a failure outside the handler (its channel
// actor crashed on it at every attempt, so the handler never ran) fails its
// notification with the reason, instead of leaving it queued.
func TestActorEmailGivenUpOutsideTheHandlerFailsTheNotification(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := catcher(t, devenv.SMTPConfig{})
	e.Exec(`SELECT pgrelay_notifier.create_channel('mail', 'app@shop.example', p_max_attempts := 2,
		p_retry_delay := '10 milliseconds')`)
	var doomed, fine int64
	require.NoError(t, e.Pool.QueryRow(context.Background(),
		`SELECT pgrelay_notifier.send('mail', ARRAY['doomed@example.org'], 's', 'b')`).Scan(&doomed))
	require.NoError(t, e.Pool.QueryRow(context.Background(),
		`SELECT pgrelay_notifier.send('mail', ARRAY['fine@example.org'], 's', 'b')`).Scan(&fine))
	poison := strconv.FormatInt(doomed, 10)
	e.startProcessor(func(c *actors.Config) {
		c.SMTPURL = s.URL()
		actors.SetTestHook(c, func(name string, msg any) {
			if p, ok := actors.RunEventPayload(msg); ok && name == "none" && p == poison {
				panic("channel actor bug")
			}
		})
	})
	testenv.Eventually(e.T, time.Minute, "the poisoned notification to fail and the other to be sent", func() bool {
		return e.notifierStatus(doomed) == "failed" && e.notifierStatus(fine) == "sent"
	})
	n := e.notifications("WHERE notification_id = $1", doomed)[doomed]
	require.NotNil(t, n.LastError)
	require.Contains(t, *n.LastError, "gave up after 2 attempts: internal error: actor")
	require.Contains(t, *n.LastError, "channel actor bug")
	require.Zero(t, n.Attempts, "the handler never ran")
	testenv.Eventually(e.T, time.Minute, "the give-up in the log", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'gave_up' AND attempt = 2`) == 1
	})
	require.Equal(t, 1, s.Count())
}

// An email event whose notification does not exist on this node (never
// created, deleted, or not replicated here) never ends succeeded: it is
// retried with the channel's backoff, which covers replication lag, and
// then gives up naming the notification. Nothing is sent.
func TestActorEmailMissingNotificationFails(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := catcher(t, devenv.SMTPConfig{})
	e.Exec(`SELECT pgrelay_notifier.create_channel('mail', 'app@shop.example', p_max_attempts := 3,
		p_retry_delay := '10 milliseconds')`)
	var origin int64
	require.NoError(t, e.Pool.QueryRow(context.Background(),
		`SELECT pgrelay.notify('mail', '424242424242')`).Scan(&origin))
	e.startProcessor(func(c *actors.Config) { c.SMTPURL = s.URL() })
	testenv.Eventually(e.T, time.Minute, "the event to end", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.log WHERE origin_id = $1
			AND event IN ('succeeded', 'gave_up')`, origin) == 1
	})
	require.Zero(t, e.Count(`SELECT count(*) FROM pgrelay.log WHERE origin_id = $1 AND event = 'succeeded'`, origin),
		"an email event whose notification does not exist succeeded")
	require.Equal(t, 2, e.Count(`SELECT count(*) FROM pgrelay.log WHERE origin_id = $1 AND event = 'failed'`, origin),
		"retried before giving up")
	why := e.Text(`SELECT error FROM pgrelay.log WHERE origin_id = $1 AND event = 'gave_up'`, origin)
	require.Contains(t, why, "notification 424242424242 does not exist on node 0")
	require.Zero(t, s.Count())
}

// One send() is delivered at most once whatever events point at it: three
// more events of the same notification (notify_many) end without sending
// and say why. An event of another channel never sends a notification, not
// even one whose own channel is paused; the notification goes out through
// its own channel once that is resumed.
func TestActorEmailOneSendWhateverEventsPointAtIt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := catcher(t, devenv.SMTPConfig{})
	e.Exec(`SELECT pgrelay_notifier.create_channel('mail', 'mail@shop.example')`)
	e.Exec(`SELECT pgrelay_notifier.create_channel('other', 'other@shop.example')`)
	var dup, held int64
	require.NoError(t, e.Pool.QueryRow(context.Background(),
		`SELECT pgrelay_notifier.send('mail', ARRAY['dup@example.org'], 's', 'b')`).Scan(&dup))
	e.Exec(`SELECT pgrelay.notify_many('mail', ARRAY[$1::text, $1::text, $1::text])`, strconv.FormatInt(dup, 10))
	require.NoError(t, e.Pool.QueryRow(context.Background(),
		`SELECT pgrelay_notifier.send('mail', ARRAY['held@example.org'], 's', 'b')`).Scan(&held))
	e.Exec(`SELECT pgrelay.update('mail', p_paused := true)`)
	var stray int64
	require.NoError(t, e.Pool.QueryRow(context.Background(),
		`SELECT pgrelay.notify('other', $1)`, strconv.FormatInt(held, 10)).Scan(&stray))
	e.startProcessor(func(c *actors.Config) { c.SMTPURL = s.URL() })
	testenv.Eventually(e.T, time.Minute, "the stray event to end", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.log WHERE origin_id = $1 AND event IN ('succeeded', 'gave_up')`, stray) == 1
	})
	require.Equal(t, "gave_up", e.Text(`SELECT event FROM pgrelay.log WHERE origin_id = $1`, stray))
	require.Contains(t, e.Text(`SELECT error FROM pgrelay.log WHERE origin_id = $1`, stray),
		fmt.Sprintf("notification %d was created for channel 'mail', not 'other'", held))
	require.Equal(t, "queued", e.notifierStatus(held), "the stray event left the notification alone")

	e.Exec(`SELECT pgrelay.update('mail', p_paused := false)`)
	testenv.Eventually(e.T, time.Minute, "every mail event to end", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.log WHERE channel = 'mail' AND event IN ('succeeded', 'gave_up')`) == 5
	})
	require.Equal(t, 2, s.Count(), "each notification once")
	for _, m := range s.Messages() {
		require.Equal(t, "mail@shop.example", strings.Trim(m.From, "<>"))
	}
	require.Equal(t, "sent", e.notifierStatus(dup))
	require.Equal(t, "sent", e.notifierStatus(held))
	require.Equal(t, 1, e.Count(`SELECT attempts FROM pgrelay_notifier.notifications WHERE notification_id = $1`, dup))
	require.Equal(t, 3, e.Count(`SELECT count(*) FROM pgrelay.log WHERE channel = 'mail' AND event = 'gave_up'
		AND error LIKE $1`, fmt.Sprintf("not sent: notification %d %%one send() is delivered at most once", dup)))
	require.Equal(t, 2, e.Count(`SELECT count(*) FROM pgrelay.log WHERE channel = 'mail' AND event = 'succeeded'`))
}

// The message is fetched, and the notification moved to sending, only once
// an SMTP connection is free: with a pool of one connection and a slow
// server, the second email starts sending after the first was accepted, so
// it stays queued (and can be cancelled) while it waits.
func TestActorEmailFetchedOnlyWithAFreeConnection(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := catcher(t, devenv.SMTPConfig{DataDelay: 500 * time.Millisecond})
	e.Exec(`SELECT pgrelay_notifier.create_channel('mail', 'app@shop.example')`)
	e.Exec(`SELECT pgrelay_notifier.send('mail', ARRAY['u' || g || '@example.org'], 's', 'b') FROM generate_series(1, 3) g`)
	e.startProcessor(func(c *actors.Config) { c.SMTPURL = s.URL() + "?pool=1" })
	testenv.Eventually(e.T, time.Minute, "3 notifications to be sent", func() bool { return e.statusCount("sent") == 3 })
	msgs := s.Messages()
	require.Len(t, msgs, 3)
	for i := 1; i < len(msgs); i++ {
		id := idOf(t, msgs[i].MessageID())
		var started time.Time
		require.NoError(t, e.Pool.QueryRow(context.Background(), `SELECT at FROM pgrelay_notifier.status_events
			WHERE notification_id = $1 AND status = 'sending'`, id).Scan(&started))
		require.True(t, started.After(msgs[i-1].At),
			"notification %d went to sending at %s, before the connection was free (previous message accepted at %s)",
			id, started.Format(time.RFC3339Nano), msgs[i-1].At.Format(time.RFC3339Nano))
	}
}

// With a fast server and a backlog, a session's worker passes the gate for
// several messages in one transaction (fewer transactions than emails: rows
// of one transaction share their xmin), and accepted messages are recorded
// sent together with those accepted meanwhile on the other sessions: fewer
// transactions than emails. How many fewer follows the sessions' pace, not a
// fixed share: a gate takes as many messages as fit the batch budget at the
// measured time per message (TestPoolBatchesByPace), and a record holds the
// accepts that fell against its commit. 93 gates of 400 were seen in a quick
// run, 202 under -race, 308 under -race on a machine at load 17. Every email
// sent once, each with one 'sending' and one 'sent' status event, in that
// order, and one attempt.
func TestActorEmailGatesAndRecordsInBatches(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := catcher(t, devenv.SMTPConfig{})
	e.Exec(`SELECT pgrelay_notifier.create_channel('mail', 'app@shop.example')`)
	const n = 400
	e.Exec(`SELECT pgrelay_notifier.send('mail', ARRAY['u' || g || '@example.org'], 's', 'b')
		FROM generate_series(1, $1::int) g`, n)
	e.startProcessor(func(c *actors.Config) { c.SMTPURL = s.URL() + "?pool=2" })
	testenv.Eventually(e.T, time.Minute, "every notification to be sent", func() bool { return e.statusCount("sent") == n })
	require.Equal(t, n, s.Count(), "each email once")
	gates := e.Count(`SELECT count(DISTINCT xmin::text) FROM pgrelay_notifier.status_events WHERE status = 'sending'`)
	records := e.Count(`SELECT count(DISTINCT xmin::text) FROM pgrelay_notifier.status_events WHERE status = 'sent'`)
	t.Logf("%d emails: gated in %d transactions, recorded sent in %d", n, gates, records)
	require.Less(t, gates, n, "gate transactions")
	require.Less(t, records, n, "record transactions")
	require.Equal(t, n, e.Count(`SELECT count(*) FROM pgrelay_notifier.notifications WHERE attempts = 1`))
	require.Zero(t, e.Count(`SELECT count(*) FROM (SELECT notification_id, array_agg(status ORDER BY id) AS s
		FROM pgrelay_notifier.status_events GROUP BY notification_id) x WHERE s <> ARRAY['queued', 'sending', 'sent']`))
}

// A failed attempt is logged at warning level (the default level shows it)
// with the channel, the notification, the attempt, the target without
// credentials and the reason: a transient one (the server does not answer:
// retried, then the notification fails) and a permanent one (a 5xx reply).
func TestActorEmailFailedAttemptsWarn(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const pw = "Warn-s3cret"
	s := catcher(t, devenv.SMTPConfig{Username: "relay", Password: pw})
	s.RejectDomain("bad.example", 550, "no such user")
	// A port nothing listens on: the server is down.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	downAddr := ln.Addr().String()
	require.NoError(t, ln.Close())
	downURL := "smtp://relay:" + pw + "@" + downAddr + "?tls=none"
	e.Exec(`SELECT pgrelay_notifier.create_channel('mail', 'app@shop.example')`)
	e.Exec(`SELECT pgrelay_notifier.create_channel('down', 'down@shop.example', p_max_attempts := 2,
		p_retry_delay := '50 milliseconds')`)
	var refused, unsent int64
	require.NoError(t, e.Pool.QueryRow(context.Background(),
		`SELECT pgrelay_notifier.send('mail', ARRAY['x@bad.example'], 's', 'b')`).Scan(&refused))
	require.NoError(t, e.Pool.QueryRow(context.Background(),
		`SELECT pgrelay_notifier.send('down', ARRAY['y@example.org'], 's', 'b')`).Scan(&unsent))
	logs := &syncLog{}
	e.startProcessor(func(c *actors.Config) {
		c.SMTPURL = s.URL()
		c.SMTPChannels = map[string]string{"down": downURL}
		c.Logger = slog.New(slog.NewTextHandler(logs, nil)) // Info and above, as pgrelay run
	})
	testenv.Eventually(e.T, time.Minute, "both notifications to fail", func() bool { return e.statusCount("failed") == 2 })
	var warns []string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "level=WARN") && strings.Contains(l, "email:") {
			warns = append(warns, l)
		}
	}
	find := func(parts ...string) string {
		t.Helper()
		for _, l := range warns {
			all := true
			for _, p := range parts {
				all = all && strings.Contains(l, p)
			}
			if all {
				return l
			}
		}
		t.Fatalf("no warning with %q among:\n%s", parts, strings.Join(warns, "\n"))
		return ""
	}
	target := "smtp://" + downAddr
	find("channel=down", fmt.Sprintf("notification=%d", unsent), "attempt=1", "max_attempts=2", target, "connection refused")
	find("channel=down", fmt.Sprintf("notification=%d", unsent), "attempt=2", "max_attempts=2", target, "connection refused")
	find("channel=mail", fmt.Sprintf("notification=%d", refused), "attempt=1", "550", "no such user")
	require.NotContains(t, logs.String(), pw)
}
