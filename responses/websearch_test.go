package responses

import (
	"encoding/json"
	"slices"
	"testing"
)

// TestBuilderWebSearchCall: a web search call is in progress from the
// first piece of its arguments, which no event shows, searching once the
// turn ends, and completed with its action; a failed one has no completed
// event. The item shows only its type, id, status and action.
func TestBuilderWebSearchCall(t *testing.T) {
	for _, failed := range []bool{false, true} {
		rec := &recorder{}
		b := NewBuilder(&Response{ID: "resp_1"}, seqIDs(), rec.sink)
		steps := []func() error{
			b.Start,
			func() error { return b.ServerCallDelta(0, ItemWebSearchCall, "web_search", "web_search", `{"query":`) },
			func() error { return b.ServerCallDelta(0, ItemWebSearchCall, "", "web_search", `"loom"}`) },
			b.EndTurn,
			func() error {
				msg := ""
				if failed {
					msg = "not configured"
				}
				return b.FinishServerCall("ws_1", json.RawMessage(`{"type":"search","query":"loom"}`), msg)
			},
		}
		for i, step := range steps {
			if err := step(); err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
		}
		want := []string{EventCreated, EventInProgress, EventOutputItemAdded, EventWebSearchCallInProgress, EventWebSearchCallSearching,
			EventWebSearchCallCompleted, EventOutputItemDone}
		status := StatusCompleted
		if failed {
			want = slices.Delete(want, 5, 6)
			status = ResponseFailed
		}
		if got := rec.types(); !slices.Equal(got, want) {
			t.Errorf("failed=%v: events %v, want %v", failed, got, want)
		}
		done, _ := json.Marshal(rec.events[len(rec.events)-1].Item)
		wantJSON := `{"type":"web_search_call","id":"ws_1","status":"` + status + `","action":{"type":"search","query":"loom"}}`
		if string(done) != wantJSON {
			t.Errorf("failed=%v: item %s, want %s", failed, done, wantJSON)
		}
	}
}
