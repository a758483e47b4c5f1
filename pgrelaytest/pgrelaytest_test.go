package pgrelaytest_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay"
	"github.com/pgrelay/pgrelay/internal/testenv"
	"github.com/pgrelay/pgrelay/pgrelaytest"
	"github.com/pgrelay/pgrelay/processor"
)

// fatal is a testing.TB whose Fatalf records its message and ends the
// goroutine, as a test's does.
type fatal struct {
	testing.TB
	msg string
}

func (f *fatal) Helper() {}

func (f *fatal) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// failure runs fn with a fatal and returns what it failed with ("": it did
// not fail).
func failure(t *testing.T, fn func(tb testing.TB)) string {
	f := &fatal{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
	return f.msg
}

// RequireNotified finds the events a transaction enqueued by payload or
// decoded value, and fails, saying what the channel holds, when none
// matches; a rolled-back event is gone.
func TestRequireNotified(t *testing.T) {
	t.Parallel()
	d := pg.NewDB(t)
	d.Exec("SELECT pgrelay.register('orders', 'SELECT pg_catalog.length($1)', p_max_attempts := 3)")
	ctx := context.Background()
	tx, err := d.Pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	id, err := pgrelay.NotifyJSON(ctx, tx, "orders", orderPlaced{OrderID: 7})
	require.NoError(t, err)
	plain, err := pgrelay.Notify(ctx, tx, "orders", "plain")
	require.NoError(t, err)

	evs := pgrelaytest.RequireNotified(t, tx, "orders", pgrelaytest.JSON(orderPlaced{OrderID: 7}))
	require.Len(t, evs, 1)
	require.Equal(t, id, evs[0].OriginID)
	require.Equal(t, `{"order_id":7}`, evs[0].Payload)
	require.Equal(t, 1, evs[0].Attempt)
	require.Equal(t, 3, evs[0].MaxAttempts)
	require.Len(t, pgrelaytest.RequireNotified(t, tx, "orders", pgrelaytest.Payload("plain")), 1)
	require.Len(t, pgrelaytest.RequireNotified(t, tx, "orders"), 2)

	require.Equal(t, `pgrelaytest: no event on channel "orders" with a JSON pgrelaytest_test.orderPlaced equal to {OrderID:8}; `+
		`the channel holds 2 event(s): `+fmt.Sprint(id)+` "{\"order_id\":7}"; `+fmt.Sprint(plain)+` "plain"`,
		failure(t, func(tb testing.TB) {
			pgrelaytest.RequireNotified(tb, tx, "orders", pgrelaytest.JSON(orderPlaced{OrderID: 8}))
		}))
	require.Empty(t, failure(t, func(tb testing.TB) { pgrelaytest.RequireNotified(tb, tx, "orders") }))
	require.NoError(t, tx.Rollback(ctx))
	require.Equal(t, `pgrelaytest: no event on channel "orders" with any payload; the channel holds no event`,
		failure(t, func(tb testing.TB) { pgrelaytest.RequireNotified(tb, d.Pool, "orders") }))
}

// Work runs each ready event once through the real completion: a failure
// is a failed attempt with its retry pending, which the next Work runs; a
// handler's panic is a failed attempt; the log has every row.
func TestWorkRecordsAsInProduction(t *testing.T) {
	t.Parallel()
	d := pg.NewDB(t)
	d.Exec("SELECT pgrelay.register('charge', 'charge', p_kind := 'go', p_retry_delay := '0', p_max_attempts := 2)")
	d.Exec("SELECT pgrelay.register('other', 'charge', p_kind := 'go')")
	p, err := processor.NewProcessor(processor.Config{DatabaseURL: d.URL,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	var calls atomic.Int32
	p.Handle("charge", func(ctx context.Context, ev pgrelay.Event) error {
		calls.Add(1)
		switch ev.Payload {
		case "declined":
			return errors.New("card declined")
		case "panic":
			panic("boom")
		}
		return nil
	})
	ctx := context.Background()
	ok, err := pgrelay.Notify(ctx, d.Pool, "charge", "ok")
	require.NoError(t, err)
	declined, err := pgrelay.Notify(ctx, d.Pool, "charge", "declined")
	require.NoError(t, err)
	panicked, err := pgrelay.Notify(ctx, d.Pool, "charge", "panic")
	require.NoError(t, err)
	other, err := pgrelay.Notify(ctx, d.Pool, "other", "ok")
	require.NoError(t, err)

	outs, err := pgrelaytest.Work(ctx, p, "charge")
	require.NoError(t, err)
	results := map[int64]string{}
	for _, o := range outs {
		results[o.Event.OriginID] = o.Result
	}
	require.Equal(t, map[int64]string{ok: "succeeded", declined: "failed", panicked: "failed"}, results)
	require.EqualValues(t, 3, calls.Load(), "each event ran once, its retry not yet")
	for _, o := range outs {
		if o.Event.OriginID == declined {
			require.EqualError(t, o.Err, "card declined")
		}
	}
	require.Equal(t, []string{"succeeded"}, logOf(t, d, ok))
	require.Equal(t, []string{"failed"}, logOf(t, d, declined))
	require.Equal(t, "handler panicked: boom", d.Text("SELECT error FROM pgrelay.log WHERE origin_id = $1", panicked))
	st, err := pgrelay.Status(ctx, d.Pool, declined)
	require.NoError(t, err)
	require.Equal(t, pgrelay.StatusRetrying, st)
	require.Equal(t, 1, d.Count("SELECT count(*) FROM pgrelay.queue WHERE origin_id = $1", other), "another channel's event stays")
	require.Zero(t, d.Count("SELECT count(*) FROM pgrelay.queue WHERE dispatched_by IS NOT NULL"), "no claim is left")
	require.Zero(t, d.Count("SELECT count(*) FROM pgrelay.processors"), "Work unregistered")

	// The retries are due at once: the next Work runs them, their last attempt.
	outs, err = pgrelaytest.Work(ctx, p, "charge")
	require.NoError(t, err)
	require.Len(t, outs, 2)
	for _, o := range outs {
		require.Equal(t, "gave_up", o.Result)
		require.Equal(t, 2, o.Event.Attempt)
	}
	require.Equal(t, []string{"failed", "gave_up"}, logOf(t, d, declined))
	outs, err = pgrelaytest.Work(ctx, p, "charge")
	require.NoError(t, err)
	require.Empty(t, outs)

	require.NoError(t, p.Start(ctx))
	defer func() { require.NoError(t, p.Stop(ctx)) }()
	_, err = pgrelaytest.Work(ctx, p, "charge")
	require.ErrorContains(t, err, "started")
}

func logOf(t *testing.T, d *testenv.DB, origin int64) []string {
	t.Helper()
	return testenv.Column[string](t, d.Pool, "SELECT event FROM pgrelay.log WHERE origin_id = $1 ORDER BY id", origin)
}

// Work runs a serialised channel's events one after the other, in order,
// each once its predecessor's outcome is written; a HandleTxBatch handler
// gets them one at a time.
func TestWorkRunsASerialChannelInOrder(t *testing.T) {
	t.Parallel()
	d := pg.NewDB(t)
	d.Exec("CREATE TABLE public.done (payload text NOT NULL, at serial)")
	d.Exec("SELECT pgrelay.register('ledger', 'post', p_kind := 'go', p_concurrency_mode := 'channel')")
	p, err := processor.NewProcessor(processor.Config{DatabaseURL: d.URL,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	p.HandleTxBatch("post", func(ctx context.Context, tx pgx.Tx, evs []pgrelay.Event) error {
		if len(evs) != 1 {
			return fmt.Errorf("a serialised channel's batch has one event, not %d", len(evs))
		}
		_, err := tx.Exec(ctx, "INSERT INTO public.done (payload) VALUES ($1)", evs[0].Payload)
		return err
	})
	ctx := context.Background()
	_, err = pgrelay.NotifyMany(ctx, d.Pool, "ledger", []string{"a", "b", "c"})
	require.NoError(t, err)
	outs, err := pgrelaytest.Work(ctx, p, "ledger")
	require.NoError(t, err)
	var ran []string
	for _, o := range outs {
		require.Equal(t, "succeeded", o.Result, o.Err)
		ran = append(ran, o.Event.Payload)
	}
	require.Equal(t, []string{"a", "b", "c"}, ran)
	require.Equal(t, []string{"a", "b", "c"}, testenv.Column[string](t, d.Pool, "SELECT payload FROM public.done ORDER BY at"))
	require.Zero(t, d.Count("SELECT count(*) FROM pgrelay.queue"))
}
