package tools

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/loomgate/loom/responses"
)

// A custom tool is offered as a function of one string; a regex format
// becomes the string's pattern, and either grammar is told to the model.
func TestCustomDefinition(t *testing.T) {
	for _, tt := range []struct {
		raw, pattern, inDescription string
	}{
		{raw: `{"type":"custom","name":"c","description":"Runs it."}`},
		{raw: `{"type":"custom","name":"c","format":{"type":"grammar","syntax":"regex","definition":"^[0-9]+$"}}`, pattern: "^[0-9]+$", inDescription: "regex grammar:\n^[0-9]+$"},
		{raw: `{"type":"custom","name":"c","format":{"type":"grammar","syntax":"lark","definition":"start: \"x\""}}`, inDescription: "lark grammar:\nstart: \"x\""},
	} {
		var tool responses.Tool
		if err := json.Unmarshal([]byte(tt.raw), &tool); err != nil {
			t.Fatal(err)
		}
		d := KindCustom.Define(tool)
		var schema struct {
			Properties map[string]struct {
				Type    string `json:"type"`
				Pattern string `json:"pattern"`
			} `json:"properties"`
			Required []string `json:"required"`
		}
		if err := json.Unmarshal(d.Parameters, &schema); err != nil {
			t.Fatalf("%s: parameters %s: %v", tt.raw, d.Parameters, err)
		}
		in := schema.Properties["input"]
		if d.Name != "c" || in.Type != "string" || in.Pattern != tt.pattern || len(schema.Required) != 1 || schema.Required[0] != "input" {
			t.Errorf("%s: defined as %s(%s)", tt.raw, d.Name, d.Parameters)
		}
		if !strings.Contains(d.Description, tt.inDescription) {
			t.Errorf("%s: description %q lacks %q", tt.raw, d.Description, tt.inDescription)
		}
	}
}

// The model's apply_patch arguments become an operation the client can
// act on: the diff kept for a create or an update, dropped for a delete,
// and arguments that are no operation passed on for the client to refuse.
func TestPatchOperation(t *testing.T) {
	for _, tt := range []struct{ args, want string }{
		{`{"type":"create_file","path":"a.txt","diff":"+a"}`, `{"type":"create_file","path":"a.txt","diff":"+a"}`},
		{`{"type":"update_file","path":"a.txt"}`, `{"type":"update_file","path":"a.txt","diff":""}`},
		{`{"type":"delete_file","path":"a.txt","diff":"ignored"}`, `{"type":"delete_file","path":"a.txt"}`},
		{`not json`, `{"type":"update_file","path":"","diff":"not json"}`},
		{`{"type":"rename","path":"a"}`, `{"type":"update_file","path":"a","diff":""}`},
	} {
		if got := string(patchOperation(tt.args)); got != tt.want {
			t.Errorf("patchOperation(%s) = %s, want %s", tt.args, got, tt.want)
		}
	}
}

// A namespace's function call reads, for the model, as the call of the
// name it was offered under; and so does a custom tool call.
func TestNamespacedHistory(t *testing.T) {
	h := History([]responses.Item{
		{Type: responses.ItemFunctionCall, Call: &responses.ItemCall{CallID: "a", Name: "search", Arguments: "{}"}, Tool: &responses.ItemTool{Namespace: "crm"}},
		{Type: responses.ItemCustomToolCall, Call: &responses.ItemCall{CallID: "b", Name: "note"}, Tool: &responses.ItemTool{Namespace: "crm", Input: "x"}},
		{Type: responses.ItemCustomToolCallOutput, Call: &responses.ItemCall{CallID: "b", Output: json.RawMessage(`"ok"`)}},
	})
	if len(h) != 3 || h[0].CallFields().Name != "crm__search" || h[0].ToolFields().Namespace != "" || h[1].CallFields().Name != "crm__note" || h[1].CallFields().Arguments != `{"input":"x"}` || h[2].Type != responses.ItemFunctionCallOutput {
		t.Errorf("history %+v", h)
	}
}
