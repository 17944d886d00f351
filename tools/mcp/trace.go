package mcp

import (
	"context"
	"errors"
	"net/url"
	"reflect"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/loomgate/loom/telemetry"
)

// traceCalls is SDK sending middleware that records a client span per
// JSON-RPC request or notification loom sends a server, as the MCP
// semantic conventions describe them (semconv v1.41.0): named
// "{mcp.method.name} {target}" (the tool of a tools/call, the prompt of a
// prompts/get), with the method, the session (a session-based server's),
// the protocol version, the server's address and port, and error.type on
// a failure (the JSON-RPC error code, "tool_error" for a tool's own error
// result). It runs before traceMeta, so that the server's span is the
// child of this one. jsonrpc.request.id is not recorded: the SDK assigns
// it below the middleware.
func (s *Server) traceCalls(next mcpsdk.MethodHandler) mcpsdk.MethodHandler {
	return func(ctx context.Context, method string, req mcpsdk.Request) (mcpsdk.Result, error) {
		if !s.c.tracing {
			return next(ctx, method, req)
		}
		name := method
		attrs := make([]attribute.KeyValue, 0, 10)
		attrs = append(attrs, semconv.McpMethodNameKey.String(method))
		attrs = append(attrs, s.peer...)
		switch p := req.GetParams().(type) {
		case *mcpsdk.CallToolParams:
			if p != nil {
				name += " " + p.Name
				attrs = append(attrs, semconv.GenAIToolName(p.Name), semconv.GenAIOperationNameExecuteTool)
			}
		case *mcpsdk.GetPromptParams:
			if p != nil {
				name += " " + p.Name
				attrs = append(attrs, semconv.GenAIPromptName(p.Name))
			}
		case *mcpsdk.ReadResourceParams:
			if p != nil {
				attrs = append(attrs, semconv.McpResourceURI(p.URI))
			}
		}
		if cs, ok := req.GetSession().(*mcpsdk.ClientSession); ok && cs != nil {
			if id := cs.ID(); id != "" {
				attrs = append(attrs, semconv.McpSessionID(id))
			}
			if ir := cs.InitializeResult(); ir != nil && ir.ProtocolVersion != "" {
				attrs = append(attrs, semconv.McpProtocolVersion(ir.ProtocolVersion))
			}
		}
		ctx, span := s.c.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
		defer span.End()
		res, err := next(ctx, method, req)
		var wire *jsonrpc.Error
		switch {
		case errors.As(err, &wire):
			code := strconv.FormatInt(wire.Code, 10)
			span.SetAttributes(semconv.ErrorTypeKey.String(code), semconv.RPCResponseStatusCode(code))
			span.SetStatus(codes.Error, wire.Message)
		case err != nil:
			span.SetAttributes(semconv.ErrorType(err))
			span.SetStatus(codes.Error, "")
		default:
			if r, ok := res.(*mcpsdk.CallToolResult); ok && r != nil && r.IsError {
				span.SetAttributes(semconv.ErrorTypeKey.String("tool_error"))
				span.SetStatus(codes.Error, "tool_error")
			}
		}
		return res, err
	}
}

// peerAttributes are the attributes of the server at u for its spans:
// server.address and server.port (the URL's, the scheme's default port
// when it names none), and the transport (streamable HTTP over TCP).
func peerAttributes(u *url.URL) []attribute.KeyValue {
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	attrs := []attribute.KeyValue{semconv.ServerAddress(u.Hostname()), semconv.NetworkTransportTCP, semconv.NetworkProtocolName("http")}
	if p, err := strconv.Atoi(port); err == nil {
		attrs = append(attrs, semconv.ServerPort(p))
	}
	return attrs
}

// traceMeta is SDK sending middleware that puts the request's W3C trace
// context into every outgoing request's params._meta under the keys
// SEP-414 reserves ("traceparent", "tracestate"): an HTTP header covers
// one HTTP request, _meta covers the MCP request whatever the transport.
// The traceparent header itself is set by authTransport.
func traceMeta(next mcpsdk.MethodHandler) mcpsdk.MethodHandler {
	return func(ctx context.Context, method string, req mcpsdk.Request) (mcpsdk.Result, error) {
		fields := telemetry.Fields(ctx)
		if p := req.GetParams(); fields != nil && p != nil && !reflect.ValueOf(p).IsNil() {
			m := p.GetMeta()
			if m == nil {
				m = make(map[string]any, len(fields))
			}
			for k, v := range fields {
				m[k] = v
			}
			p.SetMeta(m)
		}
		return next(ctx, method, req)
	}
}
