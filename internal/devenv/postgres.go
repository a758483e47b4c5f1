// Package devenv starts the real dependencies pgrelay talks to — a throwaway
// PostgreSQL cluster from the system's binaries, a pglogical or Spock cluster,
// an in-process NATS server with JetStream and an SMTP catcher — for
// `pgrelay dev`, `pgrelay bench` and the tests. It does not import the testing
// package: the pgrelay binary links it; the per-test layer is internal/testenv.
package devenv

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgrelay/pgrelay/migrations"
)

// DefaultPGBin is where Debian's postgresql-15 package puts the server binaries.
const DefaultPGBin = "/usr/lib/postgresql/15/bin"

// ErrNoPostgres tells that the PostgreSQL server binaries are not installed.
var ErrNoPostgres = errors.New("devenv: PostgreSQL 15 server binaries not found")

// PostgresConfig configures a throwaway cluster. Zero values mean defaults.
type PostgresConfig struct {
	// BinDir holds initdb and postgres. Default: $PGRELAY_PG_BIN, else DefaultPGBin.
	BinDir string
	// DataDir is the cluster's directory; it is created (initdb) when empty or
	// missing and kept on Stop. Default: a new temporary directory removed on Stop.
	DataDir string
	// Port to listen on (127.0.0.1 only). Default: a free port.
	Port int
	// Durable keeps PostgreSQL's default durability (fsync, synchronous_commit,
	// full_page_writes). Tests and `pgrelay dev` run without it for speed;
	// benchmarks run with it.
	Durable bool
	// Settings are extra postgresql.conf lines (name -> value).
	Settings map[string]string
	// Logger receives progress messages. Default: discard.
	Logger *slog.Logger
}

// Postgres is a running throwaway cluster.
type Postgres struct {
	cfg     PostgresConfig
	dataDir string
	baseDir string // removed on Stop when we created it
	port    int
	osUser  *user.User // nil: run as the current user
	logFile string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}

	templateOnce sync.Once
	templateErr  error
	dbSeq        atomic.Int64
}

// FindPGBin returns the directory with the PostgreSQL server binaries, or an
// error that says how to install them.
func FindPGBin(dir string) (string, error) {
	if dir == "" {
		dir = os.Getenv("PGRELAY_PG_BIN")
	}
	if dir == "" {
		dir = DefaultPGBin
	}
	for _, b := range []string{"initdb", "postgres"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			return "", fmt.Errorf("%w in %s (install the Debian package postgresql-15: "+
				"'apt-get install postgresql-15' as root, or set PGRELAY_PG_BIN)", ErrNoPostgres, dir)
		}
	}
	return dir, nil
}

// StartPostgres initialises (when needed) and starts a cluster, and waits until
// it accepts connections. PostgreSQL refuses to run as root: when started by
// root the server runs as the "postgres" OS user.
func StartPostgres(ctx context.Context, cfg PostgresConfig) (*Postgres, error) {
	bin, err := FindPGBin(cfg.BinDir)
	if err != nil {
		return nil, err
	}
	cfg.BinDir = bin
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	p := &Postgres{cfg: cfg}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("devenv: running as root needs the \"postgres\" OS user (created by the postgresql-15 package): %w", err)
		}
		p.osUser = u
	}
	if cfg.DataDir == "" {
		base, err := os.MkdirTemp("", "pgrelay-pg-")
		if err != nil {
			return nil, fmt.Errorf("devenv: make data dir: %w", err)
		}
		p.baseDir = base
		p.dataDir = filepath.Join(base, "data")
	} else {
		abs, err := filepath.Abs(cfg.DataDir)
		if err != nil {
			return nil, fmt.Errorf("devenv: data dir %q: %w", cfg.DataDir, err)
		}
		p.dataDir = abs
	}
	if err := p.prepareDirs(); err != nil {
		p.cleanup()
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(p.dataDir, "PG_VERSION")); err != nil {
		if err := p.initdb(ctx); err != nil {
			p.cleanup()
			return nil, err
		}
	}
	p.port = cfg.Port
	if p.port == 0 {
		if p.port, err = freePort(); err != nil {
			p.cleanup()
			return nil, err
		}
	}
	if err := p.start(ctx); err != nil {
		p.cleanup()
		return nil, err
	}
	return p, nil
}

func (p *Postgres) prepareDirs() error {
	dirs := []string{p.dataDir}
	if p.baseDir != "" {
		dirs = append([]string{p.baseDir}, dirs...)
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("devenv: make %s: %w", d, err)
		}
	}
	if p.baseDir != "" {
		// The server user must be able to reach the data directory.
		if err := os.Chmod(p.baseDir, 0o755); err != nil {
			return fmt.Errorf("devenv: chmod %s: %w", p.baseDir, err)
		}
	}
	if err := os.Chmod(p.dataDir, 0o700); err != nil {
		return fmt.Errorf("devenv: chmod %s: %w", p.dataDir, err)
	}
	if p.osUser != nil {
		uid, _ := strconv.Atoi(p.osUser.Uid)
		gid, _ := strconv.Atoi(p.osUser.Gid)
		if err := os.Chown(p.dataDir, uid, gid); err != nil {
			return fmt.Errorf("devenv: chown %s to postgres: %w", p.dataDir, err)
		}
	}
	p.logFile = filepath.Join(filepath.Dir(p.dataDir), filepath.Base(p.dataDir)+".log")
	return nil
}

func (p *Postgres) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(p.cfg.BinDir, name), args...)
	cmd.Env = append(os.Environ(), "LC_ALL=C", "TZ=UTC")
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	if p.osUser != nil {
		uid, _ := strconv.Atoi(p.osUser.Uid)
		gid, _ := strconv.Atoi(p.osUser.Gid)
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		cmd.Dir = "/"
	}
	return cmd
}

func (p *Postgres) initdb(ctx context.Context) error {
	start := time.Now()
	cmd := p.command(ctx, "initdb", "-D", p.dataDir, "-U", "postgres", "-A", "trust",
		"-E", "UTF8", "--no-locale", "--no-sync")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("devenv: initdb %s: %w\n%s", p.dataDir, err, out)
	}
	settings := map[string]string{
		"listen_addresses":          "'127.0.0.1'",
		"unix_socket_directories":   "''",
		"max_connections":           "300",
		"shared_buffers":            "'256MB'",
		"log_min_messages":          "warning",
		"log_min_error_statement":   "panic",
		"max_locks_per_transaction": "256",
	}
	if !p.cfg.Durable {
		settings["fsync"] = "off"
		settings["synchronous_commit"] = "off"
		settings["full_page_writes"] = "off"
	}
	for k, v := range p.cfg.Settings {
		settings[k] = v
	}
	keys := make([]string, 0, len(settings))
	for k := range settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("\n# added by pgrelay devenv\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "%s = %s\n", k, settings[k])
	}
	f, err := os.OpenFile(filepath.Join(p.dataDir, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("devenv: open postgresql.conf: %w", err)
	}
	defer f.Close()
	if _, err := f.WriteString(b.String()); err != nil {
		return fmt.Errorf("devenv: write postgresql.conf: %w", err)
	}
	p.cfg.Logger.Debug("initdb done", "dir", p.dataDir, "took", time.Since(start))
	return nil
}

// start runs the postmaster as a child process that dies with us (SIGQUIT, an
// immediate shutdown, when this process exits for any reason).
func (p *Postgres) start(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	logf, err := os.OpenFile(p.logFile, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("devenv: open server log: %w", err)
	}
	// The parent-death signal is tied to the OS thread that forks.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cmd := p.command(context.Background(), "postgres", "-D", p.dataDir, "-p", strconv.Itoa(p.port))
	cmd.SysProcAttr.Pdeathsig = syscall.SIGQUIT
	// Its own process group: a Ctrl-C at the terminal reaches pgrelay, which
	// stops its Processor first and the server after, not the server at once.
	cmd.SysProcAttr.Setpgid = true
	cmd.Stdout = logf
	cmd.Stderr = logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("devenv: start postgres: %w", err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(done)
	}()
	p.cmd, p.done = cmd, done

	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := pgx.Connect(ctx, p.URL("postgres"))
		if err == nil {
			_ = c.Close(ctx)
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("devenv: postgres exited during start-up; see %s:\n%s", p.logFile, p.logTail())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("devenv: postgres did not accept connections within 60s: %w\n%s", err, p.logTail())
		}
	}
}

func (p *Postgres) logTail() string {
	b, _ := os.ReadFile(p.logFile)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// LogFile is the server's log.
func (p *Postgres) LogFile() string { return p.logFile }

// DataDir is the cluster's directory.
func (p *Postgres) DataDir() string { return p.dataDir }

// Port is the TCP port on 127.0.0.1.
func (p *Postgres) Port() int { return p.port }

// URL is a connection URL for database db as the superuser "postgres".
func (p *Postgres) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", p.port, db)
}

// stopWith signals the postmaster and waits for it to exit.
func (p *Postgres) stopWith(sig syscall.Signal, wait time.Duration) error {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.cmd = nil
	p.mu.Unlock()
	if cmd == nil {
		return nil
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
		return nil
	case <-time.After(wait):
		_ = cmd.Process.Kill()
		<-done
		return fmt.Errorf("devenv: postgres did not stop within %s; killed", wait)
	}
}

// Stop shuts the server down (a fast shutdown; an immediate one for a
// temporary cluster) and removes its directory when it was a temporary one.
func (p *Postgres) Stop() error {
	// A temporary cluster is removed right after: nothing of it is worth a
	// shutdown checkpoint, whose writes can take seconds on a busy disk. An
	// immediate shutdown ends its backends and exits.
	sig := syscall.SIGINT
	if p.baseDir != "" {
		sig = syscall.SIGQUIT
	}
	err := p.stopWith(sig, 30*time.Second)
	p.cleanup()
	return err
}

// Crash kills the server with SIGKILL, as a power cut would.
func (p *Postgres) Crash() error {
	return p.stopWith(syscall.SIGKILL, 10*time.Second)
}

// Restart stops the server (fast shutdown) and starts it again on the same port.
func (p *Postgres) Restart(ctx context.Context) error {
	if err := p.stopWith(syscall.SIGINT, 30*time.Second); err != nil {
		return err
	}
	return p.start(ctx)
}

// Start starts a stopped server again on the same port.
func (p *Postgres) Start(ctx context.Context) error { return p.start(ctx) }

func (p *Postgres) cleanup() {
	if p.baseDir != "" {
		_ = os.RemoveAll(p.baseDir)
	}
}

// Exec runs sql in database db as the superuser.
func (p *Postgres) Exec(ctx context.Context, db, sql string, args ...any) error {
	c, err := pgx.Connect(ctx, p.URL(db))
	if err != nil {
		return fmt.Errorf("devenv: connect to %s: %w", db, err)
	}
	defer c.Close(context.WithoutCancel(ctx))
	if _, err := c.Exec(ctx, sql, args...); err != nil {
		return fmt.Errorf("devenv: %s: %w", firstLine(sql), err)
	}
	return nil
}

// TemplateDB is the migrated database new test databases are copied from.
const TemplateDB = "pgrelay_template"

// CreateDatabase creates database name, migrated to the latest version (copied
// from a migrated template, which is built on first use).
func (p *Postgres) CreateDatabase(ctx context.Context, name string) error {
	p.templateOnce.Do(func() { p.templateErr = p.buildTemplate(ctx) })
	if p.templateErr != nil {
		return p.templateErr
	}
	return p.Exec(ctx, "postgres", fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s",
		pgx.Identifier{name}.Sanitize(), TemplateDB))
}

// NewDatabase creates a fresh migrated database with a unique name and returns
// its URL.
func (p *Postgres) NewDatabase(ctx context.Context, prefix string) (string, error) {
	name := fmt.Sprintf("%s_%d_%d", sanitizeName(prefix), os.Getpid(), p.dbSeq.Add(1))
	if err := p.CreateDatabase(ctx, name); err != nil {
		return "", err
	}
	return p.URL(name), nil
}

func (p *Postgres) buildTemplate(ctx context.Context) error {
	if err := p.Exec(ctx, "postgres", "CREATE DATABASE "+TemplateDB); err != nil {
		return err
	}
	c, err := pgx.Connect(ctx, p.URL(TemplateDB))
	if err != nil {
		return fmt.Errorf("devenv: connect to template: %w", err)
	}
	defer c.Close(context.WithoutCancel(ctx))
	if _, err := migrations.Up(ctx, c); err != nil {
		return fmt.Errorf("devenv: migrate template: %w", err)
	}
	return nil
}

func sanitizeName(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '_' {
			b.WriteRune(r)
		} else {
			b.WriteRune('_')
		}
	}
	out := b.String()
	if len(out) > 40 {
		out = out[:40]
	}
	if out == "" || (out[0] >= '0' && out[0] <= '9') {
		out = "db_" + out
	}
	return out
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 80 {
		s = s[:80]
	}
	return s
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("devenv: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
