package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	oairesponses "github.com/openai/openai-go/v3/responses"

	"github.com/loomgate/loom/engine"
	"github.com/loomgate/loom/model/mockllm"
	"github.com/loomgate/loom/tools/mcp"
	"github.com/loomgate/loom/tools/mcp/mcptest"
)

// MRTR end to end: the go-sdk's conformance everything-server (stateless
// 2026-07-28) behind loom, driven over HTTP with the scripted upstream.
// Every test_input_required_result_* tool completes: loom answers the
// server's input requests (sampling by the upstream, roots from
// configuration, elicitation by each policy) and retries until the call
// ends, and the model gets the result. Helpers are prefixed mrtr.

// mrtrTamperProxy forwards to target, appending "-TAMPERED" to the
// requestState of every retried tools/call: a requestState altered in
// transit, which the server must refuse.
func mrtrTamperProxy(t *testing.T, target string) string {
	t.Helper()
	u, _ := url.Parse(target)
	proxy := httputil.NewSingleHostReverseProxy(u)
	next := proxy.Director
	proxy.Director = func(r *http.Request) {
		next(r)
		if r.Body == nil {
			return
		}
		body, _ := io.ReadAll(r.Body)
		body = bytes.ReplaceAll(body, []byte(`"requestState":"tampered_state"`), []byte(`"requestState":"tampered_state-TAMPERED"`))
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		r.Header.Set("Content-Length", fmt.Sprint(len(body)))
	}
	srv := httptest.NewServer(proxy)
	t.Cleanup(srv.Close)
	return srv.URL + "/"
}

// mrtrHarness is loom with an MCP provider admitting loopback servers,
// with the roots file:///work configured.
func mrtrHarness(t *testing.T) *harness {
	t.Helper()
	policy, err := mcp.NewPolicy(&mcp.PolicyOptions{Allow: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	client := mcp.NewClient(&mcp.ClientOptions{Policy: policy})
	provider := &mcp.Provider{Client: client, Elicitation: mcp.ElicitClient, Roots: []mcp.Root{{URI: "file:///work", Name: "work"}}}
	return newHarness(t, &harnessOptions{ToolProviders: []engine.ToolProvider{provider}})
}

func mrtrTool(url, policy string) map[string]any {
	return map[string]any{"type": "mcp", "server_label": "everything", "server_url": url, "require_approval": "never", "elicitation": policy}
}

// mrtrItems returns the output items of a response of the given type.
func mrtrItems(resp map[string]any, typ string) []map[string]any {
	var out []map[string]any
	list, _ := resp["output"].([]any)
	for _, v := range list {
		if it, ok := v.(map[string]any); ok && it["type"] == typ {
			out = append(out, it)
		}
	}
	return out
}

func mrtrOneCall(t *testing.T, resp map[string]any) map[string]any {
	t.Helper()
	calls := mrtrItems(resp, "mcp_call")
	if len(calls) != 1 {
		raw, _ := json.Marshal(resp["output"])
		t.Fatalf("%d mcp_call items, want 1: %s", len(calls), raw)
	}
	return calls[0]
}

func TestMRTREverythingServer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the go-sdk everything-server")
	}
	srvURL := mcptest.StartEverything(t)
	tool := func(name string) string { return "everything__test_input_required_result_" + name }

	tests := []struct {
		name   string
		policy string
		script string
		output string // in the mcp_call's output
		err    string // in the mcp_call's error, instead
		check  func(t *testing.T, h *harness)
	}{
		{name: "sampling", policy: "client", script: "#call " + tool("sampling") + " {}",
			output: "Sampling response: " + mockllm.DefaultAnswer,
			check: func(t *testing.T, h *harness) {
				// The upstream answered the server's own messages, its
				// token limit honoured, with no tools.
				for _, r := range h.Mock.Requests() {
					if bytes.Contains(r.Body, []byte("What is the capital of France?")) {
						if r.Chat == nil {
							t.Fatalf("sampling request not chat: %s", r.Body)
						}
						limit := r.Chat.MaxCompletionTokens
						if limit == nil {
							limit = r.Chat.MaxTokens
						}
						if len(r.Chat.Tools) != 0 || limit == nil || *limit != 100 {
							t.Errorf("sampling request to the upstream: %s", r.Body)
						}
						return
					}
				}
				t.Error("the upstream never got the sampling request")
			}},
		{name: "list_roots", policy: "client", script: "#call " + tool("list_roots") + " {}", output: "Client exposed 1 root(s): file:///work"},
		{name: "elicitation model", policy: "model", script: "#call " + tool("elicitation") + " {}\n#then\n#say {\"name\": \"Ada\"}", output: "Hello, Ada!"},
		// Declined, the server asks again and again: loom stops at the
		// round bound and tells the model.
		{name: "elicitation decline", policy: "decline", script: "#call " + tool("elicitation") + " {}", err: "asked for more input 5 times"},
		{name: "request_state", policy: "model", script: "#call " + tool("request_state") + " {}\n#then\n#say {\"ok\": true}", output: "state-ok"},
		{name: "multi_round", policy: "model", script: "#call " + tool("multi_round") + " {}\n#then\n#say {\"name\": \"Ada\", \"color\": \"teal\"}",
			output: "Multi-round complete: Ada likes teal"},
		{name: "multiple_inputs model", policy: "model", script: "#call " + tool("multiple_inputs") + " {}\n#then\n#say {\"name\": \"Ada\"}",
			output: mockllm.DefaultAnswer + " Ada — 1 root(s) visible"},
		{name: "capabilities", policy: "decline", script: "#call " + tool("capabilities") + " {}", output: "Capability-aware input requests fulfilled"},
		{name: "tampered_state", policy: "decline", script: "#call " + tool("tampered_state") + " {}", err: "invalid requestState: tampered"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := mrtrHarness(t)
			target := srvURL
			if tt.name == "tampered_state" {
				target = mrtrTamperProxy(t, srvURL)
			}
			resp := postJSON(t, h, map[string]any{"model": mockllm.DefaultModel, "input": tt.script, "tools": []any{mrtrTool(target, tt.policy)}})
			if resp["status"] != "completed" {
				t.Fatalf("status %v", resp["status"])
			}
			call := mrtrOneCall(t, resp)
			out, _ := call["output"].(string)
			errMsg, _ := call["error"].(string)
			switch {
			case tt.err != "":
				if call["status"] != "failed" || !strings.Contains(errMsg, tt.err) {
					t.Fatalf("mcp_call %v, want error %q", call, tt.err)
				}
			case call["status"] != "completed" || !strings.Contains(out, tt.output):
				t.Fatalf("mcp_call %v, want output %q", call, tt.output)
			}
			// The model got the result (or the failure) and answered.
			msgs := mrtrItems(resp, "message")
			if len(msgs) == 0 {
				t.Fatal("no answer after the call")
			}
			if tt.check != nil {
				tt.check(t, h)
			}
		})
	}

	t.Run("elicitation client with openai-go", func(t *testing.T) {
		h := mrtrHarness(t)
		client := newOpenAIGo(h)
		ctx := context.Background()
		mcpTool := oairesponses.ToolParamOfMcp("everything")
		mcpTool.OfMcp.ServerURL = openai.String(srvURL)
		mcpTool.OfMcp.RequireApproval.OfMcpToolApprovalSetting = openai.String("never")
		first, err := client.Responses.New(ctx, oairesponses.ResponseNewParams{
			Model: mockllm.DefaultModel,
			Input: textInput("#call " + tool("elicitation") + " {}"),
			Tools: []oairesponses.ToolUnionParam{mcpTool},
		}, option.WithJSONSet("tools.0.elicitation", "client"))
		if err != nil {
			t.Fatal(err)
		}
		if first.Status != "completed" {
			t.Fatalf("first status %s", first.Status)
		}
		var request struct {
			ID            string `json:"id"`
			ServerLabel   string `json:"server_label"`
			Name          string `json:"name"`
			InputRequests map[string]struct {
				Method string          `json:"method"`
				Params json.RawMessage `json:"params"`
			} `json:"input_requests"`
		}
		for _, it := range first.Output {
			if it.Type == "mcp_input_request" {
				if err := json.Unmarshal([]byte(it.RawJSON()), &request); err != nil {
					t.Fatal(err)
				}
			}
			if it.Type == "mcp_call" && it.Status != "incomplete" {
				t.Errorf("the waiting call is %s", it.Status)
			}
		}
		ask, ok := request.InputRequests["user_name"]
		if request.ID == "" || request.ServerLabel != "everything" || request.Name != "test_input_required_result_elicitation" || !ok ||
			ask.Method != "elicitation/create" || !bytes.Contains(ask.Params, []byte("What is your name?")) {
			t.Fatalf("mcp_input_request %+v", request)
		}

		answer := []map[string]any{{"type": "mcp_input_response", "request_id": request.ID,
			"input_responses": map[string]any{"user_name": map[string]any{"action": "accept", "content": map[string]any{"name": "Ada"}}}}}
		second, err := client.Responses.New(ctx, oairesponses.ResponseNewParams{
			Model:              mockllm.DefaultModel,
			PreviousResponseID: openai.String(first.ID),
			Tools:              []oairesponses.ToolUnionParam{mcpTool},
		}, option.WithJSONSet("tools.0.elicitation", "client"), option.WithJSONSet("input", answer))
		if err != nil {
			t.Fatal(err)
		}
		var done bool
		for _, it := range second.Output {
			if it.Type == "mcp_call" {
				if it.Status != "completed" || it.AsMcpCall().Output != "Hello, Ada!" {
					t.Fatalf("resumed mcp_call %s", it.RawJSON())
				}
				done = true
			}
		}
		if !done || second.OutputText() != "tool said: Hello, Ada!" {
			t.Fatalf("second response: %s", second.RawJSON())
		}

		// A wrong key is a 400 naming the field.
		_, err = client.Responses.New(ctx, oairesponses.ResponseNewParams{
			Model:              mockllm.DefaultModel,
			PreviousResponseID: openai.String(first.ID),
			Tools:              []oairesponses.ToolUnionParam{mcpTool},
		}, option.WithJSONSet("input", []map[string]any{{"type": "mcp_input_response", "request_id": request.ID,
			"input_responses": map[string]any{"name": map[string]any{"action": "decline"}}}}))
		var apiErr *openai.Error
		if !errorsAs(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Param != "input[0].input_responses" {
			t.Errorf("wrong key: %v", err)
		}
	})

	// multiple_inputs with the client policy: loom answers the sampling
	// and the roots in the first response, keeps those answers with the
	// pending call, and sends them with the client's in the follow-up.
	t.Run("multiple_inputs client", func(t *testing.T) {
		h := mrtrHarness(t)
		tools := []any{mrtrTool(srvURL, "client")}
		first := postJSON(t, h, map[string]any{"model": mockllm.DefaultModel, "input": "#call " + tool("multiple_inputs") + " {}", "tools": tools})
		reqs := mrtrItems(first, "mcp_input_request")
		if len(reqs) != 1 {
			t.Fatalf("input requests %v", first["output"])
		}
		asked, _ := reqs[0]["input_requests"].(map[string]any)
		if len(asked) != 1 || asked["user_name"] == nil {
			t.Fatalf("the client is asked %v, want only user_name", asked)
		}
		second := postJSON(t, h, map[string]any{"model": mockllm.DefaultModel, "previous_response_id": first["id"], "tools": tools,
			"input": []any{map[string]any{"type": "mcp_input_response", "request_id": reqs[0]["id"],
				"input_responses": map[string]any{"user_name": map[string]any{"action": "accept", "content": map[string]any{"name": "Ada"}}}}}})
		call := mrtrOneCall(t, second)
		if want := mockllm.DefaultAnswer + " Ada — 1 root(s) visible"; call["output"] != want {
			t.Fatalf("mcp_call %v, want output %q", call, want)
		}
	})
}

// TestMRTRClientStreamed asks the client in a streamed response: the
// waiting mcp_call closes incomplete, the mcp_input_request is added and
// done, and the response completes (the harness validates every event).
func TestMRTRClientStreamed(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the go-sdk everything-server")
	}
	srvURL := mcptest.StartEverything(t)
	h := mrtrHarness(t)
	body, _ := json.Marshal(map[string]any{"model": mockllm.DefaultModel, "stream": true,
		"input": "#call everything__test_input_required_result_request_state {}", "tools": []any{mrtrTool(srvURL, "client")}})
	res, err := http.Post(h.BaseURL+"/responses", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var types []string
	for _, line := range strings.Split(string(raw), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Type string `json:"type"`
			Item *struct {
				Type   string `json:"type"`
				Status string `json:"status"`
			} `json:"item"`
		}
		if json.Unmarshal([]byte(data), &ev) != nil {
			continue
		}
		if ev.Type == "response.output_item.done" && ev.Item != nil {
			types = append(types, ev.Item.Type+":"+ev.Item.Status)
		}
		if ev.Type == "response.completed" || ev.Type == "response.failed" {
			types = append(types, ev.Type)
		}
	}
	want := "mcp_list_tools: mcp_call:incomplete mcp_input_request: response.completed"
	if got := strings.Join(types, " "); got != want {
		t.Fatalf("items done %q, want %q", got, want)
	}
}

func errorsAs(err error, target **openai.Error) bool {
	if err == nil {
		return false
	}
	e, ok := err.(*openai.Error)
	if !ok {
		return false
	}
	*target = e
	return true
}
