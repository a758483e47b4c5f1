package bench

import (
	"context"
	"fmt"

	"github.com/pgrelay/pgrelay/actors"
	"github.com/pgrelay/pgrelay/internal/devenv"
	"github.com/pgrelay/pgrelay/internal/handlers/email"
)

// scenarioEmail measures the email path: n notifications composed with
// pgrelay_notifier.send() (--enqueue-batch per statement), then one
// Processor sends them all through pooled SMTP connections, to an
// in-process catcher or to the server of --smtp-url (e.g. a mailpit started
// by hand); the figure is emails per second from the Processor's start to
// the last outcome (sent or failed for good).
func (b *bench) scenarioEmail(ctx context.Context) (*scenarioResult, error) {
	const channel = "pgrelay_bench_email"
	res := &scenarioResult{Name: "email"}
	n := b.o.Events
	c := b.procConfig(b.dbURL, "")
	var catcher *devenv.SMTP
	if c.SMTPURL == "" {
		var err error
		if catcher, err = devenv.StartSMTP(devenv.SMTPConfig{Logger: b.logger}); err != nil {
			return nil, err
		}
		defer func() { _ = catcher.Close() }()
		c.SMTPURL = catcher.URL()
	}
	if err := unregisterChannels(ctx, b.pool, channel); err != nil {
		return nil, err
	}
	defer func() {
		_ = cleanup(ctx, func(ctx context.Context) error { return unregisterChannels(ctx, b.pool, channel) })
	}()
	if _, err := b.pool.Exec(ctx, `SELECT pgrelay_notifier.create_channel($1::pg_catalog.text, 'bench@pgrelay.localhost'::pg_catalog.text)`, channel); err != nil {
		return nil, fmt.Errorf("create the bench channel: %w", err)
	}
	var startID int64
	if err := b.pool.QueryRow(ctx, `SELECT COALESCE(max(notification_id), 0) FROM pgrelay_notifier.notifications`).Scan(&startID); err != nil {
		return nil, fmt.Errorf("read the last notification: %w", err)
	}
	took, err := b.insertBatches(ctx, "email: compose", n, b.o.Batch, func(ctx context.Context, from, k int) error {
		if _, err := b.pool.Exec(ctx, `SELECT count(pgrelay_notifier.send($1, ARRAY['user' || g || '@example.com'],
			'Order ' || g || ' confirmed', 'Thank you for order ' || g || '.', '<p>Thank you for order <b>' || g || '</b>.</p>'))
			FROM generate_series($2::int, $3::int) g`, channel, from+1, from+k); err != nil {
			return fmt.Errorf("compose with pgrelay_notifier.send: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := settle(ctx, b.pool); err != nil {
		return nil, err
	}
	compose := res.add(newMeasurement(fmt.Sprintf("compose (pgrelay_notifier.send x %d per statement)", b.o.Batch),
		"pgrelay", int64(n), took, "emails/s"))
	compose.Counted = false
	d, err := b.drain(ctx, drainSpec{label: "email: send", profile: "email", procs: []actors.Config{c},
		channels: []string{channel}, target: int64(n), gaveUpDone: true})
	if err != nil {
		return res, err
	}
	var sent, failed int64
	if err := b.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status = 'sent'), count(*) FILTER (WHERE status = 'failed')
		FROM pgrelay_notifier.notifications WHERE notification_id > $1 AND channel = $2`, startID, channel).Scan(&sent, &failed); err != nil {
		return res, fmt.Errorf("count the notifications' statuses: %w", err)
	}
	if sent+failed != int64(n) {
		return res, fmt.Errorf("%d notifications sent and %d failed, want %d in all", sent, failed, n)
	}
	m := res.add(newMeasurement("send (fetch, SMTP, set_status, complete)", "pgrelay", int64(n), d.took, "emails/s"))
	m.Series = d.series
	m.Detail = fmt.Sprintf("%d sent, %d failed", sent, failed)
	if catcher != nil {
		m.Detail += fmt.Sprintf("; SMTP catcher: %d messages over %d SMTP sessions", catcher.Count(), catcher.Sessions())
	} else {
		// An SMTP server of the operator's (--smtp-url): named without
		// credentials, with its pool size.
		t, err := email.ParseTarget(c.SMTPURL)
		if err != nil {
			return res, fmt.Errorf("name the SMTP server: %w", err)
		}
		m.Detail += fmt.Sprintf("; SMTP server %s (pool %d)", t, t.PoolSize)
	}
	return res, nil
}
