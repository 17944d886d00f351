package server

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	conversation "github.com/loomgate/loom/context"
)

// Metrics are loom's Prometheus metrics, served at /metrics. One value is
// shared by the server (HTTP and responses) and the engine's conversation
// contexts (tool session operations, through ConversationMetrics).
type Metrics struct {
	registry  *prometheus.Registry
	requests  *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	responses *prometheus.CounterVec
	toolOps   *prometheus.CounterVec
}

// NewMetrics registers loom's metrics on a registry of their own, with the
// Go runtime and process collectors.
func NewMetrics() *Metrics {
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loom_http_requests_total", Help: "HTTP requests by route and status code.",
		}, []string{"route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "loom_http_request_duration_seconds", Help: "HTTP request duration by route, streams included.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}, []string{"route"}),
		responses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loom_responses_total", Help: "Responses created, by final status.",
		}, []string{"status"}),
		toolOps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loom_tool_session_operations_total",
			Help: "Tool session operations (list, open, call, cleanup, close) by outcome; every failed cleanup is counted here.",
		}, []string{"op", "outcome"}),
	}
	m.registry.MustRegister(m.requests, m.duration, m.responses, m.toolOps,
		prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	return m
}

// ConversationMetrics returns the metrics as the conversation context's
// Metrics, for engine.Options.Conversation.Metrics. Server labels are left
// out: request-supplied servers would make the label set unbounded.
func (m *Metrics) ConversationMetrics() conversation.Metrics { return toolMetrics{m} }

type toolMetrics struct{ m *Metrics }

func (t toolMetrics) Observe(op conversation.Op, server string, outcome conversation.Outcome) {
	t.m.toolOps.WithLabelValues(op.String(), outcome.String()).Inc()
}

// Handler serves the metrics in the Prometheus text format, for a
// listener of their own (see Options.HideMetrics).
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}

func (m *Metrics) observeHTTP(route string, code int, elapsed time.Duration) {
	m.requests.WithLabelValues(route, strconv.Itoa(code)).Inc()
	m.duration.WithLabelValues(route).Observe(elapsed.Seconds())
}

func (m *Metrics) observeResponse(status string) {
	m.responses.WithLabelValues(status).Inc()
}
