package server

import (
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/semconv/v1.41.0/genaiconv"

	conversation "github.com/loomgate/loom/context"
	"github.com/loomgate/loom/engine"
	"github.com/loomgate/loom/model"
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
	// The upstream engines', by engine (host:port): see EngineObserver.
	engineRequests *prometheus.CounterVec
	engineInFlight *prometheus.GaugeVec
	engineHealthy  *prometheus.GaugeVec
	enginePrompt   *prometheus.CounterVec
	engineCached   *prometheus.CounterVec
	// The GenAI semantic conventions' client metrics: see GenAIObserver.
	tokenUsage *prometheus.HistogramVec
	opDuration *prometheus.HistogramVec
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
	engine := []string{"engine"}
	m.engineRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "loom_upstream_requests_total", Help: "Requests sent to each upstream engine (each retry counts).",
	}, engine)
	m.engineInFlight = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "loom_upstream_in_flight", Help: "Requests in flight on each upstream engine, from this replica.",
	}, engine)
	m.engineHealthy = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "loom_upstream_healthy", Help: "1 while an upstream engine takes turns, 0 while it is taken out (it refused a connection, or answered three 5xx in a row) and probed.",
	}, engine)
	m.enginePrompt = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "loom_upstream_prompt_tokens_total", Help: "Prompt tokens each upstream engine reported.",
	}, engine)
	m.engineCached = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "loom_upstream_cached_tokens_total", Help: "Prompt tokens each upstream engine served from its prefix cache.",
	}, engine)
	// The conventions' histograms under their names with dots turned to
	// underscores (Prometheus allows no dots), with the buckets they
	// advise; the duration is in seconds.
	m.tokenUsage = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: promName(genaiconv.ClientTokenUsage{}.Name()), Help: genaiconv.ClientTokenUsage{}.Description() + " Per model request, by token type.",
		Buckets: prometheus.ExponentialBuckets(1, 4, 14),
	}, append(genaiLabels, promName(string(semconv.GenAITokenTypeKey))))
	m.opDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: promName(genaiconv.ClientOperationDuration{}.Name()), Help: genaiconv.ClientOperationDuration{}.Description() + " In seconds: chat per model request, invoke_agent per response.",
		Buckets: prometheus.ExponentialBuckets(0.01, 2, 14),
	}, append(genaiLabels, promName(string(semconv.ErrorTypeKey))))
	m.registry.MustRegister(m.requests, m.duration, m.responses, m.toolOps,
		m.engineRequests, m.engineInFlight, m.engineHealthy, m.enginePrompt, m.engineCached, m.tokenUsage, m.opDuration,
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

// EngineObserver returns the metrics as the backend's observer of its
// engines, for model.HTTPOptions.Observer. The engines are configured,
// so the label set is bounded.
func (m *Metrics) EngineObserver() model.EngineObserver { return engineMetrics{m} }

type engineMetrics struct{ m *Metrics }

func (e engineMetrics) EngineRequest(engine string) {
	e.m.engineRequests.WithLabelValues(engine).Inc()
}

func (e engineMetrics) EngineInFlight(engine string, n int) {
	e.m.engineInFlight.WithLabelValues(engine).Set(float64(n))
}

func (e engineMetrics) EngineHealth(engine string, healthy bool) {
	v := 0.0
	if healthy {
		v = 1
	}
	e.m.engineHealthy.WithLabelValues(engine).Set(v)
}

func (e engineMetrics) EngineTokens(engine string, prompt, cached int) {
	e.m.enginePrompt.WithLabelValues(engine).Add(float64(prompt))
	e.m.engineCached.WithLabelValues(engine).Add(float64(cached))
}

// genaiLabels are the labels both GenAI metrics have: the operation, the
// provider, the model (bounded by the engine: engine.Operation.Model), and
// the engine (configured, so bounded).
var genaiLabels = []string{
	promName(string(semconv.GenAIOperationNameKey)), promName(string(semconv.GenAIProviderNameKey)),
	promName(string(semconv.GenAIRequestModelKey)), promName(string(semconv.ServerAddressKey)), promName(string(semconv.ServerPortKey)),
}

// promName is a semantic convention's name as Prometheus takes it.
func promName(name string) string { return strings.ReplaceAll(name, ".", "_") }

// GenAIObserver returns the metrics as the engine's observer of its GenAI
// operations, for engine.Options.Metrics.
func (m *Metrics) GenAIObserver() engine.MetricsObserver { return genaiMetrics{m} }

type genaiMetrics struct{ m *Metrics }

func (g genaiMetrics) ObserveOperation(op engine.Operation) {
	host, port := "", ""
	if op.Engine != "" {
		var err error
		if host, port, err = net.SplitHostPort(op.Engine); err != nil {
			host, port = op.Engine, ""
		}
	}
	labels := []string{op.Name, op.Provider, op.Model, host, port}
	g.m.opDuration.WithLabelValues(append(labels, op.ErrorType)...).Observe(op.Duration.Seconds())
	if op.Name != semconv.GenAIOperationNameChat.Value.AsString() {
		return
	}
	g.m.tokenUsage.WithLabelValues(append(labels, semconv.GenAITokenTypeInput.Value.AsString())...).Observe(float64(op.InputTokens))
	g.m.tokenUsage.WithLabelValues(append(labels, semconv.GenAITokenTypeOutput.Value.AsString())...).Observe(float64(op.OutputTokens))
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
