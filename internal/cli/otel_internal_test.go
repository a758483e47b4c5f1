package cli

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// pgrelay run exports its spans over OTLP only when the OTEL_* environment
// asks for it, and then to the endpoint it names.
func TestOTLPTracingFromEnv(t *testing.T) {
	ctx := context.Background()
	var posts atomic.Int32
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/v1/traces" {
			posts.Add(1)
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer collector.Close()
	for _, k := range []string{"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT",
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"} {
		t.Setenv(k, "")
	}

	tp, err := otlpTracing(ctx)
	require.NoError(t, err)
	require.Nil(t, tp, "no OTEL_* variable: no tracing")

	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	t.Setenv("OTEL_TRACES_EXPORTER", "none")
	tp, err = otlpTracing(ctx)
	require.NoError(t, err)
	require.Nil(t, tp, "OTEL_TRACES_EXPORTER=none wins")

	t.Setenv("OTEL_TRACES_EXPORTER", "zipkin")
	_, err = otlpTracing(ctx)
	require.ErrorContains(t, err, "otlp only")

	t.Setenv("OTEL_TRACES_EXPORTER", "")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	_, err = otlpTracing(ctx)
	require.ErrorContains(t, err, "http/protobuf only")

	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	tp, err = otlpTracing(ctx)
	require.NoError(t, err)
	require.NotNil(t, tp, "an endpoint alone turns the export on")
	_, span := tp.Tracer("test").Start(ctx, "process orders")
	span.End()
	require.NoError(t, tp.Shutdown(ctx), "the last spans are flushed to the collector")
	require.EqualValues(t, 1, posts.Load(), "the span reached the collector's /v1/traces")

	t.Setenv("OTEL_SDK_DISABLED", "true")
	tp, err = otlpTracing(ctx)
	require.NoError(t, err)
	require.Nil(t, tp)
}
