package responses

import (
	"encoding/json"
	"testing"
)

func TestParseMCPTool(t *testing.T) {
	var req Request
	body := `{"model":"m","input":"x","tools":[
		{"type":"mcp","server_label":"docs","server_url":"https://mcp.example/mcp","authorization":"tok",
		 "allowed_tools":{"tool_names":["search","fetch"],"read_only":true},
		 "require_approval":{"never":{"tool_names":["search"]}},"elicitation":"model"},
		{"type":"mcp","server_label":"x","require_approval":"never","allowed_tools":["a"]},
		{"type":"mcp","server_url":"https://a"},
		{"type":"mcp","server_label":"y","elicitation":"ask"}]}`
	if err := json.Unmarshal([]byte(body), &req); err != nil {
		t.Fatal(err)
	}
	m, err := ParseMCPTool(req.Tools[0], 0)
	if err != nil {
		t.Fatal(err)
	}
	if m.Authorization != "tok" || m.Elicitation != "model" {
		t.Errorf("fields %+v", m)
	}
	if !m.AllowedTools.Allows("search", true) || m.AllowedTools.Allows("search", false) || m.AllowedTools.Allows("delete", true) {
		t.Error("allowed_tools object form")
	}
	if m.RequireApproval.Needs("search") || !m.RequireApproval.Needs("fetch") {
		t.Error("require_approval per tool")
	}
	m2, _ := ParseMCPTool(req.Tools[1], 1)
	if m2.RequireApproval.Needs("a") || !m2.AllowedTools.Allows("a", false) || m2.AllowedTools.Allows("b", false) {
		t.Error("never / list form")
	}
	if (*RequireApproval)(nil).Needs("z") != true {
		t.Error("approval is required by default")
	}
	if _, err := ParseMCPTool(req.Tools[2], 2); err == nil || mustAPIError(t, err).Param != "tools[2].server_label" {
		t.Errorf("missing label: %v", err)
	}
	if _, err := ParseMCPTool(req.Tools[3], 3); err == nil || mustAPIError(t, err).Param != "tools[3].elicitation" {
		t.Errorf("bad elicitation: %v", err)
	}
	// The echoed tool never carries the credentials.
	echo, _ := json.Marshal(req.Tools[0])
	var back map[string]any
	json.Unmarshal(echo, &back)
	if _, ok := back["authorization"]; ok || back["server_label"] != "docs" {
		t.Errorf("echo %s", echo)
	}
}
