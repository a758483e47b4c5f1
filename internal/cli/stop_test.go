package cli_test

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/cli/clitest"
	"github.com/pgrelay/pgrelay/internal/testenv"
)

// fillPipe writes to the pipe of w until it is full: the next write of
// whoever else writes to it blocks until someone reads.
func fillPipe(t *testing.T, w *os.File) {
	t.Helper()
	fd := int(w.Fd())
	require.NoError(t, syscall.SetNonblock(fd, true))
	buf := make([]byte, 512)
	for {
		_, err := syscall.Write(fd, buf)
		if errors.Is(err, syscall.EAGAIN) {
			// Blocking again: the flag is the pipe's, shared with dev.
			require.NoError(t, syscall.SetNonblock(fd, false))
			return
		}
		require.NoError(t, err)
	}
}

// Ctrl-C stops dev whatever its output does: here nothing reads it (a
// terminal that stopped scrolling, a pipe nobody drains), so the live view
// blocks on its write. The stop runs beside the view, says what it can and
// takes everything down: PostgreSQL is gone and its cluster removed.
func TestDevStopsWhenNobodyReadsItsOutput(t *testing.T) {
	t.Parallel()
	tmp, err := os.MkdirTemp("", "pgrelay-cli-devblocked-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(tmp) })
	require.NoError(t, os.Chmod(tmp, 0o755))

	r, w, err := os.Pipe()
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(exe, "dev", "--rate", "20", "--refresh", "20ms", "--web=false", "--nats-port", "0")
	cmd.Env = append(os.Environ(), clitest.RunMainEnv+"=1", "TMPDIR="+tmp)
	stderr := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = w, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = w.Close() })
	done := make(chan struct{})
	var state *os.ProcessState
	go func() {
		_ = cmd.Wait()
		state = cmd.ProcessState
		close(done)
	}()
	exited := func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	}
	t.Cleanup(func() {
		if !exited() {
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("pgrelay dev stderr:\n%s", tail(stderr.String()))
		}
	})
	testenv.Eventually(t, 90*time.Second, "dev to start", func() bool {
		return strings.Contains(stderr.String(), "processor started") || exited()
	})
	require.False(t, exited(), "dev exited on its own")
	// From here on, whatever dev writes to its output waits.
	fillPipe(t, w)
	require.NoError(t, w.Close())
	// The cluster dev runs, under its TMPDIR.
	clusters, err := os.ReadDir(tmp)
	require.NoError(t, err)
	require.NotEmpty(t, clusters, "dev's cluster is under its TMPDIR")

	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	select {
	case <-done:
	case <-time.After(30 * time.Second): // a hang guard, not a speed bound
		t.Fatal("dev did not exit after SIGINT while nothing read its output")
	}
	assert.Equal(t, 0, state.ExitCode(), "dev exits 0")
	left, err := os.ReadDir(tmp)
	require.NoError(t, err)
	assert.Empty(t, left, "dev stopped its PostgreSQL and removed its cluster")
}

// The stop `pgrelay run` logs last covers the whole stop: each part of it
// (the Processor, the metrics server, here holding a connection that never
// sends a request) says when it is done, and the line with the stop's time
// comes after all of them, the last the process writes.
func TestRunLogsItsWholeStop(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	p := startCLI(t, nil, "run", "--database-url", d.URL, "--metrics-addr", "127.0.0.1:0",
		"--log-level", "debug", "--heartbeat-interval", "200ms")
	addrRe := regexp.MustCompile(`msg="serving metrics".* addr=(127\.0\.0\.1:\d+)`)
	var addr string
	testenv.Eventually(t, 60*time.Second, "the metrics server", func() bool {
		if m := addrRe.FindStringSubmatch(p.stderr.String()); m != nil {
			addr = m[1]
		}
		return addr != "" || p.exited()
	})
	require.NotEmpty(t, addr, "the metrics server's address")
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })

	sent := time.Now()
	p.signal(syscall.SIGTERM)
	require.Equal(t, 0, p.wait(30*time.Second), "run exits 0 on SIGTERM") // a hang guard
	wall := time.Since(sent)

	lines := strings.Split(strings.TrimRight(p.stderr.String(), "\n"), "\n")
	last := lines[len(lines)-1]
	m := regexp.MustCompile(`msg=stopped took=(\S+)$`).FindStringSubmatch(last)
	require.NotNil(t, m, "the last line is the stop's time: %q", last)
	took, err := time.ParseDuration(m[1])
	require.NoError(t, err)
	assert.LessOrEqual(t, took, wall, "the stop's time is measured inside the process's life")
	out := p.stderr.String()
	at := func(s string) int {
		i := strings.LastIndex(out, s)
		require.GreaterOrEqual(t, i, 0, "the log says %q", s)
		return i
	}
	end := at("msg=stopped took=")
	for _, part := range []string{`msg="processor stopped"`, `msg="stop: done" part="the metrics server"`} {
		assert.Less(t, at(part), end, "%s is logged before the stop's time", part)
	}
}
