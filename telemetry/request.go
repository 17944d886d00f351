package telemetry

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// StartRequest starts the span of one HTTP request served by loom: a
// child of the client's traceparent when it sent a valid one, else the
// root of a new trace. The span always has ids, even when tracer exports
// nothing, because the trace id goes on log lines, to the upstream and to
// MCP servers whether or not spans are exported. A nil tracer records no
// span: ctx gets the ids alone, and the span returned is a no-op (without
// the no-op tracer's own span and context, and opts unread).
func StartRequest(r *http.Request, tracer trace.Tracer, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	ctx := Extract(r.Context(), r.Header)
	parent := trace.SpanContextFromContext(ctx)
	if tracer == nil {
		return newSpan(ctx, parent), noop.Span{}
	}
	opts = append(opts, trace.WithSpanKind(trace.SpanKindServer))
	ctx, span := tracer.Start(ctx, name, opts...)
	return ensureSpan(ctx, parent, span), span
}

// Tracer returns the tracer named name from tp, or from a no-op provider
// when tp is nil: spans then carry the parent's ids and record nothing.
func Tracer(tp trace.TracerProvider, name string) trace.Tracer {
	if tp == nil {
		return noopProvider.Tracer(name)
	}
	return tp.Tracer(name)
}

var noopProvider trace.TracerProvider = noop.NewTracerProvider()
