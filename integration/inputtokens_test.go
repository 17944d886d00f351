package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loomgate/loom/server"
)

// inputTokensRequest is a request with instructions, a tool, and history:
// everything that reaches the prompt.
var inputTokensRequest = map[string]any{
	"model":        "mock-model",
	"instructions": "Answer in one short sentence.",
	"tools": []any{map[string]any{"type": "function", "name": "get_weather", "description": "The weather in a city.",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}}},
	"input": []any{
		map[string]any{"type": "message", "role": "user", "content": "What is the capital of France?"},
		map[string]any{"type": "message", "role": "assistant", "content": []any{map[string]any{"type": "output_text", "text": "Paris."}}},
		map[string]any{"type": "message", "role": "user", "content": "#say It is sunny there.\nAnd the weather?"},
	},
}

// TestNodeInputTokensEqualUsage: on the harmony upstream the count is the
// rendered prompt's token ids, so it equals usage.input_tokens of the same
// request; on chat with the engine's tokenize endpoint it is the engine's
// own count, which equals the prompt_tokens it reports. Counted and
// created with the openai npm client.
func TestNodeInputTokensEqualUsage(t *testing.T) {
	for _, up := range upstreams {
		t.Run(up.name, func(t *testing.T) {
			h := up.harness(t, &harnessOptions{Tokenize: true})
			out := runNodeInputTokens(t, h, inputTokensRequest)
			if out.Count.Object != "response.input_tokens" || out.Count.InputTokens <= 0 {
				t.Fatalf("count %+v", out.Count)
			}
			if out.Status != "completed" || out.Count.InputTokens != out.Usage.InputTokens {
				t.Errorf("input_tokens %d, usage.input_tokens %d (status %s): want equal",
					out.Count.InputTokens, out.Usage.InputTokens, out.Status)
			}
			// Counting called no model: one completion request, the create.
			if n := len(h.Mock.Requests()); n != 1 {
				t.Errorf("the upstream got %d completion requests, want 1 (the create)", n)
			}
		})
	}
}

type nodeInputTokens struct {
	Count struct {
		Object      string `json:"object"`
		InputTokens int    `json:"input_tokens"`
	} `json:"count"`
	Usage struct {
		InputTokens int `json:"input_tokens"`
	} `json:"usage"`
	Status string `json:"status"`
}

func runNodeInputTokens(t *testing.T, h *harness, req map[string]any) nodeInputTokens {
	t.Helper()
	if _, err := os.Stat(filepath.Join(nodeDir, "node_modules", "openai", "package.json")); err != nil {
		t.Fatalf("the openai npm package is not installed (%v): run `npm ci --prefix integration/testdata/node`", err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is not on PATH: %v", err)
	}
	body, _ := json.Marshal(req)
	ctx, cancel := context.WithTimeout(t.Context(), nodeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "input_tokens.mjs", string(body))
	cmd.Dir = nodeDir
	cmd.Env = append(os.Environ(), "LOOM_BASE_URL="+h.BaseURL, "NO_PROXY=127.0.0.1,localhost", "NODE_NO_WARNINGS=1")
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node input_tokens.mjs: %v\nstderr:\n%s", err, stderr.Bytes())
	}
	var out nodeInputTokens
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("node input_tokens.mjs printed %s (%v)", stdout.Bytes(), err)
	}
	return out
}

// postInputTokens posts body to /v1/responses/input_tokens.
func postInputTokens(t *testing.T, h *harness, body map[string]any) (*http.Response, []byte) {
	t.Helper()
	raw, _ := json.Marshal(body)
	resp, err := http.Post(h.BaseURL+"/responses/input_tokens", "application/json", bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// TestInputTokensEstimateOnChat: a chat upstream without a tokenize
// endpoint gets an o200k estimate, and says so.
func TestInputTokensEstimateOnChat(t *testing.T) {
	h := newHarness(t, nil)
	resp, body := postInputTokens(t, h, inputTokensRequest)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	var out struct {
		Object      string `json:"object"`
		InputTokens int    `json:"input_tokens"`
		Estimated   bool   `json:"estimated"`
	}
	json.Unmarshal(body, &out)
	if out.Object != "response.input_tokens" || out.InputTokens <= 0 || !out.Estimated || resp.Header.Get(server.TokenCountHeader) != "estimate" {
		t.Errorf("got %s (%s: %q), want a positive estimate marked as one", body, server.TokenCountHeader, resp.Header.Get(server.TokenCountHeader))
	}
	// More input counts more.
	longer := map[string]any{}
	for k, v := range inputTokensRequest {
		longer[k] = v
	}
	longer["instructions"] = strings.Repeat("Be brief and precise. ", 20)
	_, body2 := postInputTokens(t, h, longer)
	var out2 struct {
		InputTokens int `json:"input_tokens"`
	}
	json.Unmarshal(body2, &out2)
	if out2.InputTokens <= out.InputTokens {
		t.Errorf("longer instructions count %d, not more than %d", out2.InputTokens, out.InputTokens)
	}
	if n := len(h.Mock.Requests()); n != 0 {
		t.Errorf("counting sent %d completion requests, want none", n)
	}
}

// TestInputTokensBadRequest: the same 400s as a create, nothing stored.
func TestInputTokensBadRequest(t *testing.T) {
	h := newHarness(t, nil)
	for _, tc := range []struct {
		body  map[string]any
		param string
	}{
		{map[string]any{"input": "hi"}, "model"},
		{map[string]any{"model": "mock-model", "input": "hi", "temperature": 5}, "temperature"},
		{map[string]any{"model": "mock-model", "input": "hi", "previous_response_id": "resp_none"}, "previous_response_id"},
	} {
		resp, body := postInputTokens(t, h, tc.body)
		var e struct {
			Error struct{ Param string }
		}
		json.Unmarshal(body, &e)
		if resp.StatusCode/100 != 4 || e.Error.Param != tc.param {
			t.Errorf("%v: status %d %s, want a 4xx naming %s", tc.body, resp.StatusCode, body, tc.param)
		}
	}
	if h.Store.saves.Load() != 0 {
		t.Errorf("%d saves, want none", h.Store.saves.Load())
	}
}
