package main

import (
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/loomgate/loom/internal/testutil"
	"github.com/loomgate/loom/model/mockllm"
)

// otlpReceiver is a loopback OTLP/HTTP collector: it decodes every export
// request (protobuf) and keeps the spans.
type otlpReceiver struct {
	mu    sync.Mutex
	spans []*tracepb.Span
	paths []string
}

func (o *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	o.mu.Lock()
	o.paths = append(o.paths, r.URL.Path)
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			o.spans = append(o.spans, ss.Spans...)
		}
	}
	o.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

func attr(s *tracepb.Span, key string) string {
	for _, a := range s.Attributes {
		if a.Key == key {
			switch v := a.Value.Value.(type) {
			case *commonpb.AnyValue_StringValue:
				return v.StringValue
			case *commonpb.AnyValue_IntValue:
				return strconv.FormatInt(v.IntValue, 10)
			}
			return a.Value.String()
		}
	}
	return ""
}

// TestOTLPSpans runs a tool-calling response with an MRTR round through
// loom exporting to a loopback OTLP/HTTP receiver, and checks the spans'
// parent/child structure: request > response > (model turns, tool call,
// MRTR round > retried tool call, cleanup pass, store save).
func TestOTLPSpans(t *testing.T) {
	recv := &otlpReceiver{}
	collector := httptest.NewServer(recv)
	t.Cleanup(collector.Close)
	mcpURL := samplingMCPServer(t, &mcpRecorder{})
	mock := mockllm.New(nil)
	up := httptest.NewServer(mock)
	t.Cleanup(up.Close)
	t.Cleanup(mock.Close)
	cfg := testConfig(t, up.URL+"/v1")
	cfg.OTLPEndpoint = collector.URL
	cfg.OTLPSampleRatio = 1
	m, stop := runMain(t, cfg, io.Discard)

	body := `{"model":"m","input":"#call t__ask {}\n#then\n#say done",` +
		`"tools":[{"type":"mcp","server_label":"t","server_url":"` + mcpURL + `","require_approval":"never"}]}`
	req, _ := http.NewRequest("POST", "http://"+m.Addr()+"/v1/responses", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Traceparent", "00-"+clientTraceID+"-00f067aa0ba902b7-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	stop() // Close flushes the exporter

	recv.mu.Lock()
	defer recv.mu.Unlock()
	for _, p := range recv.paths {
		if p != "/v1/traces" {
			t.Errorf("export to %s, want /v1/traces", p)
		}
	}
	byID := map[string]*tracepb.Span{}
	byName := map[string][]*tracepb.Span{}
	for _, s := range recv.spans {
		if hex.EncodeToString(s.TraceId) != clientTraceID {
			t.Errorf("span %q in trace %x, want the client's", s.Name, s.TraceId)
		}
		byID[hex.EncodeToString(s.SpanId)] = s
		byName[s.Name] = append(byName[s.Name], s)
	}
	parentName := func(s *tracepb.Span) string {
		if p := byID[hex.EncodeToString(s.ParentSpanId)]; p != nil {
			return p.Name
		}
		return "(remote " + hex.EncodeToString(s.ParentSpanId) + ")"
	}
	one := func(name string) *tracepb.Span {
		t.Helper()
		if len(byName[name]) != 1 {
			names := []string{}
			for n := range byName {
				names = append(names, n)
			}
			t.Fatalf("%d spans named %q; spans: %v", len(byName[name]), name, names)
		}
		return byName[name][0]
	}
	httpSpan := one("POST /v1/responses")
	if got := parentName(httpSpan); got != "(remote 00f067aa0ba902b7)" || httpSpan.Kind != tracepb.Span_SPAN_KIND_SERVER {
		t.Errorf("request span: parent %s, kind %v; want the client's span, server", got, httpSpan.Kind)
	}
	if got := parentName(one("response")); got != "POST /v1/responses" {
		t.Errorf("response span's parent %s", got)
	}
	// The attributes set when a span ends, not only those it starts with.
	if s := one("response"); attr(s, "loom.response.status") != "completed" || attr(s, "gen_ai.response.id") == "" {
		t.Errorf("response span attributes %v", s.Attributes)
	}
	if attr(httpSpan, "http.route") != "POST /v1/responses" || attr(httpSpan, "http.response.status_code") != "200" ||
		attr(httpSpan, "url.path") != "/v1/responses" {
		t.Errorf("request span attributes %v", httpSpan.Attributes)
	}
	if s := one("store save"); attr(s, "gen_ai.response.id") == "" {
		t.Errorf("store save span attributes %v", s.Attributes)
	}
	for _, name := range []string{"tool cleanup", "store save", "mcp input round"} {
		if got := parentName(one(name)); got != "response" {
			t.Errorf("%s span's parent %s, want response", name, got)
		}
	}
	turns := byName["chat m"]
	if len(turns) != 2 {
		t.Errorf("%d model turn spans, want 2", len(turns))
	}
	for _, s := range turns {
		if parentName(s) != "response" || attr(s, "gen_ai.request.model") != "m" || attr(s, "gen_ai.operation.name") != "chat" ||
			attr(s, "gen_ai.usage.output_tokens") == "" || attr(s, "gen_ai.response.finish_reasons") == "" || s.Kind != tracepb.Span_SPAN_KIND_CLIENT {
			t.Errorf("model turn span: parent %s, attributes %v", parentName(s), s.Attributes)
		}
	}
	calls := byName["execute_tool t__ask"]
	parents := map[string]int{}
	for _, s := range calls {
		parents[parentName(s)]++
		if attr(s, "loom.tool.server") != "t" || attr(s, "gen_ai.tool.name") != "t__ask" {
			t.Errorf("tool call span attributes %v", s.Attributes)
		}
	}
	if len(calls) != 2 || parents["response"] != 1 || parents["mcp input round"] != 1 {
		t.Errorf("tool call spans: %d, parents %v; want the call under the response and its retry under the MRTR round", len(calls), parents)
	}
}

// TestOTLPExportFailure: a collector that refuses every export costs the
// spans, never the request.
func TestOTLPExportFailure(t *testing.T) {
	var refused atomic.Int64
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		refused.Add(1)
		http.Error(w, "no", http.StatusBadRequest)
	}))
	t.Cleanup(collector.Close)
	mock := mockllm.New(nil)
	up := httptest.NewServer(mock)
	t.Cleanup(up.Close)
	t.Cleanup(mock.Close)
	cfg := testConfig(t, up.URL+"/v1")
	cfg.OTLPEndpoint = collector.URL
	cfg.OTLPSampleRatio = 1
	logs := &testutil.LockedBuffer{}
	m, stop := runMain(t, cfg, logs)
	resp, err := http.Post("http://"+m.Addr()+"/v1/responses", "application/json", strings.NewReader(`{"model":"m","input":"hi"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("status %d with a failing collector", resp.StatusCode)
	}
	stop() // Close flushes: the export has been tried when it returns
	if refused.Load() == 0 {
		t.Fatal("no export was tried")
	}
	if !strings.Contains(logs.String(), "span export failed") && !strings.Contains(logs.String(), "flushing spans") {
		t.Errorf("the export failure was not logged:\n%s", logs.String())
	}
}

func TestOTLPFlags(t *testing.T) {
	base := []string{"--upstream-url", "http://127.0.0.1:1/v1"}
	cfg, err := parseServeFlags(base, env(nil))
	if err != nil || cfg.Tracing || cfg.OTLPSampleRatio != 1 {
		t.Fatalf("defaults: %v tracing %v ratio %v; want off, 1", err, cfg.Tracing, cfg.OTLPSampleRatio)
	}
	cfg, err = parseServeFlags(base, env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_TRACES_SAMPLER": "always_off"}))
	if err != nil || !cfg.Tracing || cfg.OTLPSampleRatio != -1 {
		t.Errorf("OTEL_* variables: %v tracing %v ratio %v; want on, the SDK's sampler", err, cfg.Tracing, cfg.OTLPSampleRatio)
	}
	cfg, err = parseServeFlags(append(base, "--otlp-sample-ratio", "0.25"), env(map[string]string{"LOOM_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_SAMPLER": "always_off"}))
	if err != nil || !cfg.Tracing || cfg.OTLPEndpoint != "http://c:4318" || cfg.OTLPSampleRatio != 0.25 {
		t.Errorf("flags: %v %+v", err, cfg)
	}
	if _, err := parseServeFlags(append(base, "--otlp-sample-ratio", "2"), env(nil)); err == nil {
		t.Error("--otlp-sample-ratio 2 accepted")
	}
}
