package engine_test

import (
	"context"
	"testing"

	"github.com/loomgate/loom/engine"
	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/responses"
)

// A run copies the caller's input before giving its items ids (a stored
// response's messages get them), unless the caller gives the input away
// (the server does): then the ids are given in place, the model reads the
// same items, and its output is appended in the room past the input's end
// rather than into a copy of the whole input.
func TestGiveInput(t *testing.T) {
	const body = `{"model":"m","input":[{"role":"user","content":"a"},{"role":"user","content":"b"}]}` // stored: its messages get ids
	text := model.Delta{Kind: model.DeltaText, Text: "ok"}
	finish := model.Delta{Kind: model.DeltaFinish, FinishReason: model.FinishStop}
	for _, give := range []bool{false, true} {
		b := &fakeBackend{stream: deltas(text, finish)}
		req, err := responses.DecodeRequest([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		in := req.Input.Items
		if _, err := newEngine(t, b).RunWith(context.Background(), req, nil, &engine.RunOptions{GiveInput: give}); err != nil {
			t.Fatal(err)
		}
		if len(b.requests) != 1 || len(b.requests[0].Items) != 2 {
			t.Fatalf("give %v: upstream requests %+v", give, b.requests)
		}
		seen := b.requests[0].Items
		switch {
		case !give && (in[0].ID != "" || &seen[0] == &in[0]):
			t.Errorf("not given: the caller's input was changed or used (id %q)", in[0].ID)
		case give && (in[0].ID == "" || &seen[0] != &in[0]):
			t.Errorf("given: the model did not read the input itself (id %q)", in[0].ID)
		}
		if full := in[:cap(in)]; give && (len(full) < 3 || full[2].Type != responses.ItemMessage || full[2].Text() != "ok") {
			t.Errorf("given: the output was not appended in the input's room: %+v", full[len(in):])
		}
	}
}
