package engine_test

import (
	"context"
	"strings"
	"testing"

	"github.com/loomgate/loom/engine"
	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/store"
)

// An input item's id is given wherever anyone can see it again: the
// stored input items of a response, its conversation's items, the
// conversation a WebSocket connection keeps to continue, and, with store
// false, every item other than a message (some kinds stand for their
// call by their id in the model's conversation).
func TestInputIDsWhereSeen(t *testing.T) {
	ctx := context.Background()
	const input = `[{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},` +
		`{"type":"function_call_output","call_id":"c1","output":"x"},` +
		`{"role":"user","content":"a"},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"b","annotations":[]}]},` +
		`{"id":"msg_client","role":"user","content":"c"}]`
	prefixes := map[string]string{responses.ItemMessage: "msg", responses.ItemFunctionCall: "fc", responses.ItemFunctionCallOutput: "fco"}
	// checkIDs fails unless every item has an id of its type's prefix,
	// none twice, and the client's own kept as it was.
	checkIDs := func(t *testing.T, what string, items []responses.Item, want int) {
		t.Helper()
		if len(items) < want {
			t.Fatalf("%s: %d items, want at least %d", what, len(items), want)
		}
		seen := map[string]bool{}
		for i, it := range items[:want] {
			switch {
			case it.Text() == "c" && it.ID != "msg_client":
				t.Errorf("%s: item %d: the client's id became %q", what, i, it.ID)
			case it.ID == "" || seen[it.ID]:
				t.Errorf("%s: item %d (%s): id %q empty or repeated", what, i, it.Type, it.ID)
			case it.Text() != "c" && (!strings.HasPrefix(it.ID, prefixes[it.Type]+"_") || len(it.ID) != len(prefixes[it.Type])+1+48):
				t.Errorf("%s: item %d (%s): id %q", what, i, it.Type, it.ID)
			}
			seen[it.ID] = true
		}
	}
	run := func(t *testing.T, e *engine.Engine, body string, opts *engine.RunOptions) (*responses.Request, *responses.Response) {
		t.Helper()
		req, err := responses.DecodeRequest([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		opts.GiveInput = true
		resp, err := e.RunWith(ctx, req, nil, opts)
		if err != nil {
			t.Fatal(err)
		}
		return req, resp
	}
	newRun := func() *engine.Engine {
		text := model.Delta{Kind: model.DeltaText, Text: "ok"}
		finish := model.Delta{Kind: model.DeltaFinish, FinishReason: model.FinishStop}
		return newEngine(t, &fakeBackend{stream: deltas(text, finish)})
	}

	t.Run("stored", func(t *testing.T) {
		e := newRun()
		req, resp := run(t, e, `{"model":"m","input":`+input+`}`, &engine.RunOptions{})
		items, _, err := e.InputItems(ctx, resp.ID, store.Page{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		checkIDs(t, "input items", items, 5)
		for i := range items {
			if items[i].ID != req.Input.Items[i].ID {
				t.Errorf("stored item %d: id %q, the run's %q", i, items[i].ID, req.Input.Items[i].ID)
			}
		}
	})
	t.Run("conversation", func(t *testing.T) {
		e := newRun()
		conv, err := e.CreateConversation(ctx, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		run(t, e, `{"model":"m","store":false,"conversation":"`+conv.ID+`","input":`+input+`}`, &engine.RunOptions{})
		items, _, err := e.ConversationItems(ctx, conv.ID, store.Page{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		checkIDs(t, "conversation items", items, 6) // and the answer
	})
	t.Run("kept", func(t *testing.T) {
		var kept *engine.Continuation
		run(t, newRun(), `{"model":"m","store":false,"input":`+input+`}`, &engine.RunOptions{Keep: func(c *engine.Continuation) { kept = c }})
		if kept == nil {
			t.Fatal("nothing kept")
		}
		checkIDs(t, "kept conversation", kept.Items, 6)
	})
	t.Run("unstored", func(t *testing.T) {
		req, _ := run(t, newRun(), `{"model":"m","store":false,"input":`+input+`}`, &engine.RunOptions{})
		checkIDs(t, "calls", req.Input.Items, 2)
		if got := req.Input.Items[4].ID; got != "msg_client" {
			t.Errorf("the client's id became %q", got)
		}
	})
}
