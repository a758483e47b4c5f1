package pgrelay_test

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay"
)

// Send stores every part of the email in the caller's transaction and
// enqueues it; EmailStatus and CancelEmail follow it, for its sender only.
func TestSend(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	d.exec(t, "SELECT pgrelay_notifier.create_channel('mail', 'Shop <shop@example.com>')")

	tx, err := d.producer.Begin(bg)
	require.NoError(t, err)
	id, err := pgrelay.Send(bg, tx, "mail", pgrelay.Email{
		To:       []string{"Bob <bob@example.org>"},
		Cc:       []string{"sales@example.com"},
		Bcc:      []string{"archive@example.com"},
		Subject:  "Your order 1042",
		BodyText: "Thank you.",
		BodyHTML: "<p>Thank you.</p>",
		Headers:  map[string]string{"Reply-To": "help@example.com", "X-Order": "1042"},
	})
	require.NoError(t, err)
	_, err = pgrelay.EmailStatus(bg, d.producer, id)
	require.ErrorIs(t, err, pgrelay.ErrNotFound, "not visible before commit")
	require.NoError(t, tx.Commit(bg))

	var (
		to, cc, bcc   []string
		subject, text string
		html          *string
		headers       map[string]string
		queued        int
	)
	require.NoError(t, d.admin.QueryRow(bg, `
		SELECT to_addrs, cc_addrs, bcc_addrs, subject, body_text, body_html, headers,
		       (SELECT count(*) FROM pgrelay.queue q WHERE q.channel = 'mail' AND q.payload = n.notification_id::text)
		  FROM pgrelay_notifier.notifications n WHERE notification_id = $1`, id).
		Scan(&to, &cc, &bcc, &subject, &text, &html, &headers, &queued))
	require.Equal(t, []string{"Bob <bob@example.org>"}, to)
	require.Equal(t, []string{"sales@example.com"}, cc)
	require.Equal(t, []string{"archive@example.com"}, bcc)
	require.Equal(t, "Your order 1042", subject)
	require.Equal(t, "Thank you.", text)
	require.Equal(t, "<p>Thank you.</p>", *html)
	require.Equal(t, map[string]string{"Reply-To": "help@example.com", "X-Order": "1042"}, headers)
	require.Equal(t, 1, queued, "one event enqueued")

	st, err := pgrelay.EmailStatus(bg, d.producer, id)
	require.NoError(t, err)
	require.Equal(t, pgrelay.EmailQueued, st)

	// Another producer sees nothing of it, and cannot cancel it.
	other := loginAs(t, d.admin, pg.URL(dbName(t, d)), "other")
	_, err = pgrelay.EmailStatus(bg, other, id)
	require.ErrorIs(t, err, pgrelay.ErrNotFound)
	ok, err := pgrelay.CancelEmail(bg, other, id)
	require.NoError(t, err)
	require.False(t, ok)

	ok, err = pgrelay.CancelEmail(bg, d.producer, id)
	require.NoError(t, err)
	require.True(t, ok)
	st, err = pgrelay.EmailStatus(bg, d.producer, id)
	require.NoError(t, err)
	require.Equal(t, pgrelay.EmailCancelled, st)
	ok, err = pgrelay.CancelEmail(bg, d.producer, id)
	require.NoError(t, err)
	require.False(t, ok, "no longer queued")

	// The smallest email: no Cc, Bcc, HTML or headers (NULL, not empty values).
	id, err = pgrelay.Send(bg, d.producer, "mail", pgrelay.Email{To: []string{"bob@example.org"}})
	require.NoError(t, err)
	require.NoError(t, d.admin.QueryRow(bg,
		"SELECT cc_addrs, bcc_addrs, body_html, headers FROM pgrelay_notifier.notifications WHERE notification_id = $1", id).
		Scan(&cc, &bcc, &html, &headers))
	require.Empty(t, cc)
	require.Empty(t, bcc)
	require.Nil(t, html)
	require.Empty(t, headers)
}

// The notifier's refusals match their sentinels.
func TestSendErrors(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	d.exec(t, "SELECT pgrelay_notifier.create_channel('mail', 'shop@example.com')")
	d.exec(t, "SELECT pgrelay.register('orders', 'SELECT pg_catalog.length($1)')")
	ok := pgrelay.Email{To: []string{"bob@example.org"}, Subject: "s", BodyText: "b"}
	with := func(f func(*pgrelay.Email)) pgrelay.Email {
		e := ok
		f(&e)
		return e
	}
	for _, c := range []struct {
		channel string
		email   pgrelay.Email
		want    error
	}{
		{"orders", ok, pgrelay.ErrNotEmailChannel},
		{"nope", ok, pgrelay.ErrNotEmailChannel},
		{"mail", with(func(e *pgrelay.Email) { e.To = nil }), pgrelay.ErrNoRecipients},
		{"mail", with(func(e *pgrelay.Email) { e.Cc = []string{"not an address"} }), pgrelay.ErrInvalidAddress},
		{"mail", with(func(e *pgrelay.Email) { e.Subject = "a\r\nBcc: x@example.org" }), pgrelay.ErrInvalidSubject},
		{"mail", with(func(e *pgrelay.Email) { e.Headers = map[string]string{"From": "x@example.org"} }), pgrelay.ErrInvalidHeaders},
	} {
		_, err := pgrelay.Send(bg, d.producer, c.channel, c.email)
		require.ErrorIs(t, err, c.want, "%s %+v", c.channel, c.email)
		var pgErr *pgconn.PgError
		require.True(t, errors.As(err, &pgErr))
	}
	var n int
	require.NoError(t, d.admin.QueryRow(bg, "SELECT count(*) FROM pgrelay_notifier.notifications").Scan(&n))
	require.Zero(t, n, "nothing stored")

	_, err := pgrelay.EmailStatus(bg, d.producer, 42)
	require.ErrorIs(t, err, pgrelay.ErrNotFound)
}

// dbName is the name of d's database.
func dbName(t *testing.T, d db) string {
	t.Helper()
	var name string
	require.NoError(t, d.admin.QueryRow(bg, "SELECT pg_catalog.current_database()").Scan(&name))
	return name
}
