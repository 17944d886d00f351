package engine_test

import (
	"context"
	"strings"
	"testing"

	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/responses"
)

// TestToolNotOffered: the model calls a tool the request did not offer.
// The client sees nothing of the call (a client runs every function_call
// it is shown), the model is told the tool does not exist, and the loop
// goes on to its answer. A continuation does not hand the refused call to the model
// again.
func TestToolNotOffered(t *testing.T) {
	for _, tc := range []struct{ name, tools string }{
		{"other tools offered", "," + twoTools},
		{"no tools offered", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &fakeBackend{}
			b.stream = func(req *model.Request, emit func(model.Delta) error) error {
				if len(b.requests) == 1 {
					return deltas(call(0, "delete_everything"), model.Delta{Kind: model.DeltaFinish, FinishReason: model.FinishToolCalls})(req, emit)
				}
				return deltas(model.Delta{Kind: model.DeltaText, Text: "I cannot do that."})(req, emit)
			}
			e := newEngine(t, b)
			resp, err := e.Run(context.Background(), decodeRequest(t, `{"model":"m","input":"x"`+tc.tools+`}`), nil)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Status != responses.StatusCompleted || len(resp.Output) != 1 || resp.Output[0].Type != responses.ItemMessage {
				t.Fatalf("status %s, output %+v; want the answer alone", resp.Status, resp.Output)
			}
			// Turn two: the model saw its call and the refusal.
			if len(b.requests) != 2 {
				t.Fatalf("%d model turns, want 2", len(b.requests))
			}
			told := false
			for _, it := range b.requests[1].Items {
				if it.Type == responses.ItemFunctionCallOutput && strings.Contains(string(it.CallFields().Output), `no tool named \"delete_everything\"`) {
					told = true
				}
			}
			if !told {
				t.Errorf("the model was not told: %+v", b.requests[1].Items)
			}

			// A follow-up: the refused call is not history the model gets.
			b.stream = deltas(model.Delta{Kind: model.DeltaText, Text: "ok"})
			if _, err := e.Run(context.Background(), decodeRequest(t, `{"model":"m","input":"and now?","previous_response_id":"`+resp.ID+`"`+tc.tools+`}`), nil); err != nil {
				t.Fatal(err)
			}
			for _, it := range b.requests[2].Items {
				if it.Type == responses.ItemFunctionCall {
					t.Errorf("the refused call reached the model again: %+v", it)
				}
			}
		})
	}
}

// TestToolNotOfferedIsBounded: a model that keeps calling a tool that
// does not exist ends the response incomplete, at max_tool_calls or at the
// turn cap, never in an endless loop.
func TestToolNotOfferedIsBounded(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		maxTurns   int
		reason     string
	}{
		{"turn cap", `{"model":"m","input":"x"}`, 16, "max_turns"},
		{"max_tool_calls", `{"model":"m","input":"x","max_tool_calls":3}`, 4, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &fakeBackend{stream: deltas(call(0, "nope"), model.Delta{Kind: model.DeltaFinish, FinishReason: model.FinishToolCalls})}
			resp, _ := newEngine(t, b).Run(context.Background(), decodeRequest(t, tc.body), nil)
			if len(b.requests) > tc.maxTurns {
				t.Errorf("%d model turns, want at most %d", len(b.requests), tc.maxTurns)
			}
			if tc.reason != "" && (resp.Status != responses.StatusIncomplete || resp.IncompleteDetails == nil || resp.IncompleteDetails.Reason != tc.reason) {
				t.Errorf("status %s, details %+v; want incomplete %s", resp.Status, resp.IncompleteDetails, tc.reason)
			}
		})
	}
}
