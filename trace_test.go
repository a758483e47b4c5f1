package pgrelay_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/pgrelay/pgrelay"
)

// traced is a context carrying a recording span of a fresh SDK provider
// whose spans the returned exporter keeps.
func traced(t *testing.T) (context.Context, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { require.NoError(t, tp.Shutdown(context.Background())) })
	ctx, span := tp.Tracer("app").Start(context.Background(), "POST /orders")
	t.Cleanup(func() { span.End() })
	return ctx, exp
}

// traceOf is the traceparent stored with the event origin, "" for none.
func traceOf(t *testing.T, d db, origin int64) string {
	t.Helper()
	var tp string
	err := d.admin.QueryRow(bg, `SELECT COALESCE((SELECT traceparent FROM pgrelay.event_traces WHERE origin_id = $1), '')`,
		origin).Scan(&tp)
	require.NoError(t, err)
	return tp
}

// Notify in a traced context makes a producer span, a child of the
// application's, and stores its traceparent with the event; NotifyMany with
// each of its events. An untraced context stores nothing and makes no span,
// also later in a transaction whose earlier Notify was traced.
func TestNotifyStoresTheProducerSpan(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	d.exec(t, "SELECT pgrelay.register('orders', 'SELECT pg_catalog.length($1)')")
	ctx, exp := traced(t)

	tx, err := d.producer.Begin(bg)
	require.NoError(t, err)
	id, err := pgrelay.Notify(ctx, tx, "orders", "1")
	require.NoError(t, err)
	ids, err := pgrelay.NotifyMany(ctx, tx, "orders", []string{"2", "3"})
	require.NoError(t, err)
	untraced, err := pgrelay.Notify(bg, tx, "orders", "4")
	require.NoError(t, err)
	require.NoError(t, tx.Commit(bg))

	spans := exp.GetSpans()
	require.Len(t, spans, 2, "one producer span per call, none for the untraced one")
	one, many := spans[0], spans[1]
	require.Equal(t, "send orders", one.Name)
	require.Equal(t, trace.SpanKindProducer, one.SpanKind)
	require.Equal(t, trace.SpanContextFromContext(ctx).SpanID(), one.Parent.SpanID(), "a child of the application's span")
	attrs := map[string]string{}
	for _, kv := range one.Attributes {
		attrs[string(kv.Key)] = kv.Value.String()
	}
	require.Equal(t, "pgrelay", attrs["messaging.system"])
	require.Equal(t, "orders", attrs["messaging.destination.name"])
	require.Equal(t, "send", attrs["messaging.operation.type"])
	require.Equal(t, pgrelay.Traceparent(one.SpanContext), traceOf(t, d, id))
	for _, m := range ids {
		require.Equal(t, pgrelay.Traceparent(many.SpanContext), traceOf(t, d, m))
	}
	require.Empty(t, traceOf(t, d, untraced), "the traced Notify before it in the transaction must not leak into it")

	// Autocommit, untraced: nothing stored.
	plain, err := pgrelay.Notify(bg, d.producer, "orders", "5")
	require.NoError(t, err)
	require.Empty(t, traceOf(t, d, plain))
	require.Equal(t, 3, count(t, d, "SELECT count(*) FROM pgrelay.event_traces"))
}

// A SQL producer sets pgrelay.traceparent for its transaction: every event
// it enqueues after that carries it; a value that is not a traceparent is
// ignored, never refused.
func TestSQLProducerSetsTheTraceparent(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	d.exec(t, "SELECT pgrelay.register('orders', 'SELECT pg_catalog.length($1)')")
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	tx, err := d.producer.Begin(bg)
	require.NoError(t, err)
	_, err = tx.Exec(bg, "SET LOCAL pgrelay.traceparent = '"+tp+"'")
	require.NoError(t, err)
	var a, b int64
	require.NoError(t, tx.QueryRow(bg, "SELECT pgrelay.notify('orders', 'a')").Scan(&a))
	require.NoError(t, tx.QueryRow(bg, "SELECT pgrelay.notify('orders', 'b')").Scan(&b))
	_, err = tx.Exec(bg, "SET LOCAL pgrelay.traceparent = 'not a traceparent'")
	require.NoError(t, err)
	var c int64
	require.NoError(t, tx.QueryRow(bg, "SELECT pgrelay.notify('orders', 'c')").Scan(&c))
	require.NoError(t, tx.Commit(bg))
	require.Equal(t, tp, traceOf(t, d, a))
	require.Equal(t, tp, traceOf(t, d, b))
	require.Empty(t, traceOf(t, d, c))

	sc, ok := pgrelay.ParseTraceparent(tp)
	require.True(t, ok)
	require.Equal(t, tp, pgrelay.Traceparent(sc))
	for _, bad := range []string{"", "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01", tp + "x"} {
		_, ok := pgrelay.ParseTraceparent(bad)
		require.False(t, ok, bad)
	}
}

func count(t *testing.T, d db, sql string) int {
	t.Helper()
	var n int
	require.NoError(t, d.admin.QueryRow(bg, sql).Scan(&n))
	return n
}
