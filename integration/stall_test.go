package integration

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/loomgate/loom/engine"
	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/model/chat"
	"github.com/loomgate/loom/model/completions"
	"github.com/loomgate/loom/tools/toolstest"
)

// TestUpstreamStallFailsTheResponse: the upstream answers a tool call,
// then, in the next turn, stops sending after two chunks and holds the
// connection. With a short idle timeout the response fails with
// upstream_idle_timeout (a JSON request, whose upstream call is not
// streamed, with a 504 after the short whole-answer timeout), is stored failed, the called tool's cleanup has
// run, and the stalled upstream request was cancelled — over both
// backends, streaming and not.
func TestUpstreamStallFailsTheResponse(t *testing.T) {
	const idle = 200 * time.Millisecond
	backends := []struct {
		name string
		opts func(*harnessOptions)
	}{
		{"chat", func(o *harnessOptions) {
			o.Chat = &chat.Options{HTTPOptions: model.HTTPOptions{IdleTimeout: idle, WholeTimeout: idle}}
		}},
		{"completions", func(o *harnessOptions) {
			o.Completions = &completions.Options{HTTPOptions: model.HTTPOptions{IdleTimeout: idle, WholeTimeout: idle}}
		}},
	}
	const script = "#call a1 {}\n#then\n#say This sentence is long enough for several chunks.\n#stall 2"
	for _, b := range backends {
		for _, stream := range []bool{false, true} {
			name := b.name + "/json"
			if stream {
				name = b.name + "/stream"
			}
			t.Run(name, func(t *testing.T) {
				log, provider := threeServers()
				opts := &harnessOptions{ToolProviders: []engine.ToolProvider{provider}}
				b.opts(opts)
				h := newHarness(t, opts)
				// A bound on the whole test, far past the idle timeout:
				// a regression fails instead of hanging.
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				body, _ := json.Marshal(map[string]any{"model": "mock-model", "input": script, "stream": stream,
					"tools": []any{map[string]any{"type": "fake"}}})
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, h.BaseURL+"/responses", strings.NewReader(string(body)))
				req.Header.Set("Content-Type", "application/json")
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				raw, err := io.ReadAll(res.Body)
				res.Body.Close()
				if err != nil {
					t.Fatalf("reading the response: %v", err)
				}
				var id string
				if stream {
					if res.StatusCode != http.StatusOK {
						t.Fatalf("status %d: %s", res.StatusCode, raw)
					}
					failed := lastEvent(t, string(raw))
					if failed.Type != "response.failed" || failed.Response.Error == nil || failed.Response.Error.Code != "upstream_idle_timeout" {
						t.Fatalf("stream ended with %+v, want response.failed with upstream_idle_timeout:\n%s", failed, raw)
					}
					id = failed.Response.ID
				} else {
					// A client that asked for no stream gets a non-streamed
					// upstream call, which stays silent until its answer is
					// whole: the whole-answer timeout ends it.
					if res.StatusCode != http.StatusGatewayTimeout {
						t.Fatalf("status %d: %s, want 504", res.StatusCode, raw)
					}
				}
				// The stalled upstream request was cancelled (turn two).
				if err := h.Mock.WaitCancelled(ctx, 1); err != nil {
					t.Fatalf("the stalled upstream request was not cancelled: %v", err)
				}
				// The called server was cleaned up and closed, once.
				for _, p := range toolstest.CheckLifecycle(log, []string{"A"}) {
					t.Error(p)
				}
				if id != "" {
					if got := storedStatus(t, h, id); got != "failed" {
						t.Errorf("stored status %q, want failed", got)
					}
				}
			})
		}
	}
}

type streamEvent struct {
	Type     string `json:"type"`
	Response struct {
		ID     string `json:"id"`
		Status string `json:"status"`
		Error  *struct {
			Code string `json:"code"`
		} `json:"error"`
	} `json:"response"`
}

// lastEvent is the last data event of an SSE body before [DONE].
func lastEvent(t *testing.T, body string) streamEvent {
	t.Helper()
	var last streamEvent
	for _, line := range strings.Split(body, "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		last = streamEvent{}
		if err := json.Unmarshal([]byte(data), &last); err != nil {
			t.Fatalf("event is not JSON: %s", data)
		}
	}
	return last
}

// storedStatus GETs a stored response and returns its status.
func storedStatus(t *testing.T, h *harness, id string) string {
	t.Helper()
	res, err := http.Get(h.BaseURL + "/responses/" + id)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var r struct{ Status string }
	if err := json.NewDecoder(res.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	return r.Status
}
