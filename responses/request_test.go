package responses

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// input is a string (one user message) or an array of items; both are
// remembered as given.
func TestInputForms(t *testing.T) {
	tests := []struct {
		name, in string
		want     Input
	}{
		{"string", `"hi"`, Input{Set: true, IsString: true, Items: []Item{{Type: ItemMessage, Role: "user", Content: []ContentPart{{Type: PartInputText, Text: "hi"}}}}}},
		{"empty string", `""`, Input{Set: true, IsString: true, Items: []Item{{Type: ItemMessage, Role: "user", Content: []ContentPart{{Type: PartInputText}}}}}},
		{"array", ` [{"role":"user","content":"a"}]`, Input{Set: true, Items: []Item{{Type: ItemMessage, Role: "user", Content: []ContentPart{{Type: PartInputText, Text: "a"}}}}}},
		{"empty array", `[]`, Input{Set: true, Items: []Item{}}},
		{"null", `null`, Input{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var in Input
			if err := json.Unmarshal([]byte(tt.in), &in); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(in, tt.want) {
				t.Errorf("got %+v, want %+v", in, tt.want)
			}
		})
	}
	for _, bad := range []string{`5`, `{"role":"user"}`, `true`} {
		var in Input
		if err := json.Unmarshal([]byte(bad), &in); err == nil {
			t.Errorf("%s: accepted as %+v", bad, in)
		}
	}
	// Marshalled, input is always the array of items.
	if b, _ := json.Marshal(Input{}); string(b) != `[]` {
		t.Errorf("empty input marshals to %s", b)
	}
	b, _ := json.Marshal(Input{Set: true, IsString: true, Items: []Item{{Type: ItemMessage, Role: "user", Content: []ContentPart{{Type: PartInputText, Text: "hi"}}}}})
	if !strings.HasPrefix(string(b), `[{"type":"message"`) || !strings.Contains(string(b), `"text":"hi"`) {
		t.Errorf("string input marshals to %s", b)
	}
}

// Function tools marshal with every key the schema requires; other tools
// are echoed as sent, minus their credentials.
func TestToolMarshal(t *testing.T) {
	var tools []Tool
	body := `[
		{"type":"function","name":"f","description":"does f","parameters":{"type":"object"},"strict":true},
		{"type":"function","name":"g"},
		{"type":"mcp","server_label":"s","server_url":"https://mcp.example","authorization":"secret","headers":{"X-Key":"secret"},"require_approval":"never"},
		{"type":"code_interpreter","container":{"type":"auto"}}]`
	if err := json.Unmarshal([]byte(body), &tools); err != nil {
		t.Fatal(err)
	}
	if tools[0].Raw != nil || tools[2].Raw == nil {
		t.Errorf("Raw kept for %v, %v; want only for non-function tools", tools[0].Raw, tools[2].Raw)
	}
	tests := []struct {
		tool int
		want string
	}{
		{0, `{"type":"function","name":"f","description":"does f","parameters":{"type":"object"},"strict":true}`},
		{1, `{"type":"function","name":"g","description":null,"parameters":null,"strict":null}`},
		{2, `{"require_approval":"never","server_label":"s","server_url":"https://mcp.example","type":"mcp"}`},
		{3, `{"container":{"type":"auto"},"type":"code_interpreter"}`},
	}
	for _, tt := range tests {
		b, err := json.Marshal(tools[tt.tool])
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != tt.want {
			t.Errorf("tools[%d] = %s, want %s", tt.tool, b, tt.want)
		}
		if strings.Contains(string(b), "secret") {
			t.Errorf("tools[%d] echoes a credential: %s", tt.tool, b)
		}
	}
}

// tool_choice decodes every form the API has and marshals back to it.
func TestToolChoiceForms(t *testing.T) {
	tests := []struct {
		in   string
		want ToolChoice
		out  string // marshalled; "" means the input itself
	}{
		{`"none"`, ToolChoice{Mode: ToolChoiceNone}, ""},
		{`"auto"`, ToolChoice{Mode: ToolChoiceAuto}, ""},
		{`"required"`, ToolChoice{Mode: ToolChoiceRequired}, ""},
		{`{"type":"function","name":"f"}`, ToolChoice{Mode: ToolChoiceRequired, Function: "f"}, ""},
		{`{"type":"allowed_tools","mode":"required","tools":[{"type":"function","name":"f"}]}`,
			ToolChoice{Mode: ToolChoiceRequired, Allowed: []ToolRef{{Type: ToolFunction, Name: "f"}}}, ""},
		{`{"type":"allowed_tools"}`, ToolChoice{Mode: ToolChoiceAuto, Allowed: []ToolRef{}}, `{"type":"allowed_tools","mode":"auto","tools":[]}`},
		{`{"type":"file_search"}`, ToolChoice{Unknown: "file_search"}, `"auto"`},
		{`{}`, ToolChoice{Unknown: "(missing)"}, `"auto"`},
	}
	for _, tt := range tests {
		var tc ToolChoice
		if err := json.Unmarshal([]byte(tt.in), &tc); err != nil {
			t.Errorf("%s: %v", tt.in, err)
			continue
		}
		if !reflect.DeepEqual(tc, tt.want) {
			t.Errorf("%s: got %+v, want %+v", tt.in, tc, tt.want)
		}
		out := tt.out
		if out == "" {
			out = tt.in
		}
		if b, _ := json.Marshal(tc); string(b) != out {
			t.Errorf("%s marshals to %s, want %s", tt.in, b, out)
		}
	}
	var tc ToolChoice
	if err := json.Unmarshal([]byte(`[1]`), &tc); err == nil {
		t.Error("an array tool_choice was accepted")
	}
}

// text.format marshals only what its type has, and strict as a boolean.
func TestTextFormatMarshal(t *testing.T) {
	tests := []struct {
		f    TextFormat
		want string
	}{
		{TextFormat{Type: FormatText, Name: "ignored"}, `{"type":"text"}`},
		{TextFormat{Type: FormatJSONObject}, `{"type":"json_object"}`},
		{TextFormat{Type: FormatJSONSchema, Name: "s", Schema: json.RawMessage(`{"type":"object"}`)},
			`{"type":"json_schema","name":"s","description":null,"schema":{"type":"object"},"strict":false}`},
		{TextFormat{Type: FormatJSONSchema, Name: "s", Description: ptr("d"), Schema: json.RawMessage(`{}`), Strict: ptr(true)},
			`{"type":"json_schema","name":"s","description":"d","schema":{},"strict":true}`},
	}
	for _, tt := range tests {
		if b, _ := json.Marshal(tt.f); string(b) != tt.want {
			t.Errorf("%s: %s, want %s", tt.f.Type, b, tt.want)
		}
	}
}

// The defaults of store and parallel_tool_calls are true; include is a
// list to look into.
func TestRequestDefaults(t *testing.T) {
	var r Request
	if !r.StoreEnabled() || !r.ParallelCalls() || r.Includes("reasoning.encrypted_content") {
		t.Errorf("defaults: store %v, parallel %v", r.StoreEnabled(), r.ParallelCalls())
	}
	r = Request{Store: ptr(false), ParallelToolCalls: ptr(false), Include: []string{"a", "reasoning.encrypted_content"}}
	if r.StoreEnabled() || r.ParallelCalls() || !r.Includes("reasoning.encrypted_content") || r.Includes("b") {
		t.Errorf("set: store %v, parallel %v", r.StoreEnabled(), r.ParallelCalls())
	}
}

// allowed_tools and require_approval, in each of their forms.
func TestMCPToolFilters(t *testing.T) {
	allowed := []struct {
		in                  string
		name                string
		readOnly, wantAllow bool
	}{
		{`["a","b"]`, "b", false, true},
		{`["a","b"]`, "c", true, false},
		{`[]`, "a", true, false},
		{`{"tool_names":["a"]}`, "a", false, true},
		{`{"read_only":true}`, "any", true, true},
		{`{"read_only":true}`, "any", false, false},
		{`{"tool_names":["a"],"read_only":true}`, "a", false, false},
		{`{}`, "any", false, true},
	}
	for _, tt := range allowed {
		var a AllowedTools
		if err := json.Unmarshal([]byte(tt.in), &a); err != nil {
			t.Errorf("%s: %v", tt.in, err)
			continue
		}
		if got := a.Allows(tt.name, tt.readOnly); got != tt.wantAllow {
			t.Errorf("%s allows %s (read-only %v) = %v", tt.in, tt.name, tt.readOnly, got)
		}
	}
	if !(*AllowedTools)(nil).Allows("x", false) {
		t.Error("no allowed_tools allows every tool")
	}
	approval := []struct {
		in, name string
		needs    bool
	}{
		{`"always"`, "a", true},
		{`"never"`, "a", false},
		{`{"never":{"tool_names":["a"]}}`, "a", false},
		{`{"never":{"tool_names":["a"]}}`, "b", true},
		{`{"always":{"tool_names":["a"]},"never":{"tool_names":["b"]}}`, "a", true},
		{`{"always":{"tool_names":["a"]},"never":{"tool_names":["b"]}}`, "b", false},
		{`{}`, "a", true},
	}
	for _, tt := range approval {
		var r RequireApproval
		if err := json.Unmarshal([]byte(tt.in), &r); err != nil {
			t.Errorf("%s: %v", tt.in, err)
			continue
		}
		if got := r.Needs(tt.name); got != tt.needs {
			t.Errorf("%s needs approval for %s = %v", tt.in, tt.name, got)
		}
	}
	for _, bad := range []string{`"sometimes"`, `5`, `["a"]`} {
		var r RequireApproval
		if err := json.Unmarshal([]byte(bad), &r); err == nil {
			t.Errorf("require_approval %s accepted", bad)
		}
	}
	var a AllowedTools
	if err := json.Unmarshal([]byte(`"a"`), &a); err == nil {
		t.Error(`allowed_tools "a" accepted`)
	}
}

// An mcp tool's own mistakes name its field.
func TestParseMCPToolErrors(t *testing.T) {
	tests := []struct {
		tool, param, code string
	}{
		{`{"type":"mcp","server_label":"s","connector_id":"connector_gmail"}`, "tools[0].connector_id", "unsupported_parameter"},
		{`{"type":"mcp","server_label":"s","require_approval":"sometimes"}`, "tools[0]", ""},
		{`{"type":"mcp","server_label":"s","allowed_tools":7}`, "tools[0]", ""},
		{`{"type":"mcp","server_label":"","server_url":"https://a"}`, "tools[0].server_label", ""},
		{`{"type":"mcp","server_label":"s","elicitation":"always"}`, "tools[0].elicitation", ""},
	}
	for _, tt := range tests {
		var tool Tool
		if err := json.Unmarshal([]byte(tt.tool), &tool); err != nil {
			t.Fatal(err)
		}
		_, err := ParseMCPTool(tool, 0)
		if err == nil {
			t.Errorf("%s: accepted", tt.tool)
			continue
		}
		if e := mustAPIError(t, err); e.Param != tt.param || e.Code != tt.code || (e.Kind != EInvalid && e.Kind != EUnsupported) {
			t.Errorf("%s: %s param %q code %q, want invalid %q %q", tt.tool, e.Kind, e.Param, e.Code, tt.param, tt.code)
		}
	}
	for _, e := range []string{"client", "model", "decline", ""} {
		var tool Tool
		json.Unmarshal([]byte(`{"type":"mcp","server_label":"s","elicitation":"`+e+`"}`), &tool)
		if m, err := ParseMCPTool(tool, 0); err != nil || m.Elicitation != e {
			t.Errorf("elicitation %q: %+v, %v", e, m, err)
		}
	}
}
