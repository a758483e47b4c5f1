package cli_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/mail"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/cli"
	"github.com/pgrelay/pgrelay/internal/secret"
	"github.com/pgrelay/pgrelay/internal/testenv"
	"github.com/pgrelay/pgrelay/migrations"
)

// devSucceeded returns the SUCCEEDED count of channel in the last frame of the
// live view printed so far, and the database URL it shows.
func devSucceeded(out, channel string) (n int, dbURL string) {
	for _, l := range strings.Split(out, "\n") {
		if u, ok := strings.CutPrefix(l, "database: "); ok {
			dbURL = strings.TrimSpace(u)
		}
		// CHANNEL MODE PENDING IN FLIGHT RETRYING SUCCEEDED FAILED GAVE UP EXPIRED
		f := strings.Fields(l)
		if len(f) == 9 && f[0] == channel {
			if v, err := strconv.Atoi(f[5]); err == nil {
				n = v
			}
		}
	}
	return n, dbURL
}

// TestDev runs `pgrelay dev` (its own PostgreSQL, the demo channels, the live
// view) until the demo events flow, stops it with SIGINT and checks it exits
// 0 and takes its PostgreSQL down with it.
func TestDev(t *testing.T) {
	t.Parallel()
	// dev's temporary cluster goes under TMPDIR: a directory of this test's,
	// reachable by the postgres OS user when running as root, to check that
	// dev removes the cluster on exit.
	tmp, err := os.MkdirTemp("", "pgrelay-cli-dev-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(tmp) })
	require.NoError(t, os.Chmod(tmp, 0o755))

	p := startCLI(t, []string{"TMPDIR=" + tmp}, "dev", "--rate", "50", "--refresh", "200ms",
		"--heartbeat-interval", "200ms")
	var dbURL string
	testenv.Eventually(t, 90*time.Second, "the live view to show succeeded demo_orders events", func() bool {
		var n int
		n, dbURL = devSucceeded(p.stdout.String(), "demo_orders")
		return n > 0 || p.exited()
	})
	require.False(t, p.exited(), "dev exited on its own")
	require.NotEmpty(t, dbURL)
	out := p.stdout.String()
	assert.Contains(t, out, "starting a throwaway PostgreSQL")
	assert.Contains(t, out, "Ctrl-C to stop")
	for _, ch := range []string{"demo_orders", "demo_ledger", "demo_flaky", "demo_email"} {
		assert.Regexp(t, `(?m)^ *`+ch+` +(none|channel) +\d+`, out, "the live view lists %s", ch)
	}
	// The demo emails reach dev's in-process SMTP catcher.
	captured := regexp.MustCompile(`SMTP catcher smtp://127\.0\.0\.1:\d+: [1-9]\d* emails captured, last: "Order \d+ confirmed"`)
	testenv.Eventually(t, 60*time.Second, "the live view to show captured emails", func() bool {
		return captured.MatchString(p.stdout.String()) || p.exited()
	})
	// Each one is kept as an .eml file, and the view lists the last ones.
	kept := regexp.MustCompile(`(?m)^ +"pgrelay demo" <demo@pgrelay\.localhost> +.+ +Order \d+ confirmed +\d{8}T\d{6}\.\d{9}Z-\d+\.eml$`)
	testenv.Eventually(t, 60*time.Second, "the live view to list the kept emails", func() bool {
		return kept.MatchString(p.stdout.String()) || p.exited()
	})
	assert.Regexp(t, `mail kept in .+/mail \(newest last\):`, p.stdout.String())
	assert.NotContains(t, out, "\033[", "no terminal escapes when stdout is not a terminal")
	assert.Regexp(t, `Processor: \d+ slots in use`, out, "the live view shows the Processor's slots in use")
	// The console, on by default, shows the same database.
	console := regexp.MustCompile(`(?m)^console:  (http://127\.0\.0\.1:\d+/)$`).FindStringSubmatch(out)
	require.NotNil(t, console, "the live view names the console")
	resp, err := http.Get(console[1])
	require.NoError(t, err)
	page, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, string(page), `id="ch-demo_orders"`)

	u, err := url.Parse(dbURL)
	require.NoError(t, err, dbURL)
	require.Equal(t, "/pgrelay_dev", u.Path)
	addr := u.Host
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err, "dev's PostgreSQL listens on %s", addr)
	_ = c.Close()

	p.signal(syscall.SIGINT)
	require.Equal(t, 0, p.wait(60*time.Second), "dev exits 0 on SIGINT")
	assert.Contains(t, p.stdout.String(), "stopping ...")

	c, err = net.DialTimeout("tcp", addr, 5*time.Second)
	if err == nil {
		_ = c.Close()
	}
	assert.Error(t, err, "dev's PostgreSQL on %s is gone", addr)
	left, err := os.ReadDir(tmp)
	require.NoError(t, err)
	assert.Empty(t, left, "dev removed its temporary cluster")
}

// TestDevDataDir: with --data-dir the cluster outlives dev, and a second dev
// on the same directory finds the first one's database, events and all.
func TestDevDataDir(t *testing.T) {
	t.Parallel()
	parent, err := os.MkdirTemp("", "pgrelay-cli-devdata-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(parent) })
	require.NoError(t, os.Chmod(parent, 0o755))
	dir := parent + "/cluster"

	p := startCLI(t, nil, "dev", "--data-dir", dir, "--rate", "50", "--refresh", "200ms")
	var first int
	testenv.Eventually(t, 90*time.Second, "succeeded demo_orders events", func() bool {
		first, _ = devSucceeded(p.stdout.String(), "demo_orders")
		return first > 0 || p.exited()
	})
	require.False(t, p.exited(), "dev exited on its own")
	p.signal(syscall.SIGINT)
	require.Equal(t, 0, p.wait(60*time.Second), "dev exits 0 on SIGINT")
	_, err = os.Stat(dir + "/PG_VERSION")
	require.NoError(t, err, "the cluster is kept in --data-dir")

	// No demo producer this time: what the view shows was kept from the first run.
	p = startCLI(t, nil, "dev", "--data-dir", dir, "--rate", "0", "--refresh", "200ms")
	var again int
	testenv.Eventually(t, 90*time.Second, "the first run's events in the live view", func() bool {
		again, _ = devSucceeded(p.stdout.String(), "demo_orders")
		return again >= first || p.exited()
	})
	require.False(t, p.exited(), "the second dev exited on its own")
	p.signal(syscall.SIGINT)
	require.Equal(t, 0, p.wait(60*time.Second), "dev exits 0 on SIGINT")
}

// startDevWithSlowHandler starts dev without a demo producer, registers a
// channel whose handler sleeps ten minutes, notifies it and waits until the
// handler runs: a stop then has something in flight to wait for. With
// attachTo, dev attaches to that database.
func startDevWithSlowHandler(t *testing.T, attachTo string, args ...string) *proc {
	t.Helper()
	tmp, err := os.MkdirTemp("", "pgrelay-cli-devstop-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(tmp) })
	require.NoError(t, os.Chmod(tmp, 0o755))
	if attachTo != "" {
		args = append([]string{"--database-url", attachTo, "--data-dir", tmp}, args...)
	}
	p := startCLI(t, []string{"TMPDIR=" + tmp}, append([]string{"dev", "--rate", "0", "--refresh", "200ms",
		"--heartbeat-interval", "200ms"}, args...)...)
	var dbURL string
	testenv.Eventually(t, 90*time.Second, "dev to show its database", func() bool {
		_, dbURL = devSucceeded(p.stdout.String(), "demo_orders")
		return dbURL != "" || p.exited()
	})
	require.False(t, p.exited(), "dev exited on its own")
	if attachTo != "" {
		dbURL = attachTo // the view hides its credentials
	}
	ctx := context.Background()
	c, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	_, err = c.Exec(ctx, `SELECT pgrelay.register('slow', 'SELECT pg_catalog.pg_sleep(600)', p_timeout := '1 hour')`)
	require.NoError(t, err)
	_, err = c.Exec(ctx, `SELECT pgrelay.notify('slow', 'x')`)
	require.NoError(t, err)
	testenv.Eventually(t, 60*time.Second, "the slow handler to run", func() bool {
		var n int
		err := c.QueryRow(ctx, `SELECT count(*) FROM pg_catalog.pg_stat_activity
			WHERE query LIKE '%pg_sleep(600)%' AND pid <> pg_catalog.pg_backend_pid()
			AND datname = pg_catalog.current_database()`).Scan(&n)
		return (err == nil && n > 0) || p.exited()
	})
	require.False(t, p.exited(), "dev exited on its own")
	return p
}

// Ctrl-C stops dev while a handler runs: dev says what it waits for, cuts
// the handler at its shutdown timeout (3 s by default in dev) and exits 0.
func TestDevStopsWhileAHandlerRuns(t *testing.T) {
	t.Parallel()
	p := startDevWithSlowHandler(t, "")
	p.signal(syscall.SIGINT)
	require.Equal(t, 0, p.wait(60*time.Second), "dev exits 0 on SIGINT")
	out := p.stdout.String()
	assert.Contains(t, out, "stopping ...")
	assert.Regexp(t, `stopping: waiting for the Processor \(\d+s, [1-9]\d* slots in use; exits at the latest 8s after the stop began; Ctrl-C again to exit now\)`, out)
}

// Attached to a database, the stop works the same, stops no PostgreSQL and
// leaves the cut event in the database for a later Processor.
func TestDevAttachedStopsWhileAHandlerRuns(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	p := startDevWithSlowHandler(t, d.URL)
	p.signal(syscall.SIGINT)
	require.Equal(t, 0, p.wait(60*time.Second), "dev exits 0 on SIGINT")
	out := p.stdout.String()
	assert.Contains(t, out, "stopping ...")
	assert.Regexp(t, `stopping: waiting for the Processor \(\d+s, [1-9]\d* slots in use; exits at the latest 8s after the stop began; Ctrl-C again to exit now\)`, out)
	assert.Equal(t, 1, d.Count("SELECT count(*) FROM pgrelay.queue WHERE channel = 'slow'"),
		"the event is still queued")
}

// A second Ctrl-C exits at once, whatever the stop waits for (here a handler
// with a ten-minute shutdown timeout).
func TestDevSecondInterruptExitsAtOnce(t *testing.T) {
	t.Parallel()
	p := startDevWithSlowHandler(t, "", "--shutdown-timeout", "10m")
	p.signal(syscall.SIGINT)
	testenv.Eventually(t, 60*time.Second, "dev to say what it waits for", func() bool {
		return strings.Contains(p.stdout.String(), "stopping: waiting for the Processor") || p.exited()
	})
	require.False(t, p.exited(), "dev waits for its handler")
	p.signal(syscall.SIGINT)
	require.Equal(t, 130, p.wait(60*time.Second), "the second SIGINT exits with 130")
	assert.Contains(t, p.stderr.String(), "pgrelay dev: interrupted again: exiting without finishing the stop")
}

// keptMail returns the .eml files in dir, in name order.
func keptMail(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.eml"))
	require.NoError(t, err)
	return files
}

// TestDevAttached: `pgrelay dev --database-url` on an existing database
// starts no PostgreSQL, says it migrates the database and does, creates no
// demo channels, and runs the database's own channels: an email channel's
// message reaches dev's SMTP catcher, which keeps it as an .eml file under
// --data-dir that the view lists. Ctrl-C leaves the database as it was. A
// second dev on the same --data-dir lists the kept mail again, and with
// --demo creates the demo channels.
func TestDevAttached(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pg.EmptyDB(t)
	dataDir := t.TempDir()
	mailDir := filepath.Join(dataDir, "mail")

	p := startCLI(t, nil, "dev", "--database-url", dbURL, "--data-dir", dataDir, "--refresh", "200ms",
		"--heartbeat-interval", "200ms")
	testenv.Eventually(t, 60*time.Second, "the live view", func() bool {
		return strings.Contains(p.stdout.String(), "Ctrl-C to stop") || p.exited()
	})
	require.False(t, p.exited(), "dev exited on its own:\n%s%s", p.stdout.String(), p.stderr.String())
	out := p.stdout.String()
	assert.NotContains(t, out, "starting a throwaway PostgreSQL")
	assert.Contains(t, out, "migrating the database as 'pgrelay migrate' would ...")
	assert.Contains(t, out, "applied 0001_pgrelay")
	assert.Contains(t, out, fmt.Sprintf("schema at version %d", migrations.Latest()))
	assert.Contains(t, out, "database: "+secret.String(dbURL), "credentials hidden")
	assert.Contains(t, out, `try:      psql "$DATABASE_URL" -c "SELECT pgrelay.notify('<channel>',`)
	assert.Contains(t, out, "demo producer: off (no demo channels: --demo creates them)")

	c, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	one := func(sql string) (v any) {
		t.Helper()
		require.NoError(t, c.QueryRow(ctx, sql).Scan(&v), sql)
		return v
	}
	assert.EqualValues(t, migrations.Latest(), one("SELECT max(version) FROM pgrelay.schema_migrations"), "dev migrated the database")
	assert.Equal(t, true, one("SELECT to_regnamespace('demo') IS NULL"), "no demo schema")
	assert.EqualValues(t, 0, one("SELECT count(*) FROM pgrelay.channels"), "no demo channels")

	// The application's own channels.
	for _, sql := range []string{
		"CREATE TABLE public.shipped (payload text NOT NULL)",
		"SELECT pgrelay.register('shipped', 'INSERT INTO public.shipped (payload) VALUES ($1)')",
		"SELECT pgrelay_notifier.create_channel('welcome', 'Team <team@example.com>')",
		"SELECT pgrelay.notify('shipped', '{\"order\": 7}')",
		"SELECT pgrelay_notifier.send('welcome', ARRAY['New Hire <new@example.com>'], 'Welcome aboard', 'Hello.')",
	} {
		_, err := c.Exec(ctx, sql)
		require.NoError(t, err, sql)
	}
	testenv.Eventually(t, 60*time.Second, "the catcher to keep the welcome email", func() bool {
		return len(keptMail(t, mailDir)) > 0 || p.exited()
	})
	require.False(t, p.exited(), "dev exited on its own")
	files := keptMail(t, mailDir)
	require.Len(t, files, 1)
	file := files[0]
	assert.Regexp(t, `^\d{8}T\d{6}\.\d{9}Z-1\.eml$`, filepath.Base(file))
	raw, err := os.ReadFile(file)
	require.NoError(t, err)
	m, err := mail.ReadMessage(bytes.NewReader(raw))
	require.NoError(t, err, "the file is an RFC 5322 message")
	assert.Equal(t, "Welcome aboard", m.Header.Get("Subject"))
	from, err := mail.ParseAddress(m.Header.Get("From"))
	require.NoError(t, err)
	assert.Equal(t, "team@example.com", from.Address)
	to, err := mail.ParseAddress(m.Header.Get("To"))
	require.NoError(t, err)
	assert.Equal(t, "new@example.com", to.Address)
	assert.NotEmpty(t, m.Header.Get("Message-Id"))

	listed := regexp.MustCompile(`(?m)^ +` + regexp.QuoteMeta(m.Header.Get("From")) + ` +` +
		regexp.QuoteMeta(m.Header.Get("To")) + ` +Welcome aboard +` + regexp.QuoteMeta(filepath.Base(file)) + `$`)
	testenv.Eventually(t, 30*time.Second, "the view to list the kept email and the shipped event", func() bool {
		n, _ := devSucceeded(p.stdout.String(), "shipped")
		return (listed.MatchString(p.stdout.String()) && n == 1) || p.exited()
	})
	require.False(t, p.exited(), "dev exited on its own")
	assert.Contains(t, p.stdout.String(), "mail kept in "+mailDir+" (newest last):")
	assert.Regexp(t, `(?m)^ *welcome +none +\d+`, p.stdout.String(), "the view lists every channel of the database")

	p.signal(syscall.SIGINT)
	require.Equal(t, 0, p.wait(60*time.Second), "dev exits 0 on SIGINT")
	assert.Contains(t, p.stdout.String(), "stopping ...")

	// The database is as dev left it running: schema, channels, rows, log.
	assert.EqualValues(t, migrations.Latest(), one("SELECT max(version) FROM pgrelay.schema_migrations"))
	assert.EqualValues(t, 2, one("SELECT count(*) FROM pgrelay.channels"))
	assert.Equal(t, `{"order": 7}`, one("SELECT payload FROM public.shipped"))
	assert.EqualValues(t, 2, one("SELECT count(*) FROM pgrelay.log WHERE event = 'succeeded'"))
	assert.Equal(t, true, one("SELECT to_regnamespace('demo') IS NULL"))

	// Again on the same --data-dir, with --demo: nothing to migrate, the
	// kept email is listed, the demo channels are created.
	p = startCLI(t, nil, "dev", "--database-url", dbURL, "--data-dir", dataDir, "--demo", "--rate", "0",
		"--refresh", "200ms", "--heartbeat-interval", "200ms")
	testenv.Eventually(t, 60*time.Second, "the second dev to list the kept email", func() bool {
		return listed.MatchString(p.stdout.String()) || p.exited()
	})
	require.False(t, p.exited(), "dev exited on its own:\n%s%s", p.stdout.String(), p.stderr.String())
	out = p.stdout.String()
	assert.Contains(t, out, fmt.Sprintf("schema at version %d: nothing to migrate", migrations.Latest()))
	assert.NotContains(t, out, "applied 0001_pgrelay")
	assert.Contains(t, out, "demo producer: off (--rate 0)")
	assert.Regexp(t, `SMTP catcher smtp://127\.0\.0\.1:\d+: 0 emails captured\n`, out)
	assert.EqualValues(t, 4, one("SELECT count(*) FROM pgrelay.channels WHERE channel LIKE 'demo\\_%'"))
	p.signal(syscall.SIGINT)
	require.Equal(t, 0, p.wait(60*time.Second), "dev exits 0 on SIGINT")
	assert.Len(t, keptMail(t, mailDir), 1)
}

// dev attached with a login that cannot migrate the database says it is
// about to migrate, then refuses with the reason and what to do; it changes
// nothing. --port is for the throwaway PostgreSQL only.
func TestDevAttachedRefusesWhenItCannotMigrate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pg.EmptyDB(t)
	role := fmt.Sprintf("dev_nomigrate_%d", os.Getpid())
	require.NoError(t, pg.Exec(ctx, "postgres", "CREATE ROLE "+role+" LOGIN"))
	t.Cleanup(func() { _ = pg.Exec(context.Background(), "postgres", "DROP ROLE "+role) })
	asRole := strings.Replace(dbURL, "postgres://postgres@", "postgres://"+role+"@", 1)
	require.NotEqual(t, dbURL, asRole)

	code, out, errOut := runCLI(t, nil, "dev", "--database-url", asRole, "--data-dir", t.TempDir())
	require.Equal(t, 1, code, "%s%s", out, errOut)
	assert.Contains(t, out, "migrating the database as 'pgrelay migrate' would ...")
	assert.Regexp(t, `cannot migrate the database as `+role+`: .*permission denied`, errOut)
	assert.Contains(t, errOut, "run 'pgrelay migrate' as the schema's owner first, or give dev a login that can")
	assert.NotContains(t, out, "Ctrl-C to stop")

	c, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	v, err := migrations.Current(ctx, c)
	require.NoError(t, err)
	assert.Equal(t, 0, v, "nothing was created")

	code, _, errOut = cliMain("dev", "--database-url", dbURL, "--port", "5999")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "--port is for the throwaway PostgreSQL: not with --database-url")
}

// dev attaches only when --database-url (or --database-url-file) is on its
// command line: PGRELAY_DATABASE_URL, set for `pgrelay run`, leaves dev on
// its throwaway PostgreSQL, with a warning, and that database untouched.
func TestDevIgnoresDatabaseURLFromEnvironment(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pg.EmptyDB(t)
	tmp, err := os.MkdirTemp("", "pgrelay-cli-devenv-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(tmp) })
	require.NoError(t, os.Chmod(tmp, 0o755))
	p := startCLI(t, []string{"TMPDIR=" + tmp, "PGRELAY_DATABASE_URL=" + dbURL}, "dev", "--rate", "0", "--refresh", "200ms")
	testenv.Eventually(t, 90*time.Second, "the live view", func() bool {
		return strings.Contains(p.stdout.String(), "Ctrl-C to stop") || p.exited()
	})
	require.False(t, p.exited(), "dev exited on its own:\n%s%s", p.stdout.String(), p.stderr.String())
	assert.Contains(t, p.stdout.String(), "starting a throwaway PostgreSQL")
	assert.Contains(t, p.stderr.String(), "pgrelay dev: warning: PGRELAY_DATABASE_URL is set but not used: "+
		"dev attaches to a database only with --database-url on its command line")
	p.signal(syscall.SIGINT)
	require.Equal(t, 0, p.wait(60*time.Second), "dev exits 0 on SIGINT")

	c, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	v, err := migrations.Current(ctx, c)
	require.NoError(t, err)
	assert.Equal(t, 0, v, "the environment's database was not migrated")
}

// When the live view cannot count pgrelay.log's outcomes (here the count
// waits on a lock until the view's query timeout), it says so and shows the
// outcome columns as unknown, not as zeros; the queue's columns still show.
func TestDevViewShowsLogCountError(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	d.Exec(`SELECT pgrelay.register('c1', 'SELECT 1 WHERE $1::text IS NOT NULL')`)
	d.Exec(`SELECT pgrelay.notify('c1', 'x')`)
	ctx := context.Background()
	tx, err := d.Pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, "LOCK TABLE pgrelay.log IN ACCESS EXCLUSIVE MODE")
	require.NoError(t, err)

	var out bytes.Buffer
	cli.RenderDevView(ctx, d.Pool, &out)
	assert.Regexp(t, `(?m)^ *c1 +none +1 +0 +0 +\? +\? +\? +\?$`, out.String(), "c1's outcomes shown as unknown")
	assert.Contains(t, out.String(), "outcomes unknown: count pgrelay.log per channel:")
}
