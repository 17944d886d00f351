package responses

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// seqIDs makes deterministic ids: msg_1, rs_2, ...
func seqIDs() func(string) string {
	n := 0
	return func(prefix string) string {
		n++
		return fmt.Sprintf("%s_%d", prefix, n)
	}
}

// recorder keeps a copy of every event.
type recorder struct{ events []Event }

func (r *recorder) sink(ev *Event) error {
	c := *ev
	if c.Item != nil {
		it := *c.Item
		c.Item = &it
	}
	r.events = append(r.events, c)
	return nil
}

func (r *recorder) types() []string {
	var out []string
	for _, e := range r.events {
		out = append(out, e.Type)
	}
	return out
}

func TestBuilderOrder(t *testing.T) {
	rec := &recorder{}
	resp := &Response{ID: "resp_1"}
	b := NewBuilder(resp, seqIDs(), rec.sink)
	steps := []func() error{
		b.Start,
		func() error { return b.ReasoningDelta("think ") },
		func() error { return b.ReasoningDelta("more") },
		func() error { return b.TextDelta("Hel") },
		func() error { return b.TextDelta("lo") },
		func() error { return b.ToolCallDelta(0, "call_a", "get", `{"a":`) },
		func() error { return b.ToolCallDelta(1, "", "put", `{}`) },
		func() error { return b.ToolCallDelta(0, "", "", `1}`) },
		b.EndTurn,
		func() error { return b.Complete(&Usage{InputTokens: 3, OutputTokens: 4, TotalTokens: 7}, 42) },
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	want := []string{
		EventCreated, EventInProgress,
		EventOutputItemAdded, EventContentPartAdded, EventReasoningTextDelta, EventReasoningTextDelta,
		EventReasoningTextDone, EventContentPartDone, EventOutputItemDone,
		EventOutputItemAdded, EventContentPartAdded, EventOutputTextDelta, EventOutputTextDelta,
		EventOutputTextDone, EventContentPartDone, EventOutputItemDone,
		EventOutputItemAdded, EventFunctionArgsDelta,
		EventOutputItemAdded, EventFunctionArgsDelta,
		EventFunctionArgsDelta,
		EventFunctionArgsDone, EventOutputItemDone,
		EventFunctionArgsDone, EventOutputItemDone,
		EventCompleted,
	}
	if got := rec.types(); !slices.Equal(got, want) {
		t.Fatalf("event order:\n got %v\nwant %v", got, want)
	}
	for i, e := range rec.events {
		if e.SequenceNumber != i {
			t.Errorf("event %d has sequence_number %d", i, e.SequenceNumber)
		}
	}
	if len(resp.Output) != 4 {
		t.Fatalf("output has %d items, want 4", len(resp.Output))
	}
	if got := resp.Output[0].Text(); got != "think more" {
		t.Errorf("reasoning text %q", got)
	}
	if got := resp.Output[1].Text(); got != "Hello" {
		t.Errorf("message text %q", got)
	}
	if c := resp.Output[2]; c.CallFields().CallID != "call_a" || c.CallFields().Arguments != `{"a":1}` || c.Status != StatusCompleted {
		t.Errorf("first call %+v", c)
	}
	if c := resp.Output[3]; c.CallFields().CallID == "" || c.CallFields().Name != "put" || c.CallFields().Arguments != `{}` {
		t.Errorf("second call %+v", c)
	}
	if resp.Status != ResponseCompleted || resp.CompletedAt == nil || *resp.CompletedAt != 42 {
		t.Errorf("status %q completed_at %v", resp.Status, resp.CompletedAt)
	}
	// Every delta belongs to an item announced before it, at the index
	// it was announced with.
	announced := map[string]int{}
	for _, e := range rec.events {
		switch e.Type {
		case EventOutputItemAdded:
			announced[e.Item.ID] = e.OutputIndex
		case EventOutputTextDelta, EventReasoningTextDelta, EventFunctionArgsDelta:
			idx, ok := announced[e.ItemID]
			if !ok || idx != e.OutputIndex {
				t.Errorf("%s for %s at %d before output_item.added (announced %v)", e.Type, e.ItemID, e.OutputIndex, ok)
			}
		}
	}
}

func TestBuilderTurnCallsInOrder(t *testing.T) {
	b := NewBuilder(&Response{}, seqIDs(), nil)
	b.Start()
	b.ToolCallDelta(3, "c3", "x", "{}")
	b.ToolCallDelta(1, "c1", "y", "{}")
	b.EndTurn()
	calls := b.TurnCalls()
	if len(calls) != 2 || calls[0].CallFields().CallID != "c3" || calls[1].CallFields().CallID != "c1" {
		t.Fatalf("calls %+v", calls)
	}
	if again := b.TurnCalls(); again != nil {
		t.Fatalf("TurnCalls twice returned %v", again)
	}
}

func TestBuilderFailClosesOpenItems(t *testing.T) {
	rec := &recorder{}
	resp := &Response{}
	b := NewBuilder(resp, seqIDs(), rec.sink)
	b.Start()
	b.TextDelta("partial")
	code := "upstream_error"
	if err := b.Fail(ResponseFailed, &ErrorPayload{Type: ErrUpstream, Code: &code, Message: "cut"}, nil); err != nil {
		t.Fatal(err)
	}
	got := rec.types()
	want := []string{EventCreated, EventInProgress, EventOutputItemAdded, EventContentPartAdded, EventOutputTextDelta,
		EventOutputTextDone, EventContentPartDone, EventOutputItemDone, EventError, EventFailed}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
	if resp.Output[0].Status != StatusIncomplete {
		t.Errorf("open message closed as %q, want incomplete", resp.Output[0].Status)
	}
	if resp.Error == nil || resp.Error.Code != "upstream_error" {
		t.Errorf("response error %+v", resp.Error)
	}
	if err := b.TextDelta("late"); !errors.Is(err, ErrBuilderEnded) {
		t.Errorf("delta after the end: %v, want ErrBuilderEnded", err)
	}
}

func TestBuilderIncomplete(t *testing.T) {
	resp := &Response{}
	b := NewBuilder(resp, seqIDs(), nil)
	b.Start()
	b.TextDelta("cut sh")
	if err := b.Incomplete(ReasonMaxOutputTokens, &Usage{}); err != nil {
		t.Fatal(err)
	}
	if resp.Status != ResponseIncomplete || resp.IncompleteDetails.Reason != ReasonMaxOutputTokens {
		t.Fatalf("status %q details %+v", resp.Status, resp.IncompleteDetails)
	}
	if resp.Output[0].Status != StatusIncomplete {
		t.Fatalf("message status %q", resp.Output[0].Status)
	}
}

func TestEventJSONMatchesEncodingJSON(t *testing.T) {
	// appendString must agree with encoding/json on every string, including
	// control characters, quotes, invalid UTF-8 and line separators.
	for _, s := range []string{"", "plain", "q\"b\\s", "\n\r\t\x00\x1f", "é😀", "bad\xffutf8", "\u2028\u2029", "<&>"} {
		ev := Event{Type: EventOutputTextDelta, ItemID: "msg_1", Delta: s}
		b, err := ev.AppendJSON(nil, DialectOpenAI)
		if err != nil {
			t.Fatal(err)
		}
		var back struct {
			Delta string `json:"delta"`
		}
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("%q: invalid JSON %s: %v", s, b, err)
		}
		want := strings.ToValidUTF8(s, "\uFFFD")
		if back.Delta != want {
			t.Errorf("round trip of %q gave %q", s, back.Delta)
		}
	}
}

func TestDialectRenames(t *testing.T) {
	ev := Event{Type: EventReasoningTextDelta, ItemID: "rs_1", Delta: "x"}
	b, _ := ev.AppendJSON(nil, DialectOpenResponses)
	if !strings.Contains(string(b), `"type":"response.reasoning.delta"`) {
		t.Errorf("openresponses reasoning delta: %s", b)
	}
	b, _ = ev.AppendJSON(nil, DialectOpenAI)
	if !strings.Contains(string(b), `"type":"response.reasoning_text.delta"`) {
		t.Errorf("openai reasoning delta: %s", b)
	}
	if got := DialectOpenResponses.ItemType("mcp_call"); got != "loom:mcp_call" {
		t.Errorf("non-standard item type renamed to %q", got)
	}
	if got := DialectOpenResponses.ItemType(ItemFunctionCall); got != ItemFunctionCall {
		t.Errorf("standard item type renamed to %q", got)
	}
	stored, _ := (&Event{Type: EventOutputItemAdded, Item: &Item{Type: "mcp_call", ID: "x"}}).AppendJSON(nil, DialectOpenAI)
	re, err := DialectOpenResponses.Rewrite(stored)
	if err != nil || !strings.Contains(string(re), `"loom:mcp_call"`) {
		t.Errorf("rewrite of a stored event: %s %v", re, err)
	}
}

// BenchmarkBuilderTextDeltas measures the event builder on the hot path: a
// text delta built, numbered and encoded as JSON.
func BenchmarkBuilderTextDeltas(b *testing.B) {
	var buf []byte
	sink := func(ev *Event) error {
		var err error
		buf, err = ev.AppendJSON(buf[:0], DialectOpenAI)
		return err
	}
	bl := NewBuilder(&Response{ID: "resp_1"}, seqIDs(), sink)
	bl.Start()
	bl.TextDelta("warm")
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := bl.TextDelta(" token"); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// TestStartEncodesTheSnapshotOnce checks that response.in_progress,
// which copies created's encoding of the response, encodes as it would on
// its own, in each dialect and when the sink switches dialects between
// the two (the copy is then not used).
func TestStartEncodesTheSnapshotOnce(t *testing.T) {
	req, err := DecodeRequest(toolsBody(2))
	if err != nil {
		t.Fatal(err)
	}
	for _, dialects := range [][2]Dialect{{DialectOpenAI, DialectOpenAI}, {DialectOpenResponses, DialectOpenResponses}, {DialectOpenAI, DialectOpenResponses}} {
		var got, want []string
		n := 0
		sink := func(ev *Event) error {
			d := dialects[min(n, 1)]
			n++
			b, err := ev.AppendJSON(nil, d)
			if err != nil {
				return err
			}
			alone := *ev
			alone.snapshot = nil
			w, err := alone.AppendJSON(nil, d)
			if err != nil {
				return err
			}
			got, want = append(got, string(b)), append(want, string(w))
			return nil
		}
		// An item whose type the dialects name differently: the
		// snapshot's encoding differs by dialect.
		resp := &Response{ID: "resp_1", Object: "response", Model: req.Model, Tools: req.Tools,
			Output: []Item{{Type: ItemMCPListTools, ID: "mcpl_1", Tool: &ItemTool{ServerLabel: "s"}}}}
		b := NewBuilder(resp, seqIDs(), sink)
		if err := b.Start(); err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || !slices.Equal(got, want) || !strings.Contains(got[1], `"name":"tool_1"`) {
			t.Errorf("dialects %v: Start encoded\n%q\nalone:\n%q", dialects, got, want)
		}
		if b.snapshot.b != nil || b.snapshot.ok {
			t.Errorf("dialects %v: the builder still holds the snapshot's encoding", dialects)
		}
	}
}
