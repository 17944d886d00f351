package engine

import (
	"testing"

	"github.com/loomgate/loom/responses"
)

// TestRunInput: the run writes in the request's input items only when
// the caller gives them; otherwise it reads a copy, and the caller's
// request stays as it was.
func TestRunInput(t *testing.T) {
	message := responses.Item{Type: responses.ItemMessage, Role: "user", Content: []responses.ContentPart{{Type: responses.PartInputText, Text: "hi"}}}
	for _, tt := range []struct {
		name string
		opts *RunOptions
		same bool // the run reads the request's array
	}{
		{"no options", nil, false},
		{"not given", &RunOptions{}, false},
		{"given", &RunOptions{GiveInput: true}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			items := []responses.Item{message, message}
			req := &responses.Request{Input: responses.Input{Items: items, Set: true}}
			got := runInput(req, tt.opts)
			if len(got) != len(items) {
				t.Fatalf("%d items, want %d", len(got), len(items))
			}
			if same := &got[0] == &items[0]; same != tt.same {
				t.Errorf("the run reads the request's array: %t, want %t", same, tt.same)
			}
		})
	}
}
