package cli_test

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/testenv"
)

// No password given to pgrelay shows in what it prints or logs: a NATS URL
// that does not parse, one that does (dev's banner and hint), an SMTP URL
// whose server refuses, a database URL in an error.
func TestSecretsNeverPrinted(t *testing.T) {
	t.Parallel()
	const pw = "Sup3rS3cret"
	t.Run("unparsable nats url", func(t *testing.T) {
		t.Parallel()
		d := newDB(t)
		code, out, errOut := runCLI(t, nil, "run", "--database-url", d.URL, "--nats-url", "nats://relay:"+pw+" x@ho st:4222")
		assert.NotEqual(t, 0, code)
		assert.NotContains(t, out+errOut, pw)
		assert.Contains(t, errOut, "xxxxx@")
	})
	t.Run("database url in an error", func(t *testing.T) {
		t.Parallel()
		code, out, errOut := runCLI(t, nil, "stats", "--database-url", "postgres://relay:"+pw+"@127.0.0.1:1/app?connect_timeout=2")
		assert.Equal(t, 1, code)
		assert.NotContains(t, out+errOut, pw)
	})
	t.Run("dev with a nats url holding a password", func(t *testing.T) {
		t.Parallel()
		tmp, err := os.MkdirTemp("", "pgrelay-cli-devsecret-")
		require.NoError(t, err)
		t.Cleanup(func() { _ = os.RemoveAll(tmp) })
		require.NoError(t, os.Chmod(tmp, 0o755))
		// Nothing listens on port 1: dev starts, its publisher keeps
		// failing to connect and logs it.
		p := startCLI(t, []string{"TMPDIR=" + tmp}, "dev", "--rate", "0", "--refresh", "200ms",
			"--nats-url", "nats://relay:"+pw+"@127.0.0.1:1", "--log-level", "debug")
		testenv.Eventually(t, 90*time.Second, "dev to print its NATS line and log a NATS failure", func() bool {
			return (regexp.MustCompile(`(?m)^nats: `).MatchString(p.stdout.String()) &&
				regexp.MustCompile(`(?i)nats`).MatchString(p.stderr.String())) || p.exited()
		})
		p.signal(syscall.SIGINT)
		p.wait(60 * time.Second)
		assert.NotContains(t, p.stdout.String()+p.stderr.String(), pw)
		assert.Contains(t, p.stdout.String(), "nats://xxxxx@127.0.0.1:1")
	})
}

// --database-url-file (and PGRELAY_DATABASE_URL_FILE) read the URL from a
// file; a file anyone can read draws a warning; the flag and its file at once
// are refused.
func TestSecretFileFlags(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	dir := t.TempDir()
	private := filepath.Join(dir, "db.url")
	require.NoError(t, os.WriteFile(private, []byte(d.URL+"\n"), 0o600))
	public := filepath.Join(dir, "db-public.url")
	require.NoError(t, os.WriteFile(public, []byte(d.URL+"\n"), 0o644))
	empty := filepath.Join(dir, "empty.url")
	require.NoError(t, os.WriteFile(empty, []byte("\n"), 0o600))

	code, out, errOut := runCLI(t, nil, "stats", "--database-url-file", private)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "CHANNEL")
	assert.Empty(t, errOut)

	code, _, errOut = runCLI(t, []string{"PGRELAY_DATABASE_URL_FILE=" + public}, "stats")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, errOut, "pgrelay: warning: --database-url-file "+public+" holds credentials and every user of this machine can read it (mode 0644): chmod 600 it")

	// The command line wins over the environment, file or not.
	code, _, errOut = runCLI(t, []string{"PGRELAY_DATABASE_URL=postgres://nobody@127.0.0.1:1/x"}, "stats", "--database-url-file", private)
	require.Equal(t, 0, code, errOut)
	code, _, errOut = runCLI(t, []string{"PGRELAY_DATABASE_URL_FILE=" + empty}, "stats", "--database-url", d.URL)
	require.Equal(t, 0, code, errOut)

	for _, tc := range []struct {
		env  []string
		args []string
		want string
	}{
		{nil, []string{"--database-url", d.URL, "--database-url-file", private}, "give --database-url or --database-url-file, not both"},
		{[]string{"PGRELAY_DATABASE_URL=" + d.URL, "PGRELAY_DATABASE_URL_FILE=" + private}, nil, "give --database-url or --database-url-file, not both"},
		{nil, []string{"--database-url-file", filepath.Join(dir, "missing")}, "--database-url-file " + filepath.Join(dir, "missing") + ": no such file"},
		{nil, []string{"--database-url-file", empty}, "--database-url-file " + empty + ": the file is empty"},
	} {
		code, _, errOut := runCLI(t, tc.env, append([]string{"stats"}, tc.args...)...)
		assert.Equal(t, 2, code, errOut)
		assert.Contains(t, errOut, tc.want)
	}
	// run has --smtp-url-file and --nats-url-file too.
	_, _, errOut = runCLI(t, nil, "run", "-h")
	for _, f := range []string{"-database-url-file", "-smtp-url-file", "-nats-url-file"} {
		assert.Contains(t, errOut, f)
	}
}

// A --config file with SMTP credentials that anyone can read draws a warning.
func TestConfigFileWorldReadableWarns(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	cfg := filepath.Join(t.TempDir(), "pgrelay.json")
	require.NoError(t, os.WriteFile(cfg, []byte(`{"smtp": {"default": "smtp://user:pw@127.0.0.1:1"}}`), 0o644))
	p := startCLI(t, nil, "run", "--database-url", d.URL, "--config", cfg, "--log-level", "info")
	testenv.Eventually(t, 30*time.Second, "the Processor to start", func() bool {
		return regexp.MustCompile(`msg="processor started"`).MatchString(p.stderr.String()) || p.exited()
	})
	p.signal(syscall.SIGTERM)
	require.Equal(t, 0, p.wait(30*time.Second))
	assert.Contains(t, p.stderr.String(), "pgrelay: warning: --config "+cfg+" holds credentials and every user of this machine can read it (mode 0644): chmod 600 it")
}

// /healthz answers "unavailable" without the database's error, which goes to
// the log.
func TestHealthzHidesTheError(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	p := startCLI(t, nil, "run", "--database-url", d.URL, "--metrics-addr", "127.0.0.1:0", "--log-level", "info")
	metrics := metricsServer(t, p)
	get := func() (int, string) { return metrics("/healthz") }
	u, err := url.Parse(d.URL)
	require.NoError(t, err)
	name := u.Path[1:]
	ctx := context.Background()
	// The database refuses connections and loses the ones it had.
	require.NoError(t, pg.Exec(ctx, "postgres", `ALTER DATABASE "`+name+`" ALLOW_CONNECTIONS false`))
	t.Cleanup(func() { _ = pg.Exec(ctx, "postgres", `ALTER DATABASE "`+name+`" ALLOW_CONNECTIONS true`) })
	require.NoError(t, pg.Exec(ctx, "postgres", `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1`, name))
	var code int
	var body string
	testenv.Eventually(t, 30*time.Second, "/healthz to fail", func() bool {
		code, body = get()
		return code != 200
	})
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Equal(t, "unavailable\n", body)
	// The first ping may meet a connection the terminate closed, later
	// ones the refusal: either way the log has the server's words.
	testenv.Eventually(t, 30*time.Second, "the detail in the log", func() bool {
		return regexp.MustCompile(`msg="healthz: unavailable" err=.*SQLSTATE`).MatchString(p.stderr.String())
	})

	require.NoError(t, pg.Exec(ctx, "postgres", `ALTER DATABASE "`+name+`" ALLOW_CONNECTIONS true`))
	testenv.Eventually(t, 30*time.Second, "/healthz to recover", func() bool {
		code, _ = get()
		return code == 200
	})
	p.signal(syscall.SIGTERM)
	require.Equal(t, 0, p.wait(30*time.Second))
}
