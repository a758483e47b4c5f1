package actors

import (
	"context"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/pgrelay/pgrelay"
	"github.com/pgrelay/pgrelay/events"
	"github.com/pgrelay/pgrelay/events/store"
	"github.com/pgrelay/pgrelay/internal/handlers"
)

// tracing makes the Processor's span of every attempt it runs
// (Config.TracerProvider): a consumer span named "process <channel>" with
// OpenTelemetry's messaging attributes, linked to the producer's span when
// the event was enqueued with a trace context. A nil *tracing is off: its
// methods do nothing and the Processor sends no query for it.
type tracing struct {
	tracer trace.Tracer
}

// newTracing is the tracing of tp; nil (off) without a provider.
func newTracing(tp trace.TracerProvider) *tracing {
	if tp == nil {
		return nil
	}
	return &tracing{tracer: tp.Tracer(pgrelay.TracerName)}
}

// attempt describes an attempt for its span.
type attempt struct {
	channel, kind, traceparent string
	id, originID               int64
	attempt, maxAttempts       int
}

func attemptOf(ev handlers.Event) attempt {
	return attempt{channel: ev.Channel, kind: ev.Kind, traceparent: ev.Traceparent, id: ev.ID,
		originID: ev.OriginID, attempt: ev.Attempt, maxAttempts: ev.MaxAttempts}
}

func directAttempt(e *store.DirectEvent) attempt {
	return attempt{channel: e.Channel, kind: e.Kind, traceparent: e.Traceparent, id: e.ID,
		originID: e.OriginID, attempt: e.Attempt, maxAttempts: e.MaxAttempts}
}

// start starts a's span under ctx (at the given time when not zero).
func (t *tracing) start(ctx context.Context, a attempt, at time.Time) (context.Context, trace.Span) {
	if t == nil {
		return ctx, nil
	}
	opts := []trace.SpanStartOption{
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(
			attribute.String("messaging.system", "pgrelay"),
			attribute.String("messaging.operation.type", "process"),
			attribute.String("messaging.operation.name", "process"),
			attribute.String("messaging.destination.name", a.channel),
			attribute.String("messaging.message.id", strconv.FormatInt(a.originID, 10)),
			attribute.Int(pgrelay.AttrAttempt, a.attempt),
			attribute.String("pgrelay.kind", a.kind),
			attribute.String("pgrelay.queue_id", strconv.FormatInt(a.id, 10)),
		),
	}
	if sc, ok := pgrelay.ParseTraceparent(a.traceparent); ok {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
	}
	if !at.IsZero() {
		opts = append(opts, trace.WithTimestamp(at))
	}
	return t.tracer.Start(ctx, "process "+a.channel, opts...)
}

// end ends span with the attempt's outcome k ("" or events.Release: the
// attempt did not count) and the handler's err (at the given time when not
// zero). A failure on the last attempt is recorded as gave_up, as the
// completion records it.
func (t *tracing) end(span trace.Span, a attempt, k events.Kind, err error, at time.Time) {
	if t == nil || span == nil {
		return
	}
	switch {
	case k == "":
		k = events.Release
	case k == events.Failed && a.maxAttempts > 0 && a.attempt >= a.maxAttempts:
		k = events.GaveUp
	}
	span.SetAttributes(attribute.String(pgrelay.AttrOutcome, string(k)))
	if err != nil && k != events.Succeeded {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	if at.IsZero() {
		span.End()
	} else {
		span.End(trace.WithTimestamp(at))
	}
}

// lookup fills the trace context of claimed rows in one query. A failed
// lookup costs the spans their links, never the events.
func (t *tracing) lookup(ctx context.Context, d *deps, rows []store.Claimed) {
	if t == nil || len(rows) == 0 {
		return
	}
	origins := make([]int64, len(rows))
	for i, r := range rows {
		origins[i] = r.OriginID
	}
	found, err := d.store.Traceparents(ctx, origins)
	if err != nil {
		d.log.Warn("tracing: reading the events' trace context failed; their spans have no link", "err", err)
		return
	}
	for i := range rows {
		rows[i].Traceparent = found[rows[i].OriginID]
	}
}

// directBatch records the spans of a direct batch of sql events that ran
// from start to end, after the fact: the statements ran in the database,
// each under the batch's transaction. One query reads their trace context.
func (t *tracing) directBatch(d *deps, b *store.DirectBatch, start, end time.Time) {
	if t == nil || b == nil || len(b.Events) == 0 {
		return
	}
	origins := make([]int64, 0, len(b.Events))
	for _, e := range b.Events {
		if e.Kind != "go" {
			origins = append(origins, e.OriginID)
		}
	}
	if len(origins) == 0 {
		return // a go batch's spans were made around each handler
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(d.runCtx), 10*time.Second)
	defer cancel()
	found, err := d.store.Traceparents(ctx, origins)
	if err != nil {
		d.log.Warn("tracing: reading the events' trace context failed; their spans have no link", "err", err)
	}
	for i := range b.Events {
		e := &b.Events[i]
		if e.Kind == "go" {
			continue
		}
		a := directAttempt(e)
		a.traceparent = found[e.OriginID]
		_, span := t.start(d.runCtx, a, start)
		t.end(span, a, e.Outcome, e.Err, end)
	}
}
