package engine_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/responses"
)

// TestStoredEventsAreTheStreamedOnes: the events a stored stream replays
// are byte for byte the ones its client was sent, response.in_progress
// too, which the engine keeps as its difference from response.created
// while the stream is open.
func TestStoredEventsAreTheStreamedOnes(t *testing.T) {
	text := func(s string) model.Delta { return model.Delta{Kind: model.DeltaText, Text: s} }
	e := newEngine(t, &fakeBackend{stream: deltas(text("Hel"), text("lo"),
		model.Delta{Kind: model.DeltaFinish, FinishReason: model.FinishStop})})
	var sent [][]byte
	sink := func(ev *responses.Event) error {
		b, err := ev.EncodeJSON(responses.DialectOpenAI)
		if err != nil {
			return err
		}
		sent = append(sent, bytes.Clone(b))
		return nil
	}
	ctx := context.Background()
	resp, err := e.Run(ctx, decodeRequest(t, `{"model":"m","input":"x","stream":true,"instructions":"Be brief."}`), sink)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := e.Events(ctx, resp.ID, -1)
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) != len(sent) || len(sent) < 3 {
		t.Fatalf("%d events stored, %d sent", len(stored), len(sent))
	}
	for i := range sent {
		if !bytes.Equal(stored[i], sent[i]) {
			t.Errorf("stored event %d is\n%s\nsent\n%s", i, stored[i], sent[i])
		}
	}
	if !bytes.Contains(sent[1], []byte(`"type":"response.in_progress"`)) {
		t.Errorf("event 1 is not response.in_progress: %s", sent[1])
	}
}
