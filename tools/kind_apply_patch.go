package tools

import (
	"encoding/json"

	"github.com/loomgate/loom/responses"
)

// KindApplyPatch is the apply_patch tool, the client's file editor: the
// model's edit goes out as an apply_patch_call item once the turn is over
// (operation create_file or update_file with a V4A diff, or delete_file)
// and the client answers with an apply_patch_call_output. The model is
// offered it as a function of this name taking the operation.
var KindApplyPatch = Register(&Kind{
	ToolType:   responses.ToolApplyPatch,
	ItemType:   responses.ItemApplyPatchCall,
	OutputType: responses.ItemApplyPatchCallOutput,
	Deferred:   true,
	Define:     func(responses.Tool) Definition { return applyPatchDefinition },
	ClientItem: func(callID, arguments string, newID func(string) string) responses.Item {
		return responses.Item{Type: responses.ItemApplyPatchCall, ID: newID("apc"), Call: &responses.ItemCall{CallID: callID},
			Tool: &responses.ItemTool{Operation: patchOperation(arguments)}, Status: responses.StatusCompleted}
	},
	History: map[string]func(responses.Item) []responses.Item{
		responses.ItemApplyPatchCall: func(it responses.Item) []responses.Item {
			return []responses.Item{{Type: responses.ItemFunctionCall, ID: it.ID, Call: &responses.ItemCall{CallID: it.CallFields().CallID, Name: applyPatchName, Arguments: string(it.ToolFields().Operation)}}}
		},
		responses.ItemApplyPatchCallOutput: func(it responses.Item) []responses.Item {
			// The model reads the client's words, and whether the edit
			// failed when the client said only that.
			text := it.OutputString()
			if it.Status == "failed" && text == "" {
				text = "error: the patch was not applied"
			}
			out, _ := json.Marshal(text)
			return []responses.Item{{Type: responses.ItemFunctionCallOutput, Call: &responses.ItemCall{CallID: it.CallFields().CallID, Output: out}}}
		},
	},
})

const applyPatchName = "apply_patch"

// applyPatchDefinition is the function the model is offered apply_patch
// as: one file operation a call.
var applyPatchDefinition = Definition{
	Name: applyPatchName,
	Description: "Edits one file on the user's machine. type create_file writes a new file at path from diff " +
		"(every line prefixed with +); update_file changes the file at path by diff, a V4A diff " +
		"(@@ context headers, lines prefixed with space, - or +); delete_file removes the file at path.",
	Parameters: json.RawMessage(`{"type":"object","properties":{` +
		`"type":{"type":"string","enum":["create_file","update_file","delete_file"]},` +
		`"path":{"type":"string"},` +
		`"diff":{"type":"string"}},` +
		`"required":["type","path"]}`),
}

// patchOperation turns the model's arguments into the operation of an
// apply_patch_call: the type and path, and the diff of a create or an
// update. Arguments that are no operation go to the client as an
// update_file whose diff is what the model wrote, which the client
// refuses and reports back to the model.
func patchOperation(arguments string) json.RawMessage {
	var op struct {
		Type string  `json:"type"`
		Path string  `json:"path"`
		Diff *string `json:"diff,omitempty"`
	}
	if json.Unmarshal([]byte(arguments), &op) != nil {
		op.Type, op.Diff = responses.PatchUpdateFile, &arguments
	}
	switch op.Type {
	case responses.PatchCreateFile, responses.PatchUpdateFile:
	case responses.PatchDeleteFile:
		op.Diff = nil
	default:
		op.Type = responses.PatchUpdateFile
	}
	if op.Type != responses.PatchDeleteFile && op.Diff == nil {
		op.Diff = new(string)
	}
	b, _ := json.Marshal(op)
	return b
}
