package responses

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Tool search: tools marked defer_loading are kept out of the prompt
// until a tool search finds them.
const (
	ToolToolSearch       = "tool_search"
	ItemToolSearchCall   = "tool_search_call"
	ItemToolSearchOutput = "tool_search_output"
	// Executions of a tool search: loom searches, or the client does.
	ExecutionServer = "server"
	ExecutionClient = "client"
)

// ToolSearchTool is a {"type": "tool_search"} entry of a request's tools.
type ToolSearchTool struct {
	Execution   string          `json:"execution"`
	Description *string         `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// DecodeToolSearchTool reads a tool_search tool's fields.
func DecodeToolSearchTool(raw json.RawMessage) ToolSearchTool {
	var t ToolSearchTool
	json.Unmarshal(raw, &t)
	return t
}

// ClientRun reports whether the client runs the searches.
func (t ToolSearchTool) ClientRun() bool { return t.Execution == ExecutionClient }

// appendToolSearch writes a tool_search_call (its arguments as the JSON
// object the model wrote) or a tool_search_output (the tools found, a
// list even when empty).
func (it *Item) appendToolSearch(o *jsonObject) {
	o.strOmitEmpty("id", it.ID)
	o.str("call_id", it.CallFields().CallID)
	if it.Type == ItemToolSearchCall {
		if json.Valid([]byte(it.CallFields().Arguments)) {
			o.raw("arguments", json.RawMessage(it.CallFields().Arguments), "")
		} else {
			o.str("arguments", it.CallFields().Arguments)
		}
	}
	o.str("execution", orDefault(it.ToolFields().Execution, ExecutionServer))
	o.str("status", orDefault(it.Status, StatusCompleted))
	if it.Type == ItemToolSearchOutput {
		o.raw("tools", it.ToolFields().Tools, "[]")
	}
}

// argumentsText is an item's arguments as text: a JSON string unquoted
// (a function call's), any other JSON value as written (a tool search
// call's object).
func argumentsText(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return "", nil
	}
	if raw[0] == '"' {
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	}
	return string(raw), nil
}

// validateToolSearchOutput checks a client's answer to a tool search: its
// call and the tools it found, a list of tools.
func (it *Item) validateToolSearchOutput(param string) *APIError {
	if it.CallFields().CallID == "" {
		return BadRequest(param+".call_id", "tool_search_output needs a call_id")
	}
	var found []Tool
	if len(it.ToolFields().Tools) > 0 && json.Unmarshal(it.ToolFields().Tools, &found) != nil {
		return BadRequest(param+".tools", "tools must be a list of tools")
	}
	for i, t := range found {
		if t.Type == ToolFunction && !validFunctionName(t.Name) {
			return BadRequest(fmt.Sprintf("%s.tools[%d].name", param, i), "function name must be 1-64 letters, digits, underscores or dashes")
		}
	}
	return nil
}
