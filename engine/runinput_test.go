package engine

import (
	"testing"

	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/store"
)

// TestRunInput: the run writes in the request's input items only when
// they are its own to give; the decode cache's (Input.Shared) it reads
// as they are while nothing is written in them, and copies otherwise.
func TestRunInput(t *testing.T) {
	sealed := "sealed"
	message := responses.Item{Type: responses.ItemMessage, Role: "user", Content: []responses.ContentPart{{Type: responses.PartInputText, Text: "hi"}}}
	call := responses.Item{Type: responses.ItemFunctionCall, Call: &responses.ItemCall{CallID: "c", Name: "f", Arguments: "{}"}}
	reasoning := responses.Item{Type: responses.ItemReasoning, ID: "rs_1", Reasoning: &responses.ItemReasoningFields{EncryptedContent: &sealed}}
	given := &RunOptions{GiveInput: true}
	for _, tt := range []struct {
		name   string
		items  []responses.Item
		shared bool
		opts   *RunOptions
		queued *store.Record
		ids    bool // messages get ids (inputIDsSeen)
		same   bool // the run reads the request's array
	}{
		{"not given", []responses.Item{message}, false, nil, nil, false, false},
		{"given", []responses.Item{message, call}, false, given, nil, true, true},
		{"shared, nothing written", []responses.Item{message, message}, true, given, nil, false, true},
		{"shared, a message gets an id", []responses.Item{message}, true, given, nil, true, false},
		{"shared, a call gets an id", []responses.Item{message, call}, true, given, nil, false, false},
		{"shared, sealed reasoning", []responses.Item{message, reasoning}, true, given, nil, false, false},
		{"shared, queued", []responses.Item{message}, true, given, &store.Record{}, false, false},
		{"shared, not given", []responses.Item{message}, true, nil, nil, false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := &responses.Request{Input: responses.Input{Items: tt.items, Set: true, Shared: tt.shared}}
			got := runInput(req, tt.opts, tt.queued, tt.ids)
			if len(got) != len(tt.items) {
				t.Fatalf("%d items, want %d", len(got), len(tt.items))
			}
			if same := &got[0] == &tt.items[0]; same != tt.same {
				t.Errorf("the run reads the request's array: %t, want %t", same, tt.same)
			}
		})
	}
}
