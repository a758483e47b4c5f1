package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgrelay/pgrelay/actors"
	"github.com/pgrelay/pgrelay/events/store"
	"github.com/pgrelay/pgrelay/internal/devenv"
	"github.com/pgrelay/pgrelay/internal/secret"
	"github.com/pgrelay/pgrelay/migrations"
)

// devShutdownTimeout is dev's --shutdown-timeout unless one is given: a
// developer's Ctrl-C should not wait half a minute for a demo handler.
const devShutdownTimeout = 3 * time.Second

func runDev(ctx context.Context, a *app, args []string) (err error) {
	fs := a.newFlags("dev")
	dbURL := fs.String("database-url", "", "attach to this database instead of starting a throwaway PostgreSQL: dev migrates it, creates no demo channels unless --demo, and drops nothing on exit")
	dataDir := fs.String("data-dir", "", "keep the throwaway PostgreSQL cluster, and the SMTP catcher's mail under mail/, in this directory (default: a temporary one, removed on exit); with --database-url only the mail (default: pgrelay/dev in the user's cache directory)")
	port := fs.Int("port", 0, "port of the throwaway PostgreSQL on 127.0.0.1 (default: a free port; not with --database-url)")
	var demo optBool
	fs.Var(&demo, "demo", "create the demo schema and channels and run the demo producer (default: true for the throwaway PostgreSQL, false with --database-url)")
	rate := fs.Float64("rate", 20, "demo events enqueued per second with the demo channels (0: none)")
	smtpPort := fs.Int("smtp-port", 0, "port of the in-process SMTP catcher on 127.0.0.1 (default: a free port; unused with --smtp-url)")
	natsPort := fs.Int("nats-port", 0, "port of the in-process NATS server on 127.0.0.1 (default: 4222 when free, else a free port; unused with --nats-url)")
	refresh := fs.Duration("refresh", time.Second, "live view refresh interval")
	webOn := fs.Bool("web", true, "serve the console (--web=false: not)")
	var wf webFlags
	wf.register(fs, "web-addr", "", "serve the console on this address (default: "+devWebAddr+" when free, else a free port on 127.0.0.1; anything but loopback needs --web-auth)")
	var f processorFlags
	f.register(fs, false)
	f.shutdownTimeout = devShutdownTimeout
	fs.Lookup("shutdown-timeout").DefValue = devShutdownTimeout.String()
	mkLog := logFlags(fs)
	// Attaching runs a Processor on the database: dev does it only when its
	// command line says so, not because PGRELAY_DATABASE_URL is set for
	// `pgrelay run`.
	pa := *a
	pa.getenv = func(name string) string {
		if name == "PGRELAY_DATABASE_URL" || name == "PGRELAY_DATABASE_URL_FILE" {
			return ""
		}
		return a.getenv(name)
	}
	if err := pa.parse(fs, args); err != nil {
		return err
	}
	if *dbURL == "" {
		for _, name := range []string{"PGRELAY_DATABASE_URL", "PGRELAY_DATABASE_URL_FILE"} {
			if a.getenv(name) != "" {
				fmt.Fprintf(a.stderr, "pgrelay dev: warning: %s is set but not used: dev attaches to a database only with --database-url on its command line\n", name)
			}
		}
	}
	if err := f.validate(); err != nil {
		return err
	}
	if f.file.holdsCredentials() {
		a.warnWorldReadable("--config "+f.configFile, f.configFile)
	}
	if *rate < 0 || *refresh <= 0 {
		return &usageError{msg: "--rate must not be negative and --refresh must be positive"}
	}
	webAuth, err := wf.check("web-addr")
	if err != nil {
		return err
	}
	attached := *dbURL != ""
	if attached && *port != 0 {
		return &usageError{msg: "--port is for the throwaway PostgreSQL: not with --database-url"}
	}
	if !demo.set {
		demo.v = !attached
	}
	if attached && *dataDir == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			return &usageError{msg: fmt.Sprintf("--data-dir is required with --database-url here: no user cache directory (%v)", err)}
		}
		*dataDir = filepath.Join(cache, "pgrelay", "dev")
	}
	logger, err := mkLog(a.stderr)
	if err != nil {
		return err
	}

	// Everything started is stopped in reverse order by one stopper, which
	// says what it waits for and gives up past its bound: Ctrl-C always ends
	// dev within the Processor's shutdown timeout and a few seconds more (a
	// second Ctrl-C at once).
	// The stop says what it does through asyncLines: an output nobody
	// reads holds up neither it nor the live view's end.
	var stops []stopStep
	viewDone := make(chan struct{})
	close(viewDone) // until the view runs
	defer func() {
		if len(stops) == 0 {
			return
		}
		began := time.Now()
		lines := newAsyncLines(a.stdout)
		lines.say("\nstopping ...")
		st := &stopper{say: lines.say, every: time.Second, bound: f.shutdownTimeout + 5*time.Second, log: logger}
		if serr := st.stop(reversed(stops)...); serr != nil && err == nil {
			err = serr
		}
		// The view ends with its frame (its queries see ctx done), unless
		// that frame waits on an output nobody reads.
		wait := time.NewTimer(time.Second)
		defer wait.Stop()
		select {
		case <-viewDone:
		case <-wait.C:
		}
		if err == nil {
			lines.say(fmt.Sprintf("stopped (took %s)", time.Since(began).Round(time.Millisecond)))
		}
		lines.close(time.Second)
	}()

	var url, mailDir string
	if attached {
		url, mailDir = *dbURL, filepath.Join(*dataDir, "mail")
		fmt.Fprintf(a.stdout, "attaching to the database %s: no throwaway PostgreSQL, nothing dropped on exit\n", secret.String(url))
		if err := migrateAttached(ctx, a, url); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(a.stdout, "starting a throwaway PostgreSQL ...")
		pg, err := startDevPostgres(ctx, *dataDir, *port, logger)
		if err != nil {
			return err
		}
		stops = append(stops, stopStep{name: "PostgreSQL", run: func() {
			if err := pg.Stop(); err != nil {
				logger.Warn("stopping PostgreSQL", "err", err)
			}
		}})
		url, mailDir = pg.URL("pgrelay_dev"), filepath.Join(pg.DataDir(), "mail")
	}
	// The view's and the demo producer's sessions use pgrelay's own
	// search_path, like every pgrelay session that runs no handler.
	pcfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return fmt.Errorf("connect to the dev database: %w", err)
	}
	store.PinSearchPath(pcfg.ConnConfig)
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return fmt.Errorf("connect to the dev database: %w", err)
	}
	stops = append(stops, stopStep{name: "the view's database connections", run: pool.Close})
	if !attached {
		if _, err := migrations.Up(ctx, pool); err != nil {
			return err
		}
	}
	if demo.v {
		if err := store.CreateDemo(ctx, pool); err != nil {
			return err
		}
	}

	// Email channels go to an in-process SMTP catcher unless an SMTP server
	// was configured.
	var catcher *devenv.SMTP
	if f.smtpURL == "" && (f.file == nil || f.file.SMTP == nil || f.file.SMTP.Default == "") {
		catcher, err = devenv.StartSMTP(devenv.SMTPConfig{Addr: fmt.Sprintf("127.0.0.1:%d", *smtpPort), Logger: logger,
			SaveDir: mailDir})
		if err != nil {
			return err
		}
		stops = append(stops, stopStep{name: "the SMTP catcher", run: func() { _ = catcher.Close() }})
		f.smtpURL = catcher.URL()
	}

	// Status events go to an in-process NATS server with JetStream unless
	// --nats-url names one.
	stopNATS, err := startDevNATS(&f.nats, *natsPort)
	if err != nil {
		return err
	}
	stops = append(stops, stopStep{name: "the NATS server", run: stopNATS})
	fmt.Fprintf(a.stdout, "nats: %s (follow the events: %s)\n", secret.String(f.nats.url), watchCommand(a.self, f.nats.url))

	f.databaseURL = url
	reg := prometheus.NewRegistry()
	p, err := actors.New(f.config(logger, reg))
	if err != nil {
		return &usageError{msg: strings.TrimPrefix(err.Error(), "pgrelay: ")}
	}
	if err := p.Start(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	if f.metricsAddr != "" {
		srv, err := serveMetrics(f.metricsAddr, reg, p.Ping, logger)
		if err != nil {
			_ = p.Stop(context.WithoutCancel(ctx))
			return err
		}
		stops = append(stops, stopStep{name: "the metrics server", run: func() { shutdownHTTP(srv) }})
	}
	var console string
	if *webOn {
		addr := wf.addr
		if addr == "" {
			addr = devWebAddr
		}
		link, stopWeb, err := startWeb(ctx, url, addr, wf, webAuth, f.effectiveDeadAfter(), logger)
		if err != nil && wf.addr == "" {
			// 8080 is taken: any free port.
			link, stopWeb, err = startWeb(ctx, url, "127.0.0.1:0", wf, webAuth, f.effectiveDeadAfter(), logger)
		}
		if err != nil {
			_ = p.Stop(context.WithoutCancel(ctx))
			return err
		}
		console = link
		fmt.Fprintf(a.stdout, "console: %s\n", link)
		stops = append(stops, stopStep{name: "the console", run: stopWeb})
	}
	inFlight := []prometheus.Gauge{p.Metrics().InFlight, p.Metrics().BatchSlotsInUse}
	stops = append(stops, stopStep{name: "the Processor",
		detail: func() string { return slotsInUse(inFlight...) },
		run: func() {
			if err := p.Stop(context.WithoutCancel(ctx)); err != nil {
				logger.Warn("stopping the processor", "err", err)
			}
		}})

	// The demo producer writes only to the demo channels: those dev
	// created (--demo).
	if demo.v && *rate > 0 {
		prodCtx, stopProducer := context.WithCancel(ctx)
		prodDone := make(chan struct{})
		go func() {
			defer close(prodDone)
			produceDemo(prodCtx, pool, *rate, logger)
		}()
		stops = append(stops, stopStep{name: "the demo producer", run: func() { stopProducer(); <-prodDone }})
	}

	view := &devView{out: a.stdout, self: a.self, url: url, tty: isTTY(a.stdout), rate: *rate, demo: demo.v,
		smtp: catcher, mailDir: mailDir, nats: f.nats.url, inFlight: inFlight, console: console}
	if attached {
		view.url = secret.String(url)
		if view.url != url {
			view.psqlArg = `"$DATABASE_URL"`
		}
	}
	// The view runs beside the wait for Ctrl-C: a frame that waits on its
	// output (nobody reads it) must not keep the stop from starting.
	viewDone = make(chan struct{})
	go func() {
		defer close(viewDone)
		t := time.NewTicker(*refresh)
		defer t.Stop()
		for {
			view.render(ctx, pool)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	<-ctx.Done()
	return nil
}

// startDevPostgres starts dev's throwaway PostgreSQL and creates its
// database pgrelay_dev unless it exists (a kept --data-dir).
func startDevPostgres(ctx context.Context, dataDir string, port int, logger *slog.Logger) (*devenv.Postgres, error) {
	pg, err := devenv.StartPostgres(ctx, devenv.PostgresConfig{DataDir: dataDir, Port: port, Logger: logger})
	if err != nil {
		return nil, err
	}
	err = func() error {
		c, err := connect(ctx, pg.URL("postgres"))
		if err != nil {
			return fmt.Errorf("connect to the dev PostgreSQL: %w", err)
		}
		defer c.Close(context.WithoutCancel(ctx))
		exists, err := store.DevDatabaseExists(ctx, c)
		if err != nil {
			return err
		}
		if !exists {
			return store.CreateDevDatabase(ctx, c)
		}
		return nil
	}()
	if err != nil {
		if serr := pg.Stop(); serr != nil {
			logger.Warn("stopping PostgreSQL", "err", serr)
		}
		return nil, err
	}
	return pg, nil
}

// migrateAttached migrates the database dev attaches to as `pgrelay
// migrate` does, saying so first; a login that cannot is refused with what
// to do. A schema already up to date needs no rights beyond reading it.
func migrateAttached(ctx context.Context, a *app, url string) error {
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	conn, err := connect(cctx, url)
	cancel()
	if err != nil {
		return fmt.Errorf("cannot connect to the database: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	v, err := migrations.Current(ctx, conn)
	if err != nil {
		return err
	}
	current, err := migrations.FunctionsApplied(ctx, conn)
	if err != nil {
		return err
	}
	if v > migrations.Latest() || (v == migrations.Latest() && current) {
		fmt.Fprintf(a.stdout, "schema at version %d: nothing to migrate\n", v)
		return nil
	}
	fmt.Fprintln(a.stdout, "migrating the database as 'pgrelay migrate' would ...")
	res, err := migrations.Up(ctx, conn)
	if err != nil {
		return fmt.Errorf("cannot migrate the database as %s: %w; run 'pgrelay migrate' as the schema's owner first, or give dev a login that can",
			conn.Config().User, err)
	}
	sayMigrated(a.stdout, res)
	return warnOwnerStats(ctx, conn, a.stderr, "pgrelay dev")
}

// optBool is a boolean flag whose default depends on other flags: set tells
// whether it was given (command line or environment).
type optBool struct{ v, set bool }

func (b *optBool) String() string {
	if b == nil {
		return "false"
	}
	return strconv.FormatBool(b.v)
}

func (b *optBool) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	b.v, b.set = v, true
	return nil
}

func (b *optBool) IsBoolFlag() bool { return true }

// produceDemo enqueues demo events at rate per second until ctx is done.
func produceDemo(ctx context.Context, pool *pgxpool.Pool, rate float64, logger *slog.Logger) {
	if rate == 0 {
		return
	}
	interval := time.Duration(float64(time.Second) / rate)
	t := time.NewTicker(interval)
	defer t.Stop()
	channels := []string{"demo_orders", "demo_orders", "demo_ledger", "demo_flaky", "demo_email"}
	seq := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		seq++
		ch := channels[rand.IntN(len(channels))]
		amount := rand.IntN(10000)
		var err error
		if ch == "demo_email" {
			err = store.SendDemoEmail(ctx, pool,
				fmt.Sprintf("Customer %d <customer%d@example.com>", seq, seq), fmt.Sprintf("Order %d confirmed", seq),
				fmt.Sprintf("Thank you for your order of %d.%02d EUR.", amount/100, amount%100),
				fmt.Sprintf("<p>Thank you for your order of <b>%d.%02d EUR</b>.</p>", amount/100, amount%100))
		} else {
			payload := fmt.Sprintf(`{"seq": %d, "amount": %d}`, seq, amount)
			err = store.NotifyDemo(ctx, pool, ch, payload)
		}
		if err != nil && ctx.Err() == nil {
			logger.Warn("demo producer", "err", err)
		}
	}
}

// devView renders the live view: per channel pending / in flight / done.
type devView struct {
	out     io.Writer
	url     string // the database, as shown
	psqlArg string // the database in the psql commands shown (default: url, quoted)
	tty     bool
	rate    float64
	demo    bool         // the demo channels are there (--demo)
	smtp    *devenv.SMTP // the SMTP catcher; nil with --smtp-url
	mailDir string       // where the catcher keeps its mail
	nats    string       // the NATS server status events go to
	console string       // the console's URL ("" when off)
	self    string       // how to run this binary (app.self)
	// inFlight is the Processor's slots in use: its claimed events' and
	// the batch slots its running batches reserve. The table's IN FLIGHT column counts
	// claims written to the queue; rows a batch holds by row lock (sql
	// channels) are running without one.
	inFlight []prometheus.Gauge
}

func (v *devView) render(ctx context.Context, pool *pgxpool.Pool) {
	qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	stats, err := store.QueueStats(qctx, pool)
	if err != nil {
		if ctx.Err() == nil {
			fmt.Fprintln(v.out, "live view:", err)
		}
		return
	}
	// Without the counts (an error: a slow count of a large log times out)
	// the view shows the queue, the outcome columns as unknown and the error.
	done, doneErr := store.LogCounts(qctx, pool)
	var b strings.Builder
	if v.tty {
		b.WriteString("\033[H\033[2J")
	}
	fmt.Fprintf(&b, "pgrelay dev — %s — Ctrl-C to stop\n", time.Now().Format("15:04:05"))
	psqlArg := v.psqlArg
	if psqlArg == "" {
		psqlArg = "'" + v.url + "'"
	}
	channel, emailChannel := "demo_orders", "demo_email"
	if !v.demo {
		channel, emailChannel = "<channel>", "<email channel>"
	}
	fmt.Fprintf(&b, "database: %s\n", v.url)
	fmt.Fprintf(&b, "try:      psql %s -c \"SELECT pgrelay.notify('%s', '{\\\"hello\\\": 1}')\"\n", psqlArg, channel)
	fmt.Fprintf(&b, "          psql %s -c \"SELECT pgrelay_notifier.send('%s', ARRAY['you@example.com'], 'Hi', 'Hello')\"\n", psqlArg, emailChannel)
	fmt.Fprintf(&b, "nats:     %s (follow the events: %s)\n", secret.String(v.nats), watchCommand(v.self, v.nats))
	if v.console != "" {
		fmt.Fprintf(&b, "console:  %s\n", v.console)
	}
	switch {
	case !v.demo:
		b.WriteString("demo producer: off (no demo channels: --demo creates them)\n\n")
	case v.rate == 0:
		b.WriteString("demo producer: off (--rate 0)\n\n")
	default:
		fmt.Fprintf(&b, "demo producer: %.0f events/s\n\n", v.rate)
	}
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "CHANNEL\tMODE\tPENDING\tIN FLIGHT\tRETRYING\tSUCCEEDED\tFAILED\tGAVE UP\tEXPIRED\t")
	for _, s := range stats {
		ended := "?\t?\t?\t?"
		if doneErr == nil {
			d := done[s.Channel]
			ended = fmt.Sprintf("%d\t%d\t%d\t%d", d.Succeeded, d.Failed, d.GaveUp, d.Expired)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\t\n", s.Channel, s.Mode, s.Pending, s.InFlight, s.Retrying, ended)
	}
	_ = tw.Flush()
	if doneErr != nil && ctx.Err() == nil {
		fmt.Fprintf(&b, "SUCCEEDED, FAILED, GAVE UP, EXPIRED: outcomes unknown: %v\n", doneErr)
	}
	if v.inFlight != nil {
		fmt.Fprintf(&b, "\nProcessor: %s (claimed events, and the slots running batches reserve)\n", slotsInUse(v.inFlight...))
	}
	if v.smtp != nil {
		fmt.Fprintf(&b, "\nSMTP catcher smtp://%s: %d emails captured", v.smtp.Addr(), v.smtp.Count())
		if m, ok := v.smtp.Last(); ok {
			fmt.Fprintf(&b, ", last: %q to %s", m.Subject(), strings.Join(m.To, ", "))
		}
		b.WriteString("\n")
		v.renderKept(&b)
	}
	if !v.tty {
		b.WriteString("\n")
	}
	fmt.Fprint(v.out, b.String())
}

// devMailListed is how many of the catcher's kept messages the view lists.
const devMailListed = 5

// renderKept lists the last messages the catcher kept, with its directory.
func (v *devView) renderKept(b *strings.Builder) {
	kept := v.smtp.Saved(devMailListed)
	if len(kept) == 0 {
		fmt.Fprintf(b, "mail kept in %s: none yet\n", v.mailDir)
		return
	}
	fmt.Fprintf(b, "mail kept in %s (newest last):\n", v.mailDir)
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  FROM\tTO\tSUBJECT\tFILE")
	for _, m := range kept {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", devCell(m.From), devCell(m.To), devCell(m.Subject), filepath.Base(m.File))
	}
	_ = tw.Flush()
}

// devCell is s for a cell of the view: control characters and tabs as
// spaces, at most 40 characters.
func devCell(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	if r := []rune(s); len(r) > 40 {
		s = string(r[:39]) + "…"
	}
	if s == "" {
		s = "-"
	}
	return s
}

func isTTY(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
