package responses

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Tool types loom runs itself.
const (
	ToolMCP             = "mcp"
	ToolCodeInterpreter = "code_interpreter"
	ToolShell           = "shell"
	ToolLocalShell      = "local_shell"
)

// MCP item types.
const (
	ItemMCPListTools       = "mcp_list_tools"
	ItemMCPApprovalRequest = "mcp_approval_request"
	// ItemMCPApprovalResponse is an input item: the client's answer.
	ItemMCPApprovalResponse = "mcp_approval_response"
	// ItemMCPInputRequest is loom's output item asking the client for the
	// input an MCP server requested (elicitation), and
	// ItemMCPInputResponse the client's answer. They are loom extensions,
	// "loom:"-prefixed in the Open Responses dialect.
	ItemMCPInputRequest  = "mcp_input_request"
	ItemMCPInputResponse = "mcp_input_response"
)

// MCPTool is an {"type": "mcp"} entry of a request's tools.
type MCPTool struct {
	ServerLabel       string            `json:"server_label"`
	ServerURL         string            `json:"server_url"`
	ConnectorID       string            `json:"connector_id"`
	ServerDescription string            `json:"server_description"`
	Authorization     string            `json:"authorization"`
	Headers           map[string]string `json:"headers"`
	AllowedTools      *AllowedTools     `json:"allowed_tools"`
	RequireApproval   *RequireApproval  `json:"require_approval"`
	// Elicitation is loom's extension: how input a server asks for is
	// answered: "client", "model" or "decline" ("" for the default).
	Elicitation string `json:"elicitation"`
	// DeferLoading keeps the server's tools out of the prompt until a
	// tool search finds the server.
	DeferLoading bool `json:"defer_loading"`
}

// AllowedTools filters the tools of an MCP server: a list of names, or
// {"tool_names": [...], "read_only": bool}.
type AllowedTools struct {
	Names    []string
	ReadOnly bool
}

// UnmarshalJSON reads either form.
func (a *AllowedTools) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '[' {
		return json.Unmarshal(data, &a.Names)
	}
	var obj struct {
		ToolNames []string `json:"tool_names"`
		ReadOnly  bool     `json:"read_only"`
	}
	if err := json.Unmarshal(data, &obj); err != nil {
		return fmt.Errorf("allowed_tools must be a list of names or {tool_names, read_only}")
	}
	a.Names, a.ReadOnly = obj.ToolNames, obj.ReadOnly
	return nil
}

// Allows reports whether a tool passes the filter; readOnly is whether the
// server marks the tool read-only. A nil filter allows everything.
func (a *AllowedTools) Allows(name string, readOnly bool) bool {
	if a == nil {
		return true
	}
	if a.ReadOnly && !readOnly {
		return false
	}
	if a.Names == nil {
		return true
	}
	for _, n := range a.Names {
		if n == name {
			return true
		}
	}
	return false
}

// RequireApproval says which calls need the client's approval: "always",
// "never", or {"always": {"tool_names": [...]}, "never": {"tool_names": [...]}}.
// Like OpenAI, loom requires approval unless told otherwise.
type RequireApproval struct {
	Mode   string // "always", "never", or "" for the per-tool form
	Always []string
	Never  []string
}

// UnmarshalJSON reads either form.
func (r *RequireApproval) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '"' {
		if err := json.Unmarshal(data, &r.Mode); err != nil {
			return err
		}
		if r.Mode != "always" && r.Mode != "never" {
			return fmt.Errorf("require_approval must be \"always\", \"never\" or an object")
		}
		return nil
	}
	type names struct {
		ToolNames []string `json:"tool_names"`
	}
	var obj struct {
		Always *names `json:"always"`
		Never  *names `json:"never"`
	}
	if err := json.Unmarshal(data, &obj); err != nil {
		return fmt.Errorf("require_approval must be \"always\", \"never\" or an object")
	}
	if obj.Always != nil {
		r.Always = obj.Always.ToolNames
	}
	if obj.Never != nil {
		r.Never = obj.Never.ToolNames
	}
	return nil
}

// Needs reports whether a call to the named tool needs approval.
func (r *RequireApproval) Needs(name string) bool {
	if r == nil {
		return true
	}
	switch r.Mode {
	case "always":
		return true
	case "never":
		return false
	}
	for _, n := range r.Never {
		if n == name {
			return false
		}
	}
	// Tools named in neither list need approval, as when nothing is said.
	return true
}

// ParseMCPTool decodes the mcp tool at tools[index]; errors name the field.
//
// The error is nil or an *APIError, returned as an error so that success
// is a nil interface.
func ParseMCPTool(t Tool, index int) (*MCPTool, error) {
	m, err := parseMCPTool(t, index)
	if err != nil {
		return nil, err
	}
	return m, nil
}

func parseMCPTool(t Tool, index int) (*MCPTool, *APIError) {
	param := fmt.Sprintf("tools[%d]", index)
	var m MCPTool
	if err := json.Unmarshal(t.Raw, &m); err != nil {
		return nil, BadRequest(param, "invalid mcp tool: %v", err)
	}
	if m.ServerLabel == "" {
		return nil, BadRequest(param+".server_label", "server_label is required")
	}
	if m.ConnectorID != "" {
		return nil, Unsupported(param+".connector_id", "connectors are not supported; give a server_url or a configured server_label")
	}
	switch m.Elicitation {
	case "", "client", "model", "decline":
	default:
		return nil, BadRequest(param+".elicitation", "elicitation must be client, model or decline")
	}
	return &m, nil
}
