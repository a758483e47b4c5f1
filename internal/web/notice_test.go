package web_test

import (
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/testenv"
	"github.com/pgrelay/pgrelay/internal/web"
)

// The status notice comes only from the redirect after an action: a link
// with ?done= shows nothing of its text.
func TestConsoleNoticeOnlyAfterAction(t *testing.T) {
	t.Parallel()
	c := newConsole(t, nil)
	failingChannels(c.DB)
	c.Exec("SELECT pgrelay.notify('bad', 'x')")
	startProcessor(t, c.URL)
	testenv.Eventually(t, 30*time.Second, "a dead letter", func() bool {
		return c.Count("SELECT count(*) FROM pgrelay.dead_letters") == 1
	})
	dl := testenv.One[int64](t, c.Pool, "SELECT id FROM pgrelay.dead_letters")

	const lure = "Your session expired, log in at evil.example"
	for _, path := range []string{"/dead?done=" + url.QueryEscape(lure), "/?done=" + url.QueryEscape(lure),
		"/channels/bad?done=" + url.QueryEscape(lure), "/dead?done=discarded&id=1"} {
		code, body := c.get(path)
		require.Equal(t, http.StatusOK, code, path)
		require.NotContains(t, body, "Your session expired", path)
		require.NotContains(t, body, `class="notice"`, path)
	}

	// A browser's round trip: the POST's redirect shows what was done,
	// once.
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	client := &http.Client{Jar: jar}
	resp, err := client.PostForm(c.srv.URL+"/dead/"+itoa(dl)+"/discard", url.Values{"back": {"/dead?channel=bad"}})
	require.NoError(t, err)
	b := readAll(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode, b)
	require.Equal(t, "/dead", resp.Request.URL.Path)
	require.NotContains(t, resp.Request.URL.RawQuery, "done")
	require.Contains(t, b, `class="notice"`)
	require.Contains(t, b, "Dead letter "+itoa(dl)+" discarded.")
	resp, err = client.Get(c.srv.URL + "/dead")
	require.NoError(t, err)
	require.NotContains(t, readAll(t, resp), `class="notice"`, "shown once")

	// A notice cookie the console did not write is ignored.
	r := mustRequest(t, http.MethodGet, c.srv.URL+"/dead", nil)
	r.AddCookie(&http.Cookie{Name: web.NoticeCookie, Value: "WW91ciBzZXNzaW9uIGV4cGlyZWQ"})
	_, body := c.do(r)
	require.NotContains(t, body, `class="notice"`)
}
