package processor_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/pgrelay/pgrelay"
	"github.com/pgrelay/pgrelay/internal/devenv"
	"github.com/pgrelay/pgrelay/internal/testenv"
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

// The attempts of email and nats channels have their spans too, each linked
// to its event's producer: an email sent (succeeded) and one the SMTP server
// refuses for good (550: gave_up), produced in SQL with
// pgrelay.traceparent set; a nats publish (succeeded) and one over the
// server's max payload (gave_up), produced by a traced Notify.
func TestTracingSpansEmailAndNATSAttemptsLinkedToTheProducer(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{processor.KindEmail, processor.KindNATS} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			d := goDB(t)
			tp, exp := tracedProvider(t)
			cfg := goConfig(d.URL)
			cfg.TracerProvider = tp
			cfg.Kinds = []string{kind}
			const channel = "out"
			var ok, refused int64
			links := map[int64]trace.SpanContext{} // event id -> the span its attempt links to
			switch kind {
			case processor.KindEmail:
				s, err := devenv.StartSMTP(devenv.SMTPConfig{})
				require.NoError(t, err)
				t.Cleanup(func() { _ = s.Close() })
				s.RejectDomain("bad.example", 550, "no such user")
				cfg.SMTPURL = s.URL()
				d.Exec("SELECT pgrelay_notifier.create_channel($1, 'shop@example.org')", channel)
				send := func(to string) int64 {
					ctx, app := tp.Tracer("app").Start(context.Background(), "POST /signup")
					defer app.End()
					tx, err := d.Pool.Begin(ctx)
					require.NoError(t, err)
					defer func() { _ = tx.Rollback(ctx) }()
					_, err = tx.Exec(ctx, "SELECT set_config('pgrelay.traceparent', $1, true)", pgrelay.Traceparent(app.SpanContext()))
					require.NoError(t, err)
					nid, err := pgrelay.Send(ctx, tx, channel, pgrelay.Email{To: []string{to}, Subject: "welcome", BodyText: "hello"})
					require.NoError(t, err)
					id := testenv.One[int64](t, tx, "SELECT origin_id FROM pgrelay.queue WHERE channel = $1 AND payload = $2", channel, strconv.FormatInt(nid, 10))
					require.NoError(t, tx.Commit(ctx))
					links[id] = app.SpanContext()
					return id
				}
				ok, refused = send("new@example.org"), send("nobody@bad.example")
			case processor.KindNATS:
				n, err := devenv.StartNATS(devenv.NATSConfig{MaxPayload: 8192})
				require.NoError(t, err)
				t.Cleanup(n.Stop)
				cfg.NATS = &processor.NATSConfig{URL: n.URL()}
				d.Exec("SELECT pgrelay.register($1, 'orders.shipped', p_kind := 'nats')", channel)
				notify := func(payload string) int64 {
					ctx, app := tp.Tracer("app").Start(context.Background(), "POST /orders")
					defer app.End()
					id, err := pgrelay.Notify(ctx, d.Pool, channel, payload)
					require.NoError(t, err)
					return id
				}
				ok, refused = notify("order 7"), notify(strings.Repeat("x", 10000))
				for _, s := range exp.GetSpans() {
					if s.Name == "send "+channel {
						id, err := strconv.ParseInt(attrs(s)["messaging.message.id"], 10, 64)
						require.NoError(t, err)
						links[id] = s.SpanContext
					}
				}
			}
			require.Len(t, links, 2, "the producers' spans")

			p, err := processor.NewProcessor(cfg)
			require.NoError(t, err)
			require.NoError(t, p.Start(context.Background()))
			waitEnded(t, d, ok)
			waitEnded(t, d, refused)
			require.NoError(t, p.Stop(context.Background()))
			require.Equal(t, []string{"succeeded"}, logEvents(t, d, ok))
			require.Equal(t, []string{"gave_up"}, logEvents(t, d, refused))

			spans := processSpans(exp, channel)
			require.Len(t, spans, 2, "a span per attempt")
			outcome := map[int64]string{ok: "succeeded", refused: "gave_up"}
			for _, s := range spans {
				a := attrs(s)
				id, err := strconv.ParseInt(a["messaging.message.id"], 10, 64)
				require.NoError(t, err)
				require.Contains(t, outcome, id, "the span of an event of the test")
				require.Equal(t, trace.SpanKindConsumer, s.SpanKind)
				require.Len(t, s.Links, 1)
				require.Equal(t, links[id].TraceID(), s.Links[0].SpanContext.TraceID(), "event %d links to its producer", id)
				require.Equal(t, links[id].SpanID(), s.Links[0].SpanContext.SpanID())
				require.Equal(t, "pgrelay", a["messaging.system"])
				require.Equal(t, "process", a["messaging.operation.type"])
				require.Equal(t, channel, a["messaging.destination.name"])
				require.Equal(t, "1", a[pgrelay.AttrAttempt])
				require.Equal(t, kind, a["pgrelay.kind"])
				require.Equal(t, outcome[id], a[pgrelay.AttrOutcome], "event %d", id)
				if id == refused {
					require.NotEmpty(t, s.Events, "the failure is recorded on the span")
				}
				delete(outcome, id)
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
