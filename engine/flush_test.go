package engine_test

import (
	"context"
	"testing"

	"github.com/loomgate/loom/engine"
	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/responses"
)

// TestFlushAtUpstreamPauses: the engine calls RunOptions.Flush where the
// upstream paused and when the turn ended, after the events built so
// far; a streaming run asks for a streamed turn, a run without a sink
// for a whole one.
func TestFlushAtUpstreamPauses(t *testing.T) {
	text := func(s string) model.Delta { return model.Delta{Kind: model.DeltaText, Text: s} }
	pause := model.Delta{Kind: model.DeltaPause}
	b := &fakeBackend{stream: deltas(text("a"), text("b"), pause, text("c"), pause,
		model.Delta{Kind: model.DeltaFinish, FinishReason: model.FinishStop})}
	e := newEngine(t, b)
	var deltasSeen int
	var atFlush []int
	sink := func(ev *responses.Event) error {
		if ev.Type == responses.EventOutputTextDelta {
			deltasSeen++
		}
		return nil
	}
	_, err := e.RunWith(context.Background(), decodeRequest(t, `{"model":"m","input":"x","stream":true}`), sink,
		&engine.RunOptions{Flush: func() { atFlush = append(atFlush, deltasSeen) }})
	if err != nil {
		t.Fatal(err)
	}
	// The first delta, two pauses, then the end of the turn.
	if len(atFlush) != 4 || atFlush[0] != 1 || atFlush[1] != 2 || atFlush[2] != 3 || atFlush[3] != 3 {
		t.Errorf("text deltas sent at each flush: %v, want [1 2 3 3]", atFlush)
	}
	if b.requests[0].Whole {
		t.Error("a streaming run asked for a whole turn")
	}

	if _, err := e.Run(context.Background(), decodeRequest(t, `{"model":"m","input":"x"}`), nil); err != nil {
		t.Fatal(err)
	}
	if !b.requests[1].Whole {
		t.Error("a run without a sink asked for a streamed turn")
	}
}

// TestNoFlushBeforeTheUpstreamSpeaks: a pause before the upstream sent
// anything this turn (the wait for its first bytes) does not flush: the
// events built before the call go out with the first delta, which is
// flushed at once, one write on the way to the first token instead of two.
func TestNoFlushBeforeTheUpstreamSpeaks(t *testing.T) {
	pause := model.Delta{Kind: model.DeltaPause}
	b := &fakeBackend{stream: deltas(pause, pause, model.Delta{Kind: model.DeltaText, Text: "a"}, pause,
		model.Delta{Kind: model.DeltaFinish, FinishReason: model.FinishStop})}
	e := newEngine(t, b)
	var events, deltasSeen int
	type flushAt struct{ events, deltas int }
	var atFlush []flushAt
	sink := func(ev *responses.Event) error {
		events++
		if ev.Type == responses.EventOutputTextDelta {
			deltasSeen++
		}
		return nil
	}
	_, err := e.RunWith(context.Background(), decodeRequest(t, `{"model":"m","input":"x","stream":true}`), sink,
		&engine.RunOptions{Flush: func() { atFlush = append(atFlush, flushAt{events, deltasSeen}) }})
	if err != nil {
		t.Fatal(err)
	}
	// The delta, the pause after it, then the end of the turn; none before.
	if len(atFlush) != 3 || atFlush[0].deltas != 1 || atFlush[2].deltas != 1 {
		t.Fatalf("flushes (events, text deltas sent): %v, want three, all after the delta", atFlush)
	}
	// response.created, in_progress, output_item.added, content_part.added
	// and the delta went out together at the first flush.
	if atFlush[0].events != 5 {
		t.Errorf("events at the first flush: %d, want 5", atFlush[0].events)
	}
}

// TestFirstDeltaFlushedInABurst: when the upstream is ahead (no pause
// between its chunks), the turn's first delta is still flushed as soon as
// it is built, not held until the burst ends; the rest of the burst is
// coalesced.
func TestFirstDeltaFlushedInABurst(t *testing.T) {
	text := func(s string) model.Delta { return model.Delta{Kind: model.DeltaText, Text: s} }
	b := &fakeBackend{stream: deltas(text("a"), text("b"), text("c"), model.Delta{Kind: model.DeltaFinish, FinishReason: model.FinishStop})}
	e := newEngine(t, b)
	var deltasSeen int
	var atFlush []int
	sink := func(ev *responses.Event) error {
		if ev.Type == responses.EventOutputTextDelta {
			deltasSeen++
		}
		return nil
	}
	_, err := e.RunWith(context.Background(), decodeRequest(t, `{"model":"m","input":"x","stream":true}`), sink,
		&engine.RunOptions{Flush: func() { atFlush = append(atFlush, deltasSeen) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(atFlush) != 2 || atFlush[0] != 1 || atFlush[1] != 3 {
		t.Errorf("text deltas sent at each flush: %v, want [1 3] (the first at once, the rest at the turn's end)", atFlush)
	}
}
