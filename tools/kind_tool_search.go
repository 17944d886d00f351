package tools

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/loomgate/loom/responses"
)

// KindToolSearch is a tool search's calls: the model searches the tools
// marked defer_loading, which are not in the prompt, and the tools found
// are offered from its next turn on. loom runs the search (tools/toolsearch)
// and reports it as a tool_search_call and a tool_search_output holding the
// tools found; with execution "client" the call goes to the client as a
// tool_search_call, and the client answers with a tool_search_output.
var KindToolSearch = Register(&Kind{
	ToolType:   responses.ToolToolSearch,
	ItemType:   responses.ItemToolSearchCall,
	OutputType: responses.ItemToolSearchOutput,
	Deferred:   true,
	Forgets:    true,
	ClientRuns: func(t responses.Tool) bool { return responses.DecodeToolSearchTool(t.Raw).ClientRun() },
	Define: func(t responses.Tool) Definition {
		cfg := responses.DecodeToolSearchTool(t.Raw)
		d := Definition{Name: ToolSearchFunction, Description: ToolSearchDescription, Parameters: json.RawMessage(ToolSearchParameters)}
		if cfg.Description != nil && *cfg.Description != "" {
			d.Description = *cfg.Description
		}
		if len(cfg.Parameters) > 0 && string(cfg.Parameters) != "null" {
			d.Parameters = cfg.Parameters
		}
		return d
	},
	ClientItem: func(callID, arguments string, newID func(string) string) responses.Item {
		return responses.Item{Type: responses.ItemToolSearchCall, ID: newID("tsc"), Call: &responses.ItemCall{CallID: callID, Arguments: arguments},
			Tool: &responses.ItemTool{Execution: responses.ExecutionClient}, Status: responses.StatusCompleted}
	},
	Items: func(c RanCall, res Result, text string, newID func(string) string) []responses.Item {
		found := res.Report
		if len(found) == 0 {
			found = json.RawMessage("[]")
		}
		return []responses.Item{
			{Type: responses.ItemToolSearchCall, ID: newID("tsc"), Call: &responses.ItemCall{CallID: c.CallID, Arguments: c.Arguments},
				Tool: &responses.ItemTool{Execution: responses.ExecutionServer}, Status: responses.StatusCompleted},
			{Type: responses.ItemToolSearchOutput, ID: newID("tso"), Call: &responses.ItemCall{CallID: c.CallID}, Tool: &responses.ItemTool{Tools: found, Execution: responses.ExecutionServer},
				Status: responses.StatusCompleted},
		}
	},
	History: map[string]func(responses.Item) []responses.Item{
		responses.ItemToolSearchCall: func(it responses.Item) []responses.Item {
			return []responses.Item{{Type: responses.ItemFunctionCall, ID: it.ID, Call: &responses.ItemCall{CallID: it.CallFields().CallID, Name: ToolSearchFunction, Arguments: it.CallFields().Arguments}}}
		},
		responses.ItemToolSearchOutput: func(it responses.Item) []responses.Item {
			out, _ := json.Marshal(FoundText(FoundTools(it)))
			return []responses.Item{{Type: responses.ItemFunctionCallOutput, Call: &responses.ItemCall{CallID: it.CallFields().CallID, Output: out}}}
		},
	},
})

// The function a tool search is offered to the model as.
const (
	ToolSearchFunction    = "tool_search"
	ToolSearchDescription = "Searches the tools available for this task that are not listed yet, by what they do. " +
		"The tools found can be called from your next step on."
	ToolSearchParameters = `{"type":"object","properties":{"query":{"type":"string","description":"words describing the tool you need"}},"required":["query"]}`
)

// FoundText is what the model reads of a tool search's result.
func FoundText(found []responses.Tool) string {
	if len(found) == 0 {
		return "No tools matched. Search again with other words, or go on without a tool."
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Found %d tools; call them from your next step on:\n", len(found))
	for _, t := range found {
		name, desc := t.Name, ""
		if t.Description != nil {
			desc = *t.Description
		}
		switch t.Type {
		case responses.ToolMCP:
			if m, _ := responses.ParseMCPTool(t, 0); m != nil {
				name, desc = "the tools of MCP server "+m.ServerLabel, m.ServerDescription
			}
		case responses.ToolNamespace:
			inner, _ := t.NamespaceTools()
			names := make([]string, len(inner))
			for i, it := range inner {
				names[i] = responses.NamespacedName(t.Name, it.Name)
			}
			name = "namespace " + t.Name + " (" + strings.Join(names, ", ") + ")"
		}
		b.WriteString("- " + name)
		if desc != "" {
			b.WriteString(": " + desc)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// Found adds the tools that the tool_search_output items among items made
// callable: the offered names of functions (a namespace's under their
// namespaced names) to functions, MCP server labels to servers.
func Found(items []responses.Item, functions, servers map[string]bool) {
	for i := range items {
		if items[i].Type != responses.ItemToolSearchOutput {
			continue
		}
		for _, t := range FoundTools(items[i]) {
			switch t.Type {
			case responses.ToolMCP:
				if m, _ := responses.ParseMCPTool(t, 0); m != nil {
					servers[m.ServerLabel] = true
				}
			case responses.ToolNamespace:
				inner, _ := t.NamespaceTools()
				for _, it := range inner {
					functions[responses.NamespacedName(t.Name, it.Name)] = true
				}
			default:
				// A function, or a client-run kind's tool (custom).
				functions[t.Name] = true
			}
		}
	}
}

// FoundTools returns the tools a tool_search_output item lists.
func FoundTools(it responses.Item) []responses.Tool {
	var found []responses.Tool
	json.Unmarshal(it.ToolFields().Tools, &found)
	return found
}

// ClientFoundFunctions returns the function tools that client-run tool
// searches among items found, as the client defined them.
func ClientFoundFunctions(items []responses.Item) []Definition {
	var out []Definition
	for i := range items {
		if items[i].Type != responses.ItemToolSearchOutput || items[i].ToolFields().Execution != responses.ExecutionClient {
			continue
		}
		for _, t := range FoundTools(items[i]) {
			if t.Type == responses.ToolFunction {
				d := FunctionDefinition(t)
				d.Deferred = false
				out = append(out, d)
			}
		}
	}
	return out
}
