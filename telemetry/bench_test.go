package telemetry_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/loomgate/loom/telemetry"
)

// BenchmarkRequestTrace is what every request pays for its trace: read
// the client's traceparent (or start a trace), start the request span,
// write the response's traceparent header.
func BenchmarkRequestTrace(b *testing.B) {
	sdk := sdktrace.NewTracerProvider() // recording, exporting nowhere
	b.Cleanup(func() { sdk.Shutdown(context.Background()) })
	for _, bc := range []struct {
		name, header string
		provider     *sdktrace.TracerProvider
	}{
		{"no-export/client-traceparent", clientParent, nil},
		{"no-export/new-trace", "", nil},
		{"sdk/client-traceparent", clientParent, sdk},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var tracer trace.Tracer // nil: no spans, what the server passes without a provider
			if bc.provider != nil {
				tracer = telemetry.Tracer(bc.provider, "b")
			}
			r := httptest.NewRequest("POST", "/v1/responses", nil)
			if bc.header != "" {
				r.Header.Set("Traceparent", bc.header)
			}
			h := http.Header{}
			b.ReportAllocs()
			for b.Loop() {
				ctx, span := telemetry.StartRequest(r, tracer, "POST /v1/responses")
				telemetry.Inject(ctx, h)
				span.End()
			}
		})
	}
}

// BenchmarkLogHandler is the cost the trace adds to one log line.
func BenchmarkLogHandler(b *testing.B) {
	r := httptest.NewRequest("POST", "/v1/responses", nil)
	r.Header.Set("Traceparent", clientParent)
	ctx, span := telemetry.StartRequest(r, telemetry.Tracer(nil, "b"), "POST")
	defer span.End()
	for _, bc := range []struct {
		name string
		log  *slog.Logger
	}{
		{"json", slog.New(slog.NewJSONHandler(discard{}, nil))},
		{"json+trace", slog.New(telemetry.LogHandler(slog.NewJSONHandler(discard{}, nil)))},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				bc.log.InfoContext(ctx, "response", "id", "resp_1", "status", "completed")
			}
		})
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
