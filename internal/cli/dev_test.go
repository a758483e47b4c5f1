package cli_test

import (
	"context"
	"net"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
	eventually(t, 90*time.Second, "the live view to show succeeded demo_orders events", func() bool {
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
	eventually(t, 60*time.Second, "the live view to show captured emails", func() bool {
		return captured.MatchString(p.stdout.String()) || p.exited()
	})
	assert.NotContains(t, out, "\033[", "no terminal escapes when stdout is not a terminal")
	assert.Regexp(t, `Processor: \d+ slots in use`, out, "the live view shows the Processor's slots in use")

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
	eventually(t, 90*time.Second, "succeeded demo_orders events", func() bool {
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
	eventually(t, 90*time.Second, "the first run's events in the live view", func() bool {
		again, _ = devSucceeded(p.stdout.String(), "demo_orders")
		return again >= first || p.exited()
	})
	require.False(t, p.exited(), "the second dev exited on its own")
	p.signal(syscall.SIGINT)
	require.Equal(t, 0, p.wait(60*time.Second), "dev exits 0 on SIGINT")
}

// startDevWithSlowHandler starts dev without a demo producer, registers a
// channel whose handler sleeps ten minutes, notifies it and waits until the
// handler runs: a stop then has something in flight to wait for.
func startDevWithSlowHandler(t *testing.T, args ...string) *proc {
	t.Helper()
	tmp, err := os.MkdirTemp("", "pgrelay-cli-devstop-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(tmp) })
	require.NoError(t, os.Chmod(tmp, 0o755))
	p := startCLI(t, []string{"TMPDIR=" + tmp}, append([]string{"dev", "--rate", "0", "--refresh", "200ms",
		"--heartbeat-interval", "200ms"}, args...)...)
	var dbURL string
	eventually(t, 90*time.Second, "dev to show its database", func() bool {
		_, dbURL = devSucceeded(p.stdout.String(), "demo_orders")
		return dbURL != "" || p.exited()
	})
	require.False(t, p.exited(), "dev exited on its own")
	ctx := context.Background()
	c, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	_, err = c.Exec(ctx, `SELECT pgrelay.register('slow', 'SELECT pg_catalog.pg_sleep(600)', p_timeout := '1 hour')`)
	require.NoError(t, err)
	_, err = c.Exec(ctx, `SELECT pgrelay.notify('slow', 'x')`)
	require.NoError(t, err)
	eventually(t, 60*time.Second, "the slow handler to run", func() bool {
		var n int
		err := c.QueryRow(ctx, `SELECT count(*) FROM pg_catalog.pg_stat_activity
			WHERE query LIKE '%pg_sleep(600)%' AND pid <> pg_catalog.pg_backend_pid()`).Scan(&n)
		return (err == nil && n > 0) || p.exited()
	})
	require.False(t, p.exited(), "dev exited on its own")
	return p
}

// Ctrl-C stops dev while a handler runs: dev says what it waits for, cuts
// the handler at its shutdown timeout (3 s by default in dev) and exits 0.
func TestDevStopsWhileAHandlerRuns(t *testing.T) {
	t.Parallel()
	p := startDevWithSlowHandler(t)
	p.signal(syscall.SIGINT)
	require.Equal(t, 0, p.wait(60*time.Second), "dev exits 0 on SIGINT")
	out := p.stdout.String()
	assert.Contains(t, out, "stopping ...")
	assert.Regexp(t, `stopping: waiting for the Processor \(\d+s, [1-9]\d* slots in use; exits at the latest 8s after the stop began; Ctrl-C again to exit now\)`, out)
}

// A second Ctrl-C exits at once, whatever the stop waits for (here a handler
// with a ten-minute shutdown timeout).
func TestDevSecondInterruptExitsAtOnce(t *testing.T) {
	t.Parallel()
	p := startDevWithSlowHandler(t, "--shutdown-timeout", "10m")
	p.signal(syscall.SIGINT)
	eventually(t, 60*time.Second, "dev to say what it waits for", func() bool {
		return strings.Contains(p.stdout.String(), "stopping: waiting for the Processor") || p.exited()
	})
	require.False(t, p.exited(), "dev waits for its handler")
	p.signal(syscall.SIGINT)
	require.Equal(t, 130, p.wait(60*time.Second), "the second SIGINT exits with 130")
	assert.Contains(t, p.stderr.String(), "pgrelay dev: interrupted again: exiting without finishing the stop")
}
