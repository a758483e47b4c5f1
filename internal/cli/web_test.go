package cli_test

import (
	"io"
	"net/http"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/testenv"
)

// pgrelay web serves the console and names its URL; with --web-auth (here
// from the environment) it asks for the token, which it never prints.
func TestWebServesTheConsole(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	d.Exec("SELECT pgrelay.register('orders', 'SELECT length($1)')")
	d.Exec("SELECT pgrelay.notify('orders', 'x') FROM generate_series(1, 3)")
	const token = "console-token-0123456789"
	p := startCLI(t, []string{"PGRELAY_WEB_AUTH=token:" + token}, "web", "--database-url", d.URL, "--addr", "127.0.0.1:0")
	link := regexp.MustCompile(`console: (http://127\.0\.0\.1:\d+/)`)
	testenv.Eventually(t, 30*time.Second, "web to print the console's URL", func() bool {
		return link.MatchString(p.stdout.String()) || p.exited()
	})
	require.False(t, p.exited(), "web exited: %s", p.stderr.String())
	u := link.FindStringSubmatch(p.stdout.String())[1]

	resp, err := http.Get(u)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	r, err := http.NewRequest(http.MethodGet, u, nil)
	require.NoError(t, err)
	r.SetBasicAuth("me", token)
	resp, err = http.DefaultClient.Do(r)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Regexp(t, `(?s)id="ch-orders".*data-col="pending">3<`, string(body))

	p.signal(syscall.SIGTERM)
	require.Equal(t, 0, p.wait(30*time.Second))
	require.NotContains(t, p.stdout.String()+p.stderr.String(), token)
}

// An address other than loopback needs --web-auth, on web, run and dev; a
// malformed --web-auth is refused without being quoted.
func TestWebRefusesOtherAddressesWithoutAuth(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"web", "--database-url", "postgres://127.0.0.1:1/x", "--addr", "0.0.0.0:8080"},
		{"web", "--database-url", "postgres://127.0.0.1:1/x", "--addr", ":8080"},
		{"run", "--database-url", "postgres://127.0.0.1:1/x", "--web-addr", "10.1.2.3:8080"},
		{"dev", "--web-addr", "0.0.0.0:8080"},
	} {
		code, _, stderr := cliMain(args...)
		require.Equal(t, 2, code, "%v: %s", args, stderr)
		require.Contains(t, stderr, "is not a loopback address", args)
		require.Contains(t, stderr, "--web-auth", args)
	}
	code, _, stderr := cliMain("web", "--database-url", "postgres://127.0.0.1:1/x", "--web-auth", "token:tooshort-secret")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "at least 16 characters")
	require.NotContains(t, stderr, "tooshort-secret")
}

// pgrelay run --web-addr serves the console beside its Processor, which
// the console lists; without --web-auth it answers to loopback names and
// those of --web-allowed-hosts (here from the environment) only.
func TestRunServesTheConsole(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	p := startCLI(t, []string{"PGRELAY_WEB_ALLOWED_HOSTS=console.example.org, other.example"},
		"run", "--database-url", d.URL, "--web-addr", "127.0.0.1:0", "--web-read-only")
	link := regexp.MustCompile(`msg="serving the console" url=(http://127\.0\.0\.1:\d+/) read_only=true`)
	testenv.Eventually(t, 30*time.Second, "run to log the console's URL", func() bool {
		return link.MatchString(p.stderr.String()) || p.exited()
	})
	require.False(t, p.exited(), "run exited: %s", p.stderr.String())
	resp, err := http.Get(link.FindStringSubmatch(p.stderr.String())[1])
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Regexp(t, `(?s)id="processors".*<td>single</td>`, string(body))
	require.Contains(t, string(body), "Read-only console")
	for host, want := range map[string]int{"console.example.org": http.StatusOK, "Other.Example.:8080": http.StatusOK,
		"localhost": http.StatusOK, "rebind.example.net": http.StatusMisdirectedRequest} {
		r, err := http.NewRequest(http.MethodGet, link.FindStringSubmatch(p.stderr.String())[1]+"static/style.css", nil)
		require.NoError(t, err)
		r.Host = host
		resp, err := http.DefaultClient.Do(r)
		require.NoError(t, err)
		_ = resp.Body.Close()
		require.Equal(t, want, resp.StatusCode, host)
	}
	p.signal(syscall.SIGTERM)
	require.Equal(t, 0, p.wait(30*time.Second))
}
