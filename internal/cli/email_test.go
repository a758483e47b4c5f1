package cli_test

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/devenv"
	"github.com/pgrelay/pgrelay/internal/testenv"
)

func smtpCatcher(t *testing.T, cfg devenv.SMTPConfig) *devenv.SMTP {
	t.Helper()
	s, err := devenv.StartSMTP(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestRunEmailKilledMidBatch: a Processor killed with SIGKILL while it sends
// a batch of emails; a second one finishes. No notification arrives twice:
// those the first one was sending when it died (it may have handed them to
// the server before it could record it) end failed, saying they may have
// been delivered, and are not sent again; every other one ends sent and
// arrived exactly once.
func TestRunEmailKilledMidBatch(t *testing.T) {
	t.Parallel()
	const n = 300
	d := newDB(t)
	s := smtpCatcher(t, devenv.SMTPConfig{DataDelay: 2 * time.Millisecond})
	d.Exec(`SELECT pgrelay_notifier.create_channel('mail', 'app@shop.example')`)
	ids := d.IDs(`SELECT pgrelay_notifier.send('mail', ARRAY['n' || g || '@example.org'], 'Order ' || g, 'b')
		FROM generate_series(1, $1::int) g`, n)
	// The recipient names the notification, whatever the Message-ID says.
	byRcpt := map[string]int64{}
	for i, id := range ids {
		byRcpt["n"+strconv.Itoa(i+1)+"@example.org"] = id
	}
	env := []string{"PGRELAY_SMTP_URL=" + s.URL()}
	args := []string{"run", "--database-url", d.URL, "--heartbeat-interval", "200ms", "--dead-after", "1s",
		"--concurrency", "16"}

	first := startCLI(t, env, args...)
	testenv.Eventually(t, 60*time.Second, "50 emails from the first processor", func() bool {
		return s.Count() >= 50 || first.exited()
	})
	require.False(t, first.exited(), "the first processor exited on its own")
	first.signal(syscall.SIGKILL)
	assert.Equal(t, -1, first.wait(10*time.Second))
	sentBefore := d.Count(`SELECT count(*) FROM pgrelay_notifier.notifications WHERE status = 'sent'`)
	require.Less(t, sentBefore, n, "the batch outlasted the first processor")
	t.Logf("killed after %d of %d emails were recorded sent (%d received)", sentBefore, n, s.Count())

	second := startCLI(t, env, args...)
	testenv.Eventually(t, 90*time.Second, "every notification to end", func() bool {
		return d.Count(`SELECT count(*) FROM pgrelay_notifier.notifications WHERE status IN ('sent', 'failed')`) == n || second.exited()
	})
	require.False(t, second.exited(), "the second processor exited on its own")
	second.signal(syscall.SIGTERM)
	require.Equal(t, 0, second.wait(60*time.Second))

	got := map[int64][]string{}
	for _, m := range s.Messages() {
		require.Len(t, m.To, 1)
		id, ok := byRcpt[strings.Trim(m.To[0], "<>")]
		require.True(t, ok, "unexpected recipient %v", m.To)
		got[id] = append(got[id], m.MessageID())
	}
	failed := map[int64]bool{}
	for _, id := range d.IDs(`SELECT notification_id FROM pgrelay_notifier.notifications WHERE status = 'failed'
		AND last_error LIKE '%may have been delivered%'`) {
		failed[id] = true
	}
	inDoubtDelivered := 0
	for _, id := range ids {
		require.LessOrEqual(t, len(got[id]), 1, "notification %d arrived %d times", id, len(got[id]))
		if failed[id] {
			inDoubtDelivered += len(got[id])
			continue
		}
		require.Len(t, got[id], 1, "notification %d ended sent and arrived once", id)
		require.Equal(t, "<"+strconv.FormatInt(id, 10)+"@pgrelay>", got[id][0])
	}
	require.LessOrEqual(t, len(failed), 16, "only those in flight at the kill (--concurrency 16)")
	t.Logf("%d in doubt at the kill, ended failed (%d of them had arrived); no duplicate", len(failed), inDoubtDelivered)
	assert.Equal(t, n-len(failed), d.Count(`SELECT count(*) FROM pgrelay_notifier.notifications WHERE status = 'sent'`))
	d.assertClean()
}

// TestRunEmailConfigFile: --config maps a channel to its own SMTP server and
// sets the Message-ID domain; PGRELAY_SMTP_URL (as --smtp-url) replaces the
// file's smtp.default, which serves when it is not given, and never a mapped
// channel's server; mistakes in either are usage errors that never show the
// password.
func TestRunEmailConfigFile(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	def := smtpCatcher(t, devenv.SMTPConfig{})
	own := smtpCatcher(t, devenv.SMTPConfig{Username: "u", Password: "Cfg-s3cret"})
	fileDef := smtpCatcher(t, devenv.SMTPConfig{})
	dir := t.TempDir()
	cfg := filepath.Join(dir, "pgrelay.json")
	require.NoError(t, os.WriteFile(cfg, []byte(`{"smtp": {
		"default": "`+fileDef.URL()+`",
		"channels": {"mapped": "`+own.URL()+`"},
		"message_id_domain": "shop.example"}}`), 0o600))
	d.Exec(`SELECT pgrelay_notifier.create_channel('mapped', 'mapped@shop.example')`)
	d.Exec(`SELECT pgrelay_notifier.create_channel('other', 'other@shop.example')`)
	mapped := d.IDs(`SELECT pgrelay_notifier.send('mapped', ARRAY['a@example.org'], 's', 'b') FROM generate_series(1, 5)`)
	d.IDs(`SELECT pgrelay_notifier.send('other', ARRAY['b@example.org'], 's', 'b') FROM generate_series(1, 5)`)

	p := startCLI(t, []string{"PGRELAY_SMTP_URL=" + def.URL()}, "run", "--database-url", d.URL, "--config", cfg)
	testenv.Eventually(t, 60*time.Second, "10 emails", func() bool {
		return d.Count(`SELECT count(*) FROM pgrelay_notifier.notifications WHERE status = 'sent'`) == 10 || p.exited()
	})
	p.signal(syscall.SIGTERM)
	require.Equal(t, 0, p.wait(60*time.Second))
	require.Equal(t, 5, own.Count())
	require.Equal(t, 5, def.Count(), "PGRELAY_SMTP_URL wins over the file's default")
	require.Zero(t, fileDef.Count())
	var want, got []string
	for _, id := range mapped {
		want = append(want, "<"+strconv.FormatInt(id, 10)+"@shop.example>")
	}
	for _, m := range own.Messages() {
		require.Equal(t, "u", m.AuthUser)
		require.Contains(t, m.From, "mapped@")
		got = append(got, m.MessageID())
	}
	require.ElementsMatch(t, want, got, "Message-IDs use the configured domain")
	require.NotContains(t, p.stderr.String(), "Cfg-s3cret")

	// Without PGRELAY_SMTP_URL the file's default serves.
	d.IDs(`SELECT pgrelay_notifier.send('other', ARRAY['c@example.org'], 's', 'b') FROM generate_series(1, 2)`)
	p = startCLI(t, nil, "run", "--database-url", d.URL, "--config", cfg)
	testenv.Eventually(t, 60*time.Second, "2 more emails", func() bool {
		return d.Count(`SELECT count(*) FROM pgrelay_notifier.notifications WHERE status = 'sent'`) == 12 || p.exited()
	})
	p.signal(syscall.SIGTERM)
	require.Equal(t, 0, p.wait(60*time.Second))
	require.Equal(t, 2, fileDef.Count(), "the file's default without --smtp-url")
	require.Equal(t, 5, def.Count())

	// Mistakes: exit 2 before connecting anything, without the password.
	bad := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"smtp": {"default": "smtp://u:Cfg-s3cret@host:99999"}}`), 0o600))
	notJSON := filepath.Join(dir, "notjson.json")
	require.NoError(t, os.WriteFile(notJSON, []byte(`{"smtp": {"default": "smtp://u:Cfg-s3cret@host"`), 0o600))
	unknown := filepath.Join(dir, "unknown.json")
	require.NoError(t, os.WriteFile(unknown, []byte(`{"smpt": {}}`), 0o600))
	for name, args := range map[string][]string{
		"bad URL in file":     {"--config", bad},
		"not JSON":            {"--config", notJSON},
		"unknown section":     {"--config", unknown},
		"missing file":        {"--config", filepath.Join(dir, "missing.json")},
		"bad --smtp-url":      {"--smtp-url", "smtp://u:Cfg-s3cret@host?tls=sometimes"},
		"wrong --smtp-url":    {"--smtp-url", "http://u:Cfg-s3cret@host"},
		"unparseable smtpurl": {"--smtp-url", "smtp://u:Cfg-s3cret@ho st"},
	} {
		code, out, errOut := cliMain(append([]string{"run", "--database-url", closedPortURL(t)}, args...)...)
		assert.Equal(t, 2, code, name)
		assert.Empty(t, out, name)
		assert.Len(t, lines(errOut), 1, "%s: %s", name, errOut)
		assert.NotContains(t, errOut, "Cfg-s3cret", name)
	}
	code, _, errOut := cliMain("run", "--database-url", closedPortURL(t), "--config", unknown)
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, `unknown field "smpt"`)
}

// TestRunChecksSMTPAtStart: `pgrelay run` opens a session to each SMTP
// server at start (EHLO, STARTTLS per policy, AUTH) and logs one warning
// per server that fails, naming it without credentials, the channels it
// serves and the reason; a server that works gets an info line and no
// warning. The Processor keeps running and sends through the good server.
func TestRunChecksSMTPAtStart(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	const pw = "Check-s3cret"
	good := smtpCatcher(t, devenv.SMTPConfig{Username: "u", Password: pw})
	locked := smtpCatcher(t, devenv.SMTPConfig{Username: "u", Password: pw})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	downAddr := ln.Addr().String()
	require.NoError(t, ln.Close())
	cfg := filepath.Join(t.TempDir(), "pgrelay.json")
	require.NoError(t, os.WriteFile(cfg, []byte(`{"smtp": {"channels": {
		"locked": "`+strings.Replace(locked.URL(), pw, "Wrong-"+pw, 1)+`",
		"down": "smtp://u:`+pw+`@`+downAddr+`?tls=none"}}}`), 0o600))
	d.Exec(`SELECT pgrelay_notifier.create_channel('mail', 'app@shop.example')`)
	d.IDs(`SELECT pgrelay_notifier.send('mail', ARRAY['a@example.org'], 's', 'b')`)

	p := startCLI(t, []string{"PGRELAY_SMTP_URL=" + good.URL()}, "run", "--database-url", d.URL, "--config", cfg)
	testenv.Eventually(t, 60*time.Second, "three SMTP check lines", func() bool {
		return strings.Count(p.stderr.String(), "smtp check:") == 3 || p.exited()
	})
	testenv.Eventually(t, 60*time.Second, "the email to be sent", func() bool {
		return d.Count(`SELECT count(*) FROM pgrelay_notifier.notifications WHERE status = 'sent'`) == 1 || p.exited()
	})
	require.False(t, p.exited(), "the Processor keeps running")
	require.Equal(t, 1, good.Count())
	require.Equal(t, "u", good.Messages()[0].AuthUser)
	var warns, infos []string
	for _, l := range lines(p.stderr.String()) {
		switch {
		case strings.Contains(l, "smtp check:") && strings.Contains(l, "level=WARN"):
			warns = append(warns, l)
		case strings.Contains(l, "smtp check:"):
			infos = append(infos, l)
		}
	}
	require.Len(t, warns, 2, strings.Join(warns, "\n"))
	require.Len(t, infos, 1, strings.Join(infos, "\n"))
	require.Contains(t, infos[0], "level=INFO")
	require.Contains(t, infos[0], "target=smtp://"+good.Addr())
	require.Contains(t, infos[0], "serves=default")
	byTarget := map[string]string{}
	for _, l := range warns {
		for _, a := range []string{locked.Addr(), downAddr} {
			if strings.Contains(l, "target=smtp://"+a+" ") {
				byTarget[a] = l
			}
		}
	}
	require.Contains(t, byTarget[locked.Addr()], "serves=locked")
	require.Contains(t, byTarget[locked.Addr()], "535")
	require.Contains(t, byTarget[downAddr], "serves=down")
	require.Contains(t, byTarget[downAddr], "connection refused")
	require.NotContains(t, p.stderr.String(), pw)

	p.signal(syscall.SIGTERM)
	require.Equal(t, 0, p.wait(60*time.Second))
}
