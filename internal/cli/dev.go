package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/pgrelay/pgrelay/actors"
	"github.com/pgrelay/pgrelay/events/store"
	"github.com/pgrelay/pgrelay/internal/testenv"
	"github.com/pgrelay/pgrelay/migrations"
)

// devSetup creates the demo schema and channels (idempotent).
const devSetup = `
CREATE SCHEMA IF NOT EXISTS demo;
CREATE TABLE IF NOT EXISTS demo.orders (id bigserial PRIMARY KEY, payload pg_catalog.jsonb NOT NULL,
  handled_at pg_catalog.timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp());
CREATE TABLE IF NOT EXISTS demo.ledger (id bigserial PRIMARY KEY, payload pg_catalog.jsonb NOT NULL,
  handled_at pg_catalog.timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp());
CREATE OR REPLACE FUNCTION demo.record_order(p pg_catalog.text) RETURNS pg_catalog.void LANGUAGE sql
  SET search_path = pg_catalog, pg_temp AS
  $f$ INSERT INTO demo.orders(payload) VALUES (p::pg_catalog.jsonb) $f$;
CREATE OR REPLACE FUNCTION demo.post_ledger(p pg_catalog.text) RETURNS pg_catalog.void LANGUAGE sql
  SET search_path = pg_catalog, pg_temp AS
  $f$ INSERT INTO demo.ledger(payload) VALUES (p::pg_catalog.jsonb) $f$;
-- Fails about one call in four, to show retries and give-ups.
CREATE OR REPLACE FUNCTION demo.flaky(p pg_catalog.text) RETURNS pg_catalog.void LANGUAGE plpgsql
  SET search_path = pg_catalog, pg_temp AS $f$
BEGIN
  IF pg_catalog.random() OPERATOR(pg_catalog.<) 0.25::pg_catalog.float8 THEN
    RAISE EXCEPTION 'demo: the downstream service is flaky (payload %)', p;
  END IF;
END $f$;
DO $d$
BEGIN
  IF NOT EXISTS (SELECT FROM pgrelay.channels WHERE channel OPERATOR(pg_catalog.=) 'demo_orders'::pg_catalog.text) THEN
    PERFORM pgrelay.register('demo_orders', 'SELECT demo.record_order($1)');
  END IF;
  IF NOT EXISTS (SELECT FROM pgrelay.channels WHERE channel OPERATOR(pg_catalog.=) 'demo_ledger'::pg_catalog.text) THEN
    PERFORM pgrelay.register('demo_ledger', 'SELECT demo.post_ledger($1)',
      p_concurrency_mode := 'channel');
  END IF;
  IF NOT EXISTS (SELECT FROM pgrelay.channels WHERE channel OPERATOR(pg_catalog.=) 'demo_flaky'::pg_catalog.text) THEN
    PERFORM pgrelay.register('demo_flaky', 'SELECT demo.flaky($1)',
      p_max_attempts := 3, p_retry_delay := '500 milliseconds');
  END IF;
  IF NOT EXISTS (SELECT FROM pgrelay.channels WHERE channel OPERATOR(pg_catalog.=) 'demo_email'::pg_catalog.text) THEN
    PERFORM pgrelay_notifier.create_channel('demo_email', 'pgrelay demo <demo@pgrelay.localhost>');
  END IF;
END $d$;
`

// devShutdownTimeout is dev's --shutdown-timeout unless one is given: a
// developer's Ctrl-C should not wait half a minute for a demo handler.
const devShutdownTimeout = 3 * time.Second

func runDev(ctx context.Context, a *app, args []string) (err error) {
	fs := a.newFlags("dev")
	dataDir := fs.String("data-dir", "", "keep the PostgreSQL cluster in this directory (default: a temporary one, removed on exit)")
	port := fs.Int("port", 0, "PostgreSQL port on 127.0.0.1 (default: a free port)")
	rate := fs.Float64("rate", 20, "demo events enqueued per second (0: none)")
	smtpPort := fs.Int("smtp-port", 0, "port of the in-process SMTP catcher on 127.0.0.1 (default: a free port; unused with --smtp-url)")
	natsPort := fs.Int("nats-port", 0, "port of the in-process NATS server on 127.0.0.1 (default: 4222 when free, else a free port; unused with --nats-url)")
	refresh := fs.Duration("refresh", time.Second, "live view refresh interval")
	var f processorFlags
	f.register(fs, false)
	f.shutdownTimeout = devShutdownTimeout
	fs.Lookup("shutdown-timeout").DefValue = devShutdownTimeout.String()
	mkLog := logFlags(fs)
	if err := a.parse(fs, args); err != nil {
		return err
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
	logger, err := mkLog(a.stderr)
	if err != nil {
		return err
	}

	// Everything started is stopped in reverse order by one stopper, which
	// says what it waits for and gives up past its bound: Ctrl-C always ends
	// dev within the Processor's shutdown timeout and a few seconds more (a
	// second Ctrl-C at once).
	var stops []stopStep
	defer func() {
		if len(stops) == 0 {
			return
		}
		fmt.Fprintln(a.stdout, "\nstopping ...")
		for i, j := 0, len(stops)-1; i < j; i, j = i+1, j-1 {
			stops[i], stops[j] = stops[j], stops[i]
		}
		st := &stopper{say: func(l string) { fmt.Fprintln(a.stdout, l) }, every: time.Second, bound: f.shutdownTimeout + 5*time.Second}
		if serr := st.stop(stops...); serr != nil && err == nil {
			err = serr
		}
	}()

	fmt.Fprintln(a.stdout, "starting a throwaway PostgreSQL ...")
	pg, err := testenv.StartPostgres(ctx, testenv.PostgresConfig{DataDir: *dataDir, Port: *port, Logger: logger})
	if err != nil {
		return err
	}
	stops = append(stops, stopStep{name: "PostgreSQL", run: func() {
		if err := pg.Stop(); err != nil {
			logger.Warn("stopping PostgreSQL", "err", err)
		}
	}})
	if err := pg.Exec(ctx, "postgres", "SELECT 1"); err != nil {
		return err
	}
	var exists bool
	if err := devQueryRow(ctx, pg.URL("postgres"), devExistsSQL, &exists); err != nil {
		return err
	}
	if !exists {
		if err := pg.Exec(ctx, "postgres", "CREATE DATABASE pgrelay_dev"); err != nil {
			return err
		}
	}
	url := pg.URL("pgrelay_dev")
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return fmt.Errorf("connect to the dev database: %w", err)
	}
	stops = append(stops, stopStep{name: "the view's database connections", run: pool.Close})
	if _, err := migrations.Up(ctx, pool); err != nil {
		return err
	}
	if _, err := pool.Exec(ctx, devSetup); err != nil {
		return fmt.Errorf("create the demo channels: %w", err)
	}

	// Email channels go to an in-process SMTP catcher unless an SMTP server
	// was configured.
	var catcher *testenv.SMTP
	if f.smtpURL == "" && (f.file == nil || f.file.SMTP == nil || f.file.SMTP.Default == "") {
		catcher, err = testenv.StartSMTP(testenv.SMTPConfig{Addr: fmt.Sprintf("127.0.0.1:%d", *smtpPort), Logger: logger})
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
	fmt.Fprintf(a.stdout, "nats: %s (follow the events: %s)\n", natsURLShown(f.nats.url), watchCommand(a.self, f.nats.url))

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
		srv, err := serveMetrics(f.metricsAddr, reg, p, logger)
		if err != nil {
			_ = p.Stop(context.WithoutCancel(ctx))
			return err
		}
		stops = append(stops, stopStep{name: "the metrics server", run: func() { _ = srv.Close() }})
	}
	inFlight := p.Metrics().InFlight
	stops = append(stops, stopStep{name: "the Processor",
		detail: func() string { return fmt.Sprintf("%.0f slots in use", gaugeValue(inFlight)) },
		run: func() {
			if err := p.Stop(context.WithoutCancel(ctx)); err != nil {
				logger.Warn("stopping the processor", "err", err)
			}
		}})

	prodCtx, stopProducer := context.WithCancel(ctx)
	prodDone := make(chan struct{})
	go func() {
		defer close(prodDone)
		produceDemo(prodCtx, pool, *rate, logger)
	}()
	stops = append(stops, stopStep{name: "the demo producer", run: func() { stopProducer(); <-prodDone }})

	view := &devView{out: a.stdout, self: a.self, url: url, tty: isTTY(a.stdout), rate: *rate, smtp: catcher, nats: f.nats.url,
		inFlight: inFlight}
	t := time.NewTicker(*refresh)
	defer t.Stop()
	for {
		view.render(ctx, pool)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// The demo producer's and the live view's statements.
const (
	devSendSQL = `SELECT pgrelay_notifier.send('demo_email'::pg_catalog.text, ARRAY[$1::pg_catalog.text],
		$2::pg_catalog.text, $3::pg_catalog.text, $4::pg_catalog.text)`
	devNotifySQL = "SELECT pgrelay.notify($1::pg_catalog.text, $2::pg_catalog.text)"
	devDoneSQL   = `SELECT channel,
		pg_catalog.count(*) FILTER (WHERE event OPERATOR(pg_catalog.=) 'succeeded'::pg_catalog.text),
		pg_catalog.count(*) FILTER (WHERE event OPERATOR(pg_catalog.=) 'failed'::pg_catalog.text),
		pg_catalog.count(*) FILTER (WHERE event OPERATOR(pg_catalog.=) 'gave_up'::pg_catalog.text),
		pg_catalog.count(*) FILTER (WHERE event OPERATOR(pg_catalog.=) 'expired'::pg_catalog.text)
		FROM pgrelay.log GROUP BY channel`
	devExistsSQL = `SELECT EXISTS (SELECT FROM pg_catalog.pg_database
		WHERE datname OPERATOR(pg_catalog.=) 'pgrelay_dev'::pg_catalog.name)`
)

func devQueryRow(ctx context.Context, url, sql string, dst ...any) error {
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer c.Close(context.WithoutCancel(ctx))
	return c.QueryRow(ctx, sql).Scan(dst...)
}

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
			_, err = pool.Exec(ctx, devSendSQL,
				fmt.Sprintf("Customer %d <customer%d@example.com>", seq, seq), fmt.Sprintf("Order %d confirmed", seq),
				fmt.Sprintf("Thank you for your order of %d.%02d EUR.", amount/100, amount%100),
				fmt.Sprintf("<p>Thank you for your order of <b>%d.%02d EUR</b>.</p>", amount/100, amount%100))
		} else {
			payload := fmt.Sprintf(`{"seq": %d, "amount": %d}`, seq, amount)
			_, err = pool.Exec(ctx, devNotifySQL, ch, payload)
		}
		if err != nil && ctx.Err() == nil {
			logger.Warn("demo producer", "err", err)
		}
	}
}

// devView renders the live view: per channel pending / in flight / done.
type devView struct {
	out  io.Writer
	url  string
	tty  bool
	rate float64
	smtp *testenv.SMTP // the SMTP catcher; nil with --smtp-url
	nats string        // the NATS server status events go to
	self string        // how to run this binary (app.self)
	// inFlight is the Processor's slots in use: its claimed events and the
	// slots its running batches reserve. The table's IN FLIGHT column counts
	// claims written to the queue; rows a batch holds by row lock (sql
	// channels) are running without one.
	inFlight prometheus.Gauge
}

type doneCounts struct{ succeeded, failed, gaveUp, expired int64 }

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
	done := map[string]doneCounts{}
	rows, err := pool.Query(qctx, devDoneSQL)
	if err == nil {
		for rows.Next() {
			var ch string
			var c doneCounts
			if rows.Scan(&ch, &c.succeeded, &c.failed, &c.gaveUp, &c.expired) == nil {
				done[ch] = c
			}
		}
		rows.Close()
	}
	var b strings.Builder
	if v.tty {
		b.WriteString("\033[H\033[2J")
	}
	fmt.Fprintf(&b, "pgrelay dev — %s — Ctrl-C to stop\n", time.Now().Format("15:04:05"))
	fmt.Fprintf(&b, "database: %s\n", v.url)
	fmt.Fprintf(&b, "try:      psql '%s' -c \"SELECT pgrelay.notify('demo_orders', '{\\\"hello\\\": 1}')\"\n", v.url)
	fmt.Fprintf(&b, "          psql '%s' -c \"SELECT pgrelay_notifier.send('demo_email', ARRAY['you@example.com'], 'Hi', 'Hello')\"\n", v.url)
	fmt.Fprintf(&b, "nats:     %s (follow the events: %s)\n", natsURLShown(v.nats), watchCommand(v.self, v.nats))
	fmt.Fprintf(&b, "demo producer: %.0f events/s\n\n", v.rate)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "CHANNEL\tMODE\tPENDING\tIN FLIGHT\tRETRYING\tSUCCEEDED\tFAILED\tGAVE UP\tEXPIRED\t")
	for _, s := range stats {
		d := done[s.Channel]
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", s.Channel, s.Mode, s.Pending, s.InFlight,
			s.Retrying, d.succeeded, d.failed, d.gaveUp, d.expired)
	}
	_ = tw.Flush()
	if v.inFlight != nil {
		var m dto.Metric
		if err := v.inFlight.Write(&m); err == nil {
			fmt.Fprintf(&b, "\nProcessor: %.0f slots in use (claimed events, and the slots running batches reserve)\n", m.GetGauge().GetValue())
		}
	}
	if v.smtp != nil {
		fmt.Fprintf(&b, "\nSMTP catcher smtp://%s: %d emails captured", v.smtp.Addr(), v.smtp.Count())
		if m, ok := v.smtp.Last(); ok {
			fmt.Fprintf(&b, ", last: %q to %s", m.Subject(), strings.Join(m.To, ", "))
		}
		b.WriteString("\n")
	}
	if !v.tty {
		b.WriteString("\n")
	}
	fmt.Fprint(v.out, b.String())
}

func isTTY(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
