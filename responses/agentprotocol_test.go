package responses

import (
	"encoding/json"
	"strings"
	"testing"
)

// A compaction_trigger is taken as the last input item only; anywhere
// else it is a 400 naming it. It is never a conversation item.
func TestCompactionTriggerMustBeLast(t *testing.T) {
	req, err := check(withItems(`{"type":"message","role":"user","content":"hi"},{"type":"compaction_trigger"}`))
	if err != nil {
		t.Fatalf("trigger last: %v", err)
	}
	if !req.CompactionTriggered() {
		t.Error("CompactionTriggered is false for an input ending with a trigger")
	}
	_, err = check(withItems(`{"type":"compaction_trigger"},{"type":"message","role":"user","content":"hi"}`))
	if e := mustAPIError(t, err); e.Param != "input[0]" || e.Kind != EInvalid || !strings.Contains(e.Message, "final input item") {
		t.Errorf("trigger first: %s %q %q", e.Kind, e.Param, e.Message)
	}
	req, _ = check(withInput(``))
	if req.CompactionTriggered() {
		t.Error("CompactionTriggered is true for a plain input")
	}
	var items []Item
	if err := json.Unmarshal([]byte(`[{"type":"compaction_trigger"}]`), &items); err != nil {
		t.Fatal(err)
	}
	if e := mustAPIError(t, ValidateConversationItems(items)); e.Param != "items[0].type" {
		t.Errorf("a trigger as a conversation item: param %q", e.Param)
	}
	// Read back from a stored input it was part of, it passes.
	if err := ValidateStoredItem(&items[0], "previous_response_id"); err != nil {
		t.Errorf("stored trigger: %v", err)
	}
}

// context_management takes compaction entries; the lowest threshold of
// them counts, and none means no threshold.
func TestCompactThreshold(t *testing.T) {
	for _, tc := range []struct {
		extra string
		want  int
		ok    bool
	}{
		{``, 0, false},
		{`,"context_management":null`, 0, false},
		{`,"context_management":[{"type":"compaction"}]`, 0, false},
		{`,"context_management":[{"type":"compaction","compact_threshold":900}]`, 900, true},
		{`,"context_management":[{"type":"compaction","compact_threshold":900},{"type":"compaction","compact_threshold":200}]`, 200, true},
	} {
		req, err := check(withInput(tc.extra))
		if err != nil {
			t.Fatalf("%s: %v", tc.extra, err)
		}
		if got, ok := req.CompactThreshold(); got != tc.want || ok != tc.ok {
			t.Errorf("%s: threshold %d %v, want %d %v", tc.extra, got, ok, tc.want, tc.ok)
		}
	}
}

// async is taken on function and custom tools, inside a namespace too;
// anywhere else it is a 400 unknown_parameter naming it.
func TestValidateAsyncTools(t *testing.T) {
	fn := `{"type":"function","name":"f","parameters":{"type":"object"},"async":true}`
	custom := `{"type":"custom","name":"c","async":true}`
	for _, tools := range []string{fn, custom, `{"type":"function","name":"f","async":false}`,
		`{"type":"namespace","name":"ns","description":"d","tools":[` + fn + `,` + custom + `]}`} {
		req, err := check(withInput(`,"tools":[` + tools + `]`))
		if err != nil {
			t.Errorf("%s: %v", tools, err)
			continue
		}
		if strings.Contains(tools, `"async":true`) && !strings.Contains(tools, "namespace") && !req.Tools[0].IsAsync() {
			t.Errorf("%s: IsAsync false", tools)
		}
	}
	for _, tc := range []struct{ tool, param string }{
		{`{"type":"namespace","name":"ns","description":"d","async":true,"tools":[` + fn + `]}`, "tools[0].async"},
		{`{"type":"shell","async":true}`, "tools[0].async"},
		{`{"type":"tool_search","execution":"client","async":true}`, "tools[0].async"},
		{`{"type":"web_search","async":true}`, "tools[0].async"},
		{`{"type":"web_search","async":false}`, "tools[0].async"},
		{`{"type":"apply_patch","async":true}`, "tools[0].async"},
	} {
		_, err := check(withInput(`,"tools":[`+tc.tool+`]`), "shell", "tool_search", "web_search")
		if err == nil {
			t.Errorf("%s accepted", tc.tool)
			continue
		}
		if e := mustAPIError(t, err); e.Param != tc.param || e.Code != "unknown_parameter" || e.Kind != EInvalid {
			t.Errorf("%s: %s param %q code %q, want %s unknown_parameter", tc.tool, e.Kind, e.Param, e.Code, tc.param)
		}
	}
}

// An async tool is echoed with async: true; a call item carries async
// through the fast decoder, encoding/json and the encoder alike.
func TestAsyncOnTheWire(t *testing.T) {
	req, err := check(withInput(`,"tools":[{"type":"function","name":"f","parameters":{"type":"object"},"async":true},{"type":"function","name":"g"}]`))
	if err != nil {
		t.Fatal(err)
	}
	echo, _ := json.Marshal(req.Tools)
	if strings.Count(string(echo), `"async":true`) != 1 {
		t.Errorf("tools echoed as %s", echo)
	}
	for _, raw := range []string{
		`{"type":"function_call","id":"fc_1","call_id":"c1","name":"f","arguments":"{}","status":"completed","async":true}`,
		`{"type":"custom_tool_call","id":"ctc_1","call_id":"c2","name":"c","input":"x","status":"completed","async":true}`,
	} {
		// In a list (the scanner) and alone (encoding/json).
		var list []Item
		if err := json.Unmarshal([]byte("["+raw+"]"), &list); err != nil {
			t.Fatal(err)
		}
		var one Item
		if err := one.decodeFields([]byte(raw)); err != nil {
			t.Fatal(err)
		}
		for _, it := range []Item{list[0], one} {
			if !it.CallFields().Async {
				t.Errorf("%s decoded without async", raw)
			}
			b, _ := json.Marshal(it)
			if !strings.Contains(string(b), `"async":true`) {
				t.Errorf("%s encoded as %s", raw, b)
			}
		}
	}
	plain, _ := json.Marshal(Item{Type: ItemFunctionCall, ID: "fc", Call: &ItemCall{CallID: "c", Name: "f"}})
	if strings.Contains(string(plain), "async") {
		t.Errorf("a call of a plain tool says async: %s", plain)
	}
}

// An async call's item carries async from its output_item.added event on.
func TestBuilderAsyncCall(t *testing.T) {
	rec := &recorder{}
	b := NewBuilder(&Response{ID: "resp_1"}, seqIDs(), rec.sink)
	for i, step := range []func() error{
		b.Start,
		func() error { return b.AsyncCallDelta(0, ItemFunctionCall, "call_a", "", "slow", `{}`) },
		func() error { return b.ClientCallDelta(1, ItemFunctionCall, "call_b", "", "quick", `{}`) },
		b.EndTurn,
	} {
		if err := step(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	added, _ := rec.events[2].EncodeJSON(DialectOpenAI)
	if rec.events[2].Type != EventOutputItemAdded || !strings.Contains(string(added), `"async":true`) {
		t.Errorf("the async call was added as %s", added)
	}
	out := b.Response().Output
	if !out[0].CallFields().Async || out[1].CallFields().Async {
		t.Errorf("async marks %v %v, want true false", out[0].CallFields().Async, out[1].CallFields().Async)
	}
}
