package processor_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay"
	"github.com/pgrelay/pgrelay/internal/testenv"
	"github.com/pgrelay/pgrelay/processor"
)

// goDB is a fresh migrated database with the table app.shipments, which the
// transactional handlers of these tests write.
func goDB(t *testing.T) *testenv.DB {
	t.Helper()
	d := pg.NewDB(t)
	d.Exec("CREATE SCHEMA app")
	d.Exec("CREATE TABLE app.shipments (origin_id bigint NOT NULL, attempt int NOT NULL)")
	return d
}

// goConfig is a Processor's configuration for these tests: quick polls,
// heartbeats and rescues.
func goConfig(url string) processor.Config {
	return processor.Config{
		DatabaseURL:       url,
		Concurrency:       16,
		PollInterval:      50 * time.Millisecond,
		HeartbeatInterval: 100 * time.Millisecond,
		DeadAfter:         time.Second,
		ShutdownTimeout:   5 * time.Second,
		IdleTimeout:       time.Second,
		Logger:            slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

// startGo starts an embedded Processor on url with the handlers setup
// registers; it is stopped when t ends.
func startGo(t *testing.T, url string, setup func(p *processor.Processor)) *processor.Processor {
	t.Helper()
	p, err := processor.NewProcessor(goConfig(url))
	require.NoError(t, err)
	setup(p)
	require.NoError(t, p.Start(context.Background()))
	t.Cleanup(func() { require.NoError(t, p.Stop(context.Background())) })
	return p
}

// notify enqueues payload on channel and returns the event's id.
func notify(t *testing.T, d *testenv.DB, channel, payload string) int64 {
	t.Helper()
	id, err := pgrelay.Notify(context.Background(), d.Pool, channel, payload)
	require.NoError(t, err)
	return id
}

// logEvents is the log's events of the event with origin id, in order.
func logEvents(t *testing.T, d *testenv.DB, origin int64) []string {
	t.Helper()
	return testenv.Column[string](t, d.Pool, "SELECT event FROM pgrelay.log WHERE origin_id = $1 ORDER BY id", origin)
}

// waitEnded waits until the event with origin id has left the queue.
func waitEnded(t *testing.T, d *testenv.DB, origin int64) {
	t.Helper()
	testenv.Eventually(t, 20*time.Second, fmt.Sprintf("event %d to end", origin), func() bool {
		return d.Count("SELECT count(*) FROM pgrelay.queue WHERE origin_id = $1", origin) == 0
	})
}

func TestGoHandleRunsTheEventOnce(t *testing.T) {
	t.Parallel()
	d := goDB(t)
	d.Exec("SELECT pgrelay.register('charge_card', 'charge', p_kind := 'go')")
	got := make(chan pgrelay.Event, 10)
	startGo(t, d.URL, func(p *processor.Processor) {
		p.Handle("charge", func(ctx context.Context, ev pgrelay.Event) error {
			got <- ev
			return nil
		})
	})
	id := notify(t, d, "charge_card", `{"order": 7}`)
	waitEnded(t, d, id)
	require.Equal(t, []string{"succeeded"}, logEvents(t, d, id))
	require.Len(t, got, 1)
	ev := <-got
	require.Equal(t, id, ev.OriginID)
	require.Equal(t, id, ev.ID, "the first attempt is the row Notify enqueued")
	require.Equal(t, "charge_card", ev.Channel)
	require.Equal(t, `{"order": 7}`, ev.Payload)
	require.Equal(t, 1, ev.Attempt)
	require.Equal(t, 5, ev.MaxAttempts)
	require.Nil(t, ev.Log)
}

func TestGoHandleTxCommitsWithTheSuccessOrNotAtAll(t *testing.T) {
	t.Parallel()
	d := goDB(t)
	d.Exec("SELECT pgrelay.register('ship', 'ship', p_kind := 'go', p_retry_delay := '0')")
	startGo(t, d.URL, func(p *processor.Processor) {
		p.HandleTx("ship", func(ctx context.Context, tx pgx.Tx, ev pgrelay.Event) error {
			if _, err := tx.Exec(ctx, "INSERT INTO app.shipments VALUES ($1, $2)", ev.OriginID, ev.Attempt); err != nil {
				return err
			}
			if ev.Attempt == 1 {
				return errors.New("carrier unavailable") // after writing: the write must roll back
			}
			return nil
		})
	})
	id := notify(t, d, "ship", "order 1")
	waitEnded(t, d, id)
	require.Equal(t, []string{"failed", "succeeded"}, logEvents(t, d, id))
	require.Equal(t, "carrier unavailable",
		d.Text("SELECT error FROM pgrelay.log WHERE origin_id = $1 AND event = 'failed'", id))
	require.Equal(t, []int32{2}, testenv.Column[int32](t, d.Pool, "SELECT attempt FROM app.shipments WHERE origin_id = $1", id),
		"only the successful attempt's write committed")
}

func TestGoFailuresRetryThenGiveUp(t *testing.T) {
	t.Parallel()
	d := goDB(t)
	d.Exec("SELECT pgrelay.register('flaky', 'flaky', p_kind := 'go', p_max_attempts := 3, p_retry_delay := '0')")
	startGo(t, d.URL, func(p *processor.Processor) {
		p.Handle("flaky", func(ctx context.Context, ev pgrelay.Event) error {
			return fmt.Errorf("attempt %d failed", ev.Attempt)
		})
	})
	id := notify(t, d, "flaky", "x")
	waitEnded(t, d, id)
	require.Equal(t, []string{"failed", "failed", "gave_up"}, logEvents(t, d, id))
	require.Equal(t, []string{"attempt 1 failed", "attempt 2 failed", "attempt 3 failed"},
		testenv.Column[string](t, d.Pool, "SELECT error FROM pgrelay.log WHERE origin_id = $1 ORDER BY id", id))
}

func TestGoPermanentGivesUpAtOnce(t *testing.T) {
	t.Parallel()
	d := goDB(t)
	d.Exec("SELECT pgrelay.register('parse', 'parse', p_kind := 'go', p_max_attempts := 5)")
	startGo(t, d.URL, func(p *processor.Processor) {
		p.Handle("parse", func(ctx context.Context, ev pgrelay.Event) error {
			return pgrelay.Permanent(errors.New("not JSON"))
		})
	})
	id := notify(t, d, "parse", "{")
	waitEnded(t, d, id)
	require.Equal(t, []string{"gave_up"}, logEvents(t, d, id))
	require.Equal(t, "not JSON", d.Text("SELECT error FROM pgrelay.log WHERE origin_id = $1", id))
}

func TestGoPanicCostsOneAttempt(t *testing.T) {
	t.Parallel()
	d := goDB(t)
	d.Exec("SELECT pgrelay.register('boom', 'boom', p_kind := 'go', p_retry_delay := '0')")
	startGo(t, d.URL, func(p *processor.Processor) {
		p.HandleTx("boom", func(ctx context.Context, tx pgx.Tx, ev pgrelay.Event) error {
			if _, err := tx.Exec(ctx, "INSERT INTO app.shipments VALUES ($1, $2)", ev.OriginID, ev.Attempt); err != nil {
				return err
			}
			if ev.Attempt == 1 {
				panic(fmt.Sprintf("nil map in attempt %d", ev.Attempt))
			}
			return nil
		})
	})
	id := notify(t, d, "boom", "x")
	waitEnded(t, d, id)
	require.Equal(t, []string{"failed", "succeeded"}, logEvents(t, d, id))
	require.Equal(t, "handler panicked: nil map in attempt 1",
		d.Text("SELECT error FROM pgrelay.log WHERE origin_id = $1 AND event = 'failed'", id))
	require.Equal(t, []int32{2}, testenv.Column[int32](t, d.Pool, "SELECT attempt FROM app.shipments WHERE origin_id = $1", id),
		"the panicking attempt's write rolled back")
}

func TestGoTimeoutCancelsTheHandler(t *testing.T) {
	t.Parallel()
	d := goDB(t)
	d.Exec("SELECT pgrelay.register('slow', 'slow', p_kind := 'go', p_timeout := '200 milliseconds', p_max_attempts := 1)")
	d.Exec("SELECT pgrelay.register('slow_tx', 'slow_tx', p_kind := 'go', p_timeout := '200 milliseconds', p_max_attempts := 1)")
	startGo(t, d.URL, func(p *processor.Processor) {
		p.Handle("slow", func(ctx context.Context, ev pgrelay.Event) error {
			<-ctx.Done()
			return ctx.Err()
		})
		p.HandleTx("slow_tx", func(ctx context.Context, tx pgx.Tx, ev pgrelay.Event) error {
			if _, err := tx.Exec(ctx, "INSERT INTO app.shipments VALUES ($1, $2)", ev.OriginID, ev.Attempt); err != nil {
				return err
			}
			<-ctx.Done()
			return ctx.Err()
		})
	})
	plain := notify(t, d, "slow", "x")
	tx := notify(t, d, "slow_tx", "x")
	waitEnded(t, d, plain)
	waitEnded(t, d, tx)
	for _, id := range []int64{plain, tx} {
		require.Equal(t, []string{"gave_up"}, logEvents(t, d, id))
		require.Equal(t, "handler timed out after 200ms: context deadline exceeded",
			d.Text("SELECT error FROM pgrelay.log WHERE origin_id = $1", id))
	}
	require.Zero(t, d.Count("SELECT count(*) FROM app.shipments"))
}

func TestGoRetryAfterDelaysTheRetryAndSpendsAnAttempt(t *testing.T) {
	t.Parallel()
	d := goDB(t)
	d.Exec("SELECT pgrelay.register('limited', 'limited', p_kind := 'go', p_retry_delay := '0')")
	startGo(t, d.URL, func(p *processor.Processor) {
		p.Handle("limited", func(ctx context.Context, ev pgrelay.Event) error {
			return pgrelay.RetryAfter(time.Hour, errors.New("429 Too Many Requests"))
		})
	})
	id := notify(t, d, "limited", "x")
	testenv.Eventually(t, 20*time.Second, "the first attempt to fail", func() bool {
		return len(logEvents(t, d, id)) == 1
	})
	require.Equal(t, []string{"failed"}, logEvents(t, d, id))
	require.Equal(t, "retry after 1h0m0s: 429 Too Many Requests",
		d.Text("SELECT error FROM pgrelay.log WHERE origin_id = $1", id))
	// The retry is attempt 2, due an hour after the failure (the channel's
	// backoff would have made it due at once).
	require.Equal(t, 2, d.Count("SELECT attempt FROM pgrelay.queue WHERE origin_id = $1", id))
	require.True(t, testenv.One[bool](t, d.Pool, `SELECT not_before > now() + interval '59 minutes'
		FROM pgrelay.queue WHERE origin_id = $1`, id))
}

func TestGoEventsOfAnUnknownHandlerWait(t *testing.T) {
	t.Parallel()
	d := goDB(t)
	d.Exec("SELECT pgrelay.register('charge_card', 'charge', p_kind := 'go')")
	d.Exec("SELECT pgrelay.register('refund_card', 'refund', p_kind := 'go')")
	startGo(t, d.URL, func(p *processor.Processor) {
		p.Handle("charge", func(ctx context.Context, ev pgrelay.Event) error { return nil })
	})
	waiting := notify(t, d, "refund_card", "r")
	// Enqueued after the refund: once it has run, the Processor has
	// claimed since the refund committed.
	ran := notify(t, d, "charge_card", "c")
	waitEnded(t, d, ran)
	require.Equal(t, []string{"succeeded"}, logEvents(t, d, ran))
	require.Empty(t, logEvents(t, d, waiting))
	require.Equal(t, 1, d.Count(`SELECT count(*) FROM pgrelay.queue
		WHERE origin_id = $1 AND dispatched_at IS NULL AND attempt = 1`, waiting), "pending, no attempt spent")
	require.Equal(t, "refund_card refund 1", d.Text(`SELECT string_agg(concat_ws(' ', channel, handler, pending), ', ')
		FROM pgrelay.unhandled_go_channels()`))
}

// Events of a 'channel' channel run one at a time in order, whichever of
// two embedded Processors claims them.
func TestGoChannelModeKeepsOrderAcrossTwoProcessors(t *testing.T) {
	t.Parallel()
	d := goDB(t)
	d.Exec("SELECT pgrelay.register('ledger', 'post', p_kind := 'go', p_concurrency_mode := 'channel')")
	var mu sync.Mutex
	var order []string
	running, most := 0, 0
	handler := func(ctx context.Context, ev pgrelay.Event) error {
		mu.Lock()
		running++
		most = max(most, running)
		order = append(order, ev.Payload)
		mu.Unlock()
		// Long enough for the other Processor to claim, were it allowed to.
		select {
		case <-time.After(5 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
		mu.Lock()
		running--
		mu.Unlock()
		return nil
	}
	for range 2 {
		startGo(t, d.URL, func(p *processor.Processor) { p.Handle("post", handler) })
	}
	const n = 60
	want := make([]string, n)
	for i := range want {
		want[i] = fmt.Sprintf("entry %02d", i)
	}
	_, err := pgrelay.NotifyMany(context.Background(), d.Pool, "ledger", want)
	require.NoError(t, err)
	testenv.Eventually(t, 30*time.Second, "every entry to run", func() bool {
		return d.Count("SELECT count(*) FROM pgrelay.log WHERE channel = 'ledger' AND event = 'succeeded'") == n
	})
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, want, order)
	require.Equal(t, 1, most, "one event at a time")
	require.Equal(t, 2, d.Count("SELECT count(DISTINCT processor_id) FROM pgrelay.go_handlers WHERE handler = 'post'"))
}

func TestGoHandlerNames(t *testing.T) {
	t.Parallel()
	d := goDB(t)
	require.ErrorIs(t, pgrelay.Classify(d.Err("SELECT pgrelay.register('c', 'charge card', p_kind := 'go')")), pgrelay.ErrInvalidHandler)
	require.ErrorIs(t, pgrelay.Classify(d.Err("SELECT pgrelay.register('c', '1charge', p_kind := 'go')")), pgrelay.ErrInvalidHandler)
	d.Exec("SELECT pgrelay.register('c', 'billing.charge-v2', p_kind := 'go')")

	p, err := processor.NewProcessor(goConfig(d.URL))
	require.NoError(t, err)
	nop := func(context.Context, pgrelay.Event) error { return nil }
	require.PanicsWithValue(t, `pgrelay: "charge card" is not a valid Go handler name (1 to 100 letters, digits, "_", "." or "-", starting with a letter or "_")`,
		func() { p.Handle("charge card", nop) })
	p.Handle("charge", nop)
	require.PanicsWithValue(t, `pgrelay: handler "charge" registered twice`, func() { p.Handle("charge", nop) })
	require.Panics(t, func() { p.HandleTx("x", nil) })
}

// childEnv names, in a child process of this test binary, the database of
// TestGoHandleTxKilledMidTransaction; childEventsEnv how many events its
// handler writes before it blocks (1 when unset).
const (
	childEnv       = "PGRELAY_TEST_KILLED_CHILD_URL"
	childEventsEnv = "PGRELAY_TEST_KILLED_CHILD_EVENTS"
)

// runKilledChild is the child of TestGoHandleTxKilledMidTransaction and
// TestGoHandleTxKilledMidBatch: an embedded Processor whose transactional
// handler writes and, at the last of the events it is told to write, says
// so on stdout and blocks until the parent kills the process.
func runKilledChild(url string) {
	p, err := processor.NewProcessor(goConfig(url))
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(2)
	}
	events := 1
	if v := os.Getenv(childEventsEnv); v != "" {
		if events, err = strconv.Atoi(v); err != nil {
			fmt.Println("error:", err)
			os.Exit(2)
		}
	}
	var written atomic.Int64
	p.HandleTx("ship", func(ctx context.Context, tx pgx.Tx, ev pgrelay.Event) error {
		if _, err := tx.Exec(ctx, "INSERT INTO app.shipments VALUES ($1, $2)", ev.OriginID, ev.Attempt); err != nil {
			return err
		}
		if written.Add(1) < int64(events) {
			return nil
		}
		fmt.Println("written")
		select {} // until SIGKILL
	})
	if err := p.Start(context.Background()); err != nil {
		fmt.Println("error:", err)
		os.Exit(2)
	}
	select {}
}

// The handler's transaction is pgrelay's to end: a handler that commits it
// itself would commit its writes without the event's completion.
func TestGoHandleTxCannotEndItsTransaction(t *testing.T) {
	t.Parallel()
	d := goDB(t)
	d.Exec("SELECT pgrelay.register('ship', 'ship', p_kind := 'go', p_max_attempts := 1)")
	startGo(t, d.URL, func(p *processor.Processor) {
		p.HandleTx("ship", func(ctx context.Context, tx pgx.Tx, ev pgrelay.Event) error {
			if _, err := tx.Exec(ctx, "INSERT INTO app.shipments VALUES ($1, $2)", ev.OriginID, ev.Attempt); err != nil {
				return err
			}
			return tx.Commit(ctx)
		})
	})
	id := notify(t, d, "ship", "x")
	waitEnded(t, d, id)
	require.Equal(t, []string{"gave_up"}, logEvents(t, d, id))
	require.Contains(t, d.Text("SELECT error FROM pgrelay.log WHERE origin_id = $1", id), "commits with its event's completion")
	require.Zero(t, d.Count("SELECT count(*) FROM app.shipments"))
}

// An embedded Processor refuses a database whose schema is older than its
// own, as `pgrelay run` does: migrate first.
func TestGoProcessorRefusesAnOlderSchema(t *testing.T) {
	t.Parallel()
	d := goDB(t)
	d.Exec("DELETE FROM pgrelay.schema_migrations WHERE version = (SELECT max(version) FROM pgrelay.schema_migrations)")
	p, err := processor.NewProcessor(goConfig(d.URL))
	require.NoError(t, err)
	p.Handle("charge", func(context.Context, pgrelay.Event) error { return nil })
	err = p.Start(context.Background())
	require.ErrorContains(t, err, "run 'pgrelay migrate' first")
	require.Zero(t, d.Count("SELECT count(*) FROM pgrelay.processors"))
	require.NoError(t, p.Stop(context.Background()))
}

// The channel's rules hold for go channels as for the others: a duplicate
// payload is absorbed at notify, an event past its expiry is recorded
// expired without running, and the metrics count per channel.
func TestGoDeduplicationExpiryAndMetrics(t *testing.T) {
	t.Parallel()
	d := goDB(t)
	d.Exec("SELECT pgrelay.register('quote', 'push_quote', p_kind := 'go', p_deduplicate := true, p_expire_after := '1 hour')")
	first := notify(t, d, "quote", "a")
	require.Equal(t, first, notify(t, d, "quote", "a"), "absorbed by the pending duplicate")
	stale := notify(t, d, "quote", "b")
	d.Exec("UPDATE pgrelay.queue SET expires_at = now() - interval '1 second' WHERE origin_id = $1", stale)

	ran := make(chan string, 10)
	reg := prometheus.NewRegistry()
	cfg := goConfig(d.URL)
	cfg.Registerer = reg
	p, err := processor.NewProcessor(cfg)
	require.NoError(t, err)
	p.Handle("push_quote", func(ctx context.Context, ev pgrelay.Event) error {
		ran <- ev.Payload
		return nil
	})
	require.NoError(t, p.Start(context.Background()))
	t.Cleanup(func() { require.NoError(t, p.Stop(context.Background())) })

	waitEnded(t, d, first)
	waitEnded(t, d, stale)
	require.Equal(t, []string{"succeeded"}, logEvents(t, d, first))
	require.Equal(t, []string{"expired"}, logEvents(t, d, stale))
	require.Len(t, ran, 1)
	require.Equal(t, "a", <-ran)
	require.Equal(t, 1.0, counter(t, reg, "pgrelay_succeeded_total", "quote"))
	require.Equal(t, 1.0, counter(t, reg, "pgrelay_expired_total", "quote"))
}

// counter is the value of the counter name{channel=channel} in reg.
func counter(t *testing.T, reg *prometheus.Registry, name, channel string) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "channel" && l.GetValue() == channel {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no %s{channel=%q}", name, channel)
	return 0
}

// A handler still running when Stop stops waiting has its context
// cancelled: its write rolls back and its event goes back to pending with
// no attempt spent.
func TestGoStopCancelsRunningHandlers(t *testing.T) {
	t.Parallel()
	d := goDB(t)
	d.Exec("SELECT pgrelay.register('ship', 'ship', p_kind := 'go', p_timeout := '1 minute')")
	cfg := goConfig(d.URL)
	cfg.ShutdownTimeout = 100 * time.Millisecond
	p, err := processor.NewProcessor(cfg)
	require.NoError(t, err)
	written := make(chan struct{})
	p.HandleTx("ship", func(ctx context.Context, tx pgx.Tx, ev pgrelay.Event) error {
		if _, err := tx.Exec(ctx, "INSERT INTO app.shipments VALUES ($1, $2)", ev.OriginID, ev.Attempt); err != nil {
			return err
		}
		close(written)
		<-ctx.Done()
		return ctx.Err()
	})
	require.NoError(t, p.Start(context.Background()))
	id := notify(t, d, "ship", "x")
	<-written
	require.NoError(t, p.Stop(context.Background()))
	require.Empty(t, logEvents(t, d, id))
	require.Equal(t, 1, d.Count(`SELECT count(*) FROM pgrelay.queue
		WHERE origin_id = $1 AND dispatched_at IS NULL AND attempt = 1`, id))
	require.Zero(t, d.Count("SELECT count(*) FROM app.shipments"))
}

// HandleTxBatch runs the events one claim brings in one call and one
// transaction: its writes commit with every event's success, and a failing
// batch is an attempt of each of its events, its writes rolled back.
func TestGoHandleTxBatch(t *testing.T) {
	t.Parallel()
	d := goDB(t)
	d.Exec("SELECT pgrelay.register('ship', 'ship_many', p_kind := 'go', p_retry_delay := '0')")
	const n = 200
	payloads := make([]string, n)
	for i := range payloads {
		payloads[i] = fmt.Sprint(i)
	}
	ids, err := pgrelay.NotifyMany(context.Background(), d.Pool, "ship", payloads)
	require.NoError(t, err)
	failed := ids[7] // the batch holding it fails on its first attempt
	var mu sync.Mutex
	var sizes []int
	startGo(t, d.URL, func(p *processor.Processor) {
		p.HandleTxBatch("ship_many", func(ctx context.Context, tx pgx.Tx, evs []pgrelay.Event) error {
			mu.Lock()
			sizes = append(sizes, len(evs))
			mu.Unlock()
			for _, ev := range evs {
				if _, err := tx.Exec(ctx, "INSERT INTO app.shipments VALUES ($1, $2)", ev.OriginID, ev.Attempt); err != nil {
					return err
				}
			}
			for _, ev := range evs {
				if ev.OriginID == failed && ev.Attempt == 1 {
					return errors.New("carrier unavailable")
				}
			}
			return nil
		})
	})
	testenv.Eventually(t, 30*time.Second, "every event to succeed", func() bool {
		return d.Count("SELECT count(*) FROM pgrelay.log WHERE channel = 'ship' AND event = 'succeeded'") == n
	})
	require.Equal(t, n, d.Count("SELECT count(*) FROM app.shipments"), "one committed row per event")
	require.Equal(t, n, d.Count("SELECT count(DISTINCT origin_id) FROM app.shipments"))
	// The failed batch: each of its events failed once, and none of its
	// first-attempt writes committed.
	failedTogether := d.Count("SELECT count(*) FROM pgrelay.log WHERE channel = 'ship' AND event = 'failed'")
	require.Positive(t, failedTogether)
	require.Equal(t, failedTogether, d.Count("SELECT count(*) FROM app.shipments WHERE attempt = 2"))
	require.Equal(t, 2, d.Count("SELECT attempt FROM app.shipments WHERE origin_id = $1", failed))
	mu.Lock()
	defer mu.Unlock()
	require.Less(t, len(sizes), n, "events ran in batches: %v", sizes)
}

// A claim taken back while a transactional handler runs (a rescue: here
// done by hand) rolls the handler's transaction back: nothing of it
// commits, no outcome is recorded for the lost claim, and the events run
// again. In a batch, the batch's other events are released. (The events of
// a 'none' channel of a HandleTx handler run in direct batches, which write
// no claim: 'one' is a serialised channel, whose events are claimed.)
func TestGoClaimTakenBackRollsBack(t *testing.T) {
	t.Parallel()
	d := goDB(t)
	d.Exec("SELECT pgrelay.register('one', 'ship_one', p_kind := 'go', p_concurrency_mode := 'channel')")
	d.Exec("SELECT pgrelay.register('many', 'ship_many', p_kind := 'go')")
	takeBack := func(ctx context.Context, origin int64) error {
		_, err := d.Pool.Exec(ctx, `UPDATE pgrelay.queue SET dispatched_at = NULL, dispatched_by = NULL
			WHERE origin_id = $1`, origin)
		return err
	}
	var tookOne, tookMany sync.Once
	write := func(ctx context.Context, tx pgx.Tx, ev pgrelay.Event) error {
		_, err := tx.Exec(ctx, "INSERT INTO app.shipments VALUES ($1, $2)", ev.OriginID, ev.Attempt)
		return err
	}
	startGo(t, d.URL, func(p *processor.Processor) {
		p.HandleTx("ship_one", func(ctx context.Context, tx pgx.Tx, ev pgrelay.Event) error {
			if err := write(ctx, tx, ev); err != nil {
				return err
			}
			var err error
			tookOne.Do(func() { err = takeBack(ctx, ev.OriginID) })
			return err
		})
		p.HandleTxBatch("ship_many", func(ctx context.Context, tx pgx.Tx, evs []pgrelay.Event) error {
			for _, ev := range evs {
				if err := write(ctx, tx, ev); err != nil {
					return err
				}
			}
			var err error
			tookMany.Do(func() { err = takeBack(ctx, evs[0].OriginID) })
			return err
		})
	})
	one := notify(t, d, "one", "x")
	many, err := pgrelay.NotifyMany(context.Background(), d.Pool, "many", []string{"a", "b", "c", "d"})
	require.NoError(t, err)
	for _, id := range append([]int64{one}, many...) {
		waitEnded(t, d, id)
		require.Equal(t, []string{"succeeded"}, logEvents(t, d, id), "event %d: no outcome for the lost claim", id)
	}
	require.Equal(t, 5, d.Count("SELECT count(*) FROM app.shipments"), "the rolled back writes are gone")
	require.Equal(t, 5, d.Count("SELECT count(DISTINCT origin_id) FROM app.shipments"))
}
