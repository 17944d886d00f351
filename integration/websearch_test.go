package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/loomgate/loom/engine"
	"github.com/loomgate/loom/tools/mcp"
	"github.com/loomgate/loom/tools/websearch"
)

// End-to-end tests of the web search tool (issue 13): web_search over a
// SearXNG-compatible server on loopback, offered as the web_search
// function on the chat upstream and as gpt-oss's built-in browser on the
// harmony upstream, seen by openai-go; and web_search with no backend.

// searxng is a loopback server speaking SearXNG's JSON API at /search,
// whose results point at pages it serves itself (/page/N), so that
// browser.open of a result is a fetch of a loopback page.
type searxng struct {
	*httptest.Server
	mu      sync.Mutex
	queries []string // the q of each search, in order
	formats []string // the format of each search
}

func newSearXNG(t *testing.T) *searxng {
	t.Helper()
	s := &searxng{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /search", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.queries = append(s.queries, r.URL.Query().Get("q"))
		s.formats = append(s.formats, r.URL.Query().Get("format"))
		s.mu.Unlock()
		base := "http://" + r.Host
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"query": r.URL.Query().Get("q"),
			"results": []map[string]any{
				{"title": "Loom weaving basics", "url": base + "/page/1", "content": "A loom holds warp threads under tension.", "engine": "mock"},
				{"title": "Jacquard looms", "url": base + "/page/2", "content": "Punched cards drove the Jacquard loom.", "engine": "mock"},
			},
		})
	})
	mux.HandleFunc("GET /page/{n}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<html><head><title>Page %s</title><style>.x{}</style></head><body>
<h1>Heddles of page %s</h1><script>var hidden = 1;</script>
<p>The heddle lifts warp threads so the shuttle can pass.</p>
<p>See <a href="/page/9">the next page</a>.</p></body></html>`, r.PathValue("n"), r.PathValue("n"))
	})
	s.Server = httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

func (s *searxng) searches() ([]string, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.queries...), append([]string(nil), s.formats...)
}

// webSearchHarness is a harness over up with the web search tool: over
// backend (nil: none), pages opened under a policy that allows loopback
// when allowLoopback; the browser built-in on the harmony upstream.
func webSearchHarness(t *testing.T, up upstream, backend websearch.Backend, allowLoopback bool) *harness {
	t.Helper()
	allow := ""
	if allowLoopback {
		allow = "127.0.0.1,::1"
	}
	policy, err := mcp.NewPolicy(&mcp.PolicyOptions{Allow: allow})
	if err != nil {
		t.Fatal(err)
	}
	fetcher, err := websearch.NewFetcher(policy, nil)
	if err != nil {
		t.Fatal(err)
	}
	opts := &websearch.Options{Backend: backend, Fetcher: fetcher, Browser: up.name == "completions"}
	if backend == nil {
		opts.Fetcher = nil
	}
	return up.harness(t, &harnessOptions{ToolProviders: []engine.ToolProvider{websearch.New(opts)}})
}

// webSearchCalls returns the web_search_call items of a response.
func webSearchCalls(r *responses.Response) []responses.ResponseFunctionWebSearch {
	var out []responses.ResponseFunctionWebSearch
	for _, it := range r.Output {
		if it.Type == "web_search_call" {
			out = append(out, it.AsWebSearchCall())
		}
	}
	return out
}

// lastPromptText is what the model read in the upstream's last request:
// the chat messages' text or the decoded harmony prompt.
func lastPromptText(t *testing.T, h *harness) string {
	t.Helper()
	if isCompletions(t, h) {
		return lastCompletion(t, h).PromptText
	}
	var b strings.Builder
	for _, m := range lastChatRequest(t, h).Messages {
		b.WriteString(m.Text())
		b.WriteString("\n")
	}
	return b.String()
}

// searchCall is the script line that makes the model search for q on up.
func searchCall(up upstream, q string) string {
	if up.name == "completions" {
		return `#builtin browser.search {"query": "` + q + `"}`
	}
	return `#call web_search {"query": "` + q + `"}`
}

// webSearchTool is the request's tool: web_search, as Codex sends it.
var webSearchTool = responses.ToolUnionParam{OfWebSearch: &responses.WebSearchToolParam{Type: responses.WebSearchToolTypeWebSearch}}

// streamResponse streams a request with openai-go, checks the stream's
// order and returns the final response and the event types.
func streamResponse(t *testing.T, h *harness, params responses.ResponseNewParams) (*responses.Response, []string) {
	t.Helper()
	client := newOpenAIGo(h)
	raws := streamedEvents(t, client.Responses.NewStreaming(clientCtx(t), params))
	sum := checkEventStream(t, raws)
	var final struct {
		Response responses.Response `json:"response"`
	}
	if err := json.Unmarshal(raws[len(raws)-1], &final); err != nil {
		t.Fatal(err)
	}
	return &final.Response, sum.Types
}

// TestWebSearchWithoutBackend: with no search backend, web_search is
// accepted; the model's search ends as a failed web_search_call, the model
// reads that search is not configured, and the response completes with its
// answer.
func TestWebSearchWithoutBackend(t *testing.T) {
	for _, up := range upstreams {
		t.Run(up.name, func(t *testing.T) {
			h := webSearchHarness(t, up, nil, false)
			resp, types := streamResponse(t, h, responses.ResponseNewParams{
				Model: openai.ChatModel("mock-model"),
				Input: textInput(searchCall(up, "loom") + "\n#then\n#say I could not search."),
				Tools: []responses.ToolUnionParam{webSearchTool},
			})
			if resp.Status != responses.ResponseStatusCompleted {
				t.Fatalf("status %s: %s", resp.Status, resp.RawJSON())
			}
			calls := webSearchCalls(resp)
			if len(calls) != 1 || calls[0].Status != "failed" || calls[0].Action.Type != "search" || calls[0].Action.Query != "loom" {
				t.Fatalf("web_search_calls %+v, want one failed search for loom: %s", calls, resp.RawJSON())
			}
			if got := resp.OutputText(); got != "I could not search." {
				t.Errorf("answer %q", got)
			}
			if !strings.Contains(lastPromptText(t, h), "web search is not configured on this server") {
				t.Errorf("the model was not told search is not configured: %s", lastPromptText(t, h))
			}
			want := []string{"response.output_item.added", "response.web_search_call.in_progress", "response.web_search_call.searching", "response.output_item.done"}
			if !containsRun(types, want) {
				t.Errorf("events %v, want the run %v", types, want)
			}
		})
	}
}

// containsRun reports whether want appears in types as a contiguous run.
func containsRun(types, want []string) bool {
	for i := 0; i+len(want) <= len(types); i++ {
		if strings.Join(types[i:i+len(want)], ",") == strings.Join(want, ",") {
			return true
		}
	}
	return false
}
