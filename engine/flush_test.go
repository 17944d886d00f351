package engine_test

import (
	"context"
	"slices"
	"testing"

	"github.com/loomgate/loom/engine"
	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/responses"
)

// flushAt is what the sink had been given when RunOptions.Flush was
// called: events, and text deltas among them.
type flushAt struct{ events, deltas int }

// streamFlushes runs a streaming request over b and returns what the sink
// had at each flush.
func streamFlushes(t *testing.T, b *fakeBackend) []flushAt {
	t.Helper()
	e := newEngine(t, b)
	var seen flushAt
	var at []flushAt
	sink := func(ev *responses.Event) error {
		seen.events++
		if ev.Type == responses.EventOutputTextDelta {
			seen.deltas++
		}
		return nil
	}
	_, err := e.RunWith(context.Background(), decodeRequest(t, `{"model":"m","input":"x","stream":true}`), sink,
		&engine.RunOptions{Flush: func() { at = append(at, seen) }})
	if err != nil {
		t.Fatal(err)
	}
	return at
}

// deltasAt returns the text deltas sent at each flush.
func deltasAt(at []flushAt) []int {
	out := make([]int, len(at))
	for i, f := range at {
		out[i] = f.deltas
	}
	return out
}

// TestFlushAtUpstreamPauses: the engine calls RunOptions.Flush where the
// upstream paused and when the turn ended, after the events built so
// far; a streaming run asks for a streamed turn, a run without a sink
// for a whole one.
func TestFlushAtUpstreamPauses(t *testing.T) {
	text := func(s string) model.Delta { return model.Delta{Kind: model.DeltaText, Text: s} }
	pause := model.Delta{Kind: model.DeltaPause}
	b := &fakeBackend{stream: deltas(text("a"), text("b"), pause, text("c"), pause,
		model.Delta{Kind: model.DeltaFinish, FinishReason: model.FinishStop})}
	// The first delta, two pauses, then the end of the turn.
	if got := deltasAt(streamFlushes(t, b)); !slices.Equal(got, []int{1, 2, 3, 3}) {
		t.Errorf("text deltas sent at each flush: %v, want [1 2 3 3]", got)
	}
	e := newEngine(t, b)
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
	at := streamFlushes(t, &fakeBackend{stream: deltas(pause, pause, model.Delta{Kind: model.DeltaText, Text: "a"}, pause,
		model.Delta{Kind: model.DeltaFinish, FinishReason: model.FinishStop})})
	// The delta, the pause after it, then the end of the turn; none before.
	if got := deltasAt(at); !slices.Equal(got, []int{1, 1, 1}) {
		t.Fatalf("text deltas sent at each flush: %v, want [1 1 1]", got)
	}
	// response.created, in_progress, output_item.added, content_part.added
	// and the delta went out together at the first flush.
	if at[0].events != 5 {
		t.Errorf("events at the first flush: %d, want 5", at[0].events)
	}
}

// TestFirstDeltaFlushedInABurst: when the upstream is ahead (no pause
// between its chunks), the turn's first delta is still flushed as soon as
// it is built, not held until the burst ends; the rest of the burst is
// coalesced.
func TestFirstDeltaFlushedInABurst(t *testing.T) {
	text := func(s string) model.Delta { return model.Delta{Kind: model.DeltaText, Text: s} }
	at := streamFlushes(t, &fakeBackend{stream: deltas(text("a"), text("b"), text("c"), model.Delta{Kind: model.DeltaFinish, FinishReason: model.FinishStop})})
	if got := deltasAt(at); !slices.Equal(got, []int{1, 3}) {
		t.Errorf("text deltas sent at each flush: %v, want [1 3] (the first at once, the rest at the turn's end)", got)
	}
}
