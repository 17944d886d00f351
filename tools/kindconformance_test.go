package tools

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/loomgate/loom/responses"
)

// TestEveryKind is the conformance suite of tool kinds: it runs over every
// registered kind, so a kind added with Register is held to the same
// rules as the others: its calls go back into the model's history as a
// function call and its result, under one call id; a client-run kind has
// everything the engine needs to offer it and report it; a kind that
// builds its own items builds them of its item type, with ids.
func TestEveryKind(t *testing.T) {
	if len(kinds) == 0 {
		t.Fatal("no kind registered")
	}
	for _, k := range kinds {
		t.Run(k.ItemType, func(t *testing.T) {
			if k.ItemType == "" {
				t.Fatal("a kind without an item type")
			}
			if _, ok := k.History[k.ItemType]; !ok {
				t.Errorf("History has no rule for the kind's own item type %s", k.ItemType)
			}
			n := 0
			newID := func(prefix string) string { n++; return fmt.Sprintf("%s_%d", prefix, n) }
			if k.ToolType != "" {
				checkClientKind(t, k, newID)
			}
			if k.Items != nil {
				ran := RanCall{Server: "srv", Tool: "t", CallID: "call_1", Arguments: `{"commands":["true"]}`}
				for _, res := range []Result{
					{CallID: "call_1", Content: []Content{{Type: ContentText, Text: "done"}}},
					{CallID: "call_1", Content: []Content{{Type: ContentText, Text: "it broke"}}, IsError: true},
				} {
					items := k.Items(ran, res, res.Text(), newID)
					checkRanItems(t, k, items, res.Text())
					if k.ItemEvents != nil && len(k.ItemEvents(items[0])) == 0 {
						// A kind that has events for its items has them
						// for a failure too: the client sees it progress.
						t.Errorf("no events for the item %+v", items[0])
					}
				}
			}
			if k.Output != nil {
				if out, msg := k.Output(Result{Content: []Content{{Type: ContentText, Text: "done"}}}, "done"); len(out) == 0 || msg != "" {
					t.Errorf("Output of a success = %s, %q; want an output and no error", out, msg)
				}
				// A failure's words reach the client: as the error, or in
				// the output (the interpreter reports a failure as logs).
				if out, msg := k.Output(Result{IsError: true, Content: []Content{{Type: ContentText, Text: "it broke"}}}, "it broke"); !strings.Contains(msg+string(out), "it broke") {
					t.Errorf("Output of a failure = %s, %q: the failure is lost", out, msg)
				}
			}
		})
	}
}

// checkClientKind: the engine offers a client-run kind as Define's
// function, reports the model's call with ClientItem once the turn is
// over (a deferred kind) or streams it as an item of the kind's type
// whose text NewArguments follows, and takes the client's answer of
// OutputType; both go back to the model as one pair.
func checkClientKind(t *testing.T, k *Kind, newID func(string) string) {
	t.Helper()
	if k.Define == nil || k.OutputType == "" || (k.Deferred && k.ClientItem == nil) || (!k.Deferred && k.NewArguments == nil) {
		t.Fatalf("client-run kind %s lacks Define, OutputType, or ClientItem (deferred) or NewArguments (streamed)", k.ToolType)
	}
	if d := k.Define(responses.Tool{Type: k.ToolType, Name: "t", Raw: json.RawMessage(`{"type":"` + k.ToolType + `","name":"t"}`)}); d.Name == "" {
		t.Error("Define gives a function without a name")
	}
	if ClientKind(k.ToolType) != k || !ClientCall(k.ItemType) || !ClientOutput(k.OutputType) {
		t.Error("the registry does not find the kind by its tool, call or output type")
	}
	var call responses.Item
	if k.Deferred {
		call = k.ClientItem("call_1", `{"command":["ls"]}`, newID)
	} else {
		// The item as the builder closes a streamed client call.
		call = responses.Item{Type: k.ItemType, ID: newID("c"), Call: &responses.ItemCall{CallID: "call_1", Name: "t", Arguments: "ls"}, Tool: &responses.ItemTool{Input: "ls"}}
	}
	if call.Type != k.ItemType || call.ID == "" || call.CallFields().CallID != "call_1" {
		t.Errorf("ClientItem = %+v, want a %s with an id and call_id call_1", call, k.ItemType)
	}
	// The answer as the client sends it: an output, or found tools.
	answer := responses.Item{Type: k.OutputType, Call: &responses.ItemCall{CallID: "call_1", Output: json.RawMessage(`"ok"`)},
		Tool: &responses.ItemTool{Tools: json.RawMessage(`[{"type":"function","name":"ok"}]`)}}
	checkPair(t, History([]responses.Item{call, answer}), "call_1", "ok")
}

// checkRanItems: the items a call that ran builds lead with one of the
// kind's item type, all have ids, and read back as one call and its result
// (or, for a kind that Forgets, a note that the result is not kept).
func checkRanItems(t *testing.T, k *Kind, items []responses.Item, text string) {
	t.Helper()
	if len(items) == 0 || items[0].Type != k.ItemType {
		t.Fatalf("Items = %+v, want them to start with a %s", items, k.ItemType)
	}
	for _, it := range items {
		if it.ID == "" {
			t.Errorf("item %s without an id", it.Type)
		}
	}
	history := History(items)
	if len(history) != 2 {
		t.Fatalf("history of %+v = %+v, want a call and its output", items, history)
	}
	if k.Forgets {
		// The items cannot hold the text: the output says what they hold.
		text = ""
	}
	checkPair(t, history, history[0].CallFields().CallID, text)
}

// checkPair: history is a function call and its output, under callID, the
// output holding want.
func checkPair(t *testing.T, history []responses.Item, callID, want string) {
	t.Helper()
	if len(history) != 2 || history[0].Type != responses.ItemFunctionCall || history[1].Type != responses.ItemFunctionCallOutput {
		t.Fatalf("history = %+v, want a function_call and its function_call_output", history)
	}
	if callID == "" || history[0].CallFields().CallID != callID || history[1].CallFields().CallID != callID {
		t.Errorf("call ids %q and %q, want both %q", history[0].CallFields().CallID, history[1].CallFields().CallID, callID)
	}
	if len(history[1].CallFields().Output) == 0 || string(history[1].CallFields().Output) == `""` {
		t.Error("the output is empty")
	}
	if !strings.Contains(string(history[1].CallFields().Output), want) {
		t.Errorf("the output %s does not hold %q", history[1].CallFields().Output, want)
	}
}
