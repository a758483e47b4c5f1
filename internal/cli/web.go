package cli

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

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
}

// register adds the flags; addrFlag names the address's flag ("addr" on
// `pgrelay web`, "web-addr" on run and dev).
func (w *webFlags) register(fs *flag.FlagSet, addrFlag, def, usage string) {
	fs.StringVar(&w.addr, addrFlag, def, usage)
	fs.StringVar(&w.auth, "web-auth", "", "ask the console's visitors for token:SECRET (the password of HTTP basic auth, any user name, or a Bearer token) or a user of basic:FILE (user:bcrypt-hash lines, htpasswd -B); required for an address other than loopback")
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
	srv, err := web.New(web.Config{DB: pool, Auth: auth, ReadOnly: w.readOnly, DeadAfter: deadAfter, Logger: logger})
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

// runWeb serves the console:
//
//	pgrelay web --database-url URL [--addr 127.0.0.1:8080] [--web-auth ...] [--web-read-only]
func runWeb(ctx context.Context, a *app, args []string) error {
	fs := a.newFlags("web")
	url := fs.String("database-url", "", "PostgreSQL URL of any node (required); its login needs pgrelay_viewer, and pgrelay_admin for retry and discard")
	var w webFlags
	w.register(fs, "addr", devWebAddr, "serve the console on this address (anything but loopback needs --web-auth)")
	deadAfter := fs.Duration("dead-after", actors.Defaults().DeadAfter, "a node silent this long is shown dead")
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
	fmt.Fprintf(a.stdout, "console: %s\n", link)
	<-ctx.Done()
	stop()
	return nil
}
