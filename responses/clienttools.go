package responses

import (
	"encoding/json"
	"fmt"
	"strings"
)

// The tool types agent clients (Codex, the Agents SDK) send besides
// function: a namespace groups function and custom tools under one name;
// a custom tool takes free text instead of JSON arguments; apply_patch is
// the client's file editor. The client runs all of them.
const (
	ToolNamespace  = "namespace"
	ToolCustom     = "custom"
	ToolApplyPatch = "apply_patch"
)

// Item types of custom and apply_patch calls and of the client's answers.
// A call to a namespaced function is a function_call with Namespace set.
const (
	ItemCustomToolCall       = "custom_tool_call"
	ItemCustomToolCallOutput = "custom_tool_call_output"
	ItemApplyPatchCall       = "apply_patch_call"
	ItemApplyPatchCallOutput = "apply_patch_call_output"
)

// Events of a custom tool call's input, streamed as the model writes it.
const (
	EventCustomToolInputDelta = "response.custom_tool_call_input.delta"
	EventCustomToolInputDone  = "response.custom_tool_call_input.done"
)

// apply_patch operation types.
const (
	PatchCreateFile = "create_file"
	PatchUpdateFile = "update_file"
	PatchDeleteFile = "delete_file"
)

// NamespacedName is the name a tool of a namespace is offered under where
// the model has no namespaces (a chat upstream): the namespace and the
// tool's name joined by "__", the scheme MCP tools use, so that tools of
// two namespaces cannot collide.
func NamespacedName(namespace, name string) string { return namespace + "__" + name }

// CustomFormat is a custom tool's format: free text ("text", also when
// absent) or a grammar ("grammar", with Syntax lark or regex and its
// Definition).
type CustomFormat struct {
	Type       string `json:"type"`
	Syntax     string `json:"syntax,omitempty"`
	Definition string `json:"definition,omitempty"`
}

// NamespaceTools decodes the tools of a namespace tool.
func (t *Tool) NamespaceTools() ([]Tool, error) {
	var ns struct {
		Tools []Tool `json:"tools"`
	}
	if err := json.Unmarshal(t.Raw, &ns); err != nil {
		return nil, err
	}
	return ns.Tools, nil
}

// CustomFormat decodes a custom tool's format; nil means free text.
func (t *Tool) CustomFormat() (*CustomFormat, error) {
	var c struct {
		Format *CustomFormat `json:"format"`
	}
	if err := json.Unmarshal(t.Raw, &c); err != nil {
		return nil, err
	}
	return c.Format, nil
}

// unservedTools are tool types of the OpenAI API that loom will not
// serve, and why: they need OpenAI's own services or a model that can
// see a screen or draw.
var unservedTools = map[string]string{
	"file_search":          "it searches OpenAI-hosted vector stores",
	"computer":             "it needs a model trained to operate a screen",
	"computer_use_preview": "it needs a model trained to operate a screen",
	"image_generation":     "it needs an image model",
}

// unknownTool is the 400 for a tool type loom does not take.
func unknownTool(param, typ string) *APIError {
	if why, ok := unservedTools[typ]; ok {
		return Unsupported(param+".type", "tool type %q is not served by this server: %s", typ, why)
	}
	return BadRequest(param+".type", "unknown or unsupported tool type %q", typ)
}

// validateClientTool checks a namespace, custom or apply_patch tool and
// records the names it offers; handled is false for other types.
func validateClientTool(param string, t *Tool, names map[string]bool) (handled bool, err *APIError) {
	switch t.Type {
	case ToolApplyPatch:
		if names[ToolApplyPatch] {
			return true, BadRequest(param+".type", "apply_patch is given twice")
		}
		names[ToolApplyPatch] = true
		return true, nil
	case ToolCustom:
		return true, validateCustomTool(param, t, t.Name, names)
	case ToolNamespace:
		return true, validateNamespaceTool(param, t, names)
	}
	return false, nil
}

func validateNamespaceTool(param string, t *Tool, names map[string]bool) *APIError {
	if !validFunctionName(t.Name) || strings.Contains(t.Name, ".") {
		return BadRequest(param+".name", "namespace name must be 1-64 letters, digits, underscores or dashes")
	}
	inner, err := t.NamespaceTools()
	if err != nil || len(inner) == 0 {
		return BadRequest(param+".tools", "a namespace needs a list of function or custom tools")
	}
	for j := range inner {
		p := fmt.Sprintf("%s.tools[%d]", param, j)
		it := &inner[j]
		if err := checkAsync(p, it); err != nil {
			return err
		}
		offered := NamespacedName(t.Name, it.Name)
		switch it.Type {
		case ToolFunction:
			if err := validateFunctionTool(func() string { return p }, it, offered, names); err != nil {
				return err
			}
		case ToolCustom:
			if err := validateCustomTool(p, it, offered, names); err != nil {
				return err
			}
		default:
			return BadRequest(p+".type", "a namespace holds function and custom tools, not %q", it.Type)
		}
	}
	return nil
}

func validateCustomTool(param string, t *Tool, offered string, names map[string]bool) *APIError {
	if err := checkToolName(func() string { return param }, t.Name, offered, names); err != nil {
		return err
	}
	f, err := t.CustomFormat()
	if err != nil {
		return BadRequest(param+".format", "format must be {\"type\":\"text\"} or {\"type\":\"grammar\",\"syntax\":...,\"definition\":...}")
	}
	if f == nil || f.Type == "text" {
		return nil
	}
	if f.Type != "grammar" {
		return BadRequest(param+".format.type", "format.type must be text or grammar")
	}
	if f.Syntax != "lark" && f.Syntax != "regex" {
		return BadRequest(param+".format.syntax", "format.syntax must be lark or regex")
	}
	if strings.TrimSpace(f.Definition) == "" {
		return BadRequest(param+".format.definition", "a grammar format needs its definition")
	}
	return nil
}

// validateFunctionTool checks a function tool offered under offered.
// param names the tool; it is called only for a fault, so that a request
// of many tools does not format a name for each.
func validateFunctionTool(param func() string, t *Tool, offered string, names map[string]bool) *APIError {
	if err := checkToolName(param, t.Name, offered, names); err != nil {
		return err
	}
	if len(t.Parameters) > 0 && string(t.Parameters) != "null" {
		return checkSchema(t.Parameters, func() string { return param() + ".parameters" }, "parameters must be a JSON Schema object")
	}
	return nil
}

// checkToolName checks a tool's own name and that the name it is offered
// under is not taken.
func checkToolName(param func() string, name, offered string, names map[string]bool) *APIError {
	if !validFunctionName(name) {
		return BadRequest(param()+".name", "tool name must be 1-64 letters, digits, underscores or dashes")
	}
	if offered != name && !validFunctionName(offered) {
		// The model is offered the namespaced name, which has the limit
		// (a name offered as it is was checked just above).
		return BadRequest(param()+".name", "with its namespace the tool is offered as %q, which is longer than 64 characters", offered)
	}
	// One hash of the name: a name already there leaves the map's size
	// as it was.
	n := len(names)
	if names[offered] = true; len(names) == n {
		return BadRequest(param()+".name", "duplicate tool name %q", offered)
	}
	return nil
}

// Input checks of the calls and outputs of these tools, as a client
// resends them with the history.

func (it *Item) validateCustomToolCall(param string) *APIError {
	if it.CallFields().CallID == "" {
		return BadRequest(param+".call_id", "custom_tool_call needs a call_id")
	}
	if it.CallFields().Name == "" {
		return BadRequest(param+".name", "custom_tool_call needs a name")
	}
	return nil
}

func (it *Item) validateApplyPatchCall(param string) *APIError {
	if it.CallFields().CallID == "" {
		return BadRequest(param+".call_id", "apply_patch_call needs a call_id")
	}
	var op struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(it.ToolFields().Operation, &op) != nil {
		return BadRequest(param+".operation", "apply_patch_call needs an operation")
	}
	switch op.Type {
	case PatchCreateFile, PatchUpdateFile, PatchDeleteFile:
		return nil
	}
	return BadRequest(param+".operation.type", "operation.type must be create_file, update_file or delete_file")
}

// validateApplyPatchOutput checks the client's answer to an apply_patch
// call: a call_id and a status; its output text is optional.
func (it *Item) validateApplyPatchOutput(param string) *APIError {
	if it.CallFields().CallID == "" {
		return BadRequest(param+".call_id", "apply_patch_call_output needs a call_id")
	}
	if it.Status != StatusCompleted && it.Status != "failed" {
		return BadRequest(param+".status", "apply_patch_call_output status must be completed or failed")
	}
	if len(it.CallFields().Output) > 0 && string(it.CallFields().Output) != "null" && it.CallFields().Output[0] != '"' {
		return BadRequest(param+".output", "output must be a string")
	}
	return nil
}

// appendClientCall writes the items of custom and apply_patch calls with
// the keys the API defines; false for other types.
func (it *Item) appendClientCall(o *jsonObject) bool {
	switch it.Type {
	case ItemCustomToolCall:
		o.strs("id", it.ID, "call_id", it.CallFields().CallID)
		o.strOmitEmpty("namespace", it.ToolFields().Namespace)
		o.strs("name", it.CallFields().Name, "input", it.ToolFields().Input)
		o.strOmitEmpty("status", it.Status)
		if it.CallFields().Async {
			o.boolean("async", true)
		}
	case ItemCustomToolCallOutput:
		o.strOmitEmpty("id", it.ID)
		o.str("call_id", it.CallFields().CallID)
		o.raw("output", it.CallFields().Output, `""`)
	case ItemApplyPatchCall:
		o.strs("id", it.ID, "call_id", it.CallFields().CallID)
		o.raw("operation", it.ToolFields().Operation, "null")
		o.str("status", orDefault(it.Status, StatusCompleted))
	case ItemApplyPatchCallOutput:
		o.strOmitEmpty("id", it.ID)
		o.strs("call_id", it.CallFields().CallID, "status", orDefault(it.Status, StatusCompleted))
		o.raw("output", it.CallFields().Output, "null")
	default:
		return false
	}
	return true
}

// clientCallPrefix is the item id prefix of a streamed client call.
func clientCallPrefix(itemType string) string {
	if itemType == ItemCustomToolCall {
		return "ctc"
	}
	return "fc"
}
