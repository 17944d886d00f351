package telemetry

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// propagator reads and writes W3C trace context (traceparent, tracestate).
var propagator = propagation.TraceContext{}

// Extract returns ctx with the remote span context of the traceparent and
// tracestate in h. A missing or malformed traceparent leaves ctx as it is.
func Extract(ctx context.Context, h http.Header) context.Context {
	if len(h["Traceparent"]) == 0 {
		// Most requests carry none: no lookup by a key canonicalised
		// again (a string per request), no propagator.
		return ctx
	}
	return propagator.Extract(ctx, propagation.HeaderCarrier(h))
}

// Inject sets traceparent (and tracestate when there is one) in h from the
// span context of ctx. Without a span context it sets nothing.
//
// It writes what propagation.TraceContext writes (TestInjectAsOtel), with
// the canonical keys set directly and the value formatted in one array:
// the propagator's Header.Set canonicalises "traceparent" into a new
// string and its builder grows, on every upstream request and response.
func Inject(ctx context.Context, h http.Header) {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return
	}
	if ts := sc.TraceState().String(); ts != "" {
		h["Tracestate"] = []string{ts}
	}
	// version 00, trace id, span id, flags: only the ones W3C defines
	// (sampled, random).
	var b [2 + 1 + 32 + 1 + 16 + 1 + 2]byte
	tid, sid := sc.TraceID(), sc.SpanID()
	b[0], b[1], b[2] = '0', '0', '-'
	hex.Encode(b[3:35], tid[:])
	b[35] = '-'
	hex.Encode(b[36:52], sid[:])
	b[52] = '-'
	hex.Encode(b[53:], []byte{byte(sc.TraceFlags() & (trace.FlagsSampled | trace.FlagsRandom))})
	h["Traceparent"] = []string{string(b[:])}
}

// Fields returns the trace context of ctx as traceparent and, when set,
// tracestate, for carriers other than HTTP headers (an MCP request's
// _meta). It returns nil without a span context.
func Fields(ctx context.Context) map[string]string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return nil
	}
	m := propagation.MapCarrier{}
	propagator.Inject(ctx, m)
	return m
}

// TraceID returns the trace id of ctx in hex, or "" without one.
func TraceID(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ""
	}
	return sc.TraceID().String()
}

// ensureSpan makes sure ctx carries a span of loom's own: when the tracer
// that started span is a no-op (no provider configured), span has either
// no span context or the remote parent's, so a fresh span id is made here,
// in the parent's trace or in a new one. New traces are marked sampled:
// the trace id is what an operator searches the upstream's and the MCP
// servers' traces and logs for.
func ensureSpan(ctx context.Context, parent trace.SpanContext, span trace.Span) context.Context {
	sc := span.SpanContext()
	if sc.IsValid() && sc.SpanID() != parent.SpanID() {
		return ctx
	}
	return newSpan(ctx, parent)
}

// newSpan returns ctx with a span context of loom's own, not recorded: a
// fresh span id in parent's trace, or in a new one when parent is not
// valid.
func newSpan(ctx context.Context, parent trace.SpanContext) context.Context {
	cfg := trace.SpanContextConfig{TraceFlags: trace.FlagsSampled}
	var ids [24]byte // a span id, and a trace id when there is no parent
	rand.Read(ids[:])
	copy(cfg.SpanID[:], ids[16:])
	if parent.IsValid() {
		cfg.TraceID, cfg.TraceFlags, cfg.TraceState = parent.TraceID(), parent.TraceFlags(), parent.TraceState()
	} else {
		copy(cfg.TraceID[:], ids[:16])
	}
	return trace.ContextWithSpanContext(ctx, trace.NewSpanContext(cfg))
}

// Detach returns a context that carries the span of ctx and nothing else:
// no deadline, no cancellation, no values. Work that outlives the request
// (closing a tool session, a late cleanup) logs with it, so that its lines
// still carry the request's trace id.
func Detach(ctx context.Context) context.Context {
	return trace.ContextWithSpanContext(context.Background(), trace.SpanContextFromContext(ctx))
}

// ContinueTrace returns ctx in the trace traceID (32 hex digits) with a
// span id of its own, for work that runs later on behalf of a request (a
// queued background response, on whichever replica claims it): its log
// lines and spans carry the request's trace id. An invalid traceID leaves
// ctx as it is.
func ContinueTrace(ctx context.Context, traceID string) context.Context {
	tid, err := trace.TraceIDFromHex(traceID)
	if err != nil {
		return ctx
	}
	cfg := trace.SpanContextConfig{TraceID: tid, TraceFlags: trace.FlagsSampled, Remote: true}
	rand.Read(cfg.SpanID[:])
	return trace.ContextWithRemoteSpanContext(ctx, trace.NewSpanContext(cfg))
}
