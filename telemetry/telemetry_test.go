package telemetry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/loomgate/loom/telemetry"
)

const clientParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

func TestStartRequest(t *testing.T) {
	sdk := sdktrace.NewTracerProvider()
	t.Cleanup(func() { sdk.Shutdown(context.Background()) })
	tracers := map[string]trace.Tracer{"no provider": telemetry.Tracer(nil, "t"), "no tracer": nil, "sdk": telemetry.Tracer(sdk, "t")}
	for name, tracer := range tracers {
		t.Run(name, func(t *testing.T) {
			for _, tt := range []struct {
				header    string
				sameTrace bool
			}{{clientParent, true}, {"", false}, {"00-zz-00f067aa0ba902b7-01", false}} {
				r := httptest.NewRequest("POST", "/v1/responses", nil)
				if tt.header != "" {
					r.Header.Set("Traceparent", tt.header)
				}
				ctx, span := telemetry.StartRequest(r, tracer, "POST")
				span.End()
				sc := trace.SpanContextFromContext(ctx)
				if !sc.IsValid() {
					t.Fatalf("traceparent %q: no span context", tt.header)
				}
				if got := sc.TraceID().String() == "4bf92f3577b34da6a3ce929d0e0e4736"; got != tt.sameTrace {
					t.Errorf("traceparent %q: trace %s", tt.header, sc.TraceID())
				}
				if sc.SpanID().String() == "00f067aa0ba902b7" {
					t.Errorf("traceparent %q: loom reused the client's span id", tt.header)
				}
				h := httptest.NewRecorder().Header()
				telemetry.Inject(ctx, h)
				if !strings.Contains(h.Get("Traceparent"), sc.TraceID().String()+"-"+sc.SpanID().String()) {
					t.Errorf("injected traceparent %q, span %s", h.Get("Traceparent"), sc.SpanID())
				}
				if f := telemetry.Fields(ctx); f["traceparent"] != h.Get("Traceparent") {
					t.Errorf("Fields %v, header %q", f, h.Get("Traceparent"))
				}
			}
		})
	}
	if telemetry.Fields(context.Background()) != nil || telemetry.TraceID(context.Background()) != "" {
		t.Error("a context without a span has trace fields")
	}
}

func TestLogHandler(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(telemetry.LogHandler(slog.NewJSONHandler(&buf, nil))).With("component", "x")
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("Traceparent", clientParent)
	ctx, span := telemetry.StartRequest(r, telemetry.Tracer(nil, "t"), "GET")
	defer span.End()
	log.InfoContext(ctx, "with")
	log.Info("without")
	log.InfoContext(telemetry.Detach(ctx), "detached")
	log.InfoContext(telemetry.ContinueTrace(context.Background(), telemetry.TraceID(ctx)), "continued")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d lines", len(lines))
	}
	for i, want := range []bool{true, false, true, true} {
		var m map[string]any
		json.Unmarshal([]byte(lines[i]), &m)
		if got := m["trace_id"] == "4bf92f3577b34da6a3ce929d0e0e4736" && m["span_id"] != nil; got != want || m["component"] != "x" {
			t.Errorf("line %s: trace attributes %v, want %v", lines[i], got, want)
		}
	}
}

// TestInjectAsOtel: Inject writes the headers otel's W3C propagator
// writes, for every flag byte, with and without a tracestate, and none
// without a span context.
func TestInjectAsOtel(t *testing.T) {
	ts, err := trace.ParseTraceState("vendor=a1,other=b2")
	if err != nil {
		t.Fatal(err)
	}
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	for _, state := range []trace.TraceState{{}, ts} {
		for _, flags := range []trace.TraceFlags{0, 1, 2, 3, 0x80, 0xff} {
			sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: flags, TraceState: state})
			ctx := trace.ContextWithRemoteSpanContext(context.Background(), sc)
			got, want := http.Header{}, http.Header{}
			telemetry.Inject(ctx, got)
			propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(want))
			if !reflect.DeepEqual(got, want) || len(want) == 0 {
				t.Errorf("flags %x, state %q: got %v, want %v", flags, state, got, want)
			}
		}
	}
	h := http.Header{}
	telemetry.Inject(context.Background(), h)
	if len(h) != 0 {
		t.Errorf("headers without a span context: %v", h)
	}
}
