// Package testenv is the test-only layer over internal/devenv: a throwaway
// PostgreSQL for a whole test binary (MainWithPostgres), a fresh migrated
// database per test with the query helpers every package's tests share (DB),
// and clusters stopped when their test ends. The pgrelay
// binary never links it; what `pgrelay dev` and `pgrelay bench` start lives in
// devenv.
package testenv

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/pgrelay/pgrelay/internal/devenv"
)

// Postgres is a test binary's throwaway cluster with the per-test helpers.
type Postgres struct {
	*devenv.Postgres
	empty atomic.Int64 // the EmptyDB databases made so far
}

// MainWithPostgres runs a package's tests against one throwaway cluster started
// for the whole test binary (initdb once per run; a database per test) and
// returns the exit code for os.Exit. The cluster is stored in *pg. A missing
// PostgreSQL fails the run loudly rather than skipping.
func MainWithPostgres(m *testing.M, pg **Postgres) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	p, err := devenv.StartPostgres(ctx, devenv.PostgresConfig{})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: cannot start the test PostgreSQL:", err)
		return 1
	}
	*pg = &Postgres{Postgres: p}
	code := m.Run()
	if err := p.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "warning:", err)
	}
	return code
}

// MainWithPostgresNoLeaks is MainWithPostgres followed, when the tests
// passed, by a check that no goroutine they started still runs. The snapshot
// of goroutines to ignore is taken before anything starts: taken after the
// tests it would ignore every goroutine still running, leaks included.
func MainWithPostgresNoLeaks(m *testing.M, pg **Postgres) int {
	ignore := goleak.IgnoreCurrent()
	code := MainWithPostgres(m, pg)
	if code == 0 {
		if err := goleak.Find(ignore, ignoreDeadLetterThrottle()); err != nil {
			fmt.Fprintln(os.Stderr, "goroutine leak:", err)
			code = 1
		}
	}
	return code
}

// ignoreDeadLetterThrottle: the actor library's dead-letter log throttle
// starts a goroutine that ends by itself one throttle interval (1 s) after a
// dead letter, such as a message to an actor of a Processor that has just
// stopped. It belongs to no Processor and outlives none for long, but longer
// than goleak's retries wait.
func ignoreDeadLetterThrottle() goleak.Option {
	return goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1")
}

// DB creates a fresh migrated database for t and returns its URL.
func (p *Postgres) DB(t testing.TB) string {
	t.Helper()
	url, err := p.NewDatabase(context.Background(), t.Name())
	if err != nil {
		t.Fatalf("create test database: %v", err)
	}
	return url
}

// EmptyDB creates an empty, unmigrated database for t and returns its URL.
func (p *Postgres) EmptyDB(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("empty_%d_%d", os.Getpid(), p.empty.Add(1))
	if err := p.Exec(context.Background(), "postgres", "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create empty database %s: %v", name, err)
	}
	return p.URL(name)
}

// Pool creates a fresh migrated database for t and a pool on it, closed when t ends.
func (p *Postgres) Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	return p.NewDB(t).Pool
}

// ClusterT starts a cluster for t and stops it when t ends. A Spock cluster
// without SPOCK_PG_HOME skips t with one line that says so.
func ClusterT(t testing.TB, cfg devenv.ClusterConfig) *devenv.Cluster {
	t.Helper()
	if cfg.Engine == "" {
		cfg.Engine = devenv.Pglogical
	}
	if cfg.Engine == devenv.Spock && cfg.BinDir == "" {
		if _, err := devenv.FindSpock(); err != nil {
			t.Skipf("Spock variant skipped: %v (make test sets it when ../shared/spock/pg15-spock exists)", err)
		}
	}
	c, err := devenv.StartCluster(context.Background(), cfg)
	if err != nil {
		t.Fatalf("start the %s cluster: %v", cfg.Engine, err)
	}
	t.Cleanup(c.Stop)
	// A failed test says what the servers said: a node that dropped its
	// connections shows only "unexpected EOF" to its clients.
	t.Cleanup(func() {
		if t.Failed() {
			for n := 1; n <= c.N(); n++ {
				t.Logf("node %d's server log (%s), its crashes and fatal errors:\n%s", n, c.Node(n).LogFile(), serverTrouble(c.Node(n).LogFile()))
			}
		}
	})
	return c
}

// serverTrouble is what a server's log says of crashes and fatal errors. A
// process that was terminated by a signal (a crash, which restarts every
// backend) also brings the 30 lines logged before it, for what the server
// was doing then. At most the last 120 lines of all that.
func serverTrouble(file string) string {
	b, err := os.ReadFile(file)
	if err != nil {
		return err.Error()
	}
	var all, lines []string
	for l := range strings.Lines(string(b)) {
		all = append(all, l)
	}
	for i, l := range all {
		for _, k := range []string{"PANIC", "FATAL", "terminated by signal", "exited with exit code", "crash", "TRAP"} {
			if !strings.Contains(l, k) {
				continue
			}
			if k == "terminated by signal" {
				lines = append(lines, "  (the 30 lines before it:)\n")
				for _, p := range all[max(0, i-30):i] {
					lines = append(lines, "  "+p)
				}
			}
			lines = append(lines, l)
			break
		}
	}
	return strings.Join(lines[max(0, len(lines)-120):], "")
}
