package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/loomgate/loom/model/mockllm"
)

// spanTree is what the OTLP receiver got, indexed.
type spanTree struct {
	t      *testing.T
	byID   map[string]*tracepb.Span
	byName map[string][]*tracepb.Span
}

func newSpanTree(t *testing.T, spans []*tracepb.Span) *spanTree {
	st := &spanTree{t: t, byID: map[string]*tracepb.Span{}, byName: map[string][]*tracepb.Span{}}
	for _, s := range spans {
		if s.Name == "GET /metrics" {
			continue // the test's own scrape, a trace of its own
		}
		if hex.EncodeToString(s.TraceId) != clientTraceID {
			t.Errorf("span %q in trace %x, want the client's", s.Name, s.TraceId)
		}
		st.byID[hex.EncodeToString(s.SpanId)] = s
		st.byName[s.Name] = append(st.byName[s.Name], s)
	}
	return st
}

func (st *spanTree) names() []string {
	var names []string
	for n, ss := range st.byName {
		names = append(names, n+" x"+strconv.Itoa(len(ss)))
	}
	slices.Sort(names)
	return names
}

// named returns the spans named name, n of them.
func (st *spanTree) named(name string, n int) []*tracepb.Span {
	st.t.Helper()
	if got := len(st.byName[name]); got != n {
		st.t.Fatalf("%d spans named %q, want %d; spans: %v", got, name, n, st.names())
	}
	return st.byName[name]
}

func (st *spanTree) parent(s *tracepb.Span) string {
	if p := st.byID[hex.EncodeToString(s.ParentSpanId)]; p != nil {
		return p.Name
	}
	return "(remote " + hex.EncodeToString(s.ParentSpanId) + ")"
}

// attrValue returns the value of an attribute as text (a string array
// joined by commas) and whether the span has it.
func attrValue(attrs []*commonpb.KeyValue, key string) (string, bool) {
	for _, a := range attrs {
		if a.Key != key {
			continue
		}
		switch v := a.Value.Value.(type) {
		case *commonpb.AnyValue_StringValue:
			return v.StringValue, true
		case *commonpb.AnyValue_IntValue:
			return strconv.FormatInt(v.IntValue, 10), true
		case *commonpb.AnyValue_BoolValue:
			return strconv.FormatBool(v.BoolValue), true
		case *commonpb.AnyValue_DoubleValue:
			return strconv.FormatFloat(v.DoubleValue, 'g', -1, 64), true
		case *commonpb.AnyValue_ArrayValue:
			var parts []string
			for _, e := range v.ArrayValue.Values {
				parts = append(parts, e.GetStringValue())
			}
			return strings.Join(parts, ","), true
		}
		return a.Value.String(), true
	}
	return "", false
}

func attr(s *tracepb.Span, key string) string {
	v, _ := attrValue(s.Attributes, key)
	return v
}

// wantAttrs checks attributes of a span against want (key: value).
func wantAttrs(t *testing.T, s *tracepb.Span, want map[string]string) {
	t.Helper()
	for k, v := range want {
		got, ok := attrValue(s.Attributes, k)
		if !ok || got != v {
			t.Errorf("span %q: %s = %q (present %v), want %q", s.Name, k, got, ok, v)
		}
	}
}

// sessionMCPServer is a session-based MCP server (protocol 2025-11-25, a
// session id) whose tool boom fails with a tool error.
func sessionMCPServer(t *testing.T) string {
	s := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "s", Version: "1"}, nil)
	s.AddTool(&mcpsdk.Tool{Name: "boom", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
			return &mcpsdk.CallToolResult{IsError: true, Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: "it broke"}}}, nil
		})
	srv := httptest.NewServer(mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return s },
		&mcpsdk.StreamableHTTPOptions{JSONResponse: true}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// genaiRun runs, through loom exporting to a loopback OTLP/HTTP receiver
// (the real otlptracehttp exporter), one response whose first turn calls
// an MCP tool that asks for a sampling (an MRTR round) and a tool of a
// session-based server that fails, and whose second turn calls a client
// function. It returns the spans, the response's id, the MCP recorder,
// the upstream's and the MCP servers' URLs, and loom's /metrics.
func genaiRun(t *testing.T, capture bool) (st *spanTree, respID string, rec *mcpRecorder, upURL, mcpURL, sessURL, metrics string) {
	recv := &otlpReceiver{}
	collector := httptest.NewServer(recv)
	t.Cleanup(collector.Close)
	rec = &mcpRecorder{}
	mcpURL = samplingMCPServer(t, rec)
	sessURL = sessionMCPServer(t)
	mock := mockllm.New(nil)
	up := httptest.NewServer(mock)
	t.Cleanup(up.Close)
	t.Cleanup(mock.Close)
	upURL = up.URL
	cfg := testConfig(t, up.URL+"/v1")
	cfg.OTLPEndpoint = collector.URL
	cfg.OTLPSampleRatio = 1
	cfg.OTelCaptureContent = capture
	m, stop := runMain(t, cfg, io.Discard)

	body := `{"model":"m","instructions":"be brief","temperature":0.5,"max_output_tokens":300,` +
		`"input":"#callid call_ask t__ask {}\n#cached 4\n#then\n#callid call_boom s__boom {\"n\":1}\n#callid call_fn get_weather {\"city\":\"Paris\"}",` +
		`"tools":[{"type":"mcp","server_label":"t","server_url":"` + mcpURL + `","require_approval":"never","authorization":"sekrit-mcp-token"},` +
		`{"type":"mcp","server_label":"s","server_url":"` + sessURL + `","require_approval":"never","headers":{"X-Api-Key":"sekrit-header"}},` +
		`{"type":"function","name":"get_weather","parameters":{"type":"object"}}]}`
	req, _ := http.NewRequest("POST", "http://"+m.Addr()+"/v1/responses", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Traceparent", "00-"+clientTraceID+"-00f067aa0ba902b7-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		ID     string       `json:"id"`
		Status string       `json:"status"`
		Output []outputItem `json:"output"`
	}
	json.NewDecoder(resp.Body).Decode(&out)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || out.Status != "completed" {
		t.Fatalf("status %d, response %+v", resp.StatusCode, out)
	}
	if !slices.ContainsFunc(out.Output, func(it outputItem) bool { return it.Type == "function_call" && it.Name == "get_weather" }) {
		t.Fatalf("the response has no function call: %+v", out.Output)
	}
	mres, err := http.Get("http://" + m.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(mres.Body)
	mres.Body.Close()
	stop() // Close flushes the exporter

	recv.mu.Lock()
	defer recv.mu.Unlock()
	for _, p := range recv.paths {
		if p != "/v1/traces" {
			t.Errorf("export to %s, want /v1/traces", p)
		}
	}
	return newSpanTree(t, recv.spans), out.ID, rec, upURL, mcpURL, sessURL, string(b)
}

type outputItem struct {
	Type string `json:"type"`
	Name string `json:"name"`
}

func hostPort(t *testing.T, raw string) (string, string) {
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u.Hostname(), u.Port()
}

// TestGenAISpans checks the spans of a run with an MCP call, an MRTR round
// and a function call against OpenTelemetry's GenAI and MCP semantic
// conventions: names, kinds, parents, attributes, events; and the GenAI
// metrics on /metrics.
func TestGenAISpans(t *testing.T) {
	st, respID, rec, upURL, mcpURL, sessURL, metrics := genaiRun(t, false)

	httpSpan := st.named("POST /v1/responses", 1)[0]
	if got := st.parent(httpSpan); got != "(remote 00f067aa0ba902b7)" || httpSpan.Kind != tracepb.Span_SPAN_KIND_SERVER {
		t.Errorf("request span: parent %s, kind %v; want the client's span, server", got, httpSpan.Kind)
	}
	wantAttrs(t, httpSpan, map[string]string{"http.route": "POST /v1/responses", "http.response.status_code": "200", "url.path": "/v1/responses"})

	// The response: invoke_agent, under the request.
	agent := st.named("invoke_agent", 1)[0]
	if st.parent(agent) != "POST /v1/responses" || agent.Kind != tracepb.Span_SPAN_KIND_INTERNAL {
		t.Errorf("invoke_agent: parent %s, kind %v", st.parent(agent), agent.Kind)
	}
	wantAttrs(t, agent, map[string]string{
		string(semconv.GenAIOperationNameKey): "invoke_agent",
		string(semconv.GenAIProviderNameKey):  "openai",
		string(semconv.GenAIRequestModelKey):  "m",
		string(semconv.GenAIResponseIDKey):    respID,
		"loom.response.status":                "completed",
		"loom.tenant":                         "",
	})
	conv := attr(agent, string(semconv.GenAIConversationIDKey))
	if len(conv) != 32 {
		t.Errorf("invoke_agent: gen_ai.conversation.id %q, want the session key", conv)
	}
	wantAttrs(t, agent, map[string]string{string(semconv.SessionIDKey): conv})
	// The MRTR round is an event of the response's span.
	var rounds int
	for _, ev := range agent.Events {
		if ev.Name != "loom.mrtr.round" {
			continue
		}
		rounds++
		for k, v := range map[string]string{string(semconv.GenAIToolNameKey): "t__ask", string(semconv.GenAIToolCallIDKey): "call_ask",
			"loom.mrtr.round": "1", "loom.mrtr.methods": "sampling/createMessage", "loom.tool.server": "t"} {
			if got, _ := attrValue(ev.Attributes, k); got != v {
				t.Errorf("MRTR round event: %s = %q, want %q", k, got, v)
			}
		}
	}
	if rounds != 1 {
		t.Errorf("%d MRTR round events on invoke_agent, want 1", rounds)
	}

	// Model requests: two turns and the sampling, each a chat span under
	// the response, with the engine that served it.
	upHost, upPort := hostPort(t, upURL)
	var sampling, cachedTurn int
	for _, s := range st.named("chat m", 3) {
		if st.parent(s) != "invoke_agent" || s.Kind != tracepb.Span_SPAN_KIND_CLIENT {
			t.Errorf("chat span: parent %s, kind %v", st.parent(s), s.Kind)
		}
		wantAttrs(t, s, map[string]string{
			string(semconv.GenAIOperationNameKey):  "chat",
			string(semconv.GenAIProviderNameKey):   "openai",
			string(semconv.GenAIRequestModelKey):   "m",
			string(semconv.GenAIResponseIDKey):     respID,
			string(semconv.GenAIConversationIDKey): conv,
			string(semconv.ServerAddressKey):       upHost,
			string(semconv.ServerPortKey):          upPort,
		})
		for _, k := range []string{string(semconv.GenAIUsageInputTokensKey), string(semconv.GenAIUsageOutputTokensKey), string(semconv.GenAIResponseFinishReasonsKey)} {
			if v := attr(s, k); v == "" || v == "0" {
				t.Errorf("chat span: %s = %q", k, v)
			}
		}
		if attr(s, "loom.turn.purpose") == "sampling" {
			sampling++
			wantAttrs(t, s, map[string]string{string(semconv.GenAIRequestMaxTokensKey): "20", string(semconv.GenAIRequestStreamKey): "false"})
			continue
		}
		wantAttrs(t, s, map[string]string{string(semconv.GenAIRequestTemperatureKey): "0.5", string(semconv.GenAIRequestMaxTokensKey): "300"})
		if attr(s, string(semconv.GenAIUsageCacheReadInputTokensKey)) == "4" {
			cachedTurn++
		}
		for _, k := range []string{string(semconv.GenAIInputMessagesKey), string(semconv.GenAIOutputMessagesKey), string(semconv.GenAISystemInstructionsKey)} {
			if _, ok := attrValue(s.Attributes, k); ok {
				t.Errorf("chat span has %s without --otel-capture-content", k)
			}
		}
	}
	if sampling != 1 || cachedTurn != 1 {
		t.Errorf("%d sampling chat spans, %d turns with 4 cached tokens; want 1 and 1", sampling, cachedTurn)
	}

	// Tool calls: execute_tool under the response, the MCP call retried
	// after its round, the failing one with error.type.
	asks := st.named("execute_tool t__ask", 2)
	var retries int
	for _, s := range asks {
		if st.parent(s) != "invoke_agent" || s.Kind != tracepb.Span_SPAN_KIND_INTERNAL {
			t.Errorf("execute_tool t__ask: parent %s, kind %v", st.parent(s), s.Kind)
		}
		wantAttrs(t, s, map[string]string{string(semconv.GenAIOperationNameKey): "execute_tool", string(semconv.GenAIToolNameKey): "t__ask",
			string(semconv.GenAIToolCallIDKey): "call_ask", string(semconv.GenAIToolTypeKey): "extension", "loom.tool.server": "t"})
		if attr(s, "loom.tool.retry") == "true" {
			retries++
		}
	}
	if retries != 1 {
		t.Errorf("%d retried t__ask calls, want 1", retries)
	}
	boom := st.named("execute_tool s__boom", 1)[0]
	wantAttrs(t, boom, map[string]string{string(semconv.GenAIToolCallIDKey): "call_boom", string(semconv.ErrorTypeKey): "tool_error"})
	if boom.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR {
		t.Errorf("failed tool call's span status %v", boom.Status)
	}
	fn := st.named("execute_tool get_weather", 1)[0]
	if st.parent(fn) != "invoke_agent" {
		t.Errorf("function call span's parent %s", st.parent(fn))
	}
	wantAttrs(t, fn, map[string]string{string(semconv.GenAIOperationNameKey): "execute_tool", string(semconv.GenAIToolNameKey): "get_weather",
		string(semconv.GenAIToolCallIDKey): "call_fn", string(semconv.GenAIToolTypeKey): "function"})

	// MCP: a client span per JSON-RPC call, the tools/call ones under the
	// execute_tool span of their call, the server's traceparent naming them.
	mcpHost, mcpPort := hostPort(t, mcpURL)
	calls := st.named("tools/call ask", 2)
	ids := map[string]bool{}
	for _, s := range calls {
		ids[hex.EncodeToString(s.SpanId)] = true
		if st.parent(s) != "execute_tool t__ask" || s.Kind != tracepb.Span_SPAN_KIND_CLIENT {
			t.Errorf("tools/call ask: parent %s, kind %v", st.parent(s), s.Kind)
		}
		wantAttrs(t, s, map[string]string{string(semconv.McpMethodNameKey): "tools/call", string(semconv.GenAIToolNameKey): "ask",
			string(semconv.GenAIOperationNameKey): "execute_tool", string(semconv.ServerAddressKey): mcpHost, string(semconv.ServerPortKey): mcpPort,
			string(semconv.NetworkTransportKey): "tcp"})
	}
	rec.mu.Lock()
	for i, m := range rec.methods {
		if m == "tools/call" && !ids[strings.Split(rec.metas[i], "-")[2]] {
			t.Errorf("the MCP server's tools/call had traceparent %q, not one of loom's tools/call spans", rec.metas[i])
		}
	}
	rec.mu.Unlock()
	sessHost, sessPort := hostPort(t, sessURL)
	bc := st.named("tools/call boom", 1)[0]
	if st.parent(bc) != "execute_tool s__boom" {
		t.Errorf("tools/call boom: parent %s", st.parent(bc))
	}
	wantAttrs(t, bc, map[string]string{string(semconv.McpMethodNameKey): "tools/call", string(semconv.ErrorTypeKey): "tool_error",
		string(semconv.ServerAddressKey): sessHost, string(semconv.ServerPortKey): sessPort, string(semconv.McpProtocolVersionKey): "2025-11-25"})
	if attr(bc, string(semconv.McpSessionIDKey)) == "" {
		t.Errorf("tools/call boom without mcp.session.id: %v", bc.Attributes)
	}
	if len(st.byName["tools/list"]) == 0 {
		t.Errorf("no tools/list span; spans: %v", st.names())
	}
	for _, s := range st.byName["tools/list"] {
		if attr(s, string(semconv.McpMethodNameKey)) != "tools/list" || s.Kind != tracepb.Span_SPAN_KIND_CLIENT {
			t.Errorf("tools/list span: %v", s.Attributes)
		}
	}

	// The session-based server's session opens in its first call.
	if !slices.ContainsFunc(st.byName["initialize"], func(s *tracepb.Span) bool {
		return st.parent(s) == "execute_tool s__boom" && attr(s, string(semconv.McpMethodNameKey)) == "initialize"
	}) {
		t.Errorf("no initialize span under execute_tool s__boom; spans: %v", st.names())
	}
	// The cleanup pass: its own span, under the response.
	if c := st.named("tool cleanup", 1)[0]; st.parent(c) != "invoke_agent" {
		t.Errorf("tool cleanup's parent %s", st.parent(c))
	}

	// Secrets are never on a span.
	for _, s := range st.byID {
		for _, a := range s.Attributes {
			if v := a.Value.String(); strings.Contains(v, "sekrit") {
				t.Errorf("span %q: %s carries a secret", s.Name, a.Key)
			}
		}
	}

	// The GenAI metrics, under the conventions' names.
	for _, want := range []string{
		`gen_ai_client_token_usage_count{gen_ai_operation_name="chat",gen_ai_provider_name="openai",gen_ai_request_model="m",gen_ai_token_type="input",server_address="` + upHost + `",server_port="` + upPort + `"} 3`,
		`gen_ai_client_token_usage_count{gen_ai_operation_name="chat",gen_ai_provider_name="openai",gen_ai_request_model="m",gen_ai_token_type="output",server_address="` + upHost + `",server_port="` + upPort + `"} 3`,
		`gen_ai_client_operation_duration_count{error_type="",gen_ai_operation_name="chat",gen_ai_provider_name="openai",gen_ai_request_model="m",server_address="` + upHost + `",server_port="` + upPort + `"} 3`,
		`gen_ai_client_operation_duration_count{error_type="",gen_ai_operation_name="invoke_agent",gen_ai_provider_name="openai",gen_ai_request_model="m",server_address="",server_port=""} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// TestGenAISpansContent: with --otel-capture-content, the chat spans carry
// what the model read and wrote and the tool spans their arguments and
// results, in the conventions' shapes; never a credential.
func TestGenAISpansContent(t *testing.T) {
	st, _, _, _, _, _, _ := genaiRun(t, true)
	var turns int
	for _, s := range st.named("chat m", 3) {
		if attr(s, "loom.turn.purpose") != "" {
			continue
		}
		turns++
		var in []struct {
			Role  string `json:"role"`
			Parts []struct {
				Type    string `json:"type"`
				Content string `json:"content"`
			} `json:"parts"`
		}
		if err := json.Unmarshal([]byte(attr(s, string(semconv.GenAIInputMessagesKey))), &in); err != nil || len(in) == 0 || in[0].Role != "user" ||
			!strings.Contains(in[0].Parts[0].Content, "#callid call_ask") {
			t.Errorf("gen_ai.input.messages %q (%v)", attr(s, string(semconv.GenAIInputMessagesKey)), err)
		}
		if got := attr(s, string(semconv.GenAISystemInstructionsKey)); got != `[{"type":"text","content":"be brief"}]` {
			t.Errorf("gen_ai.system_instructions %q", got)
		}
		if !strings.Contains(attr(s, string(semconv.GenAIOutputMessagesKey)), `"type":"tool_call"`) {
			t.Errorf("gen_ai.output.messages %q", attr(s, string(semconv.GenAIOutputMessagesKey)))
		}
	}
	if turns != 2 {
		t.Errorf("%d turns", turns)
	}
	boom := st.named("execute_tool s__boom", 1)[0]
	wantAttrs(t, boom, map[string]string{string(semconv.GenAIToolCallArgumentsKey): `{"n":1}`, string(semconv.GenAIToolCallResultKey): "it broke"})
	for _, s := range st.byID {
		for _, a := range s.Attributes {
			if strings.Contains(a.Value.String(), "sekrit") {
				t.Errorf("span %q: %s carries a secret", s.Name, a.Key)
			}
		}
	}
}

// tracedLoom runs loom exporting its spans to a loopback OTLP receiver;
// post sends a request body and returns the response's JSON; spans stops
// loom (flushing the exporter) and returns what the receiver got.
func tracedLoom(t *testing.T) (post func(body string) map[string]any, spans func() *spanTree) {
	postTo, spans, _ := tracedLoomAt(t)
	return func(body string) map[string]any { return postTo("/v1/responses", body) }, spans
}

// tracedLoomAt is tracedLoom whose post takes the path; metrics returns
// loom's /metrics.
func tracedLoomAt(t *testing.T) (post func(path, body string) map[string]any, spans func() *spanTree, metrics func() string) {
	recv := &otlpReceiver{}
	collector := httptest.NewServer(recv)
	t.Cleanup(collector.Close)
	mock := mockllm.New(nil)
	up := httptest.NewServer(mock)
	t.Cleanup(up.Close)
	t.Cleanup(mock.Close)
	cfg := testConfig(t, up.URL+"/v1")
	cfg.OTLPEndpoint = collector.URL
	cfg.OTLPSampleRatio = 1
	m, stop := runMain(t, cfg, io.Discard)
	post = func(path, body string) map[string]any {
		t.Helper()
		req, _ := http.NewRequest("POST", "http://"+m.Addr()+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Traceparent", "00-"+clientTraceID+"-00f067aa0ba902b7-01")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		json.NewDecoder(resp.Body).Decode(&out)
		return out
	}
	metrics = func() string {
		t.Helper()
		res, err := http.Get("http://" + m.Addr() + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return string(b)
	}
	spans = func() *spanTree {
		stop()
		recv.mu.Lock()
		defer recv.mu.Unlock()
		return newSpanTree(t, recv.spans)
	}
	return post, spans, metrics
}

// eventAttrs returns the attributes of the events named name of a span.
func eventAttrs(s *tracepb.Span, name string) [][]*commonpb.KeyValue {
	var out [][]*commonpb.KeyValue
	for _, ev := range s.Events {
		if ev.Name == name {
			out = append(out, ev.Attributes)
		}
	}
	return out
}

// TestGenAISpansApproval: an approval request and the client's answer
// are events of the responses' invoke_agent spans, and the approved call
// runs in an execute_tool span of the second response.
func TestGenAISpansApproval(t *testing.T) {
	mcpURL := samplingMCPServer(t, &mcpRecorder{})
	post, spans := tracedLoom(t)
	tool := `{"type":"mcp","server_label":"t","server_url":"` + mcpURL + `","require_approval":"always"}`
	first := post(`{"model":"m","input":"#callid call_ask t__ask {}","tools":[` + tool + `]}`)
	var requestID string
	for _, it := range first["output"].([]any) {
		if it := it.(map[string]any); it["type"] == "mcp_approval_request" {
			requestID = it["id"].(string)
		}
	}
	if requestID == "" {
		t.Fatalf("no approval request: %v", first)
	}
	second := post(`{"model":"m","previous_response_id":"` + first["id"].(string) + `","tools":[` + tool + `],` +
		`"input":[{"type":"mcp_approval_response","approval_request_id":"` + requestID + `","approve":true}]}`)
	if second["status"] != "completed" {
		t.Fatalf("second response: %v", second)
	}
	st := spans()
	agents := st.named("invoke_agent", 2)
	byResponse := map[string]*tracepb.Span{}
	for _, s := range agents {
		byResponse[attr(s, string(semconv.GenAIResponseIDKey))] = s
	}
	asked := eventAttrs(byResponse[first["id"].(string)], "loom.approval.requested")
	if len(asked) != 1 {
		t.Fatalf("%d approval requested events on the first response", len(asked))
	}
	if v, _ := attrValue(asked[0], "loom.approval.request_id"); v != requestID {
		t.Errorf("approval requested event: request id %q, want %q", v, requestID)
	}
	if v, _ := attrValue(asked[0], string(semconv.GenAIToolNameKey)); v != "t__ask" {
		t.Errorf("approval requested event: tool %q", v)
	}
	answered := eventAttrs(byResponse[second["id"].(string)], "loom.approval.answered")
	if len(answered) != 1 {
		t.Fatalf("%d approval answered events on the second response", len(answered))
	}
	for k, want := range map[string]string{"loom.approval.request_id": requestID, "loom.approval.approved": "true", "loom.tool.server": "t",
		string(semconv.GenAIToolNameKey): "t__ask"} {
		if v, _ := attrValue(answered[0], k); v != want {
			t.Errorf("approval answered event: %s = %q, want %q", k, v, want)
		}
	}
	// Both responses of the chain have one conversation id.
	if a, b := attr(agents[0], string(semconv.GenAIConversationIDKey)), attr(agents[1], string(semconv.GenAIConversationIDKey)); a == "" || a != b {
		t.Errorf("conversation ids %q and %q, want one", a, b)
	}
	for _, s := range st.byName["execute_tool t__ask"] {
		if p := st.byID[hex.EncodeToString(s.ParentSpanId)]; p != byResponse[second["id"].(string)] {
			t.Errorf("the approved call's span is not under the second response")
		}
	}
	if len(st.byName["execute_tool t__ask"]) == 0 {
		t.Error("the approved call has no execute_tool span")
	}
}

// TestGenAISpansFailure: a model request the upstream refuses is an error
// on its chat span and on the response's, with error.type.
func TestGenAISpansFailure(t *testing.T) {
	post, spans, metrics := tracedLoomAt(t)
	out := post("/v1/responses", `{"model":"m","input":"#fail 400 no such thing","text":{"format":{"type":"json_object"}}}`)
	// A model no engine served is not a label value: a client could make
	// up any number of them.
	if m := metrics(); !strings.Contains(m, `gen_ai_client_operation_duration_count{error_type="invalid_prompt",gen_ai_operation_name="chat",gen_ai_provider_name="openai",gen_ai_request_model="_OTHER"`) ||
		strings.Contains(m, `gen_ai_request_model="m"`) {
		t.Errorf("/metrics of a refused model request:\n%s", grepLines(m, "gen_ai_client_operation_duration_count"))
	}
	st := spans()
	chat := st.named("chat m", 1)[0]
	agent := st.named("invoke_agent", 1)[0]
	wantAttrs(t, chat, map[string]string{string(semconv.GenAIOutputTypeKey): "json"})
	et := attr(chat, string(semconv.ErrorTypeKey))
	code, _ := out["error"].(map[string]any)["code"].(string)
	if et == "" || et != code || chat.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR {
		t.Errorf("failed chat span: error.type %q (the error's code %q), status %v", et, code, chat.Status)
	}
	if got := attr(agent, string(semconv.ErrorTypeKey)); got != et || agent.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR {
		t.Errorf("failed response's span: error.type %q (want %q), status %v", got, et, agent.Status)
	}
}

// TestGenAISpansEngine: with several engines, a chat span's server.address
// and server.port are the engine that served the turn.
func TestGenAISpansEngine(t *testing.T) {
	recv := &otlpReceiver{}
	collector := httptest.NewServer(recv)
	t.Cleanup(collector.Close)
	var urls []string
	served := map[string]*atomic.Int64{}
	for range 2 {
		mock := mockllm.New(nil)
		var n atomic.Int64
		up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost {
				n.Add(1)
			}
			mock.ServeHTTP(w, r)
		}))
		t.Cleanup(up.Close)
		t.Cleanup(mock.Close)
		urls = append(urls, up.URL+"/v1")
		_, port := hostPort(t, up.URL)
		served[port] = &n
	}
	cfg := testConfig(t, strings.Join(urls, ","))
	cfg.OTLPEndpoint = collector.URL
	cfg.OTLPSampleRatio = 1
	m, stop := runMain(t, cfg, io.Discard)
	// Conversations until both engines have served one (the ring places
	// them by the engines' random ports): at most 64.
	bothServed := func() bool {
		for _, n := range served {
			if n.Load() == 0 {
				return false
			}
		}
		return true
	}
	for i := 0; i < 64 && !bothServed(); i++ {
		resp, err := http.Post("http://"+m.Addr()+"/v1/responses", "application/json",
			strings.NewReader(`{"model":"m","input":"conversation `+strconv.Itoa(i)+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	stop()
	recv.mu.Lock()
	defer recv.mu.Unlock()
	perPort := map[string]int64{}
	for _, s := range recv.spans {
		if s.Name != "chat m" {
			continue
		}
		if attr(s, string(semconv.ServerAddressKey)) != "127.0.0.1" {
			t.Errorf("chat span's server.address %q", attr(s, string(semconv.ServerAddressKey)))
		}
		perPort[attr(s, string(semconv.ServerPortKey))]++
	}
	for port, n := range served {
		if n.Load() == 0 {
			t.Errorf("engine on port %s served no turn: the test shows nothing", port)
		}
		if perPort[port] != n.Load() {
			t.Errorf("engine on port %s served %d turns, its chat spans say %d (spans per port %v)", port, n.Load(), perPort[port], perPort)
		}
	}
}

// TestGenAISpansCompaction: the model request of /v1/responses/compact is
// a chat span of purpose compaction under the request's span.
func TestGenAISpansCompaction(t *testing.T) {
	post, spans, _ := tracedLoomAt(t)
	out := post("/v1/responses/compact", `{"model":"m","input":"hello there"}`)
	if out["object"] != "response.compaction" {
		t.Fatalf("compact: %v", out)
	}
	st := spans()
	chat := st.named("chat m", 1)[0]
	if st.parent(chat) != "POST /v1/responses/compact" {
		t.Errorf("compaction chat span's parent %s", st.parent(chat))
	}
	wantAttrs(t, chat, map[string]string{"loom.turn.purpose": "compaction", string(semconv.GenAIOperationNameKey): "chat"})
	if _, ok := attrValue(chat.Attributes, string(semconv.GenAIResponseIDKey)); ok {
		t.Errorf("compaction chat span has a response id")
	}
}

// grepLines returns the lines of text that contain s.
func grepLines(text, s string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestOTLPLangfuseSetup: loom set up as docs/operations.md says for
// Langfuse (the traces URL under /api/public/otel, basic auth in
// OTEL_EXPORTER_OTLP_HEADERS) exports there with the header.
func TestOTLPLangfuseSetup(t *testing.T) {
	recv := &otlpReceiver{}
	collector := httptest.NewServer(recv)
	t.Cleanup(collector.Close)
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "Authorization=Basic cGstbGYtMTpzay1sZi0x")
	mock := mockllm.New(nil)
	up := httptest.NewServer(mock)
	t.Cleanup(up.Close)
	t.Cleanup(mock.Close)
	cfg := testConfig(t, up.URL+"/v1")
	cfg.OTLPEndpoint = collector.URL + "/api/public/otel/v1/traces"
	cfg.OTLPSampleRatio = 1
	m, stop := runMain(t, cfg, io.Discard)
	resp, err := http.Post("http://"+m.Addr()+"/v1/responses", "application/json", strings.NewReader(`{"model":"m","input":"hi"}`))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	stop()
	recv.mu.Lock()
	defer recv.mu.Unlock()
	if len(recv.paths) == 0 {
		t.Fatal("nothing exported")
	}
	for i, p := range recv.paths {
		if p != "/api/public/otel/v1/traces" || recv.auths[i] != "Basic cGstbGYtMTpzay1sZi0x" {
			t.Errorf("export to %s with Authorization %q", p, recv.auths[i])
		}
	}
}
