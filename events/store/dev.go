package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// The statements of `pgrelay dev`: its throwaway database, the demo
// channels, the demo producer and the live view.

// demoSetup creates the demo schema and channels (idempotent).
const demoSetup = `
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

// CreateDemo creates the demo schema and channels (idempotent).
func CreateDemo(ctx context.Context, q Querier) error {
	if _, err := q.Exec(ctx, demoSetup); err != nil {
		return fmt.Errorf("create the demo channels: %w", err)
	}
	return nil
}

// DevDatabaseExists reports whether dev's database pgrelay_dev exists on q's
// server.
func DevDatabaseExists(ctx context.Context, q Querier) (bool, error) {
	var exists bool
	if err := q.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_catalog.pg_database
		WHERE datname OPERATOR(pg_catalog.=) 'pgrelay_dev'::pg_catalog.name)`).Scan(&exists); err != nil {
		return false, fmt.Errorf("look for database pgrelay_dev: %w", err)
	}
	return exists, nil
}

// CreateDevDatabase creates dev's database pgrelay_dev.
func CreateDevDatabase(ctx context.Context, q Querier) error {
	if _, err := q.Exec(ctx, "CREATE DATABASE pgrelay_dev"); err != nil {
		return fmt.Errorf("create database pgrelay_dev: %w", err)
	}
	return nil
}

// NotifyDemo enqueues payload on the demo channel channel (pgrelay.notify).
func NotifyDemo(ctx context.Context, q Querier, channel, payload string) error {
	if _, err := q.Exec(ctx, "SELECT pgrelay.notify($1::pg_catalog.text, $2::pg_catalog.text)", channel, payload); err != nil {
		return fmt.Errorf("notify demo channel %s: %w", channel, err)
	}
	return nil
}

// SendDemoEmail sends one email to `to` on the demo channel demo_email
// (pgrelay_notifier.send).
func SendDemoEmail(ctx context.Context, q Querier, to, subject, text, html string) error {
	if _, err := q.Exec(ctx, `SELECT pgrelay_notifier.send('demo_email'::pg_catalog.text, ARRAY[$1::pg_catalog.text],
		$2::pg_catalog.text, $3::pg_catalog.text, $4::pg_catalog.text)`, to, subject, text, html); err != nil {
		return fmt.Errorf("send demo email to %s: %w", to, err)
	}
	return nil
}

// EndedCounts is how many events of a channel pgrelay.log records per outcome.
type EndedCounts struct{ Succeeded, Failed, GaveUp, Expired int64 }

// LogCounts counts pgrelay.log's rows per channel and outcome.
func LogCounts(ctx context.Context, q Querier) (map[string]EndedCounts, error) {
	rows, err := q.Query(ctx, `SELECT channel,
		pg_catalog.count(*) FILTER (WHERE event OPERATOR(pg_catalog.=) 'succeeded'::pg_catalog.text),
		pg_catalog.count(*) FILTER (WHERE event OPERATOR(pg_catalog.=) 'failed'::pg_catalog.text),
		pg_catalog.count(*) FILTER (WHERE event OPERATOR(pg_catalog.=) 'gave_up'::pg_catalog.text),
		pg_catalog.count(*) FILTER (WHERE event OPERATOR(pg_catalog.=) 'expired'::pg_catalog.text)
		FROM pgrelay.log GROUP BY channel`)
	if err != nil {
		return nil, fmt.Errorf("count pgrelay.log per channel: %w", err)
	}
	out := map[string]EndedCounts{}
	var ch string
	var c EndedCounts
	_, err = pgx.ForEachRow(rows, []any{&ch, &c.Succeeded, &c.Failed, &c.GaveUp, &c.Expired}, func() error {
		out[ch] = c
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("count pgrelay.log per channel: %w", err)
	}
	return out, nil
}
