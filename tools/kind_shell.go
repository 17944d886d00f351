package tools

import (
	"encoding/json"

	"github.com/loomgate/loom/responses"
)

// KindShell is the sandboxed shell's calls: reported once they ran, as a
// shell_call item with the action and a shell_call_output item with what
// each command printed. The model calls it as the shell function.
var KindShell = Register(&Kind{
	ItemType: responses.ItemShellCall,
	Deferred: true,
	Items: func(c RanCall, res Result, text string, newID func(string) string) []responses.Item {
		action := json.RawMessage(c.Arguments)
		if !json.Valid(action) {
			action, _ = json.Marshal(map[string]string{"invalid_arguments": c.Arguments})
		}
		call := responses.Item{Type: responses.ItemShellCall, ID: newID("sh"), Call: &responses.ItemCall{CallID: c.CallID}, Tool: &responses.ItemTool{Action: action}, Status: responses.StatusCompleted}
		var body struct {
			Output          json.RawMessage `json:"output"`
			MaxOutputLength *int            `json:"max_output_length"`
		}
		if json.Unmarshal(res.Structured, &body) != nil || len(body.Output) == 0 {
			// Bad arguments: no command ran; the output says why.
			body.Output, _ = json.Marshal([]map[string]any{{"stdout": "", "stderr": res.Text(), "outcome": map[string]any{"type": "exit", "exit_code": 2}}})
		}
		out := responses.Item{Type: responses.ItemShellCallOutput, ID: newID("sho"), Call: &responses.ItemCall{CallID: c.CallID, Output: body.Output},
			Tool: &responses.ItemTool{MaxOutputLength: body.MaxOutputLength}, Status: responses.StatusCompleted}
		return []responses.Item{call, out}
	},
	History: map[string]func(responses.Item) []responses.Item{
		responses.ItemShellCall: func(it responses.Item) []responses.Item {
			return []responses.Item{{Type: responses.ItemFunctionCall, ID: it.ID, Call: &responses.ItemCall{CallID: it.CallFields().CallID, Name: "shell", Arguments: string(it.ToolFields().Action)}}}
		},
		responses.ItemShellCallOutput: func(it responses.Item) []responses.Item {
			result, _ := json.Marshal(string(it.CallFields().Output))
			return []responses.Item{{Type: responses.ItemFunctionCallOutput, Call: &responses.ItemCall{CallID: it.CallFields().CallID, Output: result}}}
		},
	},
})
