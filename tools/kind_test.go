package tools

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/loomgate/loom/responses"
)

// Each kind's stored items go back to the model as a function call and
// its output, whatever the client saw; bookkeeping items are left out, and
// so are calls nothing answered.
func TestHistoryByKind(t *testing.T) {
	errMsg, code := "boom", "print(1)"
	fc := func(id, callID, name, args string) responses.Item {
		return responses.Item{Type: responses.ItemFunctionCall, ID: id, Call: &responses.ItemCall{CallID: callID, Name: name, Arguments: args}}
	}
	out := func(callID, output string) responses.Item {
		return responses.Item{Type: responses.ItemFunctionCallOutput, Call: &responses.ItemCall{CallID: callID, Output: json.RawMessage(output)}}
	}
	tests := []struct {
		name string
		in   responses.Item
		want []responses.Item
	}{
		{"message stays", responses.Item{Type: responses.ItemMessage, Role: "user"}, []responses.Item{{Type: responses.ItemMessage, Role: "user"}}},
		{"function call stays", fc("fc_1", "c1", "f", "{}"), []responses.Item{fc("fc_1", "c1", "f", "{}")}},
		{"refused function call dropped", responses.Item{Type: responses.ItemFunctionCall, Call: &responses.ItemCall{CallID: "c1"}, Status: responses.StatusIncomplete}, nil},
		{"mcp call", responses.Item{Type: responses.ItemMCPCall, ID: "mcp_1", Call: &responses.ItemCall{Name: "search", Arguments: `{"q":1}`, Output: json.RawMessage(`"found"`)}},
			[]responses.Item{fc("mcp_1", "mcp_1", "search", `{"q":1}`), out("mcp_1", `"found"`)}},
		{"failed mcp call", responses.Item{Type: responses.ItemMCPCall, ID: "mcp_2", Call: &responses.ItemCall{Name: "search"}, Tool: &responses.ItemTool{Error: &errMsg}},
			[]responses.Item{fc("mcp_2", "mcp_2", "search", ""), out("mcp_2", `"error: boom"`)}},
		{"mcp call waiting for input dropped", responses.Item{Type: responses.ItemMCPCall, ID: "mcp_3", Status: responses.StatusIncomplete}, nil},
		{"approval request dropped", responses.Item{Type: responses.ItemMCPApprovalRequest, ID: "mcpr_1"}, nil},
		{"list tools dropped", responses.Item{Type: responses.ItemMCPListTools, ID: "mcpl_1"}, nil},
		{"code interpreter call", responses.Item{Type: responses.ItemCodeInterpreterCall, ID: "ci_1", Tool: &responses.ItemTool{Code: &code, Outputs: json.RawMessage(`[{"type":"logs","logs":"1\n"}]`)}},
			[]responses.Item{fc("ci_1", "ci_1", "python", `{"code":"print(1)"}`), out("ci_1", `"1\n"`)}},
		{"shell call", responses.Item{Type: responses.ItemShellCall, ID: "sh_1", Call: &responses.ItemCall{CallID: "c2"}, Tool: &responses.ItemTool{Action: json.RawMessage(`{"commands":["ls"]}`)}},
			[]responses.Item{fc("sh_1", "c2", "shell", `{"commands":["ls"]}`)}},
		{"shell output", responses.Item{Type: responses.ItemShellCallOutput, Call: &responses.ItemCall{CallID: "c2", Output: json.RawMessage(`[{"stdout":"a"}]`)}},
			[]responses.Item{out("c2", `"[{\"stdout\":\"a\"}]"`)}},
		{"local shell call", responses.Item{Type: responses.ItemLocalShellCall, ID: "lsh_1", Call: &responses.ItemCall{CallID: "c3"}, Tool: &responses.ItemTool{Action: json.RawMessage(`{"type":"exec","command":["ls"],"env":{}}`)}},
			[]responses.Item{fc("lsh_1", "c3", "local_shell", `{"command":["ls"],"env":{}}`)}},
		{"local shell output", responses.Item{Type: responses.ItemLocalShellCallOutput, Call: &responses.ItemCall{CallID: "c3", Output: json.RawMessage(`"ok"`)}},
			[]responses.Item{out("c3", `"ok"`)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := History([]responses.Item{tt.in}); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("History(%s)\n got %+v\nwant %+v", tt.in.Type, got, tt.want)
			}
		})
	}
}

// The code of a python call streams as the client sees it: raw code as it
// comes, a {"code": ...} object held back and decoded once complete.
func TestCodeArguments(t *testing.T) {
	tests := []struct {
		name    string
		pieces  []string
		streams []string
		flush   string
	}{
		{"raw code", []string{" ", "print(", "1)"}, []string{"", " print(", "1)"}, ""},
		{"json object", []string{`{"co`, `de": "x = 1"}`}, []string{"", ""}, "x = 1"},
		{"only blanks", []string{" "}, []string{""}, " "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := KindCodeInterpreter.NewArguments()
			for i, p := range tt.pieces {
				if got := a.Delta(p); got != tt.streams[i] {
					t.Errorf("Delta(%q) = %q, want %q", p, got, tt.streams[i])
				}
			}
			if got := a.Flush(); got != tt.flush {
				t.Errorf("Flush = %q, want %q", got, tt.flush)
			}
			want := ""
			for _, p := range tt.pieces {
				want += p
			}
			if a.Model() != want {
				t.Errorf("Model = %q, want the arguments as written %q", a.Model(), want)
			}
		})
	}
}

// Client-run kinds are found by their request tool type; an item type is
// registered once.
func TestKindRegistry(t *testing.T) {
	if ClientKind(responses.ToolLocalShell) != KindLocalShell || ClientKind(responses.ToolMCP) != nil || ClientKind("") != nil {
		t.Error("ClientKind finds the wrong kinds")
	}
	if !ClientCall(responses.ItemLocalShellCall) || !ClientOutput(responses.ItemLocalShellCallOutput) || ClientCall(responses.ItemMCPCall) {
		t.Error("client calls and outputs misreported")
	}
	defer func() {
		if recover() == nil {
			t.Error("a second kind of item type mcp_call was registered")
		}
	}()
	Register(&Kind{ItemType: responses.ItemMCPCall})
}

// A server that declares nothing is an MCP-like server whose names are its
// own, needing no approval, its elicitations answered by the client.
func TestZeroCapabilities(t *testing.T) {
	var c Capabilities
	if c.KindOf() != KindMCP || c.OwnName("x") != "x" || c.Approval("x") || c.ElicitationPolicy() != ElicitClient || string(c.RootsResult()) != `{"roots":[]}` {
		t.Errorf("zero capabilities: %+v", c)
	}
	c = Capabilities{ToolName: func(s string) string { return s[3:] }, NeedsApproval: func(tool string) bool { return tool == "rm" }, Elicitation: "bogus"}
	if !c.Approval("A__rm") || c.Approval("A__ls") || c.ElicitationPolicy() != ElicitClient {
		t.Errorf("declared capabilities not applied: %+v", c)
	}
}
