package cli_test

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/cli/clitest"
	"github.com/pgrelay/pgrelay/internal/testenv"
)

var pg *testenv.Postgres

func TestMain(m *testing.M) { os.Exit(clitest.Main(m, &pg)) }

// cliMain runs the command line in this process.
var cliMain = clitest.Run

// lines splits s into its lines, without the empty one after a final newline.
func lines(s string) []string {
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// closedPortURL is a URL nothing listens on.
func closedPortURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	return fmt.Sprintf("postgres://postgres:s3cret@127.0.0.1:%d/nowhere?sslmode=disable", port)
}

// db is one test's migrated database (testenv.DB) with the helpers of these
// tests.
type db struct{ *testenv.DB }

func newDB(t *testing.T) *db {
	t.Helper()
	d := pg.NewDB(t)
	return dbOn(t, d.URL, d.Pool)
}

// dbOn wraps a database the test made itself (url, and pool on it).
func dbOn(t *testing.T, url string, pool *pgxpool.Pool) *db {
	return &db{DB: &testenv.DB{T: t, URL: url, Pool: pool}}
}

// syncBuffer is a bytes.Buffer safe for a writer and concurrent readers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// proc is the pgrelay command running as a subprocess.
type proc struct {
	t      *testing.T
	name   string
	cmd    *exec.Cmd
	stdout *syncBuffer
	stderr *syncBuffer
	done   chan struct{}
	state  *os.ProcessState
}

// startCLI runs `pgrelay args...` as a subprocess with extra environment
// variables env ("NAME=value"). The process is killed when the test ends if
// it is still running, and dies with the test binary.
func startCLI(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(exe, args...)
	cmd.Env = append(append(os.Environ(), clitest.RunMainEnv+"=1"), env...)
	p := &proc{t: t, name: strings.Join(args[:1], " "), cmd: cmd,
		stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.stdout, p.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(t, cmd.Start())
	go func() {
		_ = cmd.Wait()
		p.state = cmd.ProcessState
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("pgrelay %s (pid %d) stdout:\n%s", p.name, cmd.Process.Pid, tail(p.stdout.String()))
			t.Logf("pgrelay %s (pid %d) stderr:\n%s", p.name, cmd.Process.Pid, tail(p.stderr.String()))
		}
	})
	return p
}

func tail(s string) string {
	if len(s) > 6000 {
		return "..." + s[len(s)-6000:]
	}
	return s
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *proc) signal(sig os.Signal) {
	p.t.Helper()
	require.NoError(p.t, p.cmd.Process.Signal(sig))
}

// wait waits for the process to exit and returns its exit code (-1 when a
// signal killed it); it fails the test (and kills the process) after timeout.
func (p *proc) wait(timeout time.Duration) int {
	p.t.Helper()
	select {
	case <-p.done:
		return p.state.ExitCode()
	case <-time.After(timeout):
		_ = p.cmd.Process.Kill()
		<-p.done
		p.t.Fatalf("pgrelay %s did not exit within %s", p.name, timeout)
		return 0
	}
}

// runCLI runs `pgrelay args...` as a subprocess to completion.
func runCLI(t *testing.T, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	p := startCLI(t, env, args...)
	code = p.wait(60 * time.Second)
	return code, p.stdout.String(), p.stderr.String()
}
