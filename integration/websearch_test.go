package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

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

// searchAndOpen is a harness over up with the web search tool over a new
// SearXNG server (pages on loopback allowed), and the script of a search
// for "loom weaving" and, on harmony, browser.open of its first result.
func searchAndOpen(t *testing.T, up upstream) (*searxng, *harness, string) {
	t.Helper()
	sx := newSearXNG(t)
	backend, err := websearch.NewSearXNG(sx.URL+"/search", nil)
	if err != nil {
		t.Fatal(err)
	}
	script := searchCall(up, "loom weaving") + "\n#then\n"
	if up.name == "completions" {
		script += "#builtin browser.open {\"id\": 0}\n#then\n"
	}
	return sx, webSearchHarness(t, up, backend, true), script
}

// TestWebSearchSearXNG: web_search over a SearXNG-compatible server on
// loopback. On chat completions the model calls the web_search function
// and reads the results; on harmony it calls browser.search, then
// browser.open of the first result (a loopback page the fetch policy
// allows), and reads the page's text with its cursor. Each call is a
// completed web_search_call whose action names the query or the page,
// with the sources include asked for.
func TestWebSearchSearXNG(t *testing.T) {
	for _, up := range upstreams {
		t.Run(up.name, func(t *testing.T) {
			sx, h, script := searchAndOpen(t, up)
			script += "#say Looms hold warp threads."
			resp, types := streamResponse(t, h, responses.ResponseNewParams{
				Model:   openai.ChatModel("mock-model"),
				Input:   textInput(script),
				Tools:   []responses.ToolUnionParam{webSearchTool},
				Include: []responses.ResponseIncludable{responses.ResponseIncludableWebSearchCallActionSources},
			})
			if resp.Status != responses.ResponseStatusCompleted {
				t.Fatalf("status %s: %s", resp.Status, resp.RawJSON())
			}
			queries, formats := sx.searches()
			if len(queries) != 1 || queries[0] != "loom weaving" || formats[0] != "json" {
				t.Errorf("the backend got searches %q with formats %q, want one for \"loom weaving\" as json", queries, formats)
			}
			calls := webSearchCalls(resp)
			wantCalls := 1
			if up.name == "completions" {
				wantCalls = 2
			}
			if len(calls) != wantCalls {
				t.Fatalf("%d web_search_calls, want %d: %s", len(calls), wantCalls, resp.RawJSON())
			}
			search := calls[0]
			if search.Status != "completed" || search.Action.Type != "search" || search.Action.Query != "loom weaving" {
				t.Errorf("search call %s", search.RawJSON())
			}
			if len(search.Action.Sources) != 2 || search.Action.Sources[0].URL != sx.URL+"/page/1" {
				t.Errorf("sources %+v, want the two result URLs", search.Action.Sources)
			}
			prompt := lastPromptText(t, h)
			if !strings.Contains(prompt, "Loom weaving basics") || !strings.Contains(prompt, "A loom holds warp threads under tension.") {
				t.Errorf("the search results did not reach the model: %s", prompt)
			}
			if up.name == "completions" {
				open := calls[1]
				if open.Status != "completed" || open.Action.Type != "open_page" || open.Action.URL != sx.URL+"/page/1" {
					t.Errorf("open call %s", open.RawJSON())
				}
				// The search page is cursor 0; the opened page is [1], its
				// text without script or style, its link numbered.
				for _, want := range []string{"【0†Loom weaving basics†127.0.0.1】", "[1] Page 1 (" + sx.URL + "/page/1)",
					"The heddle lifts warp threads so the shuttle can pass.", "【0†the next page】"} {
					if !strings.Contains(prompt, want) {
						t.Errorf("the model did not read %q: %s", want, prompt)
					}
				}
				if strings.Contains(prompt, "var hidden") {
					t.Errorf("the page's script reached the model")
				}
				if !strings.Contains(prompt, "namespace browser") {
					t.Errorf("the prompt does not declare the built-in browser: %s", prompt)
				}
			}
			// In progress from the model's first piece of the call, searching
			// once it is complete (before the backend answers), then done.
			want := []string{"response.output_item.added", "response.web_search_call.in_progress", "response.web_search_call.searching",
				"response.web_search_call.completed", "response.output_item.done"}
			if !containsRun(types, want) {
				t.Errorf("events %v, want the run %v", types, want)
			}
			if got := resp.OutputText(); got != "Looms hold warp threads." {
				t.Errorf("answer %q", got)
			}
		})
	}
}

// TestWebSearchFetchPolicy: on harmony, with a policy that does not allow
// loopback, browser.open of a loopback result is refused: the call is a
// failed web_search_call, the model reads why, and the response goes on.
// With external_web_access false the page is not fetched at all: the
// model gets the engine's snippet instead.
func TestWebSearchFetchPolicy(t *testing.T) {
	up := upstreams[1]
	sx := newSearXNG(t)
	backend, err := websearch.NewSearXNG(sx.URL+"/search", nil)
	if err != nil {
		t.Fatal(err)
	}
	script := searchCall(up, "loom") + "\n#then\n#builtin browser.open {\"id\": 1}\n#then\n#say done"
	t.Run("loopback refused", func(t *testing.T) {
		h := webSearchHarness(t, up, backend, false)
		resp, _ := streamResponse(t, h, responses.ResponseNewParams{
			Model: openai.ChatModel("mock-model"), Input: textInput(script), Tools: []responses.ToolUnionParam{webSearchTool},
		})
		calls := webSearchCalls(resp)
		if resp.Status != responses.ResponseStatusCompleted || len(calls) != 2 || calls[1].Status != "failed" || calls[1].Action.URL != sx.URL+"/page/2" {
			t.Fatalf("response %s", resp.RawJSON())
		}
		if prompt := lastPromptText(t, h); !strings.Contains(prompt, "loopback") || strings.Contains(prompt, "Heddles") {
			t.Errorf("the model was not told the page is refused, or read it: %s", prompt)
		}
	})
	t.Run("no external web access", func(t *testing.T) {
		h := webSearchHarness(t, up, backend, true)
		offline := responses.ToolUnionParam{OfWebSearch: &responses.WebSearchToolParam{Type: responses.WebSearchToolTypeWebSearch, ExternalWebAccess: openai.Bool(false)}}
		resp, _ := streamResponse(t, h, responses.ResponseNewParams{
			Model: openai.ChatModel("mock-model"), Input: textInput(script), Tools: []responses.ToolUnionParam{offline},
		})
		if resp.Status != responses.ResponseStatusCompleted {
			t.Fatalf("response %s", resp.RawJSON())
		}
		prompt := lastPromptText(t, h)
		if !strings.Contains(prompt, "Punched cards drove the Jacquard loom.") || strings.Contains(prompt, "Heddles") {
			t.Errorf("the model should read the snippet, not the live page: %s", prompt)
		}
	})
}

// nodeRequest is request.mjs's summary of one streamed response.
type nodeRequest struct {
	Types      []string         `json:"types"`
	Sequence   []int            `json:"sequence"`
	Text       string           `json:"text"`
	ID         string           `json:"id"`
	Status     string           `json:"status"`
	OutputText string           `json:"outputText"`
	Output     []map[string]any `json:"output"`
}

// runNodeRequest streams params through the openai npm package's strict
// stream helper (testdata/node/request.mjs) against h.
func runNodeRequest(t *testing.T, h *harness, params any) *nodeRequest {
	t.Helper()
	if _, err := os.Stat(filepath.Join(nodeDir, "node_modules", "openai", "package.json")); err != nil {
		t.Fatalf("the openai npm package is not installed (%v): run `npm ci --prefix integration/testdata/node`", err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is not on PATH: %v", err)
	}
	body, err := json.Marshal(params)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), nodeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "request.mjs", string(body))
	cmd.Dir = nodeDir
	cmd.Env = append(os.Environ(), "LOOM_BASE_URL="+h.BaseURL, "NO_PROXY=127.0.0.1,localhost", "NODE_NO_WARNINGS=1")
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node request.mjs: %v\nstderr:\n%s\nstdout:\n%s", err, stderr.Bytes(), stdout.Bytes())
	}
	var out nodeRequest
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("node request.mjs printed no summary (%v):\n%s\nstderr:\n%s", err, stdout.Bytes(), stderr.Bytes())
	}
	for i, seq := range out.Sequence {
		if seq != i {
			t.Fatalf("event %d (%s) has sequence_number %d", i, out.Types[i], seq)
		}
	}
	return &out
}

// outputOfType returns the summary's output items of one type.
func (r *nodeRequest) outputOfType(typ string) []map[string]any {
	var out []map[string]any
	for _, it := range r.Output {
		if it["type"] == typ {
			out = append(out, it)
		}
	}
	return out
}

// TestNodeWebSearch: the openai npm package's strict stream helper reads
// web_search flows on both upstreams: a search over the SearXNG server
// (and, on harmony, browser.open of its first result) as completed
// web_search_call items whose results reach the model, and with no
// backend a failed web_search_call in a completed response.
func TestNodeWebSearch(t *testing.T) {
	for _, up := range upstreams {
		t.Run(up.name, func(t *testing.T) {
			t.Parallel() // node's startup dominates; overlap it
			_, h, script := searchAndOpen(t, up)
			got := runNodeRequest(t, h, map[string]any{"model": "mock-model", "input": script + "#say Found it.",
				"tools": []any{map[string]any{"type": "web_search"}}, "include": []string{"web_search_call.action.sources"}})
			calls := got.outputOfType("web_search_call")
			if got.Status != "completed" || len(calls) == 0 || calls[0]["status"] != "completed" || got.OutputText != "Found it." {
				t.Fatalf("summary %+v", got)
			}
			action, _ := calls[0]["action"].(map[string]any)
			if action["type"] != "search" || action["query"] != "loom weaving" || len(action["sources"].([]any)) != 2 {
				t.Errorf("action %v", action)
			}
			if !strings.Contains(lastPromptText(t, h), "A loom holds warp threads under tension.") {
				t.Errorf("the results did not reach the model")
			}
			if up.name == "completions" && (len(calls) != 2 || !strings.Contains(lastPromptText(t, h), "The heddle lifts warp threads")) {
				t.Errorf("the opened page did not reach the model: %v", calls)
			}
			if !slices.Contains(got.Types, "response.web_search_call.completed") {
				t.Errorf("events %v", got.Types)
			}

			bare := webSearchHarness(t, up, nil, false)
			got = runNodeRequest(t, bare, map[string]any{"model": "mock-model", "input": searchCall(up, "x") + "\n#then\n#say No luck.",
				"tools": []any{map[string]any{"type": "web_search_preview"}}})
			calls = got.outputOfType("web_search_call")
			if got.Status != "completed" || len(calls) != 1 || calls[0]["status"] != "failed" || got.OutputText != "No luck." {
				t.Errorf("no backend: %+v", got)
			}
		})
	}
}

// blockingBackend is a search backend that answers only once released,
// and says when a search arrived.
type blockingBackend struct {
	arrived chan struct{}
	release chan struct{}
}

func (b *blockingBackend) Search(ctx context.Context, query string, n int) ([]websearch.Result, error) {
	close(b.arrived)
	select {
	case <-b.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return []websearch.Result{{Title: "Late result", URL: "https://example.com/late", Content: "late"}}, nil
}

// TestWebSearchStreamsProgress: a streaming client sees the search in
// progress and searching while the backend has not answered yet (the
// backend is released only once the client saw searching), then
// completed.
func TestWebSearchStreamsProgress(t *testing.T) {
	backend := &blockingBackend{arrived: make(chan struct{}), release: make(chan struct{})}
	h := webSearchHarness(t, upstreams[0], backend, false)
	client := newOpenAIGo(h)
	stream := client.Responses.NewStreaming(clientCtx(t), responses.ResponseNewParams{
		Model: openai.ChatModel("mock-model"),
		Input: textInput(searchCall(upstreams[0], "late") + "\n#then\n#say done"),
		Tools: []responses.ToolUnionParam{webSearchTool},
	})
	var types []string
	for stream.Next() {
		ev := stream.Current()
		types = append(types, ev.Type)
		if ev.Type == "response.web_search_call.searching" {
			<-backend.arrived // the search runs now, its answer held back
			close(backend.release)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	want := []string{"response.web_search_call.in_progress", "response.web_search_call.searching", "response.web_search_call.completed"}
	var got []string
	for _, typ := range types {
		if strings.HasPrefix(typ, "response.web_search_call.") {
			got = append(got, typ)
		}
	}
	if !slices.Equal(got, want) || types[len(types)-1] != "response.completed" {
		t.Errorf("events %v", types)
	}
}
