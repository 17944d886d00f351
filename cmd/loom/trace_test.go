package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loomgate/loom/internal/testutil"
	"github.com/loomgate/loom/model/mockllm"
)

// Issue 15: one W3C trace per request, end to end. A client's traceparent
// reaches the upstream (every model turn and the MRTR sampling request)
// and the MCP server (header and params._meta), stands on every JSON log
// line loom writes for the request, and comes back in the response's
// traceparent header; without one, loom starts a trace and returns it.

const clientTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"

// mcpRecorder is what the MCP test server saw: the traceparent header and
// the params._meta.traceparent of every request.
type mcpRecorder struct {
	mu      sync.Mutex
	headers []string
	metas   []string
	methods []string
}

func (r *mcpRecorder) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		req.Body = io.NopCloser(bytes.NewReader(body))
		var msg struct {
			Method string `json:"method"`
			Params struct {
				Meta map[string]any `json:"_meta"`
			} `json:"params"`
		}
		json.Unmarshal(body, &msg)
		r.mu.Lock()
		if msg.Method != "" && !strings.HasPrefix(msg.Method, "notifications/") {
			r.headers = append(r.headers, req.Header.Get("Traceparent"))
			tp, _ := msg.Params.Meta["traceparent"].(string)
			r.metas = append(r.metas, tp)
			r.methods = append(r.methods, msg.Method)
		}
		r.mu.Unlock()
		next.ServeHTTP(w, req)
	})
}

// samplingMCPServer is a stateless MCP server whose tool "ask" needs one
// MRTR round: it asks for a sampling completion, then answers with it.
func samplingMCPServer(t *testing.T, rec *mcpRecorder) string {
	s := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "t", Version: "1"}, nil)
	s.AddTool(&mcpsdk.Tool{Name: "ask", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(_ context.Context, req *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
			if res, ok := req.Params.InputResponses["q"].(*mcpsdk.CreateMessageWithToolsResult); ok && res != nil {
				text := ""
				for _, c := range res.Content {
					if tc, ok := c.(*mcpsdk.TextContent); ok {
						text = tc.Text
					}
				}
				return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: "sampled: " + text}}}, nil
			}
			return &mcpsdk.CallToolResult{InputRequests: mcpsdk.InputRequestMap{
				"q": &mcpsdk.CreateMessageParams{
					Messages:  []*mcpsdk.SamplingMessage{{Role: "user", Content: &mcpsdk.TextContent{Text: "say something"}}},
					MaxTokens: 20,
				},
			}}, nil
		})
	srv := httptest.NewServer(rec.wrap(mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return s },
		&mcpsdk.StreamableHTTPOptions{Stateless: true, JSONResponse: true})))
	t.Cleanup(srv.Close)
	return srv.URL
}

// runMain opens and runs loom with cfg and its JSON log in logs; stop
// shuts it down and waits for Run to return.
func runMain(t *testing.T, cfg *Config, logs io.Writer) (m *Main, stop func()) {
	t.Helper()
	m = NewMain(cfg, newLogger(logs, "json", "debug"))
	if err := m.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				t.Error("Run did not return after shutdown")
			}
			m.Close()
		})
	}
	t.Cleanup(stop)
	return m, stop
}

func testConfig(t *testing.T, upstreamURL string) *Config {
	return &Config{Addr: "127.0.0.1:0", UpstreamURL: upstreamURL, UpstreamAPI: "chat",
		Store: filepath.Join(t.TempDir(), "loom.db"), EventDialect: "openai", MCPAllow: "127.0.0.1", MCPElicitation: "client",
		ShutdownTimeout: 5 * time.Second, RequestTimeout: time.Minute, MaxBodyBytes: 1 << 20}
}

func traceIDOf(traceparent string) string {
	parts := strings.Split(traceparent, "-")
	if len(parts) != 4 || len(parts[1]) != 32 {
		return ""
	}
	return parts[1]
}

func TestTraceEndToEnd(t *testing.T) {
	rec := &mcpRecorder{}
	mcpURL := samplingMCPServer(t, rec)
	mock := mockllm.New(nil)
	up := httptest.NewServer(mock)
	t.Cleanup(up.Close)
	t.Cleanup(mock.Close)
	logs := &testutil.LockedBuffer{}
	m, stop := runMain(t, testConfig(t, up.URL+"/v1"), logs)

	body := `{"model":"m","input":"#call t__ask {}\n#then\n#say done",` +
		`"tools":[{"type":"mcp","server_label":"t","server_url":"` + mcpURL + `","require_approval":"never"}]}`
	before := len(logs.String())
	req, _ := http.NewRequest("POST", "http://"+m.Addr()+"/v1/responses", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Traceparent", "00-"+clientTraceID+"-00f067aa0ba902b7-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(raw), "sampled: ") {
		t.Fatalf("status %d: %s", resp.StatusCode, raw)
	}
	if got := resp.Header.Get("Traceparent"); traceIDOf(got) != clientTraceID || strings.Contains(got, "00f067aa0ba902b7") {
		t.Errorf("response traceparent %q: want the client's trace with loom's own span", got)
	}
	// The stored response carries the trace id, for operators.
	var created struct {
		ID string `json:"id"`
	}
	json.Unmarshal(raw, &created)
	if rec, err := m.store.GetResponse(context.Background(), created.ID); err != nil {
		t.Errorf("stored response: %v", err)
	} else if rec.TraceID != clientTraceID {
		t.Errorf("stored response's trace id %q, want %s", rec.TraceID, clientTraceID)
	}

	// The upstream: both model turns and the sampling request.
	reqs := mock.Requests()
	if len(reqs) < 3 {
		t.Fatalf("upstream saw %d requests, want the two turns and the sampling request", len(reqs))
	}
	for i, r := range reqs {
		if got := traceIDOf(r.Header.Get("Traceparent")); got != clientTraceID {
			t.Errorf("upstream request %d: traceparent %q", i, r.Header.Get("Traceparent"))
		}
	}
	// The MCP server: every request, header and _meta, tools/call twice
	// (the call and its MRTR retry).
	rec.mu.Lock()
	calls := 0
	for i, m := range rec.methods {
		if m == "tools/call" {
			calls++
		}
		if traceIDOf(rec.headers[i]) != clientTraceID || traceIDOf(rec.metas[i]) != clientTraceID {
			t.Errorf("MCP %s: header traceparent %q, _meta traceparent %q", m, rec.headers[i], rec.metas[i])
		}
	}
	rec.mu.Unlock()
	if calls != 2 {
		t.Errorf("MCP server saw %d tools/call, want 2 (the call and its MRTR retry): %v", calls, rec.methods)
	}

	// Every line logged for the request carries its trace id. Shut down
	// first, so that the lines written after the body was sent are in.
	stop()
	lines := 0
	sc := bufio.NewScanner(strings.NewReader(logs.String()[before:]))
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("not a JSON log line: %s", sc.Bytes())
		}
		if line["msg"] == "loom listening" || line["component"] == "jobs" {
			// Run's first line, which may land after before, and the job
			// engine's own upkeep, which serves no request.
			continue
		}
		if line["msg"] == "shutting down" {
			break
		}
		lines++
		if line["trace_id"] != clientTraceID || line["span_id"] == nil {
			t.Errorf("log line without the request's trace: %s", sc.Bytes())
		}
	}
	if lines < 2 {
		t.Errorf("%d log lines for the request; want at least the response and the access line", lines)
	}
}

func TestTraceStartedWhenAbsent(t *testing.T) {
	mock := mockllm.New(nil)
	up := httptest.NewServer(mock)
	t.Cleanup(up.Close)
	t.Cleanup(mock.Close)
	m, _ := runMain(t, testConfig(t, up.URL+"/v1"), io.Discard)
	seen := map[string]bool{}
	for range 2 {
		resp, err := http.Post("http://"+m.Addr()+"/v1/responses", "application/json", strings.NewReader(`{"model":"m","input":"hi"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		id := traceIDOf(resp.Header.Get("Traceparent"))
		if id == "" || id == strings.Repeat("0", 32) || seen[id] {
			t.Fatalf("response traceparent %q: want a new trace per request", resp.Header.Get("Traceparent"))
		}
		seen[id] = true
		reqs := mock.Requests()
		if got := traceIDOf(reqs[len(reqs)-1].Header.Get("Traceparent")); got != id {
			t.Errorf("upstream got trace %q, the client %q", got, id)
		}
	}
	// A malformed traceparent is ignored: a new trace, not an error.
	req, _ := http.NewRequest("POST", "http://"+m.Addr()+"/v1/responses", strings.NewReader(`{"model":"m","input":"hi"}`))
	req.Header.Set("Traceparent", "00-zz-00f067aa0ba902b7-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || traceIDOf(resp.Header.Get("Traceparent")) == "" {
		t.Errorf("malformed traceparent: status %d, traceparent %q", resp.StatusCode, resp.Header.Get("Traceparent"))
	}
}

func TestMetricsAddr(t *testing.T) {
	mock := mockllm.New(nil)
	up := httptest.NewServer(mock)
	t.Cleanup(up.Close)
	t.Cleanup(mock.Close)
	cfg := testConfig(t, up.URL+"/v1")
	cfg.MetricsAddr = "127.0.0.1:0"
	m, _ := runMain(t, cfg, io.Discard)
	get := func(url string) (int, string) {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("http://" + m.MetricsAddr() + "/metrics"); code != http.StatusOK || !strings.Contains(body, "loom_http_requests_total") && !strings.Contains(body, "go_goroutines") {
		t.Errorf("metrics listener: %d %.200s", code, body)
	}
	if code, _ := get("http://" + m.Addr() + "/metrics"); code != http.StatusNotFound {
		t.Errorf("API listener /metrics: %d, want 404", code)
	}
	// Without --metrics-addr the API listener serves it.
	m2, _ := runMain(t, testConfig(t, up.URL+"/v1"), io.Discard)
	if code, _ := get("http://" + m2.Addr() + "/metrics"); code != http.StatusOK {
		t.Errorf("API listener /metrics without --metrics-addr: %d, want 200", code)
	}
	if m2.MetricsAddr() != "" {
		t.Errorf("MetricsAddr %q without the flag", m2.MetricsAddr())
	}
	if cfg, err := parseServeFlags([]string{"--upstream-url", "http://127.0.0.1:1/v1"}, env(map[string]string{"LOOM_METRICS_ADDR": "127.0.0.1:9090"})); err != nil || cfg.MetricsAddr != "127.0.0.1:9090" {
		t.Errorf("LOOM_METRICS_ADDR: %v %+v", err, cfg)
	}
}
