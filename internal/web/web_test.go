package web_test

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"

	"github.com/pgrelay/pgrelay/events/store"
	"github.com/pgrelay/pgrelay/internal/testenv"
	"github.com/pgrelay/pgrelay/internal/web"
)

const script = `<script>alert("x")</script>`

// cell returns the text of the overview's cell data-col=col in the row
// with id rowID.
func cell(t *testing.T, body, rowID, col string) string {
	t.Helper()
	row := regexp.MustCompile(`(?s)<tr id="` + regexp.QuoteMeta(rowID) + `">(.*?)</tr>`).FindStringSubmatch(body)
	require.NotNil(t, row, "no row %s in:\n%s", rowID, body)
	m := regexp.MustCompile(`(?s)data-col="` + col + `">(.*?)</td>`).FindStringSubmatch(row[1])
	require.NotNil(t, m, "no cell %s in row %s", col, rowID)
	return strings.TrimSpace(regexp.MustCompile(`<[^>]*>`).ReplaceAllString(m[1], ""))
}

// Every page answers, with the database's numbers; what does not exist is a
// 404, a malformed id a 400.
func TestConsolePages(t *testing.T) {
	t.Parallel()
	c := newConsole(t, nil)
	c.Exec("SELECT pgrelay.register('orders', 'SELECT length($1)')")
	c.Exec("SELECT pgrelay.update('orders', p_paused := true)")
	c.Exec(`SELECT pgrelay.register('ledger', 'SELECT length($1)', p_priority := 3, p_max_in_flight := 4,
		p_rate_limit := 50, p_rate_period := '1 minute')`)
	c.Exec("SELECT pgrelay.notify('orders', 'o' || g) FROM generate_series(1, 7) g")
	c.Exec("SELECT pgrelay.register('charge_card', 'charge', p_kind := 'go')")
	id := testenv.One[int64](t, c.Pool, "SELECT pgrelay.notify('ledger', '{\"n\": 1}')")
	c.Exec("SELECT pgrelay_notifier.create_channel('mail', 'Shop <shop@example.com>')")
	nid := testenv.One[int64](t, c.Pool, "SELECT pgrelay_notifier.send('mail', ARRAY['a@example.com'], 'Your order', 'body')")

	code, body := c.get("/")
	require.Equal(t, http.StatusOK, code, body)
	require.Equal(t, "7", cell(t, body, "ch-orders", "pending"))
	require.Equal(t, "1", cell(t, body, "ch-ledger", "pending"))
	require.Equal(t, "9", cell(t, body, "totals", "pending"), "7 + 1 + the email event")
	require.Contains(t, body, "paused")
	require.Contains(t, body, `no running Processor of this node has the Go handler charge: its events wait">no handler charge</span>`,
		"a go channel no Processor handles says why its events wait")
	require.NotContains(t, body[strings.Index(body, `id="ch-ledger"`):][:400], "no handler")
	code, live := c.get("/live")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "7", cell(t, live, "ch-orders", "pending"))
	require.NotContains(t, live, "<html", "the live part alone")

	for path, want := range map[string]int{
		"/channels/orders":       http.StatusOK,
		"/channels/nope":         http.StatusNotFound,
		"/events/" + itoa(id):    http.StatusOK,
		"/events/123":            http.StatusNotFound,
		"/events/abc":            http.StatusBadRequest,
		"/events?id=" + itoa(id): http.StatusSeeOther,
		"/events?id=x":           http.StatusBadRequest,
		"/dead":                  http.StatusOK,
		"/dead?channel=orders&since=2026-01-01T00:00": http.StatusOK,
		"/dead?since=yesterday":                       http.StatusBadRequest,
		"/emails":                                     http.StatusOK,
		"/emails/" + itoa(nid):                        http.StatusOK,
		"/emails/1":                                   http.StatusNotFound,
		"/static/style.css":                           http.StatusOK,
		"/static/live.js":                             http.StatusOK,
		"/nope":                                       http.StatusNotFound,
	} {
		code, body := c.get(path)
		require.Equal(t, want, code, "GET %s: %s", path, body)
	}
	// The channel page shows the flow settings.
	_, ch := c.get("/channels/ledger")
	require.Contains(t, ch, "<dt>Priority</dt><dd>3</dd>")
	require.Contains(t, ch, "<dt>Max in flight</dt><dd>4</dd>")
	require.Contains(t, ch, "<dt>Rate limit</dt><dd>50 starts per 1m0s</dd>")
	_, ch = c.get("/channels/orders")
	require.Contains(t, ch, "<dt>Priority</dt><dd>0</dd>")
	require.Contains(t, ch, "<dt>Max in flight</dt><dd>no limit</dd>")
	require.Contains(t, ch, "<dt>Rate limit</dt><dd>no limit</dd>")
	_, ev := c.get("/events/" + itoa(id))
	require.Contains(t, ev, "pending")
	require.Contains(t, ev, `{&#34;n&#34;: 1}`, "the payload, from the queue")
	_, em := c.get("/emails/" + itoa(nid))
	require.Contains(t, em, "Your order")
	require.Contains(t, em, "queued")
	require.NotContains(t, em, ">body<", "no email body")
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// Error texts and payloads that hold markup are shown as text on every page
// that shows them; a dead letter is retried and discarded from its page,
// and a bulk retry asks for its count first.
func TestConsoleDeadLettersAndEscaping(t *testing.T) {
	t.Parallel()
	c := newConsole(t, nil)
	failingChannels(c.DB)
	first := testenv.One[int64](t, c.Pool, "SELECT pgrelay.notify('bad', $1)", script)
	c.Exec("SELECT pgrelay.notify('bad', 'second ' || $1)", script)
	c.Exec("SELECT pgrelay.notify('bad', 'third ' || $1)", script)
	startProcessor(t, c.URL)
	testenv.Eventually(t, 30*time.Second, "three dead letters", func() bool {
		return c.Count("SELECT count(*) FROM pgrelay.dead_letters") == 3
	})
	dl := testenv.One[int64](t, c.Pool, "SELECT id FROM pgrelay.dead_letters WHERE origin_id = $1", first)

	for _, path := range []string{"/", "/dead", "/dead?channel=bad", "/channels/bad", "/events/" + itoa(first)} {
		code, body := c.get(path)
		require.Equal(t, http.StatusOK, code, path)
		require.NotContains(t, body, script, path)
		if path != "/" {
			require.Contains(t, body, `&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;`, path)
		}
	}
	_, body := c.get("/")
	require.Equal(t, "3", cell(t, body, "ch-bad", "dead"))

	// Retry one: back to the page it came from, the event queued again.
	code, _, loc := c.post("/dead/"+itoa(dl)+"/retry", url.Values{"back": {"/events/" + itoa(first)}})
	require.Equal(t, http.StatusSeeOther, code)
	require.Equal(t, "/events/"+itoa(first), loc)
	require.Equal(t, 1, c.Count("SELECT count(*) FROM pgrelay.log WHERE origin_id = $1 AND event = 'retried'", first))
	code, body, _ = c.post("/dead/"+itoa(dl)+"/retry", nil)
	require.Equal(t, http.StatusNotFound, code, "no longer a dead letter: %s", body)
	// Somewhere else than the console: back to the dead letters.
	_, _, loc = c.post("/dead/"+itoa(dl)+"/discard", url.Values{"back": {"//evil.example/"}})
	require.Equal(t, "", loc, "not a dead letter any more: no redirect")

	testenv.Eventually(t, 30*time.Second, "the retried event to fail again", func() bool {
		return c.Count("SELECT count(*) FROM pgrelay.dead_letters") == 3
	})
	// Discard one.
	other := testenv.One[int64](t, c.Pool, "SELECT id FROM pgrelay.dead_letters ORDER BY id LIMIT 1")
	code, _, loc = c.post("/dead/"+itoa(other)+"/discard", url.Values{"back": {"//evil.example/"}})
	require.Equal(t, http.StatusSeeOther, code)
	require.Equal(t, "/dead", loc, "an address outside the console is not followed")
	require.Zero(t, c.Count("SELECT count(*) FROM pgrelay.dead_letters WHERE id = $1", other))

	// Bulk: the first POST shows the count, a stale count is refused, the
	// right one retries.
	code, body, _ = c.post("/dead/retry-all", url.Values{"channel": {"bad"}})
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `name="confirm" value="2"`)
	code, body, _ = c.post("/dead/retry-all", url.Values{"channel": {"bad"}, "confirm": {"5"}})
	require.Equal(t, http.StatusConflict, code)
	require.Contains(t, body, "changed")
	require.Equal(t, 2, c.Count("SELECT count(*) FROM pgrelay.dead_letters"))
	code, _, loc = c.post("/dead/retry-all", url.Values{"channel": {"bad"}, "confirm": {"2"}})
	require.Equal(t, http.StatusSeeOther, code)
	require.Contains(t, loc, "channel=bad")
	require.Equal(t, 3, c.Count("SELECT count(*) FROM pgrelay.log WHERE event = 'retried'"), "one, then two")
	code, _, _ = c.post("/dead/retry-all", url.Values{})
	require.Equal(t, http.StatusBadRequest, code, "bulk retry needs a channel")
}

// A POST from another site is refused, whatever it carries.
func TestConsoleRefusesCrossOriginPosts(t *testing.T) {
	t.Parallel()
	c := newConsole(t, nil)
	failingChannels(c.DB)
	c.Exec("SELECT pgrelay.notify('bad', 'x')")
	startProcessor(t, c.URL)
	testenv.Eventually(t, 30*time.Second, "a dead letter", func() bool {
		return c.Count("SELECT count(*) FROM pgrelay.dead_letters") == 1
	})
	dl := testenv.One[int64](t, c.Pool, "SELECT id FROM pgrelay.dead_letters")
	for _, h := range []map[string]string{
		{"Sec-Fetch-Site": "cross-site"},
		{"Origin": "http://evil.example"},
	} {
		for _, path := range []string{"/dead/" + itoa(dl) + "/discard", "/dead/" + itoa(dl) + "/retry"} {
			r := mustRequest(t, http.MethodPost, c.srv.URL+path, nil)
			for k, v := range h {
				r.Header.Set(k, v)
			}
			code, body := c.do(r)
			require.Equal(t, http.StatusForbidden, code, "%v %s: %s", h, path, body)
		}
	}
	require.Equal(t, 1, c.Count("SELECT count(*) FROM pgrelay.dead_letters"))
	// The console's own page posts same-origin.
	r := mustRequest(t, http.MethodPost, c.srv.URL+"/dead/"+itoa(dl)+"/discard", nil)
	r.Header.Set("Sec-Fetch-Site", "same-origin")
	r.Header.Set("Origin", c.srv.URL)
	code, _ := c.do(r)
	require.Equal(t, http.StatusSeeOther, code)
	require.Zero(t, c.Count("SELECT count(*) FROM pgrelay.dead_letters"))
}

// Read-only: no action on any page, and their POSTs refused.
func TestConsoleReadOnly(t *testing.T) {
	t.Parallel()
	c := newConsole(t, func(cfg *web.Config) { cfg.ReadOnly = true })
	failingChannels(c.DB)
	c.Exec("SELECT pgrelay.notify('bad', 'x')")
	startProcessor(t, c.URL)
	testenv.Eventually(t, 30*time.Second, "a dead letter", func() bool {
		return c.Count("SELECT count(*) FROM pgrelay.dead_letters") == 1
	})
	dl := testenv.One[int64](t, c.Pool, "SELECT id FROM pgrelay.dead_letters")
	origin := testenv.One[int64](t, c.Pool, "SELECT origin_id FROM pgrelay.dead_letters")
	for _, path := range []string{"/", "/dead", "/dead?channel=bad", "/channels/bad", "/events/" + itoa(origin)} {
		code, body := c.get(path)
		require.Equal(t, http.StatusOK, code, path)
		require.NotContains(t, body, `method="post"`, path)
	}
	for _, path := range []string{"/dead/" + itoa(dl) + "/retry", "/dead/" + itoa(dl) + "/discard", "/dead/retry-all"} {
		code, body, _ := c.post(path, url.Values{"channel": {"bad"}, "confirm": {"1"}})
		require.Equal(t, http.StatusForbidden, code, path)
		require.Contains(t, body, "read-only")
	}
	require.Equal(t, 1, c.Count("SELECT count(*) FROM pgrelay.dead_letters"))
}

// --web-auth: a token (basic auth's password or a Bearer token), or users
// of a basic-auth file.
func TestConsoleAuth(t *testing.T) {
	t.Parallel()
	d := pg.NewDB(t)
	const token = "0123456789abcdef-token"
	tok, err := web.ParseAuth("token:" + token)
	require.NoError(t, err)
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret pass"), bcrypt.MinCost)
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "users")
	require.NoError(t, os.WriteFile(file, []byte("# console users\n\nalice:"+string(hash)+"\n"), 0o600))
	basic, err := web.ParseAuth("basic:" + file)
	require.NoError(t, err)

	withToken := serveOn(t, d, d.Pool, func(cfg *web.Config) { cfg.Auth = tok })
	withUsers := serveOn(t, d, d.Pool, func(cfg *web.Config) { cfg.Auth = basic })
	type try struct {
		c          *console
		user, pass string
		bearer     string
		want       int
	}
	for i, tc := range []try{
		{c: withToken, want: http.StatusUnauthorized},
		{c: withToken, user: "anyone", pass: token, want: http.StatusOK},
		{c: withToken, user: "anyone", pass: token + "x", want: http.StatusUnauthorized},
		{c: withToken, bearer: token, want: http.StatusOK},
		{c: withToken, bearer: "wrong", want: http.StatusUnauthorized},
		{c: withUsers, want: http.StatusUnauthorized},
		{c: withUsers, user: "alice", pass: "s3cret pass", want: http.StatusOK},
		{c: withUsers, user: "alice", pass: "s3cret pass", want: http.StatusOK}, // remembered
		{c: withUsers, user: "alice", pass: "wrong", want: http.StatusUnauthorized},
		{c: withUsers, user: "bob", pass: "s3cret pass", want: http.StatusUnauthorized},
		{c: withUsers, bearer: token, want: http.StatusUnauthorized},
	} {
		for _, path := range []string{"/", "/static/style.css", "/dead/1/retry"} {
			method := http.MethodGet
			if strings.HasPrefix(path, "/dead") {
				method = http.MethodPost
			}
			r := mustRequest(t, method, tc.c.srv.URL+path, nil)
			if tc.user != "" {
				r.SetBasicAuth(tc.user, tc.pass)
			}
			if tc.bearer != "" {
				r.Header.Set("Authorization", "Bearer "+tc.bearer)
			}
			code, body := tc.c.do(r)
			want := tc.want
			if want == http.StatusOK && method == http.MethodPost {
				want = http.StatusNotFound // authenticated: no dead letter 1
			}
			require.Equal(t, want, code, "case %d, %s %s: %s", i, method, path, body)
			if code == http.StatusUnauthorized {
				require.NotContains(t, body, token)
			}
		}
	}

	for _, bad := range []string{"", "s3cret", "token:short", "basic:" + filepath.Join(t.TempDir(), "none"), "bearer:" + token} {
		_, err := web.ParseAuth(bad)
		require.Error(t, err, bad)
		require.NotContains(t, err.Error(), token)
	}
	plain := filepath.Join(t.TempDir(), "plain")
	require.NoError(t, os.WriteFile(plain, []byte("alice:s3cret pass\n"), 0o600))
	_, err = web.ParseAuth("basic:" + plain)
	require.ErrorContains(t, err, "not a bcrypt hash")
	require.NotContains(t, err.Error(), "s3cret")
}

// Only loopback without auth.
func TestCheckAddr(t *testing.T) {
	t.Parallel()
	tok, err := web.ParseAuth("token:0123456789abcdef")
	require.NoError(t, err)
	for _, addr := range []string{"127.0.0.1:8080", "localhost:0", "[::1]:8080", "127.0.0.2:80"} {
		require.NoError(t, web.CheckAddr(addr, nil), addr)
	}
	for _, addr := range []string{":8080", "0.0.0.0:8080", "[::]:8080", "10.0.0.5:8080", "console.example.com:80"} {
		require.ErrorContains(t, web.CheckAddr(addr, nil), "--web-auth", addr)
		require.NoError(t, web.CheckAddr(addr, tok), addr)
	}
	require.Error(t, web.CheckAddr("8080", nil))
}

// A login with pgrelay_viewer alone reads every page; its actions are
// refused by the database, and the page says what the login lacks.
func TestConsoleAsViewer(t *testing.T) {
	t.Parallel()
	d := pg.NewDB(t)
	failingChannels(d)
	origin := testenv.One[int64](t, d.Pool, "SELECT pgrelay.notify('bad', 'x')")
	d.Exec("SELECT pgrelay_notifier.create_channel('mail', 'Shop <shop@example.com>')")
	nid := testenv.One[int64](t, d.Pool, "SELECT pgrelay_notifier.send('mail', ARRAY['a@example.com'], 'Hi', 'body')")
	d.Exec("SELECT pgrelay.register('charge_card', 'charge', p_kind := 'go')")
	startProcessor(t, d.URL)
	testenv.Eventually(t, 30*time.Second, "a dead letter", func() bool {
		return d.Count("SELECT count(*) FROM pgrelay.dead_letters") == 1
	})
	dl := testenv.One[int64](t, d.Pool, "SELECT id FROM pgrelay.dead_letters")
	role := d.Name() + "_viewer"
	d.Exec("CREATE ROLE " + role + " LOGIN IN ROLE pgrelay_viewer")
	t.Cleanup(func() { _ = d.Err("DROP ROLE " + role) })
	u, err := url.Parse(d.URL)
	require.NoError(t, err)
	u.User = url.User(role)
	pool := poolOn(t, u.String())
	c := serveOn(t, d, pool, nil)

	for _, path := range []string{"/", "/live", "/channels/bad", "/events/" + itoa(origin), "/dead", "/dead?channel=bad",
		"/emails", "/emails/" + itoa(nid)} {
		code, body := c.get(path)
		require.Equal(t, http.StatusOK, code, "GET %s: %s", path, body)
	}
	_, body := c.get("/")
	require.Contains(t, body, "no handler charge", "the viewer reads which go channels no Processor handles")
	code, body, _ := c.post("/dead/"+itoa(dl)+"/retry", nil)
	require.Equal(t, http.StatusForbidden, code, body)
	require.Contains(t, body, "pgrelay_admin")
	require.Equal(t, 1, d.Count("SELECT count(*) FROM pgrelay.dead_letters"))
}

// A login with pgrelay_admin alone (a member of pgrelay_viewer) reads every
// page and discards a dead letter.
func TestConsoleAsAdmin(t *testing.T) {
	t.Parallel()
	d := pg.NewDB(t)
	failingChannels(d)
	origin := testenv.One[int64](t, d.Pool, "SELECT pgrelay.notify('bad', 'x')")
	d.Exec("SELECT pgrelay_notifier.create_channel('mail', 'Shop <shop@example.com>')")
	nid := testenv.One[int64](t, d.Pool, "SELECT pgrelay_notifier.send('mail', ARRAY['a@example.com'], 'Hi', 'body')")
	startProcessor(t, d.URL)
	testenv.Eventually(t, 30*time.Second, "a dead letter", func() bool {
		return d.Count("SELECT count(*) FROM pgrelay.dead_letters") == 1
	})
	dl := testenv.One[int64](t, d.Pool, "SELECT id FROM pgrelay.dead_letters")
	role := d.Name() + "_admin"
	d.Exec("CREATE ROLE " + role + " LOGIN IN ROLE pgrelay_admin")
	t.Cleanup(func() { _ = d.Err("DROP ROLE " + role) })
	u, err := url.Parse(d.URL)
	require.NoError(t, err)
	u.User = url.User(role)
	c := serveOn(t, d, poolOn(t, u.String()), nil)

	for _, path := range []string{"/", "/live", "/channels/bad", "/events/" + itoa(origin), "/dead", "/dead?channel=bad",
		"/emails", "/emails/" + itoa(nid)} {
		code, body := c.get(path)
		require.Equal(t, http.StatusOK, code, "GET %s: %s", path, body)
	}
	code, body, _ := c.post("/dead/"+itoa(dl)+"/discard", nil)
	require.Equal(t, http.StatusSeeOther, code, body)
	require.Zero(t, d.Count("SELECT count(*) FROM pgrelay.dead_letters WHERE id = $1", dl))
}

// The overview's charts count the log's last hour per channel: succeeded,
// and failed attempts (failed, gave_up, expired); older rows are left out.
func TestConsoleChartsCountTheLastHour(t *testing.T) {
	t.Parallel()
	c := newConsole(t, nil)
	c.Exec("SELECT pgrelay.register('orders', 'SELECT length($1)')")
	c.Exec(`INSERT INTO pgrelay.log (id, queue_id, origin_id, channel, attempt, event, node, at)
		SELECT pgrelay._id_floor(x.at) + g, g, g, 'orders', 1, x.event, 0, x.at
		  FROM generate_series(1, 10) g,
		       LATERAL (SELECT CASE WHEN g <= 4 THEN now() - interval '30 minutes'
		                            WHEN g <= 7 THEN now() - interval '10 minutes'
		                            ELSE now() - interval '2 hours' END AS at,
		                       (ARRAY['succeeded', 'succeeded', 'succeeded', 'failed', 'succeeded', 'gave_up',
		                              'expired', 'succeeded', 'failed', 'failed'])[g] AS event) x`)
	code, body := c.get("/")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `aria-label="orders, last hour per minute: 4 succeeded, 3 failed, busiest minute 4"`)
	require.Contains(t, body, `aria-label="all channels, last hour per minute: 4 succeeded, 3 failed, busiest minute 4"`)
}

// A retry pgrelay refuses (the channel is gone) says why, with pgrelay's
// hint, as a conflict.
func TestConsoleRetryRefusedSaysWhy(t *testing.T) {
	t.Parallel()
	c := newConsole(t, nil)
	failingChannels(c.DB)
	c.Exec("SELECT pgrelay.notify('bad', 'x')")
	startProcessor(t, c.URL)
	testenv.Eventually(t, 30*time.Second, "a dead letter", func() bool {
		return c.Count("SELECT count(*) FROM pgrelay.dead_letters") == 1
	})
	dl := testenv.One[int64](t, c.Pool, "SELECT id FROM pgrelay.dead_letters")
	c.Exec("SELECT pgrelay.unregister('bad')")
	code, body, _ := c.post("/dead/"+itoa(dl)+"/retry", nil)
	require.Equal(t, http.StatusConflict, code, body)
	require.Contains(t, body, "not registered")
	require.Contains(t, body, "discard the dead letter")
	require.Equal(t, 1, c.Count("SELECT count(*) FROM pgrelay.dead_letters"))
}

// countingDB counts the statements that call queue_stats().
type countingDB struct {
	store.Querier
	stats atomic.Int64
}

func (c *countingDB) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if strings.Contains(sql, "pgrelay.queue_stats()") {
		c.stats.Add(1)
	}
	return c.Querier.Query(ctx, sql, args...)
}

// However many pages ask at once, the overview is read from the database
// at most once a second.
func TestConsoleSharesOneReadingASecond(t *testing.T) {
	t.Parallel()
	d := pg.NewDB(t)
	d.Exec("SELECT pgrelay.register('orders', 'SELECT length($1)')")
	db := &countingDB{Querier: d.Pool}
	c := serveOn(t, d, d.Pool, func(cfg *web.Config) { cfg.DB = db })
	start := time.Now()
	var wg sync.WaitGroup
	for range 40 {
		wg.Go(func() {
			resp, err := http.Get(c.srv.URL + "/live")
			if assert.NoError(t, err) {
				_ = resp.Body.Close()
				assert.Equal(t, http.StatusOK, resp.StatusCode)
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	require.LessOrEqual(t, db.stats.Load(), int64(1+took/web.Refresh), "40 requests in %s", took)
}

// The channel page shows its cancelled and snoozed events beside the other
// outcomes: how many of each the log holds for the last hour (the per-minute
// counts the charts read), and their rows among the recent ones with their
// detail (the cancel's reason, the snooze's due time).
func TestConsoleChannelShowsCancelledAndSnoozed(t *testing.T) {
	t.Parallel()
	c := newConsole(t, nil)
	c.Exec("SELECT pgrelay.register('orders', 'SELECT length($1)')")
	c.Exec(`INSERT INTO pgrelay.log (id, queue_id, origin_id, channel, attempt, event, error, node, at)
		SELECT pgrelay._id_floor(x.at) + g, g, 100 + g, 'orders', 1, x.event, x.error, 0, x.at
		  FROM generate_series(1, 7) g,
		       LATERAL (SELECT CASE WHEN g <= 6 THEN now() - interval '20 minutes'
		                            ELSE now() - interval '2 hours' END AS at,
		                       (ARRAY['cancelled', 'snoozed', 'snoozed', 'succeeded', 'failed', 'snoozed', 'cancelled'])[g] AS event,
		                       (ARRAY['cancelled by admin', 'snoozed until 2026-12-31T00:00:00.000000Z',
		                              'snoozed until 2026-12-31T00:00:01.000000Z', NULL, 'boom',
		                              'snoozed until 2026-12-31T00:00:02.000000Z', 'cancelled long ago'])[g] AS error) x`)
	code, body := c.get("/channels/orders")
	require.Equal(t, http.StatusOK, code, body)
	require.Equal(t, "1", cell(t, body, "channel-row", "cancelled"), "the last hour's, not the older one")
	require.Equal(t, "3", cell(t, body, "channel-row", "snoozed"))

	recent := regexp.MustCompile(`(?s)<table id="failures">.*?</table>`).FindString(body)
	require.NotEmpty(t, recent, body)
	for _, want := range []string{"cancelled by admin", "snoozed until 2026-12-31T00:00:00.000000Z",
		"snoozed until 2026-12-31T00:00:02.000000Z", "boom"} {
		require.Contains(t, recent, want)
	}
	require.NotContains(t, recent, "cancelled long ago", "older than the hour")
	require.Equal(t, 5, strings.Count(recent, `<a href="/events/`), "cancelled, 3 snoozed and failed, not the success")
}
