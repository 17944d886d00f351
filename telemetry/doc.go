// Package telemetry carries one W3C trace through a request: it reads and
// writes the traceparent/tracestate headers, starts a trace when the
// client sent none, puts trace_id and span_id on every log record whose
// context carries a span, and builds the OpenTelemetry tracer provider
// that exports spans over OTLP/HTTP when an endpoint is configured.
//
// It imports nothing of loom's, so every package (engine, model backends,
// tools, the MCP client) may use it.
package telemetry
