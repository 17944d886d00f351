package completions

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/responses"
)

// Two MCP servers, "docs" and "wiki", each with a tool named "search",
// offered as docs__search and wiki__search (tools/mcp's prefixes).
func searchTool(offered, desc string) responses.Tool {
	return responses.Tool{Type: responses.ToolFunction, Name: offered, Description: &desc,
		Parameters: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`)}
}

func twoServers(r *model.Request) {
	r.Tools = append(r.Tools, searchTool("wiki__search", "Search the wiki."), searchTool("docs__search", "Search the docs."))
	r.Namespaces = map[string]model.ToolRef{
		"docs__search": {Namespace: "docs", Name: "search"},
		"wiki__search": {Namespace: "wiki", Name: "search"},
	}
}

const (
	// Namespaces render sorted by name, in the system message.
	serversDecl = "# Tools\n\n" +
		"## docs\n\nnamespace docs {\n\n// Search the docs.\ntype search = (_: {\nq: string,\n}) => any;\n\n} // namespace docs\n\n" +
		"## wiki\n\nnamespace wiki {\n\n// Search the wiki.\ntype search = (_: {\nq: string,\n}) => any;\n\n} // namespace wiki"
	// Calls to server namespaces go to commentary, so it is offered; the
	// note about 'functions' is there only when functions are.
	channelsServers = "# Valid channels: analysis, commentary, final. Channel must be included for every message.<|end|>"
)

func TestRenderServerNamespaces(t *testing.T) {
	tests := []struct {
		name string
		req  func(r *model.Request)
		want string
	}{{
		name: "two servers, same tool name: two namespaces, no functions",
		req:  twoServers,
		want: sysHead + "Reasoning: medium\n\n" + serversDecl + "\n\n" + channelsServers +
			"<|start|>user<|message|>Hi<|end|><|start|>assistant",
	}, {
		name: "with a function: functions in the developer message, servers in the system message",
		req: func(r *model.Request) {
			r.Tools = []responses.Tool{weatherTool()}
			twoServers(r)
		},
		want: sysHead + "Reasoning: medium\n\n" + serversDecl + "\n\n" + channelsTools +
			"<|start|>developer<|message|>" + weatherDecl + "<|end|>" +
			"<|start|>user<|message|>Hi<|end|><|start|>assistant",
	}, {
		name: "call and output in history render under the namespace",
		req: func(r *model.Request) {
			twoServers(r)
			r.Items = append(r.Items,
				callItem("c1", "wiki__search", `{"q":"loom"}`),
				outputItem("c1", "wiki result"),
				callItem("c2", "docs__search", `{"q":"loom"}`),
				outputItem("c2", "docs result"))
		},
		want: sysHead + "Reasoning: medium\n\n" + serversDecl + "\n\n" + channelsServers +
			"<|start|>user<|message|>Hi<|end|>" +
			"<|start|>assistant to=wiki.search<|channel|>commentary <|constrain|>json<|message|>{\"q\":\"loom\"}<|call|>" +
			"<|start|>wiki.search to=assistant<|channel|>commentary<|message|>wiki result<|end|>" +
			"<|start|>assistant to=docs.search<|channel|>commentary <|constrain|>json<|message|>{\"q\":\"loom\"}<|call|>" +
			"<|start|>docs.search to=assistant<|channel|>commentary<|message|>docs result<|end|>" +
			"<|start|>assistant",
	}, {
		name: "tools hidden (tool_choice none): no declaration, history keeps its recipients",
		req: func(r *model.Request) {
			twoServers(r)
			r.ToolChoice = responses.ToolChoiceNone
			r.Items = append(r.Items, callItem("c1", "docs__search", `{}`), outputItem("c1", "ok"))
		},
		want: sysHead + "Reasoning: medium\n\n" + channelsNoTools +
			"<|start|>user<|message|>Hi<|end|>" +
			"<|start|>assistant to=docs.search<|channel|>commentary <|constrain|>json<|message|>{}<|call|>" +
			"<|start|>docs.search to=assistant<|channel|>commentary<|message|>ok<|end|>" +
			"<|start|>assistant",
	}, {
		name: "a client's namespace: declared in the developer message with its functions (sorted by name), called as NS.tool",
		req: func(r *model.Request) {
			r.Tools = []responses.Tool{weatherTool(), searchTool("crm__search", "Search the CRM.")}
			r.Namespaces = map[string]model.ToolRef{"crm__search": {Namespace: "crm", Name: "search", Client: true, Description: "The customer database."}}
			r.Items = append(r.Items, callItem("c1", "crm__search", `{"q":"ada"}`), outputItem("c1", "found"))
		},
		want: sysHead + "Reasoning: medium\n\n" + channelsTools +
			"<|start|>developer<|message|># Tools\n\n## crm\n\n// The customer database.\nnamespace crm {\n\n// Search the CRM.\ntype search = (_: {\nq: string,\n}) => any;\n\n} // namespace crm\n\n" +
			strings.TrimPrefix(weatherDecl, "# Tools\n\n") + "<|end|>" +
			"<|start|>user<|message|>Hi<|end|>" +
			"<|start|>assistant to=crm.search<|channel|>commentary <|constrain|>json<|message|>{\"q\":\"ada\"}<|call|>" +
			"<|start|>crm.search to=assistant<|channel|>commentary<|message|>found<|end|>" +
			"<|start|>assistant",
	}, {
		name: "a namespace named like a reserved one stays a function",
		req: func(r *model.Request) {
			r.Tools = []responses.Tool{searchTool("functions__search", "Search.")}
			r.Namespaces = map[string]model.ToolRef{"functions__search": {Namespace: "functions", Name: "search"}}
		},
		want: sysHead + "Reasoning: medium\n\n" + channelsTools +
			"<|start|>developer<|message|># Tools\n\n## functions\n\nnamespace functions {\n\n// Search.\n" +
			"type functions__search = (_: {\nq: string,\n}) => any;\n\n} // namespace functions<|end|>" +
			"<|start|>user<|message|>Hi<|end|><|start|>assistant",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := userReq("Hi")
			tt.req(req)
			if got := renderText(t, req, testOptions()); got != tt.want {
				t.Errorf("rendered\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}

func TestNamespacedUnusable(t *testing.T) {
	req := userReq("Hi")
	req.Namespaces = map[string]model.ToolRef{
		"a__x":  {Namespace: "a", Name: "x"},
		"a___x": {Namespace: "a", Name: "x"}, // same recipient: neither may use it
		"b__y":  {Namespace: "b.c", Name: "y"},
		"p__z":  {Namespace: "python", Name: "z"},
		"s__t":  {Namespace: "s s", Name: "t"},
		"ok__t": {Namespace: "ok-1", Name: "t"},
	}
	got := namespaced(req, testOptions())
	want := map[string]string{"ok__t": "ok-1.t"}
	if len(got) != len(want) || got["ok__t"] != want["ok__t"] {
		t.Errorf("namespaced = %v, want %v", got, want)
	}
}

// TestRoutingNamespacedCall: a call to "NS.tool" goes out under the
// offered name, whichever header order the model writes; and the call,
// fed back as history, renders as the model wrote it.
func TestRoutingNamespacedCall(t *testing.T) {
	texts := []string{
		`<|channel|>commentary to=wiki.search <|constrain|>json<|message|>{"q":"loom"}<|call|>`,
		`<|channel|>analysis<|message|>Look it up.<|end|><|start|>assistant to=wiki.search<|channel|>commentary <|constrain|>json<|message|>{"q":"loom"}<|call|>`,
	}
	for _, text := range texts {
		for _, ids := range []bool{true, false} {
			srv := sseServer(t, completion{text: text, ids: ids}.stream(t))
			req := userReq("hi")
			twoServers(req)
			deltas, err := collect(context.Background(), New(srv.URL+"/v1", "", testOptions()), req)
			if err != nil {
				t.Fatalf("Stream: %v", err)
			}
			checkCallDeltas(t, deltas)
			got := slices.DeleteFunc(summary(deltas), func(s string) bool {
				return strings.HasPrefix(s, "usage") || strings.HasPrefix(s, "reasoning")
			})
			want := []string{`call 0 wiki__search:{"q":"loom"}`, "finish:tool_calls"}
			if !slices.Equal(got, want) {
				t.Errorf("ids=%v deltas %q, want %q", ids, got, want)
			}
		}
	}

	// Without the namespace the recipient stays as written (and a
	// "functions." call to an offered name still resolves).
	srv := sseServer(t, completion{text: `<|channel|>commentary to=functions.docs__search <|constrain|>json<|message|>{}<|call|>`}.stream(t))
	req := userReq("hi")
	twoServers(req)
	deltas, err := collect(context.Background(), New(srv.URL+"/v1", "", testOptions()), req)
	if err != nil {
		t.Fatal(err)
	}
	if s := summary(deltas); !slices.Contains(s, "call 0 docs__search:{}") {
		t.Errorf("functions.docs__search routed as %q", s)
	}
}

// TestNamespacedRoundTrip: the call the router reports, stored as a
// function_call item with its output, renders with the recipient the
// model used, and the tool's answer comes from the same name.
func TestNamespacedRoundTrip(t *testing.T) {
	call := `<|channel|>commentary to=docs.search <|constrain|>json<|message|>{"q":"x"}<|call|>`
	srv := sseServer(t, completion{text: call, ids: true}.stream(t))
	req := userReq("hi")
	twoServers(req)
	deltas, err := collect(context.Background(), New(srv.URL+"/v1", "", testOptions()), req)
	if err != nil {
		t.Fatal(err)
	}
	var id, name, args string
	for _, d := range deltas {
		if d.Kind == model.DeltaToolCall {
			if d.ToolName != "" {
				id, name = d.ToolCallID, d.ToolName
			}
			args += d.ToolArguments
		}
	}
	if name != "docs__search" {
		t.Fatalf("tool name %q, want docs__search", name)
	}
	req.Items = append(req.Items, callItem(id, name, args), outputItem(id, "found"))
	text := renderText(t, req, testOptions())
	want := "<|start|>user<|message|>hi<|end|>" +
		"<|start|>assistant to=docs.search<|channel|>commentary <|constrain|>json<|message|>{\"q\":\"x\"}<|call|>" +
		"<|start|>docs.search to=assistant<|channel|>commentary<|message|>found<|end|><|start|>assistant"
	if !strings.HasSuffix(text, want) {
		t.Errorf("history renders\n%q\nwant suffix\n%q", text, want)
	}
	msgs, err := Conversation(req, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	last := msgs[len(msgs)-1]
	if last.Author.Name != "docs.search" || msgs[len(msgs)-2].Recipient != "docs.search" {
		t.Errorf("call to %q answered by %q, want docs.search for both", msgs[len(msgs)-2].Recipient, last.Author.Name)
	}
}
