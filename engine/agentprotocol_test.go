package engine_test

import (
	"context"
	"strings"
	"testing"

	"github.com/loomgate/loom/engine"
	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/store/sqlite"
)

// newCompactingEngine is an engine with a sealer and a token counter
// that counts count tokens for every turn.
func newCompactingEngine(t *testing.T, b model.Backend, count int) *engine.Engine {
	t.Helper()
	db, err := sqlite.Open(context.Background(), ":memory:", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	sealer, err := engine.NewSealer([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	return engine.New(b, db, &engine.Options{Models: []string{"m"}, Sealer: sealer, Upstream: model.Capabilities{
		CountInput: func(context.Context, *model.Request) (model.InputCount, error) {
			return model.InputCount{Tokens: count}, nil
		}}})
}

// itemTypes lists the types of items.
func itemTypes(items []responses.Item) string {
	var types []string
	for _, it := range items {
		types = append(types, it.Type)
	}
	return strings.Join(types, ",")
}

// TestAsyncCallGoesOn: an async tool's call is reported with async set;
// the next turn reads the call and its acknowledgement, and the tool's
// description carries the hint. A later request's output of the call
// comes after the acknowledgement and the model's answer.
func TestAsyncCallGoesOn(t *testing.T) {
	b := scriptedTurns([]model.Delta{call(0, "slow"), {Kind: model.DeltaFinish, FinishReason: model.FinishToolCalls}},
		[]model.Delta{{Kind: model.DeltaText, Text: "going on"}})
	e := newEngine(t, b)
	tools := `,"tools":[{"type":"function","name":"slow","description":"Slow.","async":true},{"type":"function","name":"quick"}]`
	resp, err := e.Run(context.Background(), decodeRequest(t, `{"model":"m","input":"x"`+tools+`}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := itemTypes(resp.Output); got != "function_call,message" || !resp.Output[0].CallFields().Async {
		t.Fatalf("output %s (async %v), want the async call and the answer", got, resp.Output[0].CallFields().Async)
	}
	if len(b.requests) != 2 {
		t.Fatalf("%d turns, want 2", len(b.requests))
	}
	second := b.requests[1]
	if got := itemTypes(second.Items); got != "message,function_call,function_call_output" || !strings.Contains(string(second.Items[2].CallFields().Output), "not available yet") {
		t.Errorf("the continuation read %s: %+v", got, second.Items)
	}
	for _, tool := range second.Tools {
		hinted := tool.Description != nil && strings.Contains(*tool.Description, "runs asynchronously")
		if hinted != (tool.Name == "slow") {
			t.Errorf("tool %s described as %v", tool.Name, tool.Description)
		}
	}

	_, err = e.Run(context.Background(), decodeRequest(t, `{"model":"m","previous_response_id":"`+resp.ID+`"`+tools+
		`,"input":[{"type":"function_call_output","call_id":"slow_id","output":"the result"}]}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	third := b.requests[2]
	if got := itemTypes(third.Items); got != "message,function_call,function_call_output,message,function_call_output" || third.Items[4].OutputString() != "the result" {
		t.Errorf("the later turn read %s", got)
	}
	// Without the tools offered again, the stored call's own mark says
	// it was async.
	if _, err = e.Run(context.Background(), decodeRequest(t, `{"model":"m","previous_response_id":"`+resp.ID+
		`","input":[{"type":"function_call_output","call_id":"slow_id","output":"the result"}]}`), nil); err != nil {
		t.Fatal(err)
	}
	if got := itemTypes(b.requests[3].Items); got != "message,function_call,function_call_output,message,function_call_output" {
		t.Errorf("without the tools the later turn read %s", got)
	}
}

// TestCompactionTriggerOutput: a request ending with a compaction_trigger
// is one summary turn and one compaction item; the next request on the
// chain reads the summary in place of what it compacted.
func TestCompactionTriggerOutput(t *testing.T) {
	b := &fakeBackend{stream: deltas(model.Delta{Kind: model.DeltaText, Text: "the summary"})}
	e := newCompactingEngine(t, b, 0)
	first, err := e.Run(context.Background(), decodeRequest(t, `{"model":"m","input":"old question"}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := e.Run(context.Background(), decodeRequest(t, `{"model":"m","previous_response_id":"`+first.ID+`","input":[{"type":"compaction_trigger"}]}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := itemTypes(resp.Output); got != "compaction" || resp.Status != responses.StatusCompleted {
		t.Fatalf("output %s, status %s", got, resp.Status)
	}
	if len(b.requests) != 2 || !strings.Contains(b.requests[1].Instructions, "You compact conversations") {
		t.Fatalf("%d turns; the last is not the summary's", len(b.requests))
	}
	if _, err := e.Run(context.Background(), decodeRequest(t, `{"model":"m","previous_response_id":"`+resp.ID+`","input":"new question"}`), nil); err != nil {
		t.Fatal(err)
	}
	next := b.requests[2].Items
	if len(next) != 2 || !strings.Contains(next[0].Text(), "the summary") || next[1].Text() != "new question" {
		t.Errorf("the next turn read %+v", next)
	}
}

// TestCompactThresholdCompacts: past the threshold the output starts
// with the compaction and the model answers from the summary and the
// last question; at the threshold nothing is compacted.
func TestCompactThresholdCompacts(t *testing.T) {
	for _, tc := range []struct {
		count int
		want  string
	}{{10, "message"}, {11, "compaction,message"}} {
		b := &fakeBackend{stream: deltas(model.Delta{Kind: model.DeltaText, Text: "words"})}
		e := newCompactingEngine(t, b, tc.count)
		resp, err := e.Run(context.Background(), decodeRequest(t, `{"model":"m","context_management":[{"type":"compaction","compact_threshold":10}],`+
			`"input":[{"role":"developer","content":"be brief"},{"role":"user","content":"q1"},{"role":"assistant","content":"a1"},{"role":"user","content":"q2"}]}`), nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := itemTypes(resp.Output); got != tc.want {
			t.Errorf("%d tokens: output %s, want %s", tc.count, got, tc.want)
		}
		if tc.want == "message" {
			continue
		}
		answer := b.requests[len(b.requests)-1].Items
		if len(answer) != 3 || answer[0].Text() != "be brief" || !strings.Contains(answer[1].Text(), "Summary of the earlier conversation") || answer[2].Text() != "q2" {
			t.Errorf("the answer's turn read %+v", answer)
		}
	}
}

// TestCompactionNeedsAKey: without a reasoning key a compaction_trigger
// is refused up front, naming the trigger.
func TestCompactionNeedsAKey(t *testing.T) {
	b := &fakeBackend{stream: deltas(model.Delta{Kind: model.DeltaText, Text: "x"})}
	_, err := newEngine(t, b).Run(context.Background(), decodeRequest(t, `{"model":"m","input":[{"role":"user","content":"q"},{"type":"compaction_trigger"}]}`), nil)
	if e, ok := err.(*responses.APIError); !ok || e.Param != "input[1]" || e.Kind != responses.EUnsupported {
		t.Errorf("got %v, want an unsupported 400 naming input[1]", err)
	}
	if len(b.requests) != 0 {
		t.Errorf("the model was called")
	}
}

// TestAsyncCallMeetsRequiredChoice: under tool_choice required, the
// continuation after an async call may answer: its turn is offered the
// tools under auto.
func TestAsyncCallMeetsRequiredChoice(t *testing.T) {
	b := scriptedTurns([]model.Delta{call(0, "slow"), {Kind: model.DeltaFinish, FinishReason: model.FinishToolCalls}},
		[]model.Delta{{Kind: model.DeltaText, Text: "going on"}})
	e := newEngine(t, b)
	resp, err := e.Run(context.Background(), decodeRequest(t, `{"model":"m","input":"x","tool_choice":"required","tools":[{"type":"function","name":"slow","async":true}]}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != responses.StatusCompleted || itemTypes(resp.Output) != "function_call,message" {
		t.Fatalf("status %s, output %s", resp.Status, itemTypes(resp.Output))
	}
	if first, second := b.requests[0].ToolChoice, b.requests[1].ToolChoice; first != responses.ToolChoiceRequired || second != responses.ToolChoiceAuto {
		t.Errorf("tool choices %q then %q, want required then auto", first, second)
	}
}

// TestAsyncCallBesideAPlainOne: a turn that calls an async tool and a
// plain one ends for the client, both calls shown; the follow-up with the
// plain call's output gives the model the async call's acknowledgement
// in its place.
func TestAsyncCallBesideAPlainOne(t *testing.T) {
	b := scriptedTurns([]model.Delta{call(0, "slow"), call(1, "quick"), {Kind: model.DeltaFinish, FinishReason: model.FinishToolCalls}})
	e := newEngine(t, b)
	tools := `,"tools":[{"type":"function","name":"slow","async":true},{"type":"function","name":"quick"}]`
	resp, err := e.Run(context.Background(), decodeRequest(t, `{"model":"m","input":"x"`+tools+`}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := itemTypes(resp.Output); got != "function_call,function_call" || len(b.requests) != 1 ||
		!resp.Output[0].CallFields().Async || resp.Output[1].CallFields().Async {
		t.Fatalf("output %s after %d turns: want both calls, the first async, and the response ended", got, len(b.requests))
	}
	if _, err := e.Run(context.Background(), decodeRequest(t, `{"model":"m","previous_response_id":"`+resp.ID+`"`+tools+
		`,"input":[{"type":"function_call_output","call_id":"quick_id","output":"quick result"}]}`), nil); err != nil {
		t.Fatal(err)
	}
	items := b.requests[1].Items
	if got := itemTypes(items); got != "message,function_call,function_call_output,function_call,function_call_output" ||
		items[2].CallFields().CallID != "slow_id" || !strings.Contains(string(items[2].CallFields().Output), "not available yet") || items[4].OutputString() != "quick result" {
		t.Errorf("the follow-up read %s: %+v", got, items)
	}
}

// TestLateOutputAfterACompaction: an async call's output that comes after
// a compaction of the conversation keeps its call in the model's view
// (a harmony prompt cannot render an output without it), acknowledged,
// before the summary.
func TestLateOutputAfterACompaction(t *testing.T) {
	b := scriptedTurns([]model.Delta{call(0, "slow"), {Kind: model.DeltaFinish, FinishReason: model.FinishToolCalls}},
		[]model.Delta{{Kind: model.DeltaText, Text: "going on"}}, []model.Delta{{Kind: model.DeltaText, Text: "the summary"}})
	e := newCompactingEngine(t, b, 0)
	tools := `,"tools":[{"type":"function","name":"slow","async":true}]`
	first, err := e.Run(context.Background(), decodeRequest(t, `{"model":"m","input":"x"`+tools+`}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	compacted, err := e.Run(context.Background(), decodeRequest(t, `{"model":"m","previous_response_id":"`+first.ID+`","input":[{"type":"compaction_trigger"}]}`), nil)
	if err != nil || itemTypes(compacted.Output) != "compaction" {
		t.Fatalf("compaction: %v", err)
	}
	if _, err := e.Run(context.Background(), decodeRequest(t, `{"model":"m","previous_response_id":"`+compacted.ID+`"`+tools+
		`,"input":[{"type":"function_call_output","call_id":"slow_id","output":"late result"}]}`), nil); err != nil {
		t.Fatal(err)
	}
	items := b.requests[3].Items
	if got := itemTypes(items); got != "function_call,function_call_output,message,function_call_output" ||
		!strings.Contains(items[2].Text(), "the summary") || items[3].OutputString() != "late result" {
		t.Errorf("the late output's turn read %s: %+v", got, items)
	}
}

// TestThresholdCompactionKeepsALateOutputsCall: a compaction at the
// threshold within a response keeps, before the summary, an async call
// made before the last user message whose output came after it (the view
// kept only what followed that message: the output without its call,
// which a harmony prompt cannot render).
func TestThresholdCompactionKeepsALateOutputsCall(t *testing.T) {
	b := scriptedTurns([]model.Delta{call(0, "slow"), {Kind: model.DeltaFinish, FinishReason: model.FinishToolCalls}},
		[]model.Delta{{Kind: model.DeltaText, Text: "going on"}}, []model.Delta{{Kind: model.DeltaText, Text: "second answer"}},
		[]model.Delta{{Kind: model.DeltaText, Text: "the summary"}}, []model.Delta{{Kind: model.DeltaText, Text: "done"}})
	e := newCompactingEngine(t, b, 1000)
	tools := `,"tools":[{"type":"function","name":"slow","async":true}]`
	first, err := e.Run(context.Background(), decodeRequest(t, `{"model":"m","input":"x"`+tools+`}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	second, err := e.Run(context.Background(), decodeRequest(t, `{"model":"m","previous_response_id":"`+first.ID+`"`+tools+`,"input":"and then?"}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	third, err := e.Run(context.Background(), decodeRequest(t, `{"model":"m","previous_response_id":"`+second.ID+`"`+tools+
		`,"context_management":[{"type":"compaction","compact_threshold":10}]`+
		`,"input":[{"type":"function_call_output","call_id":"slow_id","output":"late result"}]}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := itemTypes(third.Output); got != "compaction,message" {
		t.Fatalf("the third response's output: %s", got)
	}
	items := b.requests[len(b.requests)-1].Items
	call, out := -1, -1
	for i, it := range items {
		switch {
		case it.Type == responses.ItemFunctionCall && it.CallFields().CallID == "slow_id":
			call = i
		case it.Type == responses.ItemFunctionCallOutput && it.OutputString() == "late result":
			out = i
		}
	}
	if call < 0 || out < 0 || call > out {
		t.Errorf("after the compaction the model read %s: the late output without its call before it", itemTypes(items))
	}
}
