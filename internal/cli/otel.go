package cli

import (
	"context"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// otlpTracing is the tracer provider `pgrelay run` exports its spans with
// over OTLP (HTTP/protobuf) when the standard environment variables ask for
// it: OTEL_TRACES_EXPORTER=otlp, or, with OTEL_TRACES_EXPORTER unset, an
// OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT. Nil
// otherwise (no spans, no trace queries), and with OTEL_SDK_DISABLED=true
// or OTEL_TRACES_EXPORTER=none. The exporter, the batch processor and the
// sampler read the rest of the OTEL_* variables themselves (endpoint,
// headers, timeout, OTEL_BSP_*, OTEL_TRACES_SAMPLER); OTEL_SERVICE_NAME
// and OTEL_RESOURCE_ATTRIBUTES name the service (default "pgrelay").
func otlpTracing(ctx context.Context) (*sdktrace.TracerProvider, error) {
	if strings.EqualFold(strings.TrimSpace(os.Getenv("OTEL_SDK_DISABLED")), "true") {
		return nil, nil
	}
	switch exp := strings.TrimSpace(os.Getenv("OTEL_TRACES_EXPORTER")); exp {
	case "none":
		return nil, nil
	case "":
		if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
			return nil, nil
		}
	case "otlp":
	default:
		return nil, &usageError{msg: fmt.Sprintf("OTEL_TRACES_EXPORTER=%s: pgrelay run exports traces with otlp only (or none)", exp)}
	}
	protocol := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if protocol == "" {
		protocol = os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	if protocol != "" && protocol != "http/protobuf" {
		return nil, &usageError{msg: fmt.Sprintf("OTEL_EXPORTER_OTLP_PROTOCOL=%s: pgrelay run exports OTLP over http/protobuf only (a collector's port 4318)", protocol)}
	}
	exporter, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	res, err := resource.New(ctx, resource.WithAttributes(attribute.String("service.name", "pgrelay")),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter: resource: %w", err)
	}
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res)), nil
}
