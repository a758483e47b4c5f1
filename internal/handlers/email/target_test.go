package email

import (
	"bytes"
	"errors"
	"fmt"
	"net/textproto"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	mail "github.com/wneessen/go-mail"

	"github.com/pgrelay/pgrelay/events/store"
	"github.com/pgrelay/pgrelay/internal/secret"
)

func TestParseTarget(t *testing.T) {
	t.Parallel()
	tg, err := ParseTarget("smtp://user:s3cret@mail.example.com")
	require.NoError(t, err)
	require.Equal(t, "mail.example.com", tg.Host)
	require.Equal(t, 587, tg.Port)
	require.False(t, tg.ImplicitTLS)
	require.Equal(t, mail.TLSMandatory, tg.TLSPolicy, "credentials to a remote host: STARTTLS is required")
	require.Equal(t, mail.SMTPAuthAutoDiscover, tg.Auth)
	require.Equal(t, "user", tg.Username)
	require.Equal(t, "smtp://mail.example.com:587", tg.String(), "String never shows credentials")

	tg, err = ParseTarget("smtps://u:p@mail.example.com?auth=cram-md5&timeout=5s&pool=8&idle=2m&helo=me.example")
	require.NoError(t, err)
	require.Equal(t, 465, tg.Port)
	require.True(t, tg.ImplicitTLS)
	require.Equal(t, mail.SMTPAuthCramMD5, tg.Auth)
	require.Equal(t, 5*time.Second, tg.Timeout)
	require.Equal(t, 8, tg.PoolSize)
	require.Equal(t, 2*time.Minute, tg.IdleTimeout)
	require.Equal(t, "me.example", tg.HELO)

	tg, err = ParseTarget("smtp://127.0.0.1:2525?tls=mandatory&insecure_skip_verify=true")
	require.NoError(t, err)
	require.Equal(t, 2525, tg.Port)
	require.Equal(t, mail.TLSMandatory, tg.TLSPolicy)
	require.True(t, tg.InsecureSkipVerify)
	require.Equal(t, mail.SMTPAuthNoAuth, tg.Auth)

	tg, err = ParseTarget("smtp://u:p@h:25?auth=login&tls=none")
	require.NoError(t, err)
	require.Equal(t, mail.SMTPAuthLogin, tg.Auth)
	require.Equal(t, mail.NoTLS, tg.TLSPolicy)
}

// With credentials and a host other than loopback, STARTTLS is mandatory unless
// the URL turns it off explicitly: a stripped STARTTLS offer must not send the
// password in clear. Without credentials, or on loopback, it stays
// opportunistic.
func TestParseTargetCredentialsRequireTLS(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]mail.TLSPolicy{
		"smtp://user:pw@mail.example.com":                   mail.TLSMandatory,
		"smtp://user@mail.example.com?auth=plain":           mail.TLSMandatory,
		"smtp://user:pw@10.0.0.5:25":                        mail.TLSMandatory,
		"smtp://user:pw@mail.example.com?tls=opportunistic": mail.TLSOpportunistic,
		"smtp://user:pw@mail.example.com?tls=none":          mail.NoTLS,
		"smtp://mail.example.com":                           mail.TLSOpportunistic,
		"smtp://user:pw@localhost:2525":                     mail.TLSOpportunistic,
		"smtp://user:pw@127.0.0.1:2525":                     mail.TLSOpportunistic,
		"smtp://user:pw@[::1]:2525":                         mail.TLSOpportunistic,
	} {
		tg, err := ParseTarget(raw)
		require.NoError(t, err, raw)
		assert.Equal(t, want, tg.TLSPolicy, raw)
	}
}

// No error of a bad URL shows the password, whatever is wrong with it.
func TestParseTargetErrorsNeverShowThePassword(t *testing.T) {
	t.Parallel()
	const pw = "hunter2-PW"
	for _, raw := range []string{
		"smtp://user:" + pw + "@host:notaport",
		"smtp://user:" + pw + "@host:99999",
		"http://user:" + pw + "@host",
		"smtp://user:" + pw + "@host?tls=sometimes",
		"smtp://user:" + pw + "@host?auth=magic",
		"smtp://user:" + pw + "@host?pool=0",
		"smtp://user:" + pw + "@host?bogus=1",
		"smtp://user:" + pw + "@host/path",
		"smtp://user:" + pw + "@",
		"smtp:user:" + pw + "@host",
		"smtp://user:" + pw + "@ho st",
		"smtp://user:" + pw + "@host\x7f",
		"smtp://:" + pw + "@host?auth=plain",
	} {
		_, err := ParseTarget(raw)
		require.Error(t, err, raw)
		require.True(t, errors.Is(err, ErrInvalidTarget), raw)
		require.NotContains(t, err.Error(), pw, raw)
		require.NotContains(t, secret.URL(raw), pw, raw)
	}
	cfg := Config{Default: "smtp://u:" + pw + "@h?pool=x", Channels: map[string]string{"c": "smtp://u:" + pw + "@h?tls=x"}}
	require.NotContains(t, cfg.Validate().Error(), pw)
	cfg = Config{Channels: map[string]string{"c": "smtp://u:" + pw + "@h?tls=x"}}
	require.NotContains(t, cfg.Validate().Error(), pw)
	require.Error(t, Config{MessageIDDomain: "not a domain"}.Validate())
	require.NoError(t, Config{MessageIDDomain: "mail.example.com"}.Validate())
	require.Equal(t, "smtp://host:25", secret.URL("smtp://user:"+pw+"@host:25?auth=plain"))
}

func TestPermanentOnlyFor5xxRepliesToTheMessage(t *testing.T) {
	t.Parallel()
	r := func(c int) error { return &textproto.Error{Code: c, Msg: "x"} }
	require.True(t, Permanent(fmt.Errorf("DATA: %w", r(554))))
	require.True(t, Permanent(fmt.Errorf("MAIL FROM <a@b>: %w", r(550))))
	require.False(t, Permanent(fmt.Errorf("MAIL FROM <a@b>: %w", r(451))))
	require.True(t, Permanent(&rcptError{rcpts: []string{"<a@b>", "<c@d>"}, errs: []error{r(550), r(553)}}))
	require.False(t, Permanent(&rcptError{rcpts: []string{"<a@b>", "<c@d>"}, errs: []error{r(550), r(452)}}),
		"a recipient that may succeed later makes the whole message worth retrying")
	require.False(t, Permanent(&connectError{err: fmt.Errorf("SMTP AUTH failed: %w", r(535))}),
		"a failure to open a session says nothing about the message")
	require.False(t, Permanent(errors.New("dial tcp 127.0.0.1:1: connection refused")))
}

func TestBuildMessage(t *testing.T) {
	t.Parallel()
	html := "<p>Hi Bob</p>"
	created := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	n := &store.Notification{ID: 123456789, Channel: "c", From: "App <app@example.com>",
		To: []string{"Bob <bob@example.org>"}, Cc: []string{"cc@example.org"}, Bcc: []string{"hidden@example.org"},
		Subject: "Grüße", BodyText: "Hi Bob", BodyHTML: &html,
		Headers: map[string]string{"Reply-To": "help@example.com", "X-Order": "42"}, CreatedAt: created}
	m, env, err := buildMessage(n, "mail.example.com")
	require.NoError(t, err)
	require.Equal(t, "<app@example.com>", env.from)
	require.Equal(t, []string{"<bob@example.org>", "<cc@example.org>", "<hidden@example.org>"}, env.rcpts)
	var b bytes.Buffer
	_, err = m.WriteTo(&b)
	require.NoError(t, err)
	out := b.String()
	require.Contains(t, out, "Message-ID: <123456789@mail.example.com>\r\n")
	require.Equal(t, "<123456789@mail.example.com>", MessageID(123456789, "mail.example.com"))
	require.Contains(t, out, "Date: Wed, 04 Mar 2026 05:06:07 +0000\r\n", "Date is when the notification was composed")
	require.Contains(t, out, "X-Order: 42\r\n")
	require.Contains(t, out, "Reply-To: help@example.com\r\n")
	require.Contains(t, out, "multipart/alternative")
	require.NotContains(t, strings.ToLower(out), "hidden@example.org", "Bcc is only in the envelope")

	// The same notification builds the same headers again: a resend is the
	// same message for the receiver.
	m2, _, err := buildMessage(n, "mail.example.com")
	require.NoError(t, err)
	require.Equal(t, m.GetMessageID(), m2.GetMessageID())

	n.From = "not an address"
	_, _, err = buildMessage(n, "x")
	require.Error(t, err)
}
