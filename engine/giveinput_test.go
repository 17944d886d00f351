package engine_test

import (
	"context"
	"testing"

	"github.com/loomgate/loom/engine"
	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/tools"
	"github.com/loomgate/loom/tools/toolstest"
)

// A run copies the caller's input before giving its items ids (a stored
// response's messages get them), unless the caller gives the input away
// (the server does): then the ids are given in place and the model reads
// the same items. A turn that made calls adds its words to the
// conversation in the room past the input's end, where the next turn reads
// them, rather than into a copy of the whole input; the last turn, which
// made none, adds nothing (nothing reads the conversation after it).
func TestGiveInput(t *testing.T) {
	const body = `{"model":"m","input":[{"role":"user","content":"a"},{"role":"user","content":"b"}],"tools":[{"type":"fake"}]}` // stored: its messages get ids
	text := model.Delta{Kind: model.DeltaText, Text: "ok"}
	finish := model.Delta{Kind: model.DeltaFinish, FinishReason: model.FinishStop}
	for _, tc := range []struct {
		name  string
		give  bool
		turns [][]model.Delta
	}{
		{"not given", false, [][]model.Delta{{text, finish}}},
		{"given, one turn", true, [][]model.Delta{{text, finish}}},
		{"given, a call then an answer", true, [][]model.Delta{{text, call(0, "a1")}, {text, finish}}},
	} {
		b := scriptedTurns(tc.turns...)
		e := newToolEngine(t, b, &toolstest.Provider{Type: "fake", List: []tools.Server{&toolstest.Server{Label: "A", ToolNames: []string{"a1"}, Log: &toolstest.Log{}}}})
		req, err := responses.DecodeRequest([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		in := req.Input.Items
		if _, err := e.RunWith(context.Background(), req, nil, &engine.RunOptions{GiveInput: tc.give}); err != nil {
			t.Fatal(err)
		}
		if len(b.requests) != len(tc.turns) || len(b.requests[0].Items) != 2 {
			t.Fatalf("%s: upstream requests %+v", tc.name, b.requests)
		}
		seen := b.requests[0].Items
		switch {
		case !tc.give && (in[0].ID != "" || &seen[0] == &in[0]):
			t.Errorf("%s: the caller's input was changed or used (id %q)", tc.name, in[0].ID)
		case tc.give && (in[0].ID == "" || &seen[0] != &in[0]):
			t.Errorf("%s: the model did not read the input itself (id %q)", tc.name, in[0].ID)
		}
		if !tc.give {
			continue
		}
		room := in[len(in):cap(in)]
		if len(room) < 3 {
			t.Fatalf("%s: no room past the input: cap %d", tc.name, cap(in))
		}
		if len(tc.turns) == 1 {
			if room[0].Type != "" {
				t.Errorf("%s: the last turn's output was added to the conversation: %+v", tc.name, room[0])
			}
			continue
		}
		// The first turn's words and its call's pair, in the room; the
		// second turn read them there, after the input itself.
		next := b.requests[1].Items
		if room[0].Type != responses.ItemMessage || room[0].Text() != "ok" || len(next) != 5 || &next[0] != &in[0] || next[2].Text() != "ok" {
			t.Errorf("%s: the first turn's words were not added in the input's room: room %+v, next turn %+v", tc.name, room[:3], next)
		}
	}
}
