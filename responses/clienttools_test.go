package responses

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// A custom tool call streams its raw input as custom_tool_call_input
// events and closes as a custom_tool_call item carrying it; a namespaced
// function call carries its namespace from the first event on.
func TestBuilderClientCalls(t *testing.T) {
	rec := &recorder{}
	b := NewBuilder(&Response{ID: "resp_1"}, seqIDs(), rec.sink)
	steps := []func() error{
		b.Start,
		func() error {
			return b.ClientCallDelta(0, ItemCustomToolCall, "call_a", "", "apply_patch", "*** Begin")
		},
		func() error {
			return b.ClientCallDelta(0, ItemCustomToolCall, "call_a", "", "apply_patch", " Patch\n\"x\"")
		},
		func() error { return b.ClientCallDelta(1, ItemFunctionCall, "call_b", "crm", "search", `{"q":1}`) },
		b.EndTurn,
		func() error { return b.Complete(&Usage{}, 1) },
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	if err := b.ClientCallDelta(2, ItemMCPCall, "c", "", "x", ""); err == nil {
		t.Error("ClientCallDelta took an mcp_call")
	}
	want := []string{EventCreated, EventInProgress,
		EventOutputItemAdded, EventCustomToolInputDelta, EventCustomToolInputDelta,
		EventOutputItemAdded, EventFunctionArgsDelta,
		EventCustomToolInputDone, EventOutputItemDone, EventFunctionArgsDone, EventOutputItemDone, EventCompleted}
	if got := rec.types(); !slices.Equal(got, want) {
		t.Fatalf("events %v\nwant %v", got, want)
	}
	added := rec.events[5].Item
	if added.ToolFields().Namespace != "crm" || added.CallFields().Name != "search" || added.CallFields().CallID != "call_b" {
		t.Errorf("function_call added as %+v", added)
	}
	out := b.Response().Output
	custom := out[0]
	if custom.Type != ItemCustomToolCall || custom.ToolFields().Input != "*** Begin Patch\n\"x\"" || custom.CallFields().CallID != "call_a" || custom.Status != StatusCompleted {
		t.Errorf("custom_tool_call %+v", custom)
	}
	done, _ := rec.events[7].AppendJSON(nil, DialectOpenAI)
	var ev struct {
		ItemID string `json:"item_id"`
		Input  string `json:"input"`
	}
	if err := json.Unmarshal(done, &ev); err != nil || ev.Input != custom.ToolFields().Input || ev.ItemID != custom.ID {
		t.Errorf("input done event %s", done)
	}
	if or, _ := rec.events[7].AppendJSON(nil, DialectOpenResponses); !strings.Contains(string(or), `"type":"loom:response.custom_tool_call_input.done"`) {
		t.Errorf("the Open Responses dialect writes %s, want the vendor prefix", or)
	}
	item, _ := json.Marshal(out[1])
	if !strings.Contains(string(item), `"namespace":"crm"`) {
		t.Errorf("function_call JSON %s lacks its namespace", item)
	}
	plain, _ := json.Marshal(Item{Type: ItemFunctionCall, ID: "fc", Call: &ItemCall{CallID: "c", Name: "f"}})
	if strings.Contains(string(plain), "namespace") {
		t.Errorf("a plain function_call writes a namespace: %s", plain)
	}
}

// The items of custom and apply_patch calls are written with every key
// the API gives them, and read back the same.
func TestClientCallItemsRoundTrip(t *testing.T) {
	items := []Item{
		{Type: ItemCustomToolCall, ID: "ctc_1", Call: &ItemCall{CallID: "c1", Name: "note"}, Tool: &ItemTool{Namespace: "crm", Input: "raw"}, Status: StatusCompleted},
		{Type: ItemCustomToolCallOutput, Call: &ItemCall{CallID: "c1", Output: json.RawMessage(`"ok"`)}},
		{Type: ItemApplyPatchCall, ID: "apc_1", Call: &ItemCall{CallID: "c2"}, Tool: &ItemTool{Operation: json.RawMessage(`{"type":"delete_file","path":"a"}`)}, Status: StatusCompleted},
		{Type: ItemApplyPatchCallOutput, Call: &ItemCall{CallID: "c2", Output: json.RawMessage(`"no"`)}, Status: "failed"},
	}
	for _, it := range items {
		b, err := json.Marshal(it)
		if err != nil {
			t.Fatal(err)
		}
		var back Item
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		again, _ := json.Marshal(back)
		if string(again) != string(b) {
			t.Errorf("%s reads back as %s", b, again)
		}
		if !strings.Contains(string(b), `"call_id":`) {
			t.Errorf("%s without call_id", b)
		}
	}
	empty, _ := json.Marshal(Item{Type: ItemApplyPatchCallOutput, Call: &ItemCall{CallID: "c"}})
	if string(empty) != `{"type":"apply_patch_call_output","call_id":"c","status":"completed","output":null}` {
		t.Errorf("empty apply_patch_call_output %s", empty)
	}
}
