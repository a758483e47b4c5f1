package devenv_test

import (
	"net/smtp"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/devenv"
)

// A catcher with SaveDir keeps every message it accepts there as
// <time>-<n>.eml, the bytes as received; Saved lists them, and a catcher
// started later on the same directory lists them too, while its Messages and
// Count start empty.
func TestSMTPSaveDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "mail")
	c, err := devenv.StartSMTP(devenv.SMTPConfig{SaveDir: dir})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })

	raw := "From: Team <team@example.com>\r\nTo: New Hire <new@example.com>\r\n" +
		"Subject: =?utf-8?q?Welcome_=C3=A0_bord?=\r\n\r\nHello.\r\n"
	require.NoError(t, smtp.SendMail(c.Addr(), nil, "bounce@example.com", []string{"new@example.com"}, []byte(raw)))
	require.Equal(t, 1, c.Count())
	got := c.Messages()[0]

	saved := c.Saved(5)
	require.Len(t, saved, 1)
	s := saved[0]
	require.Equal(t, dir, filepath.Dir(s.File))
	require.Regexp(t, regexp.MustCompile(`^\d{8}T\d{6}\.\d{9}Z-1\.eml$`), filepath.Base(s.File))
	require.Equal(t, "Team <team@example.com>", s.From)
	require.Equal(t, "New Hire <new@example.com>", s.To)
	require.Equal(t, "Welcome à bord", s.Subject)
	b, err := os.ReadFile(s.File)
	require.NoError(t, err)
	require.Equal(t, got.Data, b, "the file holds the message as received")
	require.Equal(t, raw, string(b))
	st, err := os.Stat(s.File)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm(), "mail may hold personal data")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "nothing but the message")

	// A second catcher on the same directory lists what the first kept.
	require.NoError(t, c.Close())
	c2, err := devenv.StartSMTP(devenv.SMTPConfig{SaveDir: dir})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c2.Close() })
	require.Equal(t, 0, c2.Count())
	require.Equal(t, []devenv.SavedMessage{s}, c2.Saved(5))
	require.NoError(t, smtp.SendMail(c2.Addr(), nil, "bounce@example.com", []string{"b@example.com"},
		[]byte("From: a@example.com\r\nTo: b@example.com\r\nSubject: second\r\n\r\nx\r\n")))
	saved = c2.Saved(5)
	require.Len(t, saved, 2)
	require.Equal(t, s, saved[0], "oldest first")
	require.Equal(t, "second", saved[1].Subject)
	require.Len(t, c2.Saved(1), 1)
	require.Equal(t, "second", c2.Saved(1)[0].Subject, "Saved(n) is the last n")
}

// Without SaveDir the catcher writes nothing and lists nothing saved.
func TestSMTPWithoutSaveDir(t *testing.T) {
	c, err := devenv.StartSMTP(devenv.SMTPConfig{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	require.NoError(t, smtp.SendMail(c.Addr(), nil, "a@example.com", []string{"b@example.com"},
		[]byte("Subject: x\r\n\r\nx\r\n")))
	require.Equal(t, 1, c.Count())
	require.Empty(t, c.Saved(5))
}
