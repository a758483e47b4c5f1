package cli

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/pgrelay/pgrelay/actors"
	"github.com/pgrelay/pgrelay/events/store"
	"github.com/pgrelay/pgrelay/internal/web"
)

// devWebAddr is where `pgrelay dev` serves the console when it is free.
const devWebAddr = "127.0.0.1:8080"

// webConns is the most database connections a console opens: a page runs
// its statements one after the other, and the overview's reading is shared.
const webConns = 4

// webFlags are the console's flags, on `pgrelay web`, `run` and `dev`.
type webFlags struct {
	addr     string
	auth     string
	readOnly bool
	hosts    string // --web-allowed-hosts, comma-separated
}

// register adds the flags; addrFlag names the address's flag ("addr" on
// `pgrelay web`, "web-addr" on run and dev).
func (w *webFlags) register(fs *flag.FlagSet, addrFlag, def, usage string) {
	fs.StringVar(&w.addr, addrFlag, def, usage)
	fs.StringVar(&w.auth, "web-auth", "", "ask the console's visitors for token:SECRET (the password of HTTP basic auth, any user name, or a Bearer token) or a user of basic:FILE (user:bcrypt-hash lines, htpasswd -B); required for an address other than loopback")
	fs.StringVar(&w.hosts, "web-allowed-hosts", "", "without --web-auth, the Host names the console answers to besides localhost, 127.0.0.0/8 and [::1] (comma-separated, e.g. console.example.org for a proxy that passes Host on); any other Host is refused (421), against DNS rebinding")
	fs.BoolVar(&w.readOnly, "web-read-only", false, "the console shows everything but retries and discards nothing: its actions are hidden and refused")
}

// check parses --web-auth and refuses an address other than loopback
// without it.
func (w *webFlags) check(addrFlag string) (*web.Auth, error) {
	var auth *web.Auth
	if w.auth != "" {
		a, err := web.ParseAuth(w.auth)
		if err != nil {
			return nil, &usageError{msg: err.Error()}
		}
		auth = a
	}
	if w.addr != "" {
		if err := web.CheckAddr(w.addr, auth); err != nil {
			return nil, &usageError{msg: "--" + addrFlag + " " + err.Error()}
		}
	}
	return auth, nil
}

// allowedHosts is --web-allowed-hosts as a list.
func (w *webFlags) allowedHosts() []string {
	var out []string
	for _, h := range strings.Split(w.hosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			out = append(out, h)
		}
	}
	return out
}

// startWeb serves the console on addr over the database at url until ctx
// ends. It returns the console's URL and a function that waits for it to
// stop and closes its connections.
func startWeb(ctx context.Context, url, addr string, w webFlags, auth *web.Auth, deadAfter time.Duration,
	logger *slog.Logger) (string, func(), error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return "", nil, fmt.Errorf("console: invalid --database-url: %w", err)
	}
	store.PinSearchPath(cfg.ConnConfig)
	cfg.MaxConns = webConns
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return "", nil, fmt.Errorf("console: connect to the database: %w", err)
	}
	srv, err := web.New(web.Config{DB: pool, Auth: auth, AllowedHosts: w.allowedHosts(), ReadOnly: w.readOnly,
		DeadAfter: deadAfter, Logger: logger})
	if err != nil {
		pool.Close()
		return "", nil, err
	}
	sctx, stop := context.WithCancel(ctx)
	at, done, err := web.Listen(sctx, addr, srv, logger)
	if err != nil {
		stop()
		pool.Close()
		return "", nil, err
	}
	host, port, _ := net.SplitHostPort(at)
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "localhost"
	}
	link := "http://" + net.JoinHostPort(host, port) + "/"
	logger.Info("serving the console", "url", link, "read_only", w.readOnly, "auth", auth != nil)
	return link, func() { stop(); <-done; pool.Close() }, nil
}

// runWeb serves the console, and with --metrics-addr the database's gauges:
//
//	pgrelay web --database-url URL [--addr 127.0.0.1:8080] [--web-auth ...] [--web-allowed-hosts NAMES] [--web-read-only] [--metrics-addr ADDR]
func runWeb(ctx context.Context, a *app, args []string) error {
	fs := a.newFlags("web")
	url := fs.String("database-url", "", "PostgreSQL URL of any node (required); its login needs pgrelay_viewer, and pgrelay_admin for retry and discard")
	var w webFlags
	w.register(fs, "addr", devWebAddr, "serve the console on this address (anything but loopback needs --web-auth)")
	deadAfter := fs.Duration("dead-after", actors.Defaults().DeadAfter, "a node or Processor silent this long is shown dead")
	metricsAddr := fs.String("metrics-addr", "", "serve the database's Prometheus gauges (backlog, dead letters, live Processors) at /metrics, and /healthz, on this address, e.g. :9188, whether or not a Processor runs (default: off)")
	mkLog := logFlags(fs)
	if err := a.parse(fs, args); err != nil {
		return err
	}
	if *url == "" {
		return &usageError{msg: "--database-url (or PGRELAY_DATABASE_URL) is required"}
	}
	if w.addr == "" {
		return &usageError{msg: "--addr must not be empty"}
	}
	auth, err := w.check("addr")
	if err != nil {
		return err
	}
	logger, err := mkLog(a.stderr)
	if err != nil {
		return err
	}
	conn, err := connectMigrated(ctx, *url)
	if err != nil {
		return err
	}
	conn.Close(context.WithoutCancel(ctx))
	link, stop, err := startWeb(ctx, *url, w.addr, w, auth, *deadAfter, logger)
	if err != nil {
		return err
	}
	defer stop()
	if *metricsAddr != "" {
		stopMetrics, err := serveDatabaseMetrics(ctx, *url, *metricsAddr, *deadAfter, logger)
		if err != nil {
			return err
		}
		defer stopMetrics()
	}
	fmt.Fprintf(a.stdout, "console: %s\n", link)
	<-ctx.Done()
	return nil
}

// metricsConns is the most database connections the database's gauges
// use: a scrape reads on one.
const metricsConns = 2

// serveDatabaseMetrics serves the database's gauges (actors.DatabaseCollector)
// on addr, with the Go runtime's and the process's, and /healthz, over a
// pool of its own on the database at url. It returns a function that stops
// the server and closes the pool.
func serveDatabaseMetrics(ctx context.Context, url, addr string, deadAfter time.Duration, logger *slog.Logger) (func(), error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("metrics: invalid --database-url: %w", err)
	}
	store.PinSearchPath(cfg.ConnConfig)
	cfg.MaxConns = metricsConns
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("metrics: connect to the database: %w", err)
	}
	reg := prometheus.NewRegistry()
	errs := actors.NewDBErrors("queue_stats")
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), errs,
		actors.NewDatabaseCollector(actors.DatabaseCollectorConfig{DB: pool, DeadAfter: deadAfter, Errors: errs, Logger: logger}))
	srv, err := serveMetrics(addr, reg, pool.Ping, logger)
	if err != nil {
		pool.Close()
		return nil, err
	}
	return func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_ = srv.Shutdown(sctx)
		cancel()
		pool.Close()
	}, nil
}
