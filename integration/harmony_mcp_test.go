package integration

import (
	"slices"
	"strings"
	"testing"

	"github.com/loomgate/loom/engine"
	"github.com/loomgate/loom/model/completions"
	"github.com/loomgate/loom/tools/mcp"
)

// TestHarmonyMCPNamespaces: over the harmony completions upstream, each
// MCP server's tools are offered as a namespace of their own, so two
// servers with a tool of the same name do not collide; the model calls
// one as "LABEL.tool" and that server, and only it, runs the call.
func TestHarmonyMCPNamespaces(t *testing.T) {
	docs := mcptStart(t, nil, "search")
	wiki := mcptStart(t, nil, "search")
	policy, err := mcp.NewPolicy(&mcp.PolicyOptions{Allow: "127.0.0.1,::1"})
	if err != nil {
		t.Fatal(err)
	}
	provider := &mcp.Provider{Client: mcp.NewClient(&mcp.ClientOptions{Policy: policy})}
	h := newHarness(t, &harnessOptions{
		Completions:   &completions.Options{},
		ToolProviders: []engine.ToolProvider{provider},
	})
	never := map[string]any{"require_approval": "never"}
	r := mcptCreate(t, h, map[string]any{
		"model": "mock-model",
		"input": "#callns wiki.search {\"q\":\"loom\"}\n#then\n#say done",
		"tools": []any{mcptTool("docs", docs.URL, never), mcptTool("wiki", wiki.URL, never)},
	})
	if !slices.Equal(r.types(), []string{"mcp_list_tools", "mcp_list_tools", "mcp_call", "message"}) {
		t.Fatalf("output %v", r.types())
	}
	call := r.only(t, "mcp_call")
	if call.ServerLabel != "wiki" || call.Name != "search" || call.Arguments != `{"q":"loom"}` {
		t.Errorf("mcp_call %s.%s(%s), want wiki.search({\"q\":\"loom\"})", call.ServerLabel, call.Name, call.Arguments)
	}
	if call.Output == nil || *call.Output != `search ran with {"q":"loom"}` {
		t.Errorf("mcp_call output %v", call.Output)
	}
	if got := wiki.callsOf("search"); !slices.Equal(got, []string{`{"q":"loom"}`}) {
		t.Errorf("wiki ran search with %q", got)
	}
	if n := len(docs.toolCalls()); n != 0 {
		t.Errorf("docs ran %d tool calls, want none", n)
	}

	reqs := h.Mock.Requests()
	if len(reqs) != 2 || reqs[0].Completion == nil || reqs[1].Completion == nil {
		t.Fatalf("upstream got %d requests, want 2 harmony completions", len(reqs))
	}
	first := reqs[0].Completion.PromptText
	system, _, _ := strings.Cut(first, "<|start|>user")
	for _, want := range []string{
		"## docs\n\n", "namespace docs {", "type search = ", "} // namespace docs",
		"## wiki\n\n", "namespace wiki {", "} // namespace wiki",
		"# Valid channels: analysis, commentary, final.",
	} {
		if !strings.Contains(system, want) {
			t.Errorf("prompt before the user message lacks %q:\n%s", want, system)
		}
	}
	for _, unwanted := range []string{"docs__search", "wiki__search", "namespace functions"} {
		if strings.Contains(first, unwanted) {
			t.Errorf("prompt offers %q: MCP tools must be namespaced, not functions:\n%s", unwanted, first)
		}
	}
	second := reqs[1].Completion.PromptText
	for _, want := range []string{
		`<|start|>assistant to=wiki.search<|channel|>commentary <|constrain|>json<|message|>{"q":"loom"}<|call|>`,
		`<|start|>wiki.search to=assistant<|channel|>commentary<|message|>search ran with {"q":"loom"}<|end|>`,
	} {
		if !strings.Contains(second, want) {
			t.Errorf("second prompt lacks %q:\n%s", want, second)
		}
	}
	if msg := r.only(t, "message"); len(msg.Content) == 0 || msg.Content[0].Text != "done" {
		t.Errorf("answer %+v, want done", msg.Content)
	}
}
