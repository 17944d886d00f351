package integration

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/loomgate/loom/engine"
	"github.com/loomgate/loom/harmony"
	"github.com/loomgate/loom/internal/testutil"
	"github.com/loomgate/loom/tools"
	"github.com/loomgate/loom/tools/toolstest"
)

// threeServers returns servers A (a1, a2), B (b1) and C (c1) sharing one log,
// offered to requests with a tool of type "fake".
func threeServers() (*toolstest.Log, *toolstest.Provider) {
	log := &toolstest.Log{}
	return log, &toolstest.Provider{Type: "fake", List: []tools.Server{
		&toolstest.Server{Label: "A", ToolNames: []string{"a1", "a2"}, Log: log},
		&toolstest.Server{Label: "B", ToolNames: []string{"b1"}, Log: log},
		&toolstest.Server{Label: "C", ToolNames: []string{"c1"}, Log: log},
	}}
}

// postJSON sends a non-streaming create and decodes the response.
func postJSON(t *testing.T, h *harness, body map[string]any) map[string]any {
	t.Helper()
	b, _ := json.Marshal(body)
	res, err := http.Post(h.BaseURL+"/responses", "application/json", strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", res.StatusCode, raw)
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestServerToolsEndToEnd(t *testing.T) {
	for _, up := range upstreams {
		t.Run(up.name, func(t *testing.T) {
			log, provider := threeServers()
			h := up.harness(t, &harnessOptions{ToolProviders: []engine.ToolProvider{provider}})
			resp := postJSON(t, h, map[string]any{
				"model": "mock-model",
				"input": "#call a1 {}\n#then\n#call a2 {\"x\": 1}\n#then\n#say done",
				"tools": []any{map[string]any{"type": "fake"}},
			})
			var got []string
			for _, raw := range resp["output"].([]any) {
				it := raw.(map[string]any)
				switch it["type"] {
				case "mcp_call":
					got = append(got, it["server_label"].(string)+"/"+it["name"].(string)+" -> "+it["output"].(string))
				case "message":
					got = append(got, "message")
				}
			}
			want := []string{`A/a1 -> a1 ran with {}`, `A/a2 -> a2 ran with {"x": 1}`, "message"}
			if !slices.Equal(got, want) {
				t.Errorf("output %q, want %q", got, want)
			}
			// Only A was called: B and C were listed (offered) and nothing
			// more; A opened once across two turns, cleaned once, closed.
			for _, p := range toolstest.CheckLifecycle(log, []string{"A"}) {
				t.Error(p)
			}
			// The model saw the tool results: the upstream got three turns.
			if n := len(h.Mock.Requests()); n != 3 {
				t.Errorf("upstream got %d requests, want 3", n)
			}
			requireCaptured(t, h, 1, 0)
		})
	}
}

func TestNoToolsNoToolWorkEndToEnd(t *testing.T) {
	for _, up := range upstreams {
		t.Run(up.name, func(t *testing.T) {
			log, provider := threeServers()
			h := up.harness(t, &harnessOptions{ToolProviders: []engine.ToolProvider{provider}})
			postJSON(t, h, map[string]any{"model": "mock-model", "input": "#say hi"})
			if provider.Asked() != 0 || len(log.Events()) != 0 {
				t.Errorf("no tools, yet the provider was asked %d times and servers saw %v", provider.Asked(), log.Events())
			}
			reqs := h.Mock.Requests()
			if len(reqs) != 1 {
				t.Fatalf("upstream got %d requests", len(reqs))
			}
			prompt := upstreamPrompt(t, reqs[0].Body)
			for _, banned := range []string{`"tools"`, `"tool_choice"`, "# Tools", "namespace functions", "commentary"} {
				if strings.Contains(prompt, banned) {
					t.Errorf("the prompt of a request without tools contains %q:\n%s", banned, prompt)
				}
			}
			requireCaptured(t, h, 1, 0)
		})
	}
}

// upstreamPrompt returns what the model was given: the chat request body,
// or the harmony prompt decoded from its token ids.
func upstreamPrompt(t *testing.T, body []byte) string {
	t.Helper()
	var req struct {
		Prompt json.RawMessage `json:"prompt"`
	}
	json.Unmarshal(body, &req)
	if len(req.Prompt) == 0 {
		return string(body)
	}
	var ids []uint32
	if err := json.Unmarshal(req.Prompt, &ids); err != nil {
		t.Fatalf("prompt is not token ids: %s", req.Prompt)
	}
	text, err := harmony.Decode(ids)
	if err != nil {
		t.Fatal(err)
	}
	return text
}

func TestDisconnectDuringToolCall(t *testing.T) {
	for _, up := range upstreams {
		t.Run(up.name, func(t *testing.T) {
			log := &toolstest.Log{}
			started := make(chan struct{})
			cancelled := make(chan struct{})
			slow := &toolstest.Server{Label: "A", ToolNames: []string{"slow"}, Log: log,
				CallFunc: func(ctx context.Context, c tools.Call) (tools.Result, error) {
					close(started)
					<-ctx.Done()
					close(cancelled)
					return tools.Result{}, ctx.Err()
				}}
			h := up.harness(t, &harnessOptions{ToolProviders: []engine.ToolProvider{&toolstest.Provider{Type: "fake", List: []tools.Server{slow}}}})
			baseline := goleak.IgnoreCurrent()

			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			transport := &http.Transport{}
			reqCtx, disconnect := context.WithCancel(ctx)
			body := `{"model":"mock-model","stream":true,"input":"#call slow {}","tools":[{"type":"fake"}]}`
			req, _ := http.NewRequestWithContext(reqCtx, http.MethodPost, h.BaseURL+"/responses", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			done := make(chan error, 1)
			go func() {
				res, err := (&http.Client{Transport: transport}).Do(req)
				if err == nil {
					_, err = io.Copy(io.Discard, res.Body)
					res.Body.Close()
				}
				done <- err
			}()
			select {
			case <-started:
			case <-ctx.Done():
				t.Fatal("the tool was never called")
			}
			disconnect()
			select {
			case <-cancelled:
			case <-ctx.Done():
				t.Fatal("the tool call was not cancelled by the disconnect")
			}
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Errorf("client ended with %v", err)
			}
			// Cleanup and close happen as the request ends, on a context
			// of their own; wait for the close, boundedly.
			testutil.Eventually(2*time.Second, func() bool { return log.Count("close:A") > 0 })
			for _, p := range toolstest.CheckLifecycle(log, []string{"A"}) {
				t.Error(p)
			}
			h.WaitIdle(5 * time.Second)
			transport.CloseIdleConnections()
			// The first model turn ended normally: its keep-alive
			// connection to the upstream is pooled, not leaked.
			h.Upstream.CloseIdleConnections()
			goleak.VerifyNone(t, baseline)
		})
	}
}
