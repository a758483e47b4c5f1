// Package web is the console of `pgrelay web` (and of `pgrelay run
// --web-addr`, `pgrelay dev`): a few server-rendered pages over what
// PostgreSQL holds, so one console shows every Processor of every node. It
// reads through events/store only (pgrelay_viewer may run it); its actions
// (retry and discard dead letters) are POSTs that need pgrelay_admin,
// refused cross-origin (http.CrossOriginProtection) and hidden and refused
// with Config.ReadOnly. Without Config.Auth it answers only to loopback Host
// names and Config.AllowedHosts.
package web

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/pgrelay/pgrelay/events/store"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Refresh is how often the overview refreshes itself, and how long the
// server keeps one reading of it for every browser that asks: the console
// adds at most one queue_stats() a second to the database however many
// pages are open.
const Refresh = time.Second

// Config is the console's configuration.
type Config struct {
	// DB is where the console reads (a pool: pages run a few statements at
	// once).
	DB store.Querier
	// Auth, when set, is asked of every request.
	Auth *Auth
	// AllowedHosts are the names, besides loopback ones, that a request's
	// Host may give when Auth is nil (--web-allowed-hosts).
	AllowedHosts []string
	// ReadOnly hides the actions and refuses their POSTs.
	ReadOnly bool
	// DeadAfter: a node silent this long is shown dead (default 10 s, as
	// `pgrelay nodes`).
	DeadAfter time.Duration
	// Logger gets the errors the pages show (default: discarded).
	Logger *slog.Logger
}

// Server is the console's http.Handler.
type Server struct {
	cfg     Config
	pages   map[string]*template.Template
	handler http.Handler
	over    overviewCache
	notices notices
}

// New returns the console over cfg.DB.
func New(cfg Config) (*Server, error) {
	if cfg.DB == nil {
		return nil, errors.New("web: no database")
	}
	if cfg.DeadAfter <= 0 {
		cfg.DeadAfter = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, pages: map[string]*template.Template{}, notices: newNotices()}
	for _, p := range []string{"overview", "channel", "event", "dead", "confirm", "emails", "email", "error"} {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html",
			"templates/live.html", "templates/"+p+".html")
		if err != nil {
			return nil, fmt.Errorf("web: parse the %s page: %w", p, err)
		}
		s.pages[p] = t
	}
	static, err := fs.Sub(staticFS, "static")
	if err != nil {
		return nil, fmt.Errorf("web: static files: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /{$}", s.overview)
	mux.HandleFunc("GET /live", s.live)
	mux.HandleFunc("GET /channels/{channel}", s.channel)
	mux.HandleFunc("GET /events", s.findEvent)
	mux.HandleFunc("GET /events/{id}", s.event)
	mux.HandleFunc("GET /events/{id}/payload", s.payload)
	mux.HandleFunc("GET /dead", s.deadLetters)
	mux.HandleFunc("POST /dead/{id}/retry", s.action(s.retry))
	mux.HandleFunc("POST /dead/{id}/discard", s.action(s.discard))
	mux.HandleFunc("POST /dead/retry-all", s.action(s.retryAll))
	mux.HandleFunc("GET /emails", s.emails)
	mux.HandleFunc("GET /emails/{id}", s.email)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.fail(w, r, http.StatusNotFound, "There is no such page.")
	})

	csrf := http.NewCrossOriginProtection()
	csrf.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.fail(w, r, http.StatusForbidden, "Refused: the request came from another site. "+
			"The console's actions are taken only from its own pages.")
	}))
	s.handler = cfg.Auth.wrap(csrf.Handler(mux))
	if cfg.Auth == nil {
		s.handler = guardHost(s.handler, cfg.AllowedHosts)
	}
	return s, nil
}

// ServeHTTP serves the console, with headers that keep its pages from being
// framed, sniffed or given scripts and styles from anywhere else.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "+
		"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	s.handler.ServeHTTP(w, r)
}

// CheckAddr refuses an address other than loopback without auth: the
// console shows payloads and error texts, and its actions change the queue.
func CheckAddr(addr string, auth *Auth) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port: %w", addr, err)
	}
	if auth != nil || IsLoopback(host) {
		return nil
	}
	shown := host
	if shown == "" {
		shown = "every interface"
	}
	return fmt.Errorf("%s is not a loopback address (%s): give --web-auth (a token or a basic-auth file), "+
		"or bind 127.0.0.1", addr, shown)
}

// IsLoopback reports whether host (a name or an address) is this machine's
// loopback only: localhost, 127.0.0.0/8, ::1.
func IsLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// guardHost serves only the requests whose Host names this machine's
// loopback or one of allowed: without auth, a page that DNS rebinding
// pointed at the console (its own name, now resolving to 127.0.0.1) would
// otherwise read and act with the console's rights, same-origin for the
// browser and so past http.CrossOriginProtection.
func guardHost(h http.Handler, allowed []string) http.Handler {
	names := make(map[string]bool, len(allowed))
	for _, a := range allowed {
		if n := HostName(a); n != "" {
			names[n] = true
		}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n := HostName(r.Host); n == "" || !(IsLoopback(n) || names[n]) {
			w.Header().Set("Cache-Control", "no-store")
			http.Error(w, fmt.Sprintf("pgrelay console: refused: Host %q is not this console's name. Without "+
				"--web-auth it answers only to localhost, 127.0.0.0/8, [::1] and the names of --web-allowed-hosts.",
				r.Host), http.StatusMisdirectedRequest)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// HostName is the name of host (a Host header or a name of
// --web-allowed-hosts) as the console compares it: without its port and
// IPv6 brackets, without a trailing dot, in lower case.
func HostName(host string) string {
	host = strings.TrimSpace(host)
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	return strings.ToLower(host)
}

// Listen starts serving h on addr until ctx ends, then shuts the server
// down (at most 5 s for the requests under way). It returns the address
// served (the port chosen for ":0") and a channel closed when the server has
// stopped.
func Listen(ctx context.Context, addr string, h http.Handler, logger *slog.Logger) (string, <-chan struct{}, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("console on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: time.Minute}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) && logger != nil {
			logger.Error("console stopped", "err", err)
		}
	})
	go func() {
		defer close(done)
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		wg.Wait()
	}()
	return ln.Addr().String(), done, nil
}
