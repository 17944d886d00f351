package tools

import (
	"encoding/json"

	"github.com/loomgate/loom/responses"
)

// KindCustom is the client's custom tools: free-text input instead of
// JSON arguments. The model is offered a custom tool as a function taking
// one string, input (on harmony too: gpt-oss was trained on function
// tools, and Codex offers it apply_patch in this form); the client sees a
// custom_tool_call item whose raw input streams as the model writes it,
// and answers with a custom_tool_call_output.
var KindCustom = Register(&Kind{
	ToolType:     responses.ToolCustom,
	ItemType:     responses.ItemCustomToolCall,
	OutputType:   responses.ItemCustomToolCallOutput,
	NewArguments: func() Arguments { return &fieldArgs{field: customInputField} },
	Define:       customDefinition,
	History: map[string]func(responses.Item) []responses.Item{
		responses.ItemCustomToolCall: func(it responses.Item) []responses.Item {
			args, _ := json.Marshal(map[string]string{customInputField: it.ToolFields().Input})
			return []responses.Item{{Type: responses.ItemFunctionCall, ID: it.ID, Call: &responses.ItemCall{CallID: it.CallFields().CallID, Name: offeredName(it.ToolFields().Namespace, it.CallFields().Name), Arguments: string(args)}}}
		},
		responses.ItemCustomToolCallOutput: func(it responses.Item) []responses.Item {
			return []responses.Item{{Type: responses.ItemFunctionCallOutput, Call: &responses.ItemCall{CallID: it.CallFields().CallID, Output: it.CallFields().Output}}}
		},
	},
})

const customInputField = "input"

// customDefinition is the function a custom tool is offered as. A regex
// format becomes the string's JSON Schema pattern, which engines that
// decode tool calls under the schema (vLLM's structured outputs with a
// required or named tool choice) enforce; a lark grammar, which no
// engine's function calling takes, is shown to the model in the
// description. Either way the model is told what the input must match.
func customDefinition(t responses.Tool) Definition {
	d := Definition{Name: t.Name}
	if t.Description != nil {
		d.Description = *t.Description
	}
	input := map[string]string{"type": "string", "description": "The tool's input, as free text."}
	if f, err := t.CustomFormat(); err == nil && f != nil && f.Type == "grammar" {
		if f.Syntax == "regex" {
			input["pattern"] = f.Definition
		}
		if d.Description != "" {
			d.Description += "\n\n"
		}
		d.Description += "The input must match this " + f.Syntax + " grammar:\n" + f.Definition
	}
	schema, _ := json.Marshal(map[string]any{
		"type":                 "object",
		"properties":           map[string]any{customInputField: input},
		"required":             []string{customInputField},
		"additionalProperties": false,
	})
	d.Parameters = schema
	return d
}

// offeredName is the name a tool is offered to the model under: its own
// name, or, in a namespace, the namespaced name (see
// responses.NamespacedName).
func offeredName(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return responses.NamespacedName(namespace, name)
}
