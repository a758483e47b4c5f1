package web_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/actors"
	"github.com/pgrelay/pgrelay/internal/testenv"
	"github.com/pgrelay/pgrelay/internal/web"
)

var pg *testenv.Postgres

func TestMain(m *testing.M) { os.Exit(testenv.MainWithPostgres(m, &pg)) }

// console is a test's database with the console served over it.
type console struct {
	*testenv.DB
	srv *httptest.Server
}

// newConsole serves the console over a fresh migrated database; mod
// adjusts its configuration.
func newConsole(t *testing.T, mod func(*web.Config)) *console {
	t.Helper()
	d := pg.NewDB(t)
	return serveOn(t, d, d.Pool, mod)
}

// serveOn serves the console on the database of d through pool.
func serveOn(t *testing.T, d *testenv.DB, pool *pgxpool.Pool, mod func(*web.Config)) *console {
	t.Helper()
	cfg := web.Config{DB: pool, Logger: testLogger()}
	if mod != nil {
		mod(&cfg)
	}
	s, err := web.New(cfg)
	require.NoError(t, err)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return &console{DB: d, srv: srv}
}

func testLogger() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.DiscardHandler)
}

// noRedirect is a client that shows redirects instead of following them.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// get fetches path and returns the status and the body.
func (c *console) get(path string) (int, string) {
	c.T.Helper()
	return c.do(mustRequest(c.T, http.MethodGet, c.srv.URL+path, nil))
}

// post posts form to path, as a page of the console does (no Origin: a
// client that is no browser), and returns the status, the body and where
// it redirects.
func (c *console) post(path string, form url.Values) (int, string, string) {
	c.T.Helper()
	r := mustRequest(c.T, http.MethodPost, c.srv.URL+path, strings.NewReader(form.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := noRedirect.Do(r)
	require.NoError(c.T, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(c.T, err)
	return resp.StatusCode, string(b), resp.Header.Get("Location")
}

func (c *console) do(r *http.Request) (int, string) {
	c.T.Helper()
	resp, err := noRedirect.Do(r)
	require.NoError(c.T, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(c.T, err)
	return resp.StatusCode, string(b)
}

func mustRequest(t testing.TB, method, u string, body io.Reader) *http.Request {
	t.Helper()
	r, err := http.NewRequest(method, u, body)
	require.NoError(t, err)
	return r
}

// startProcessor runs a Processor on url until the test ends.
func startProcessor(t *testing.T, url string) {
	t.Helper()
	p, err := actors.New(actors.Config{DatabaseURL: url, Concurrency: 16, PollInterval: 100 * time.Millisecond,
		HeartbeatInterval: 200 * time.Millisecond, DeadAfter: 2 * time.Second, ShutdownTimeout: 5 * time.Second,
		Logger: testLogger()})
	require.NoError(t, err)
	require.NoError(t, p.Start(context.Background()))
	t.Cleanup(func() { _ = p.Stop(context.Background()) })
}

// failingChannels registers 'bad', whose handler raises its payload as the
// error (one attempt: each event becomes a dead letter), and 'ok'.
func failingChannels(d *testenv.DB) {
	d.Exec(`CREATE FUNCTION public.fail_with(p text) RETURNS void LANGUAGE plpgsql AS
		$$BEGIN IF p LIKE 'ok%' THEN RETURN; END IF; RAISE EXCEPTION '%', p; END$$`)
	d.Exec("GRANT EXECUTE ON FUNCTION public.fail_with(text) TO PUBLIC")
	d.Exec("SELECT pgrelay.register('bad', 'SELECT public.fail_with($1)', p_max_attempts := 1)")
	d.Exec("SELECT pgrelay.register('ok', 'SELECT length($1)')")
}

// poolOn opens a pool on url, closed when the test ends.
func poolOn(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// readAll reads and closes resp's body.
func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}
