package web_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/testenv"
)

// maxPage is the most bytes any console response may have (the payload's
// download aside).
const maxPage = 1 << 20

// A producer cannot make the console's pages unusable: 30 events of 1 MiB
// (markup, which escaping makes four times longer) that fail with their
// payload as the error, an event with 1 000 attempts of long errors, and
// emails with long recipients, errors and notes: every page stays under
// 1 MiB, lists show prefixes, an event's page the first 64 Ki characters
// and a download of the whole payload.
func TestConsolePagesStayBounded(t *testing.T) {
	t.Parallel()
	c := newConsole(t, nil)
	failingChannels(c.DB)
	const mib = 1 << 20
	big := strings.Repeat("<", mib-len("big 00 ")) // each event's payload: "big NN " + this
	c.Exec("SELECT pgrelay.notify('bad', 'big ' || pg_catalog.lpad(g::text, 2, '0') || ' ' || $1) FROM generate_series(1, 30) g", big)
	startProcessor(t, c.URL)
	testenv.Eventually(t, 60*time.Second, "30 dead letters", func() bool {
		return c.Count("SELECT count(*) FROM pgrelay.dead_letters") == 30
	})
	origin := testenv.One[int64](t, c.Pool, "SELECT origin_id FROM pgrelay.dead_letters WHERE payload LIKE 'big 07 %'")
	// An event with as many attempts as max_attempts allows, each error
	// 8 KiB of markup.
	const many = int64(9_000_000_000)
	c.Exec(`INSERT INTO pgrelay.log (queue_id, origin_id, channel, attempt, event, error)
		SELECT $1::bigint + a, $1::bigint, 'bad', a, CASE WHEN a = 1000 THEN 'gave_up' ELSE 'failed' END,
		       pg_catalog.repeat('"', 8192)
		  FROM generate_series(1, 1000) a`, many)
	// Emails: recipients, an error and notes past any page's size.
	c.Exec("SELECT pgrelay_notifier.create_channel('mail', 'Shop <shop@example.com>')")
	var email int64
	for range 50 { // 100 recipients of 250 characters each
		email = testenv.One[int64](t, c.Pool, `SELECT pgrelay_notifier.send('mail',
			(SELECT array_agg(pg_catalog.lpad(g::text, 60, 'u') || '@' || pg_catalog.repeat('d', 60) || '.'
			                  || pg_catalog.repeat('e', 60) || '.' || pg_catalog.repeat('f', 60) || '.com')
			   FROM generate_series(1, 100) g),
			'Your order', 'Thanks')`)
	}
	c.Exec("UPDATE pgrelay_notifier.notifications SET last_error = pg_catalog.repeat('&', 1048576)")
	c.Exec(`INSERT INTO pgrelay_notifier.debug_log (notification_id, message)
		SELECT $1::bigint, pg_catalog.repeat('+', 8192) FROM generate_series(1, 1000)`, email)

	pages := []string{"/", "/live", "/dead", "/dead?channel=bad", "/channels/bad", "/events/" + itoa(origin),
		"/events/" + itoa(many), "/emails", "/emails/" + itoa(email)}
	for _, p := range pages {
		resp, err := http.Get(c.srv.URL + p)
		require.NoError(t, err, p)
		n, err := io.Copy(io.Discard, io.LimitReader(resp.Body, 64*maxPage))
		resp.Body.Close()
		require.NoError(t, err, p)
		require.Equal(t, http.StatusOK, resp.StatusCode, p)
		require.Less(t, n, int64(maxPage), "%s is %d bytes", p, n)
		t.Logf("%s: %d bytes", p, n)
	}

	// Lists: a prefix and the way to the event's page.
	_, body := c.get("/dead")
	require.Contains(t, body, "big 07 &lt;&lt;")
	require.Contains(t, body, `<a class="more" href="/events/`+itoa(origin)+`">`)
	// The event's page: the first 64 Ki characters, and the download.
	_, body = c.get("/events/" + itoa(origin))
	require.Contains(t, body, "big 07 "+strings.Repeat("&lt;", 65536-len("big 07 "))+"</pre>")
	require.Contains(t, body, `href="/events/`+itoa(origin)+`/payload"`)
	resp, err := http.Get(c.srv.URL + "/events/" + itoa(origin) + "/payload")
	require.NoError(t, err)
	all := readAll(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/plain; charset=utf-8", resp.Header.Get("Content-Type"))
	require.Contains(t, resp.Header.Get("Content-Disposition"), "attachment")
	require.Equal(t, "big 07 "+big, all)
	code, _ := c.get("/events/" + itoa(many+1) + "/payload")
	require.Equal(t, http.StatusNotFound, code)

	t.Run("chromium", func(t *testing.T) {
		ctx := browser(t)
		row := "#dead-" + itoa(testenv.One[int64](t, c.Pool, "SELECT id FROM pgrelay.dead_letters WHERE origin_id = $1", origin))
		run(t, ctx, chromedp.Navigate(c.srv.URL+"/dead"), chromedp.WaitVisible(chromedp.CSS(row)))
		rows, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("table.dead tbody tr").length`))
		require.NoError(t, err)
		require.Equal(t, 30, rows)
		require.Contains(t, text(t, ctx, row), "big 07 <<<")
		run(t, ctx, chromedp.Navigate(c.srv.URL+"/events/"+itoa(origin)), chromedp.WaitVisible(chromedp.CSS("#payload")))
		shown, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelector("#payload").textContent.length`))
		require.NoError(t, err)
		require.Equal(t, 65536, shown)
	})
}
