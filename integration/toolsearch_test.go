package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"

	"github.com/loomgate/loom/engine"
	"github.com/loomgate/loom/model/mockllm"
	loomresponses "github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/tools/mcp"
	"github.com/loomgate/loom/tools/toolsearch"
	"github.com/loomgate/loom/tools/websearch"
)

// End-to-end tests of tool_search with defer_loading (issue 13): a
// request carries 200 deferred function tools; the prompt holds none of
// them, only the search; the model searches, loom answers from the
// deferred definitions, and the tool found is offered, and called, in the
// next turn. A client-run search goes to the client, whose answer's tools
// are offered next.

// harmonyFunction matches a function declared in a harmony prompt.
var harmonyFunction = regexp.MustCompile(`(?m)^type (\w+) = `)

// offeredNames are the function names an upstream request offered.
func offeredNames(req mockllm.Request) []string {
	var names []string
	if req.Completion != nil {
		for _, m := range harmonyFunction.FindAllStringSubmatch(req.Completion.PromptText, -1) {
			names = append(names, m[1])
		}
		return names
	}
	for _, t := range req.Chat.Tools {
		names = append(names, t.Function.Name)
	}
	return names
}

// deferredTools are n deferred function tools, tool_000 ... plus the one
// the search should find, get_weather_forecast, in the middle.
func deferredTools(n int) []responses.ToolUnionParam {
	var out []responses.ToolUnionParam
	for i := range n {
		name, desc := fmt.Sprintf("tool_%03d", i), fmt.Sprintf("Manages inventory record %d.", i)
		if i == n/2 {
			name, desc = "get_weather_forecast", "Returns the weather forecast for a city."
		}
		out = append(out, param.Override[responses.ToolUnionParam](json.RawMessage(fmt.Sprintf(
			`{"type":"function","name":%q,"description":%q,"parameters":{"type":"object","properties":{"city":{"type":"string"}}},"strict":false,"defer_loading":true}`, name, desc))))
	}
	return out
}

func toolSearchHarness(t *testing.T, up upstream) *harness {
	return up.harness(t, &harnessOptions{ToolProviders: []engine.ToolProvider{toolsearch.Provider{}}})
}

// TestToolSearchDeferred: over both upstreams, with openai-go.
func TestToolSearchDeferred(t *testing.T) {
	for _, up := range upstreams {
		t.Run(up.name, func(t *testing.T) {
			h := toolSearchHarness(t, up)
			tools := append(deferredTools(200), responses.ToolUnionParam{OfToolSearch: &responses.ToolSearchToolParam{}})
			resp, types := streamResponse(t, h, responses.ResponseNewParams{
				Model: openai.ChatModel("mock-model"),
				Input: textInput("#call tool_search {\"query\": \"weather forecast\"}\n#then\n#call get_weather_forecast {\"city\": \"Paris\"}\n#then\n#say Sunny."),
				Tools: tools,
			})
			reqs := h.Mock.Requests()
			if len(reqs) != 2 {
				t.Fatalf("%d upstream requests, want 2", len(reqs))
			}
			if got := offeredNames(reqs[0]); !slices.Equal(got, []string{"tool_search"}) {
				t.Errorf("the first prompt offers %v, want only tool_search", got)
			}
			if got := offeredNames(reqs[1]); !slices.Equal(got, []string{"get_weather_forecast", "tool_search"}) {
				t.Errorf("the second prompt offers %v, want the found tool and the search", got)
			}
			var itemTypes []string
			for _, it := range resp.Output {
				itemTypes = append(itemTypes, it.Type)
			}
			if !slices.Equal(itemTypes, []string{"tool_search_call", "tool_search_output", "function_call"}) {
				t.Fatalf("output %v: %s", itemTypes, resp.RawJSON())
			}
			call, out := resp.Output[0].AsToolSearchCall(), resp.Output[1].AsToolSearchOutput()
			if call.Execution != "server" || call.Status != "completed" || out.CallID != call.CallID || out.Execution != "server" {
				t.Errorf("search items %s / %s", resp.Output[0].RawJSON(), resp.Output[1].RawJSON())
			}
			if len(out.Tools) == 0 || out.Tools[0].Name != "get_weather_forecast" {
				t.Errorf("found tools %s, want get_weather_forecast first", resp.Output[1].RawJSON())
			}
			fc := resp.Output[2].AsFunctionCall()
			if fc.Name != "get_weather_forecast" || !jsonEqual(fc.Arguments, `{"city": "Paris"}`) {
				t.Errorf("function call %s", resp.Output[2].RawJSON())
			}
			if !slices.Contains(types, "response.function_call_arguments.done") {
				t.Errorf("events %v", types)
			}

			// The client answers the call: the found tool is still offered
			// (found in the history), and the model answers.
			client := newOpenAIGo(h)
			output := responses.ResponseInputItemParamOfFunctionCallOutput(`{"sky": "sunny"}`)
			output.OfFunctionCallOutput.CallID = openai.String(fc.CallID)
			next, err := client.Responses.New(clientCtx(t), responses.ResponseNewParams{
				Model:              openai.ChatModel("mock-model"),
				PreviousResponseID: openai.String(resp.ID),
				Input:              responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{output}},
				Tools:              tools,
			})
			if err != nil {
				t.Fatal(err)
			}
			if next.Status != responses.ResponseStatusCompleted || next.OutputText() != "Sunny." {
				t.Errorf("follow-up %s", next.RawJSON())
			}
			reqs = h.Mock.Requests()
			if got := offeredNames(reqs[len(reqs)-1]); !slices.Equal(got, []string{"get_weather_forecast", "tool_search"}) {
				t.Errorf("the follow-up offers %v", got)
			}
			requireToolRoundTrip(t, h, fc.CallID, fc.Name, fc.Arguments, `{"sky": "sunny"}`)
		})
	}
}

// TestToolSearchClient: a tool_search with execution "client" reaches the
// client as a tool_search_call; the client's tool_search_output offers a
// tool the request did not carry, which the model calls next.
func TestToolSearchClient(t *testing.T) {
	for _, up := range upstreams {
		t.Run(up.name, func(t *testing.T) {
			h := toolSearchHarness(t, up)
			tools := append(deferredTools(3), responses.ToolUnionParam{OfToolSearch: &responses.ToolSearchToolParam{
				Execution: responses.ToolSearchToolExecutionClient, Description: openai.String("Finds order tools.")}})
			script := "#call tool_search {\"query\": \"orders\"}\n#then\n#call lookup_order {\"id\": \"42\"}"
			resp, _ := streamResponse(t, h, responses.ResponseNewParams{
				Model: openai.ChatModel("mock-model"), Input: textInput(script), Tools: tools,
			})
			if len(resp.Output) != 1 || resp.Output[0].Type != "tool_search_call" {
				t.Fatalf("output %s", resp.RawJSON())
			}
			call := resp.Output[0].AsToolSearchCall()
			if call.Execution != "client" || call.CallID == "" {
				t.Fatalf("call %s", resp.Output[0].RawJSON())
			}
			if args, _ := json.Marshal(call.Arguments); !jsonEqual(string(args), `{"query": "orders"}`) {
				t.Errorf("arguments %s", args)
			}
			answer := param.Override[responses.ResponseInputItemUnionParam](json.RawMessage(fmt.Sprintf(
				`{"type":"tool_search_output","call_id":%q,"execution":"client","status":"completed","tools":[{"type":"function","name":"lookup_order","description":"Looks up an order.","parameters":{"type":"object","properties":{"id":{"type":"string"}}},"strict":false}]}`, call.CallID)))
			next, _ := streamResponse(t, h, responses.ResponseNewParams{
				Model: openai.ChatModel("mock-model"), PreviousResponseID: openai.String(resp.ID), Tools: tools,
				Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{answer}},
			})
			if len(next.Output) != 1 || next.Output[0].AsFunctionCall().Name != "lookup_order" {
				t.Fatalf("follow-up %s", next.RawJSON())
			}
			reqs := h.Mock.Requests()
			if got := offeredNames(reqs[len(reqs)-1]); !slices.Equal(got, []string{"tool_search", "lookup_order"}) {
				t.Errorf("the follow-up offers %v, want the search and the tool the client found", got)
			}
		})
	}
}

// TestToolSearchDeferredMCPServer: an MCP server marked defer_loading is
// kept out of the prompt until a search finds it by its description; then
// its tools are offered and the model calls one, which loom runs.
func TestToolSearchDeferredMCPServer(t *testing.T) {
	for _, up := range upstreams {
		t.Run(up.name, func(t *testing.T) {
			ms := mcptStart(t, nil, "lookup_customer")
			policy, err := mcp.NewPolicy(&mcp.PolicyOptions{Allow: "127.0.0.1,::1"})
			if err != nil {
				t.Fatal(err)
			}
			h := up.harness(t, &harnessOptions{ToolProviders: []engine.ToolProvider{
				&mcp.Provider{Client: mcp.NewClient(&mcp.ClientOptions{Policy: policy})}, toolsearch.Provider{}}})
			call := "#call crm__lookup_customer {\"id\": \"7\"}"
			if up.name == "completions" {
				call = "#callns crm.lookup_customer {\"id\": \"7\"}"
			}
			status, raw := mcptPost(t, h, map[string]any{
				"model": "mock-model",
				"input": "#call tool_search {\"query\": \"customer records\"}\n#then\n" + call + "\n#then\n#say Found the customer.",
				"tools": []any{
					mcptTool("crm", ms.URL, map[string]any{"server_description": "Customer records", "defer_loading": true, "require_approval": "never"}),
					map[string]any{"type": "tool_search"},
				},
			})
			var resp struct {
				Status string `json:"status"`
				Output []struct {
					Type string `json:"type"`
				} `json:"output"`
			}
			if err := json.Unmarshal(raw, &resp); err != nil || status != 200 || resp.Status != "completed" {
				t.Fatalf("status %d: %s", status, raw)
			}
			var types []string
			for _, it := range resp.Output {
				types = append(types, it.Type)
			}
			reqs := h.Mock.Requests()
			if len(reqs) != 3 {
				t.Fatalf("%d upstream requests, want 3", len(reqs))
			}
			// What each prompt declares: the chat tools, or the harmony
			// prompt before the conversation.
			declared := func(req mockllm.Request) string {
				if req.Completion != nil {
					text, _, _ := strings.Cut(req.Completion.PromptText, "<|start|>user")
					return text
				}
				return strings.Join(offeredNames(req), ",")
			}
			if d := declared(reqs[0]); strings.Contains(d, "lookup_customer") || !strings.Contains(d, "tool_search") {
				t.Errorf("the first prompt declares %s, want the search and not the deferred server's tool", d)
			}
			if d := declared(reqs[1]); !strings.Contains(d, "lookup_customer") {
				t.Errorf("the second prompt does not declare the found server's tool: %s", d)
			}
			if calls := ms.toolCalls(); len(calls) != 1 || calls[0].Name != "lookup_customer" {
				t.Errorf("the MCP server ran %v", calls)
			}
			if !slices.Equal(types, []string{"mcp_list_tools", "tool_search_call", "tool_search_output", "mcp_call", "message"}) {
				t.Errorf("output %v", types)
			}
		})
	}
}

// TestNodeToolSearch: the openai npm package's strict stream helper reads
// a server-run tool search over 200 deferred tools and the call of the
// tool found, on both upstreams.
func TestNodeToolSearch(t *testing.T) {
	for _, up := range upstreams {
		t.Run(up.name, func(t *testing.T) {
			t.Parallel() // node's startup dominates; overlap it
			h := toolSearchHarness(t, up)
			var tools []any
			for _, p := range deferredTools(200) {
				raw, _ := json.Marshal(p)
				tools = append(tools, json.RawMessage(raw))
			}
			tools = append(tools, map[string]any{"type": "tool_search"})
			got := runNodeRequest(t, h, map[string]any{"model": "mock-model", "tools": tools,
				"input": "#call tool_search {\"query\": \"weather forecast\"}\n#then\n#call get_weather_forecast {\"city\": \"Paris\"}"})
			var types []string
			for _, it := range got.Output {
				types = append(types, it["type"].(string))
			}
			if got.Status != "completed" || !slices.Equal(types, []string{"tool_search_call", "tool_search_output", "function_call"}) {
				t.Fatalf("summary %+v", got)
			}
			if got.Output[2]["name"] != "get_weather_forecast" {
				t.Errorf("call %v", got.Output[2])
			}
			reqs := h.Mock.Requests()
			if first := offeredNames(reqs[0]); !slices.Equal(first, []string{"tool_search"}) {
				t.Errorf("the first prompt offers %v", first)
			}
		})
	}
}

// TestToolSearchDeferredNamespace: a namespace marked defer_loading stays
// out of the prompt until a search finds it by its description; then its
// function is offered under its namespace and the call reaches the
// client with the namespace.
func TestToolSearchDeferredNamespace(t *testing.T) {
	for _, up := range upstreams {
		t.Run(up.name, func(t *testing.T) {
			h := toolSearchHarness(t, up)
			call := "#call crm__search " + crmArgs
			if up.name == "completions" {
				call = "#callns crm.search " + crmArgs
			}
			deferred := param.Override[responses.ToolUnionParam](json.RawMessage(`{"type":"namespace","name":"crm","description":"The customer database.","defer_loading":true,` +
				`"tools":[{"type":"function","name":"search","description":"Finds a customer.","parameters":{"type":"object","properties":{"q":{"type":"string"}}}}]}`))
			resp, _ := streamResponse(t, h, responses.ResponseNewParams{
				Model: openai.ChatModel("mock-model"),
				Input: textInput("#call tool_search {\"query\": \"customer database\"}\n#then\n" + call),
				Tools: []responses.ToolUnionParam{deferred, {OfToolSearch: &responses.ToolSearchToolParam{}}},
			})
			reqs := h.Mock.Requests()
			if len(reqs) != 2 {
				t.Fatalf("%d upstream requests, want 2", len(reqs))
			}
			declared := func(req mockllm.Request) string {
				if req.Completion != nil {
					text, _, _ := strings.Cut(req.Completion.PromptText, "<|start|>user")
					return text
				}
				return strings.Join(offeredNames(req), ",")
			}
			if d := declared(reqs[0]); strings.Contains(d, "type search =") || strings.Contains(d, "crm__search") || strings.Contains(d, "namespace crm") {
				t.Errorf("the first prompt declares the deferred namespace: %s", d)
			}
			if d := declared(reqs[1]); !strings.Contains(d, "crm__search") && !strings.Contains(d, "namespace crm") {
				t.Errorf("the second prompt does not declare the found namespace: %s", d)
			}
			last := resp.Output[len(resp.Output)-1]
			if last.Type != "function_call" || last.AsFunctionCall().Name != "search" || last.AsFunctionCall().Namespace != "crm" {
				t.Errorf("last item %s", last.RawJSON())
			}
		})
	}
}

// TestOpenResponsesDialectSearches: in the Open Responses dialect the web
// search and tool search items and events, which are not in the core
// schema, carry the vendor prefix; a client-run tool search is answered
// with the prefixed tool_search_output, and the tool it found is called.
// The harness validates every event and body against the schema.
func TestOpenResponsesDialectSearches(t *testing.T) {
	h := newHarness(t, &harnessOptions{Dialect: loomresponses.DialectOpenResponses,
		ToolProviders: []engine.ToolProvider{websearch.New(nil), toolsearch.Provider{}}})
	body, _ := json.Marshal(map[string]any{
		"model": mockllm.DefaultModel, "stream": true,
		"input": "#call web_search {\"query\":\"x\"}\n#then\n#call tool_search {\"query\":\"orders\"}\n#then\n#call lookup_order {}",
		"tools": []any{map[string]any{"type": "web_search"}, map[string]any{"type": "tool_search", "execution": "client"}},
	})
	status, raw := postStream(t, h.BaseURL+"/responses", string(body), nil)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, raw)
	}
	var types []string
	var final struct {
		ID     string `json:"id"`
		Output []struct {
			Type, Status string
			CallID       string `json:"call_id"`
		} `json:"output"`
	}
	for _, ev := range parseSSE(t, raw) {
		types = append(types, ev.Type)
		if ev.Type == "response.completed" {
			var c struct {
				Response json.RawMessage `json:"response"`
			}
			json.Unmarshal(ev.Data, &c)
			json.Unmarshal(c.Response, &final)
		}
	}
	for _, want := range []string{"loom:response.web_search_call.in_progress", "loom:response.web_search_call.searching"} {
		if !slices.Contains(types, want) {
			t.Errorf("events %v lack %s", types, want)
		}
	}
	if len(final.Output) != 2 || final.Output[0].Type != "loom:web_search_call" || final.Output[0].Status != "failed" ||
		final.Output[1].Type != "loom:tool_search_call" {
		t.Fatalf("output %+v", final.Output)
	}
	next, _ := json.Marshal(map[string]any{
		"model": mockllm.DefaultModel, "previous_response_id": final.ID,
		"tools": []any{map[string]any{"type": "web_search"}, map[string]any{"type": "tool_search", "execution": "client"}},
		"input": []any{map[string]any{"type": "loom:tool_search_output", "call_id": final.Output[1].CallID, "execution": "client",
			"tools": []any{map[string]any{"type": "function", "name": "lookup_order", "parameters": map[string]any{"type": "object"}}}}},
	})
	status, raw = doRaw(t, http.MethodPost, h.BaseURL+"/responses", string(next))
	if status != http.StatusOK || !strings.Contains(string(raw), `"name":"lookup_order"`) {
		t.Errorf("follow-up %d: %s", status, raw)
	}
	requireCaptured(t, h, 1, len(types))
}
