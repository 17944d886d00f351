package conversation

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"

	"github.com/loomgate/loom/internal/testutil"
	"github.com/loomgate/loom/tools"
)

// TestCallSpanErrors: every call has its execute_tool span, with
// error.type when it fails: a tool no server offers, a server whose
// session does not open, a tool's own error result.
func TestCallSpanErrors(t *testing.T) {
	log := &eventLog{}
	up, down := newFake(log, "up", "ok", "bad"), newFake(log, "down", "gone")
	down.OpenFunc = func(context.Context) (tools.Session, error) { return nil, errRefused }
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	open := up.OpenFunc
	up.OpenFunc = func(ctx context.Context) (tools.Session, error) {
		s, err := open(ctx)
		if err != nil {
			return nil, err
		}
		s.(*fakeSession).CallFunc = func(_ context.Context, call tools.Call) (tools.Result, error) {
			return tools.Result{IsError: call.Name == "bad", Content: []tools.Content{{Type: tools.ContentText, Text: "x"}}}, nil
		}
		return s, nil
	}
	c := New(registry(t, up, down), nil, &Options{TracerProvider: tp, Logger: testLogger(&testutil.LockedBuffer{})})
	ctx := context.Background()
	c.Call(ctx, []tools.Call{{CallID: "c1", Name: "ok"}, {CallID: "c2", Name: "bad"}, {CallID: "c3", Name: "gone"}, {CallID: "c4", Name: "nope"}})
	c.Close(ctx)
	want := map[string]string{"c1": "", "c2": "tool_error", "c3": "error", "c4": "unknown_tool"}
	got := map[string]string{}
	for _, s := range rec.Ended() {
		var id, et, op string
		for _, a := range s.Attributes() {
			switch a.Key {
			case semconv.GenAIToolCallIDKey:
				id = a.Value.AsString()
			case semconv.ErrorTypeKey:
				et = a.Value.AsString()
			case semconv.GenAIOperationNameKey:
				op = a.Value.AsString()
			}
		}
		if op != "execute_tool" {
			continue
		}
		got[id] = et
		if (et != "") != (s.Status().Code == codes.Error) {
			t.Errorf("call %s: error.type %q, status %v", id, et, s.Status())
		}
	}
	for id, et := range want {
		if g, ok := got[id]; !ok || g != et {
			t.Errorf("call %s: error.type %q (span %v), want %q", id, g, ok, et)
		}
	}
}
