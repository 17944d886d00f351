package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
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
	auths []string // the Authorization header of each export
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
	o.auths = append(o.auths, r.Header.Get("Authorization"))
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
