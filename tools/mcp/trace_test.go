package mcp

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/loomgate/loom/tools"
)

// TestCallSpans: each JSON-RPC call to a server is a client span in the
// MCP conventions, named by method and tool; a JSON-RPC error is its
// error.type and rpc.response.status_code, its message the status.
func TestCallSpans(t *testing.T) {
	ts, _ := startServer(t, nil, func(s *mcpsdk.Server) {
		textTool("ok", "fine")(s)
		s.AddTool(&mcpsdk.Tool{Name: "bad", InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(context.Context, *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
				return nil, &jsonrpc.Error{Code: -32602, Message: "no such widget"}
			})
	})
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	c := loopbackClient(t, &ClientOptions{TracerProvider: tp})
	s := newServer(t, c, ServerConfig{Label: "w", URL: ts.URL, Authorization: "sekrit"})
	sess := open(t, s)
	for _, name := range []string{"ok", "bad"} {
		if _, err := sess.Call(context.Background(), tools.Call{CallID: "c_" + name, Name: name, Arguments: "{}"}); err != nil {
			t.Fatalf("call %s: %v", name, err)
		}
	}
	spans := map[string]sdktrace.ReadOnlySpan{}
	for _, sp := range rec.Ended() {
		spans[sp.Name()] = sp
	}
	attrs := func(sp sdktrace.ReadOnlySpan) map[string]string {
		m := map[string]string{}
		for _, a := range sp.Attributes() {
			m[string(a.Key)] = a.Value.Emit()
		}
		return m
	}
	ok, bad := spans["tools/call ok"], spans["tools/call bad"]
	if ok == nil || bad == nil {
		t.Fatalf("spans %v", spans)
	}
	for _, sp := range []sdktrace.ReadOnlySpan{ok, bad} {
		if sp.SpanKind() != trace.SpanKindClient {
			t.Errorf("%s: kind %v", sp.Name(), sp.SpanKind())
		}
		a := attrs(sp)
		if a[string(semconv.McpMethodNameKey)] != "tools/call" || a[string(semconv.ServerAddressKey)] != "127.0.0.1" ||
			a[string(semconv.ServerPortKey)] == "" || a[string(semconv.GenAIOperationNameKey)] != "execute_tool" {
			t.Errorf("%s: attributes %v", sp.Name(), a)
		}
		for k, v := range a {
			if v == "sekrit" || k == "authorization" {
				t.Errorf("%s: %s carries the credential", sp.Name(), k)
			}
		}
	}
	if a := attrs(ok); a[string(semconv.ErrorTypeKey)] != "" || ok.Status().Code == codes.Error {
		t.Errorf("tools/call ok: error %v, status %v", a[string(semconv.ErrorTypeKey)], ok.Status())
	}
	a := attrs(bad)
	if a[string(semconv.ErrorTypeKey)] != "-32602" || a[string(semconv.RPCResponseStatusCodeKey)] != "-32602" ||
		bad.Status().Code != codes.Error || bad.Status().Description != "no such widget" {
		t.Errorf("tools/call bad: attributes %v, status %v", a, bad.Status())
	}
}
