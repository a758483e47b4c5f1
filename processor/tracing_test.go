package processor_test

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/pgrelay/pgrelay"
	"github.com/pgrelay/pgrelay/processor"
)

// tracedProvider is an SDK provider whose ended spans exp keeps.
func tracedProvider(t *testing.T) (*sdktrace.TracerProvider, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { require.NoError(t, tp.Shutdown(context.Background())) })
	return tp, exp
}

// attrs is a span's attributes as text.
func attrs(s tracetest.SpanStub) map[string]string {
	m := map[string]string{}
	for _, kv := range s.Attributes {
		m[string(kv.Key)] = kv.Value.String()
	}
	return m
}

// processSpans are the Processor's spans of channel, in the order they ended.
func processSpans(exp *tracetest.InMemoryExporter, channel string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		if s.Name == "process "+channel {
			out = append(out, s)
		}
	}
	return out
}

// Every attempt of a traced event has a span of its own, the first and the
// retry alike, each linked to the producer's span of Notify, with the
// messaging attributes and the attempt's outcome: for a Go handler (Handle:
// claimed; HandleTx on a 'none' channel: a direct batch), whose ctx carries
// the span, and for a sql channel (a direct batch of statements).
func TestTracingSpansEveryAttemptLinkedToTheProducer(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"handle", "tx", "sql"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			d := goDB(t)
			// The first attempt fails, the retry (due at once) succeeds: a
			// sequence is not rolled back with the failed attempt.
			d.Exec("CREATE SEQUENCE app.tries")
			d.Exec(`CREATE FUNCTION app.fail_once(p text) RETURNS void LANGUAGE plpgsql AS $$
				BEGIN IF nextval('app.tries') = 1 THEN RAISE EXCEPTION 'first try of %', p; END IF; END $$`)
			handler, chKind := "ship", "go"
			if kind == "sql" {
				handler, chKind = "SELECT app.fail_once($1)", "sql"
			}
			d.Exec("SELECT pgrelay.register('ship', $1, p_kind := $2, p_retry_delay := '0')", handler, chKind)

			tp, exp := tracedProvider(t)
			cfg := goConfig(d.URL)
			cfg.TracerProvider = tp
			if kind == "sql" {
				cfg.Kinds = []string{processor.KindSQL}
			}
			p, err := processor.NewProcessor(cfg)
			require.NoError(t, err)
			inHandler := make(chan trace.SpanContext, 2)
			fail := func(ctx context.Context, ev pgrelay.Event) error {
				inHandler <- trace.SpanContextFromContext(ctx)
				if ev.Attempt == 1 {
					return errors.New("carrier unavailable")
				}
				return nil
			}
			switch kind {
			case "handle":
				p.Handle("ship", fail)
			case "tx":
				p.HandleTx("ship", func(ctx context.Context, _ pgx.Tx, ev pgrelay.Event) error { return fail(ctx, ev) })
			}

			ctx, app := tp.Tracer("app").Start(context.Background(), "POST /orders")
			id, err := pgrelay.Notify(ctx, d.Pool, "ship", "order 7")
			require.NoError(t, err)
			app.End()
			require.NoError(t, p.Start(context.Background()))
			waitEnded(t, d, id)
			// Stop waits for every handler and batch: their spans have ended.
			require.NoError(t, p.Stop(context.Background()))
			require.Equal(t, []string{"failed", "succeeded"}, logEvents(t, d, id))

			var producer tracetest.SpanStub
			for _, s := range exp.GetSpans() {
				if s.Name == "send ship" {
					producer = s
				}
			}
			require.True(t, producer.SpanContext.IsValid(), "Notify's producer span")
			require.Equal(t, trace.SpanKindProducer, producer.SpanKind)

			spans := processSpans(exp, "ship")
			require.Len(t, spans, 2, "a span per attempt")
			for i, s := range spans {
				require.Equal(t, trace.SpanKindConsumer, s.SpanKind)
				require.Len(t, s.Links, 1)
				require.Equal(t, producer.SpanContext.TraceID(), s.Links[0].SpanContext.TraceID(),
					"attempt %d links to the producer's span", i+1)
				require.Equal(t, producer.SpanContext.SpanID(), s.Links[0].SpanContext.SpanID())
				a := attrs(s)
				require.Equal(t, "pgrelay", a["messaging.system"])
				require.Equal(t, "process", a["messaging.operation.type"])
				require.Equal(t, "ship", a["messaging.destination.name"])
				require.Equal(t, pgrelayID(id), a["messaging.message.id"])
				require.Equal(t, pgrelayID(int64(i+1)), a[pgrelay.AttrAttempt])
				require.Equal(t, chKind, a["pgrelay.kind"])
			}
			require.Equal(t, "failed", attrs(spans[0])[pgrelay.AttrOutcome])
			require.Equal(t, "succeeded", attrs(spans[1])[pgrelay.AttrOutcome])
			require.NotEmpty(t, spans[0].Events, "the failure is recorded on the span")
			if kind != "sql" {
				require.Len(t, inHandler, 2)
				for _, s := range spans {
					require.Equal(t, s.SpanContext.SpanID(), (<-inHandler).SpanID(), "the handler's ctx carries its attempt's span")
				}
			}
		})
	}
}

// A channel registered with p_store_traces := false keeps no producer's
// trace context: a traced Notify stores no trace row, and the Processor's
// span of its attempt has no link. By default (and after update turns it
// back on) the trace context is stored and linked.
func TestTracingChannelThatStoresNoTraces(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		setup  []string
		stored bool
	}{
		{"default", nil, true},
		{"off", []string{"SELECT pgrelay.update('ship', p_store_traces := false)"}, false},
		{"on again", []string{"SELECT pgrelay.update('ship', p_store_traces := false)",
			"SELECT pgrelay.update('ship', p_store_traces := true)"}, true},
		{"registered off", []string{"SELECT pgrelay.unregister('ship')",
			"SELECT pgrelay.register('ship', 'ship', p_kind := 'go', p_store_traces := false)"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := goDB(t)
			d.Exec("SELECT pgrelay.register('ship', 'ship', p_kind := 'go')")
			for _, sql := range tc.setup {
				d.Exec(sql)
			}
			tp, exp := tracedProvider(t)
			cfg := goConfig(d.URL)
			cfg.TracerProvider = tp
			p, err := processor.NewProcessor(cfg)
			require.NoError(t, err)
			p.Handle("ship", func(context.Context, pgrelay.Event) error { return nil })

			ctx, app := tp.Tracer("app").Start(context.Background(), "POST /orders")
			id, err := pgrelay.Notify(ctx, d.Pool, "ship", "order 7")
			require.NoError(t, err)
			app.End()
			stored := d.Count("SELECT count(*) FROM pgrelay.event_traces WHERE origin_id = $1", id)
			require.NoError(t, p.Start(context.Background()))
			waitEnded(t, d, id)
			require.NoError(t, p.Stop(context.Background()))

			spans := processSpans(exp, "ship")
			require.Len(t, spans, 1)
			require.Equal(t, "succeeded", attrs(spans[0])[pgrelay.AttrOutcome])
			if tc.stored {
				require.Equal(t, 1, stored, "the producer's trace context is stored")
				require.Len(t, spans[0].Links, 1, "the attempt's span links to the producer's")
			} else {
				require.Zero(t, stored, "no trace context is stored for the channel")
				require.Empty(t, spans[0].Links, "the attempt's span has no link")
			}
		})
	}
}

// Without a TracerProvider the Processor makes no span and reads no trace
// context, though the event has one.
func TestTracingOffMakesNoSpans(t *testing.T) {
	t.Parallel()
	d := goDB(t)
	d.Exec("SELECT pgrelay.register('ship', 'ship', p_kind := 'go')")
	tp, exp := tracedProvider(t)
	got := make(chan trace.SpanContext, 1)
	startGo(t, d.URL, func(p *processor.Processor) {
		p.Handle("ship", func(ctx context.Context, ev pgrelay.Event) error {
			got <- trace.SpanContextFromContext(ctx)
			return nil
		})
	})
	ctx, app := tp.Tracer("app").Start(context.Background(), "POST /orders")
	id, err := pgrelay.Notify(ctx, d.Pool, "ship", "order 7")
	require.NoError(t, err)
	app.End()
	waitEnded(t, d, id)
	require.False(t, (<-got).IsValid(), "no span in the handler's ctx")
	require.Empty(t, processSpans(exp, "ship"))
}

func pgrelayID(n int64) string { return strconv.FormatInt(n, 10) }
