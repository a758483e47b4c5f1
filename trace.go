package pgrelay

import (
	"context"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// TracerName is the instrumentation scope of pgrelay's OpenTelemetry spans:
// the producer spans of Notify and NotifyMany, and a Processor's spans.
const TracerName = "github.com/pgrelay/pgrelay"

// The attributes of pgrelay's spans besides OpenTelemetry's messaging ones
// (messaging.system "pgrelay", messaging.destination.name the channel,
// messaging.message.id the event's id as Notify returned it).
const (
	// AttrAttempt is the attempt a Processor's span ran (1 first).
	AttrAttempt = "pgrelay.attempt"
	// AttrOutcome is what came of the attempt: succeeded, failed, gave_up,
	// expired or released (the attempt did not count).
	AttrOutcome = "pgrelay.outcome"
)

// notifySpan starts Notify's (or NotifyMany's, n events) producer span when
// ctx carries a span: a child of it, from the tracer provider of that span,
// so that only an application that traces pays for it and the root package
// needs no global provider. It returns the traceparent to store with the
// event ("" for none) and the function that ends the span. Without a span
// in ctx it does nothing.
func notifySpan(ctx context.Context, channel string, n int) (context.Context, string, func(ids []int64, err error)) {
	parent := trace.SpanFromContext(ctx)
	if !parent.SpanContext().IsValid() {
		return ctx, "", func([]int64, error) {}
	}
	attrs := []attribute.KeyValue{
		attribute.String("messaging.system", "pgrelay"),
		attribute.String("messaging.operation.type", "send"),
		attribute.String("messaging.operation.name", "notify"),
		attribute.String("messaging.destination.name", channel),
	}
	if n != 1 {
		attrs = append(attrs, attribute.Int("messaging.batch.message_count", n))
	}
	ctx, span := parent.TracerProvider().Tracer(TracerName).Start(ctx, "send "+channel,
		trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(attrs...))
	return ctx, Traceparent(span.SpanContext()), func(ids []int64, err error) {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		} else if len(ids) == 1 {
			span.SetAttributes(attribute.String("messaging.message.id", strconv.FormatInt(ids[0], 10)))
		}
		span.End()
	}
}

// Traceparent is sc as a W3C traceparent header value (version 00), the form
// pgrelay stores with an event; "" for an invalid sc.
func Traceparent(sc trace.SpanContext) string {
	if !sc.IsValid() {
		return ""
	}
	tid, sid := sc.TraceID(), sc.SpanID()
	return "00-" + tid.String() + "-" + sid.String() + "-" + sc.TraceFlags().String()
}

// ParseTraceparent is the span context of a W3C traceparent (version 00,
// as Traceparent writes it), marked remote; ok is false for anything else.
func ParseTraceparent(s string) (sc trace.SpanContext, ok bool) {
	if len(s) != 55 || s[:3] != "00-" || s[35] != '-' || s[52] != '-' {
		return trace.SpanContext{}, false
	}
	tid, err := trace.TraceIDFromHex(s[3:35])
	if err != nil {
		return trace.SpanContext{}, false
	}
	sid, err := trace.SpanIDFromHex(s[36:52])
	if err != nil {
		return trace.SpanContext{}, false
	}
	flags, err := strconv.ParseUint(s[53:], 16, 8)
	if err != nil {
		return trace.SpanContext{}, false
	}
	sc = trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid,
		TraceFlags: trace.TraceFlags(flags), Remote: true})
	return sc, sc.IsValid()
}

// channelArg is the SQL of the channel argument ($1) of notify() or
// notify_many(): with a traceparent, pgrelay._traced($1, $n), which sets
// pgrelay.traceparent for this statement's enqueue before the function
// runs (arguments are evaluated first), in the same round trip. Without
// one, the statement is the untraced one.
func channelArg(traceparent string, n int) string {
	if traceparent == "" {
		return "$1::pg_catalog.text"
	}
	return "pgrelay._traced($1::pg_catalog.text, $" + strconv.Itoa(n) + "::pg_catalog.text)"
}

// traced is args with the traceparent as the next parameter when there is
// one.
func traced(args []any, traceparent string) []any {
	if traceparent == "" {
		return args
	}
	return append(args, traceparent)
}
