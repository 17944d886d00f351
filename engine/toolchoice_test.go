package engine_test

import (
	"context"
	"testing"

	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/responses"
)

// TestToolChoiceRequiredNotFollowed: tool_choice requires a call (required,
// a named function, allowed_tools in required mode) and the model answers
// with text. The response ends incomplete with reason
// tool_choice_required, its text kept; with a call it completes, and
// under auto a text answer completes.
func TestToolChoiceRequiredNotFollowed(t *testing.T) {
	text := deltas(model.Delta{Kind: model.DeltaText, Text: "no call from me"})
	called := deltas(call(0, "b"), model.Delta{Kind: model.DeltaFinish, FinishReason: model.FinishToolCalls})
	tests := []struct {
		name, choice string
		stream       func(*model.Request, func(model.Delta) error) error
		status       string
	}{
		{"required, text", `"required"`, text, responses.ResponseIncomplete},
		{"named, text", `{"type":"function","name":"b"}`, text, responses.ResponseIncomplete},
		{"allowed_tools required, text", `{"type":"allowed_tools","mode":"required","tools":[{"type":"function","name":"b"}]}`, text, responses.ResponseIncomplete},
		{"required, a call", `"required"`, called, responses.StatusCompleted},
		{"named, a call", `{"type":"function","name":"b"}`, called, responses.StatusCompleted},
		{"auto, text", `"auto"`, text, responses.StatusCompleted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &fakeBackend{stream: tt.stream}
			resp, err := newEngine(t, b).Run(context.Background(), decodeRequest(t, `{"model":"m","input":"x","tool_choice":`+tt.choice+`,`+twoTools+`}`), nil)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Status != tt.status {
				t.Fatalf("status %s, want %s", resp.Status, tt.status)
			}
			if tt.status == responses.ResponseIncomplete {
				if resp.IncompleteDetails == nil || resp.IncompleteDetails.Reason != responses.ReasonToolChoiceRequired {
					t.Errorf("incomplete details %+v", resp.IncompleteDetails)
				}
				if len(resp.Output) != 1 || resp.Output[0].Text() != "no call from me" {
					t.Errorf("the answer is not kept: %+v", resp.Output)
				}
			}
		})
	}
}
