package web_test

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/testenv"
	"github.com/pgrelay/pgrelay/internal/web"
)

// asHost sends method path to c with Host host, as a browser's page of
// that origin would (its Origin, Sec-Fetch-Site same-origin).
func (c *console) asHost(method, path, host string) (int, string) {
	c.T.Helper()
	var body *strings.Reader
	if method == http.MethodPost {
		body = strings.NewReader(url.Values{"back": {"/dead"}}.Encode())
	} else {
		body = strings.NewReader("")
	}
	r := mustRequest(c.T, method, c.srv.URL+path, body)
	r.Host = host
	r.Header.Set("Origin", "http://"+host)
	r.Header.Set("Sec-Fetch-Site", "same-origin")
	if method == http.MethodPost {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	return c.do(r)
}

// Without auth, a page that DNS rebinding brought to the console (its own
// name, same-origin for the browser) reads and changes nothing: only
// loopback names and --web-allowed-hosts are served, /static included.
func TestConsoleRefusesForeignHostWithoutAuth(t *testing.T) {
	t.Parallel()
	c := newConsole(t, nil)
	failingChannels(c.DB)
	c.Exec("SELECT pgrelay.notify('bad', 'secret payload')")
	startProcessor(t, c.URL)
	testenv.Eventually(t, 30*time.Second, "a dead letter", func() bool {
		return c.Count("SELECT count(*) FROM pgrelay.dead_letters") == 1
	})
	dl := testenv.One[int64](t, c.Pool, "SELECT id FROM pgrelay.dead_letters")
	_, port, splitErr := net.SplitHostPort(c.srv.Listener.Addr().String())
	require.NoError(t, splitErr)

	for _, host := range []string{"rebind.attacker.example:" + port, "rebind.attacker.example",
		"localhost.attacker.example:" + port, "127.0.0.1.nip.io:" + port, "10.0.0.1:" + port, "[::2]:" + port} {
		for _, path := range []string{"/dead", "/", "/live", "/static/style.css", "/events/1", "/events/1/payload"} {
			code, body := c.asHost(http.MethodGet, path, host)
			require.Equal(t, http.StatusMisdirectedRequest, code, "GET %s with Host %q: %s", path, host, body)
			require.NotContains(t, body, "secret payload")
			require.Contains(t, body, "--web-allowed-hosts")
		}
		code, body := c.asHost(http.MethodPost, "/dead/"+itoa(dl)+"/discard", host)
		require.Equal(t, http.StatusMisdirectedRequest, code, "POST with Host %q: %s", host, body)
		require.Equal(t, 1, c.Count("SELECT count(*) FROM pgrelay.dead_letters"), "nothing discarded")
	}
	for _, host := range []string{"localhost:" + port, "LocalHost.:" + port, "localhost", "127.0.0.1:" + port,
		"127.8.9.10", "[::1]:" + port, "[::1]"} {
		code, body := c.asHost(http.MethodGet, "/dead", host)
		require.Equal(t, http.StatusOK, code, "Host %q: %s", host, body)
		require.Contains(t, body, "secret payload")
	}

	// Names given to --web-allowed-hosts, as a proxy passes them on.
	named := serveOn(t, c.DB, c.Pool, func(cfg *web.Config) { cfg.AllowedHosts = []string{"Console.Example.ORG."} })
	for host, want := range map[string]int{
		"console.example.org":           http.StatusOK,
		"CONSOLE.example.org.:443":      http.StatusOK,
		"localhost:" + port:             http.StatusOK,
		"other.example.org":             http.StatusMisdirectedRequest,
		"console.example.org.evil.test": http.StatusMisdirectedRequest,
	} {
		code, body := named.asHost(http.MethodGet, "/static/style.css", host)
		require.Equal(t, want, code, "Host %q: %s", host, body)
	}

	// With auth, the credentials decide: another site's page has none.
	tok, err := web.ParseAuth("token:0123456789abcdef-token")
	require.NoError(t, err)
	authed := serveOn(t, c.DB, c.Pool, func(cfg *web.Config) { cfg.Auth = tok })
	code, _ := authed.asHost(http.MethodGet, "/dead", "console.example.org")
	require.Equal(t, http.StatusUnauthorized, code)
	r := mustRequest(t, http.MethodGet, authed.srv.URL+"/dead", nil)
	r.Host = "console.example.org"
	r.Header.Set("Authorization", "Bearer 0123456789abcdef-token")
	code, _ = authed.do(r)
	require.Equal(t, http.StatusOK, code)

	// In a browser: a name of the attacker's that resolves to 127.0.0.1
	// (as DNS rebinding makes it) gets the refusal, and its page's own
	// same-origin POST discards nothing.
	t.Run("chromium", func(t *testing.T) {
		ctx := browser(t, chromedp.Flag("host-resolver-rules", "MAP rebind.attacker.example 127.0.0.1"))
		run(t, ctx, chromedp.Navigate(c.srv.URL+"/dead"), chromedp.WaitVisible(chromedp.CSS("#dead-"+itoa(dl))))
		run(t, ctx, chromedp.Navigate("http://rebind.attacker.example:"+port+"/dead"),
			chromedp.WaitReady(chromedp.CSS("body")))
		body := text(t, ctx, "body")
		require.Contains(t, body, "is not this console's name")
		require.NotContains(t, body, "secret payload")
		c2, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		status, err := chromedp.Run(c2, chromedp.Evaluate[int](`fetch("/dead/`+itoa(dl)+`/discard", {method: "POST",
			headers: {"Content-Type": "application/x-www-form-urlencoded"}, body: "back=/dead"}).then(r => r.status)`,
			chromedp.EvalAwaitPromise))
		require.NoError(t, err)
		require.Equal(t, http.StatusMisdirectedRequest, status)
		require.Equal(t, 1, c.Count("SELECT count(*) FROM pgrelay.dead_letters"), "nothing discarded")
	})

	code, body, _ := c.post("/dead/"+itoa(dl)+"/discard", nil)
	require.Equal(t, http.StatusSeeOther, code, body)
	require.Zero(t, c.Count("SELECT count(*) FROM pgrelay.dead_letters"))
}
