// Package cli is the pgrelay command line: migrate, run, dev, stats, dead, version.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strings"
	"syscall"

	"golang.org/x/term"

	"github.com/pgrelay/pgrelay/internal/secret"
	"github.com/pgrelay/pgrelay/internal/version"
)

// command is one subcommand.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, a *app, args []string) error
}

// app carries a command's output streams and environment.
type app struct {
	stdout io.Writer
	stderr io.Writer
	// stdin answers confirmation prompts, asked only when terminal (stdin
	// is a terminal).
	stdin    io.Reader
	terminal bool
	getenv   func(string) string
	// self is how the hints this program prints run it again: "pgrelay"
	// when that is this binary, else its path (./bin/pgrelay after make).
	self string
}

func commands() []command {
	return []command{
		{"migrate", "create or upgrade pgrelay's schema in a database", runMigrate},
		{"run", "run the Processor: claim queued events and dispatch them", runRun},
		{"dev", "run everything on embedded defaults with a demo channel and a live view", runDev},
		{"stats", "show pgrelay.queue_stats() as a table, then publishers, schedules and Processors", runStats},
		{"doctor", "check an installation (roles, grants, search_path, replication, publisher, vacuum) and say how to fix it", runDoctor},
		{"nodes", "list nodes (heartbeat, mode, leader, pending, pinned); 'nodes decommission N --yes'", runNodes},
		{"web", "serve the console: queue, nodes, events, dead letters and emails in a browser", runWeb},
		{"watch", "follow the status events on NATS", runWatch},
		{"dead", "dead letters (events that gave up or expired): 'dead list', 'dead show ID', 'dead retry', 'dead discard'", runDead},
		{"bench", "measure throughput and latency: burn-down, enqueue, latency, backlog, channels, ceiling, ...", runBench},
		{"version", "print the release and the commit it was built from", runVersion},
	}
}

// usageError is a command-line mistake: the message and exit code 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// Main runs the command line and returns the process exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	a := &app{stdout: stdout, stderr: stderr, stdin: os.Stdin, terminal: term.IsTerminal(int(os.Stdin.Fd())),
		getenv: os.Getenv, self: selfCommand(exec.LookPath, os.Executable, os.Getwd)}
	if len(args) < 1 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		a.usage()
		if len(args) < 1 {
			return 2
		}
		return 0
	}
	var cmd *command
	for _, c := range commands() {
		if c.name == args[0] {
			cmd = &c
			break
		}
	}
	if cmd == nil {
		fmt.Fprintf(stderr, "pgrelay: unknown command %q\n\n", args[0])
		a.usage()
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	done, second := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(second)
		exitOnSecondSignal(ctx, done, stderr, cmd.name)
	}()
	defer func() { close(done); <-second }()
	err := cmd.run(ctx, a, args[1:])
	var ue *usageError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "pgrelay %s: %s\n", cmd.name, secret.String(ue.msg))
		return 2
	default:
		fmt.Fprintf(stderr, "pgrelay %s: %s\n", cmd.name, secret.String(oneLine(err.Error())))
		return 1
	}
}

func (a *app) usage() {
	fmt.Fprintln(a.stderr, "pgrelay — a transactional outbox and event dispatcher for PostgreSQL")
	fmt.Fprintln(a.stderr, "\nUsage: pgrelay <command> [flags]\n\nCommands:")
	for _, c := range commands() {
		fmt.Fprintf(a.stderr, "  %-9s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(a.stderr, "\nRun 'pgrelay <command> -h' for a command's flags. Every flag also reads")
	fmt.Fprintln(a.stderr, "PGRELAY_<FLAG> from the environment (e.g. PGRELAY_DATABASE_URL).")
}

// newFlags returns a flag set whose usage goes to stderr.
func (a *app) newFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("pgrelay "+name, flag.ContinueOnError)
	fs.SetOutput(a.stderr)
	return fs
}

// parse parses args, then fills every flag not given on the command line from
// PGRELAY_<FLAG> (upper case, '-' as '_').
func (a *app) parse(fs *flag.FlagSet, args []string) error {
	addFileFlags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return &usageError{msg: err.Error()}
	}
	if fs.NArg() > 0 {
		return &usageError{msg: fmt.Sprintf("unexpected argument %q", fs.Arg(0))}
	}
	return a.fillEnv(fs)
}

// parseMixed is parse for a command that takes arguments besides its flags:
// they may come before, between and after the flags (after "--" everything
// is an argument). It returns the arguments in order.
func (a *app) parseMixed(fs *flag.FlagSet, args []string) ([]string, error) {
	addFileFlags(fs)
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, &usageError{msg: err.Error()}
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if len(rest) < len(args) && args[len(args)-len(rest)-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	return pos, a.fillEnv(fs)
}

// fillEnv fills every flag not given on the command line from
// PGRELAY_<FLAG>; a secret flag's -file companion stands for the flag
// (applyFileFlags), the command line's winning over the environment's.
func (a *app) fillEnv(fs *flag.FlagSet) error {
	if err := a.applyFileFlags(fs, nil); err != nil {
		return err
	}
	set := visited(fs)
	if err := a.fillEnvExcept(fs, set); err != nil {
		return err
	}
	return a.applyFileFlags(fs, set)
}

func (a *app) fillEnvExcept(fs *flag.FlagSet, set map[string]bool) error {
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	sort.Strings(names)
	for _, n := range names {
		if set[n] {
			continue
		}
		env := flagEnv(n)
		if v := a.getenv(env); v != "" {
			if err := fs.Set(n, v); err != nil {
				return &usageError{msg: fmt.Sprintf("%s=%q: %v", env, v, err)}
			}
		}
	}
	return nil
}

// flagEnv is the environment variable of the flag name: PGRELAY_<FLAG>.
func flagEnv(name string) string {
	return "PGRELAY_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// logFlags adds --log-level and --log-format and returns a constructor.
func logFlags(fs *flag.FlagSet) func(w io.Writer) (*slog.Logger, error) {
	return logFlagsAt(fs, "info")
}

// logFlagsAt is logFlags with def as --log-level's default.
func logFlagsAt(fs *flag.FlagSet, def string) func(w io.Writer) (*slog.Logger, error) {
	level := fs.String("log-level", def, "log level: debug, info, warn, error")
	format := fs.String("log-format", "text", "log format: text or json")
	return func(w io.Writer) (*slog.Logger, error) {
		var l slog.Level
		if err := l.UnmarshalText([]byte(*level)); err != nil {
			return nil, &usageError{msg: fmt.Sprintf("--log-level %q: expected debug, info, warn or error", *level)}
		}
		opts := &slog.HandlerOptions{Level: l, ReplaceAttr: scrubAttr}
		switch *format {
		case "text":
			return slog.New(slog.NewTextHandler(w, opts)), nil
		case "json":
			return slog.New(slog.NewJSONHandler(w, opts)), nil
		}
		return nil, &usageError{msg: fmt.Sprintf("--log-format %q: expected text or json", *format)}
	}
}

// scrubAttr hides credentials in every log message and string or error
// attribute (a URL in an error, a DSN).
func scrubAttr(_ []string, at slog.Attr) slog.Attr {
	switch at.Value.Kind() {
	case slog.KindString:
		at.Value = slog.StringValue(secret.String(at.Value.String()))
	case slog.KindAny:
		switch v := at.Value.Any().(type) {
		case error:
			at.Value = slog.StringValue(secret.String(v.Error()))
		case fmt.Stringer:
			at.Value = slog.StringValue(secret.String(v.String()))
		}
	}
	return at
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func runVersion(_ context.Context, a *app, args []string) error {
	fs := a.newFlags("version")
	if err := a.parse(fs, args); err != nil {
		return err
	}
	fmt.Fprintln(a.stdout, versionLine(version.Release, buildInfo()))
	return nil
}

// selfCommand is the command that runs this binary from the current
// directory: "pgrelay" when that name on $PATH is this very file, else the
// binary's path, relative when it is below the working directory
// ("./bin/pgrelay" after `make build`). Any lookup that fails leaves "pgrelay".
func selfCommand(lookPath func(string) (string, error), executable func() (string, error), getwd func() (string, error)) string {
	exe, err := executable()
	if err != nil {
		return "pgrelay"
	}
	if onPath, err := lookPath("pgrelay"); err == nil {
		a, errA := os.Stat(onPath)
		b, errB := os.Stat(exe)
		if errA == nil && errB == nil && os.SameFile(a, b) {
			return "pgrelay"
		}
	}
	if wd, err := getwd(); err == nil {
		if rel, err := filepath.Rel(wd, exe); err == nil && !strings.HasPrefix(rel, "..") {
			return "./" + rel
		}
	}
	return exe
}

// buildInfo returns the binary's build information, or nil.
func buildInfo() *debug.BuildInfo {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return nil
	}
	return bi
}

// versionLine tells the release and the commit a binary was built from:
// "pgrelay v0.2.0 (commit 0123abcd4567, 2026-12-01T10:00:00Z)". The release is
// the source's (internal/version); the commit comes from the Go toolchain's
// VCS stamp (builds inside a git checkout), "+modified" when the tree had
// uncommitted changes.
func versionLine(release string, bi *debug.BuildInfo) string {
	var rev, at string
	var modified bool
	if bi != nil {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				at = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	if rev == "" {
		return "pgrelay " + release + " (commit unknown: built outside a git checkout)"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if modified {
		rev += "+modified"
	}
	if at != "" {
		return fmt.Sprintf("pgrelay %s (commit %s, %s)", release, rev, at)
	}
	return fmt.Sprintf("pgrelay %s (commit %s)", release, rev)
}
