package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/model/chat"
)

// maxErrorMessage is the cap loom puts on an error message (1024 bytes,
// plus the ellipsis that marks a cut).
const maxErrorMessage = 1024 + len("…")

// wantError is the error a request must get.
type wantError struct {
	status int
	typ    string
	param  string // "" means param must be null
	code   string // checked only when set
}

// TestBadRequests sends requests loom must reject before doing anything:
// each gets its documented status, type and param, and none reaches the
// upstream or the store.
func TestBadRequests(t *testing.T) {
	const limit = 16 << 10
	h := newHarness(t, &harnessOptions{MaxBodyBytes: limit})
	tool := `{"type":"function","name":"get_weather","parameters":{"type":"object"}}`
	long := strings.Repeat("x", 5000)
	cases := []struct {
		name string
		body string
		want wantError
	}{
		{"invalid JSON", `{"model":"mock-model","input":`, wantError{400, "invalid_request_error", "", ""}},
		{"empty body", ``, wantError{400, "invalid_request_error", "", ""}},
		{"body over the limit", `{"model":"mock-model","input":"` + strings.Repeat("a", 2*limit) + `"}`,
			wantError{413, "invalid_request_error", "", "request_too_large"}},
		{"missing model", `{"input":"hi"}`, wantError{400, "invalid_request_error", "model", ""}},
		{"missing input", `{"model":"mock-model"}`, wantError{400, "invalid_request_error", "input", ""}},
		{"temperature 3", `{"model":"mock-model","input":"hi","temperature":3}`, wantError{400, "invalid_request_error", "temperature", ""}},
		{"temperature -0.1", `{"model":"mock-model","input":"hi","temperature":-0.1}`, wantError{400, "invalid_request_error", "temperature", ""}},
		{"temperature of the wrong type", `{"model":"mock-model","input":"hi","temperature":"hot"}`, wantError{400, "invalid_request_error", "temperature", ""}},
		{"top_p 0", `{"model":"mock-model","input":"hi","top_p":0}`, wantError{400, "invalid_request_error", "top_p", ""}},
		{"top_p 1.5", `{"model":"mock-model","input":"hi","top_p":1.5}`, wantError{400, "invalid_request_error", "top_p", ""}},
		{"max_output_tokens 0", `{"model":"mock-model","input":"hi","max_output_tokens":0}`, wantError{400, "invalid_request_error", "max_output_tokens", ""}},
		{"max_tool_calls 0", `{"model":"mock-model","input":"hi","tools":[` + tool + `],"max_tool_calls":0}`, wantError{400, "invalid_request_error", "max_tool_calls", ""}},
		{"tool_choice required without tools", `{"model":"mock-model","input":"hi","tool_choice":"required"}`, wantError{400, "invalid_request_error", "tool_choice", ""}},
		{"tool_choice names a function not in tools", `{"model":"mock-model","input":"hi","tools":[` + tool + `],"tool_choice":{"type":"function","name":"get_time"}}`,
			wantError{400, "invalid_request_error", "tool_choice.name", ""}},
		{"tool_choice names a function with no tools", `{"model":"mock-model","input":"hi","tool_choice":{"type":"function","name":"get_time"}}`,
			wantError{400, "invalid_request_error", "tool_choice", ""}},
		{"unknown tool type", `{"model":"mock-model","input":"hi","tools":[{"type":"teleport"}]}`, wantError{400, "invalid_request_error", "tools[0].type", ""}},
		{"message without role", `{"model":"mock-model","input":[{"type":"message","content":"hi"}]}`, wantError{400, "invalid_request_error", "input[0].role", ""}},
		{"function_call_output without call_id", `{"model":"mock-model","input":[{"type":"function_call_output","output":"42"}]}`,
			wantError{400, "invalid_request_error", "input[0].call_id", ""}},
		{"message content of the wrong type", `{"model":"mock-model","input":[{"role":"user","content":42}]}`,
			wantError{400, "invalid_request_error", "input[0].content", ""}},
		{"input of the wrong type", `{"model":"mock-model","input":42}`, wantError{400, "invalid_request_error", "input", ""}},
		{"call_id of the wrong type", `{"model":"mock-model","input":[{"type":"function_call_output","call_id":7,"output":"42"}]}`,
			wantError{400, "invalid_request_error", "input[0].call_id", ""}},
		{"tools of the wrong type", `{"model":"mock-model","input":"hi","tools":{}}`, wantError{400, "invalid_request_error", "tools", ""}},
		{"tool_choice of the wrong type", `{"model":"mock-model","input":"hi","tool_choice":5}`, wantError{400, "invalid_request_error", "tool_choice", ""}},
		{"body not an object", `[1,2]`, wantError{400, "invalid_request_error", "", ""}},
		{"content part of an unknown type", `{"model":"mock-model","input":[{"role":"user","content":[{"type":"input_hologram"}]}]}`,
			wantError{400, "invalid_request_error", "input[0].content[0].type", ""}},
		{"function_call_output answering no call", `{"model":"mock-model","input":[{"type":"function_call_output","call_id":"call_nope","output":"42"}]}`,
			wantError{400, "invalid_request_error", "input[0].call_id", ""}},
		{"unknown model", `{"model":"gpt-17","input":"hi"}`, wantError{404, "not_found_error", "model", ""}},
		{"unknown previous_response_id", `{"model":"mock-model","input":"hi","previous_response_id":"resp_nope"}`,
			wantError{404, "not_found_error", "previous_response_id", ""}},
		// User-supplied text echoed in a message must not make the body
		// unbounded: the caps are checked for every case below.
		{"very long model name", `{"model":"` + long + `","input":"hi"}`, wantError{404, "not_found_error", "model", ""}},
		{"service_tier unknown", `{"model":"mock-model","input":"hi","service_tier":"bogus"}`, wantError{400, "invalid_request_error", "service_tier", ""}},
		{"stream_options a string", `{"model":"mock-model","input":"hi","stream_options":"x"}`, wantError{400, "invalid_request_error", "stream_options", ""}},
		{"include_obfuscation a string", `{"model":"mock-model","input":"hi","stream_options":{"include_obfuscation":"x"}}`,
			wantError{400, "invalid_request_error", "stream_options.include_obfuscation", ""}},
		{"very long tool type", `{"model":"mock-model","input":"hi","tools":[{"type":"` + long + `"}]}`, wantError{400, "invalid_request_error", "tools[0].type", ""}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, resp := doRaw(t, http.MethodPost, h.BaseURL+"/responses", tc.body)
			checkAPIError(t, h, status, resp, tc.want)
			// A streaming request is rejected the same way, as JSON,
			// before any event.
			if body := strings.TrimSuffix(tc.body, "}"); body != tc.body && json.Valid([]byte(tc.body)) {
				sStatus, sResp := doRaw(t, http.MethodPost, h.BaseURL+"/responses", body+`,"stream":true}`)
				if sStatus != status || !bytes.Equal(sResp, resp) {
					t.Errorf("with stream true: %d %s; without: %d %s", sStatus, sResp, status, resp)
				}
			}
			checkNothingHappened(t, h, 0, 0)
		})
	}
}

// TestNotFound covers ids that point at nothing, including responses made
// with store false: they cannot be retrieved, deleted, listed or continued.
func TestNotFound(t *testing.T) {
	h := newHarness(t, nil)
	status, body := doRaw(t, http.MethodPost, h.BaseURL+"/responses", `{"model":"mock-model","input":"#say not kept","store":false}`)
	if status != http.StatusOK {
		t.Fatalf("create with store false: %d %s", status, body)
	}
	var created struct{ ID string }
	if err := json.Unmarshal(body, &created); err != nil || created.ID == "" {
		t.Fatalf("create with store false: no id in %s", body)
	}
	notFound := wantError{404, "not_found_error", "response_id", "not_found"}
	cases := []struct {
		name, method, path, body string
		want                     wantError
	}{
		{"GET unknown", http.MethodGet, "/responses/resp_nope", "", notFound},
		{"DELETE unknown", http.MethodDelete, "/responses/resp_nope", "", notFound},
		{"input_items of unknown", http.MethodGet, "/responses/resp_nope/input_items", "", notFound},
		{"cancel unknown", http.MethodPost, "/responses/resp_nope/cancel", "", notFound},
		{"GET store false", http.MethodGet, "/responses/" + created.ID, "", notFound},
		{"DELETE store false", http.MethodDelete, "/responses/" + created.ID, "", notFound},
		{"input_items of store false", http.MethodGet, "/responses/" + created.ID + "/input_items", "", notFound},
		{"continue store false", http.MethodPost, "/responses", `{"model":"mock-model","input":"again","previous_response_id":"` + created.ID + `"}`,
			wantError{404, "not_found_error", "previous_response_id", "not_found"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, body := doRaw(t, tc.method, h.BaseURL+tc.path, tc.body)
			checkAPIError(t, h, status, body, tc.want)
		})
	}
	// Only the store:false create reached the upstream, and it stored nothing.
	checkNothingHappened(t, h, 0, 1)
}

// TestInputItemsUnknownCursor pages a stored response's input items from
// an item it does not have: a 400 naming after (it was a 500 while the
// SQLite store had its own copy of the engine's cursor error).
func TestInputItemsUnknownCursor(t *testing.T) {
	h := newHarness(t, nil)
	status, body := doRaw(t, http.MethodPost, h.BaseURL+"/responses", `{"model":"mock-model","input":"#say kept"}`)
	if status != http.StatusOK {
		t.Fatalf("create: %d %s", status, body)
	}
	var created struct{ ID string }
	if err := json.Unmarshal(body, &created); err != nil || created.ID == "" {
		t.Fatalf("create: no id in %s", body)
	}
	status, body = doRaw(t, http.MethodGet, h.BaseURL+"/responses/"+created.ID+"/input_items?after=msg_nope", "")
	checkAPIError(t, h, status, body, wantError{400, "invalid_request_error", "after", ""})
	// A known cursor still pages.
	status, body = doRaw(t, http.MethodGet, h.BaseURL+"/responses/"+created.ID+"/input_items", "")
	if status != http.StatusOK {
		t.Fatalf("input_items without a cursor: %d %s", status, body)
	}
}

// TestUpstreamFailures maps upstream failures of non-streaming requests to
// their statuses, and checks that what the upstream said (its address, its
// message) never reaches the client, and that nothing is stored.
func TestUpstreamFailures(t *testing.T) {
	chatOpts := &chat.Options{HTTPOptions: model.HTTPOptions{
		// Retries happen, but quickly; and the slow case times out soon.
		RetryWaitMin:     time.Millisecond,
		RetryWaitMax:     5 * time.Millisecond,
		FirstByteTimeout: 300 * time.Millisecond,
		// These requests are not streamed, nor is their upstream call.
		WholeTimeout: 300 * time.Millisecond,
		Logger:       slog.New(slog.DiscardHandler),
	}}
	const secret = "engine-internal-detail at /var/lib/vllm"
	cases := []struct {
		name   string
		script string
		want   wantError
		// upstream is how many requests the upstream must see: the first
		// plus the chat backend's retries where they apply.
		upstream int
	}{
		{"429", "#fail 429 " + secret, wantError{429, "rate_limit_error", "", "rate_limit_exceeded"}, 1 + model.DefaultRetries},
		{"500", "#fail 500 " + secret, wantError{502, "upstream_error", "", "upstream_error"}, 1 + model.DefaultRetries},
		{"404 from the engine", "#fail 404 " + secret, wantError{502, "upstream_error", "", "upstream_error"}, 1},
		{"garbage", "#garbage", wantError{502, "upstream_error", "", "upstream_error"}, 1},
		// The non-streamed upstream call is cut before its answer: nothing
		// was read, so it is retried like a refused connection.
		{"cut", "#say never finished\n#cut 2", wantError{502, "upstream_error", "", "upstream_error"}, 1 + model.DefaultRetries},
		{"slow", "#delay 30s", wantError{504, "upstream_error", "", "timeout"}, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, &harnessOptions{Chat: chatOpts})
			req, _ := json.Marshal(map[string]any{"model": "mock-model", "input": tc.script})
			status, body := doRaw(t, http.MethodPost, h.BaseURL+"/responses", string(req))
			checkAPIError(t, h, status, body, tc.want)
			if bytes.Contains(body, []byte(secret)) {
				t.Errorf("error body repeats the upstream's message: %s", body)
			}
			checkNothingHappened(t, h, 0, tc.upstream)
		})
	}
}

// TestUpstreamRejection: an upstream 400 or 422 (the request is bad for the
// model: its context too long, say) reaches the client as a 400
// invalid_request_error carrying the engine's reason, cleaned of the
// engine's addresses and capped; streamed, response.failed carries the
// same message and code. Nothing is retried, and nothing is stored for
// the JSON request. Over both backends.
func TestUpstreamRejection(t *testing.T) {
	const reason = "This model's maximum context length is 8192 tokens. However, you requested 9000 tokens"
	for _, up := range upstreams {
		for _, tc := range []struct {
			status          int
			detail, code    string
			wantMsgContains string
		}{
			{400, reason + " (served by http://10.1.2.3:8000/v1)", "context_length_exceeded", reason + " (served by [url])"},
			{422, "temperature is out of range on vllm-0:8000", "invalid_prompt", "temperature is out of range on [host]"},
		} {
			t.Run(fmt.Sprintf("%s/%d", up.name, tc.status), func(t *testing.T) {
				h := up.harness(t, nil)
				script := fmt.Sprintf("#fail %d %s", tc.status, tc.detail)
				req, _ := json.Marshal(map[string]any{"model": "mock-model", "input": script})
				status, body := doRaw(t, http.MethodPost, h.BaseURL+"/responses", string(req))
				checkAPIError(t, h, status, body, wantError{400, "invalid_request_error", "", tc.code})
				var e struct{ Error struct{ Message string } }
				json.Unmarshal(body, &e)
				if !strings.Contains(e.Error.Message, tc.wantMsgContains) {
					t.Errorf("message %q, want it to carry %q", e.Error.Message, tc.wantMsgContains)
				}
				checkNothingHappened(t, h, 0, 1)

				// Streamed: the same message and code in response.failed.
				req, _ = json.Marshal(map[string]any{"model": "mock-model", "input": script, "stream": true})
				sStatus, raw := postStream(t, h.BaseURL+"/responses", string(req), nil)
				if sStatus != http.StatusOK {
					t.Fatalf("stream: status %d: %s", sStatus, raw)
				}
				var failed struct {
					Type     string `json:"type"`
					Response struct {
						Error *struct{ Code, Message string } `json:"error"`
					} `json:"response"`
				}
				events := parseSSE(t, raw)
				if len(events) > 0 {
					json.Unmarshal(events[len(events)-1].Data, &failed)
				}
				if failed.Type != "response.failed" || failed.Response.Error == nil ||
					failed.Response.Error.Code != tc.code || failed.Response.Error.Message != e.Error.Message {
					t.Errorf("stream ended with %+v, want response.failed with code %s and message %q:\n%s", failed, tc.code, e.Error.Message, raw)
				}
			})
		}
	}
}

// doRaw sends one request with a bounded context and returns the status
// and body.
func doRaw(t *testing.T, method, url, body string) (int, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return resp.StatusCode, b
}

// checkAPIError checks an error answer: status, a JSON body with exactly
// the keys message, type, param and code, the wanted values, a capped
// message, and no internal detail (loopback addresses, upstream URL).
func checkAPIError(t *testing.T, h *harness, status int, body []byte, want wantError) {
	t.Helper()
	if status != want.status {
		t.Errorf("status %d, want %d; body %s", status, want.status, body)
	}
	var env map[string]map[string]any
	if err := json.Unmarshal(body, &env); err != nil || len(env) != 1 || env["error"] == nil {
		t.Fatalf("body is not {\"error\":{...}}: %s", body)
	}
	e := env["error"]
	for _, k := range []string{"message", "type", "param", "code"} {
		if _, ok := e[k]; !ok {
			t.Errorf("error has no %q key: %s", k, body)
		}
	}
	if len(e) != 4 {
		t.Errorf("error has keys beyond message, type, param, code: %s", body)
	}
	if e["type"] != want.typ {
		t.Errorf("type %v, want %q", e["type"], want.typ)
	}
	switch p := e["param"].(type) {
	case nil:
		if want.param != "" {
			t.Errorf("param null, want %q; message %v", want.param, e["message"])
		}
	case string:
		if p != want.param {
			t.Errorf("param %q, want %q; message %v", p, want.param, e["message"])
		}
	default:
		t.Errorf("param %v is neither null nor a string", p)
	}
	if want.code != "" && e["code"] != want.code {
		t.Errorf("code %v, want %q", e["code"], want.code)
	}
	msg, _ := e["message"].(string)
	if msg == "" {
		t.Errorf("empty message")
	}
	if len(msg) > maxErrorMessage {
		t.Errorf("message is %d bytes, want at most %d", len(msg), maxErrorMessage)
	}
	// Go's own decoding errors name loom's types ("[]responses.Tool",
	// "Go value of type ..."): internal details too.
	leaks := []string{h.MockURL, strings.TrimPrefix(h.MockURL, "http://"), "127.0.0.1", "localhost", "chat/completions",
		"goroutine", ".go:", "json: ", "Go value", "Go struct", "responses.", "interface {}", ".plain."}
	for _, leak := range leaks {
		if bytes.Contains(body, []byte(leak)) {
			t.Errorf("error body leaks %q: %s", leak, body)
		}
	}
}

// checkNothingHappened checks how many responses were stored and how many
// requests reached the upstream, so far.
func checkNothingHappened(t *testing.T, h *harness, saves, upstream int) {
	t.Helper()
	if n := h.Store.saves.Load(); n != int64(saves) {
		t.Errorf("%d responses stored, want %d", n, saves)
	}
	if n := len(h.Mock.Requests()); n != upstream {
		t.Errorf("upstream received %d requests, want %d", n, upstream)
	}
}
