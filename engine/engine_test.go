package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/loomgate/loom/engine"
	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/store/sqlite"
)

// fakeBackend is a model.Backend scripted by a function field; it records
// the requests it was sent (read them once the runs have ended).
type fakeBackend struct {
	stream   func(req *model.Request, emit func(model.Delta) error) error
	mu       sync.Mutex // responses may run at once
	requests []*model.Request
}

func (f *fakeBackend) Stream(ctx context.Context, req *model.Request, emit func(model.Delta) error) error {
	f.mu.Lock()
	f.requests = append(f.requests, req)
	f.mu.Unlock()
	return f.stream(req, emit)
}

func deltas(ds ...model.Delta) func(*model.Request, func(model.Delta) error) error {
	return func(_ *model.Request, emit func(model.Delta) error) error {
		for _, d := range ds {
			if err := emit(d); err != nil {
				return err
			}
		}
		return nil
	}
}

func newEngine(t testing.TB, b model.Backend) *engine.Engine {
	t.Helper()
	db, err := sqlite.Open(context.Background(), ":memory:", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return engine.New(b, db, &engine.Options{Models: []string{"m"}})
}

func decodeRequest(t *testing.T, body string) *responses.Request {
	t.Helper()
	var req responses.Request
	if err := json.Unmarshal([]byte(body), &req); err != nil {
		t.Fatal(err)
	}
	return &req
}

func call(i int, name string) model.Delta {
	return model.Delta{Kind: model.DeltaToolCall, ToolIndex: i, ToolCallID: name + "_id", ToolName: name, ToolArguments: "{}"}
}

const twoTools = `"tools":[{"type":"function","name":"a"},{"type":"function","name":"b"}]`

func TestToolCallLimits(t *testing.T) {
	tests := []struct {
		name  string
		body  string
		calls []string
	}{
		{"parallel allowed", `{"model":"m","input":"x",` + twoTools + `}`, []string{"a", "b"}},
		{"parallel off keeps the first", `{"model":"m","input":"x","parallel_tool_calls":false,` + twoTools + `}`, []string{"a"}},
		{"max_tool_calls caps", `{"model":"m","input":"x","max_tool_calls":1,` + twoTools + `}`, []string{"a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &fakeBackend{stream: deltas(call(0, "a"), call(1, "b"), model.Delta{Kind: model.DeltaFinish, FinishReason: model.FinishToolCalls})}
			resp, err := newEngine(t, b).Run(context.Background(), decodeRequest(t, tt.body), nil)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, it := range resp.Output {
				if it.Type == responses.ItemFunctionCall {
					got = append(got, it.CallFields().Name)
				}
			}
			if !slices.Equal(got, tt.calls) {
				t.Errorf("calls %v, want %v", got, tt.calls)
			}
		})
	}
}

func TestToolsOffered(t *testing.T) {
	tests := []struct {
		name     string
		body     string
		tools    []string
		choice   string
		function string
	}{
		{"empty list offers nothing", `{"model":"m","input":"x","tools":[]}`, nil, "", ""},
		{"empty list with auto offers nothing", `{"model":"m","input":"x","tools":[],"tool_choice":"auto"}`, nil, "", ""},
		{"none offers nothing", `{"model":"m","input":"x","tool_choice":"none",` + twoTools + `}`, nil, "", ""},
		{"default auto", `{"model":"m","input":"x",` + twoTools + `}`, []string{"a", "b"}, "auto", ""},
		{"named function", `{"model":"m","input":"x","tool_choice":{"type":"function","name":"b"},` + twoTools + `}`, []string{"a", "b"}, "required", "b"},
		{"allowed_tools narrows", `{"model":"m","input":"x","tool_choice":{"type":"allowed_tools","mode":"required","tools":[{"type":"function","name":"b"}]},` + twoTools + `}`, []string{"b"}, "required", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &fakeBackend{stream: deltas(model.Delta{Kind: model.DeltaText, Text: "ok"})}
			if _, err := newEngine(t, b).Run(context.Background(), decodeRequest(t, tt.body), nil); err != nil {
				t.Fatal(err)
			}
			req := b.requests[0]
			var names []string
			for _, tool := range req.Tools {
				names = append(names, tool.Name)
			}
			if !slices.Equal(names, tt.tools) || req.ToolChoice != tt.choice || req.ToolChoiceFunction != tt.function {
				t.Errorf("offered %v choice %q function %q; want %v %q %q", names, req.ToolChoice, req.ToolChoiceFunction, tt.tools, tt.choice, tt.function)
			}
		})
	}
}

func TestChainSurvivesDeletedAncestor(t *testing.T) {
	b := &fakeBackend{stream: deltas(model.Delta{Kind: model.DeltaText, Text: "ok"})}
	e := newEngine(t, b)
	ctx := context.Background()
	first, err := e.Run(ctx, decodeRequest(t, `{"model":"m","input":"one"}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	second, err := e.Run(ctx, decodeRequest(t, `{"model":"m","input":"two","previous_response_id":"`+first.ID+`"}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Delete(ctx, first.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Run(ctx, decodeRequest(t, `{"model":"m","input":"three","previous_response_id":"`+second.ID+`"}`), nil); err != nil {
		t.Fatal(err)
	}
	// The third turn sees the second turn's input and output, not the
	// deleted first turn's.
	var texts []string
	for _, it := range b.requests[2].Items {
		texts = append(texts, it.Text())
	}
	if want := []string{"two", "ok", "three"}; !slices.Equal(texts, want) {
		t.Errorf("history %q, want %q", texts, want)
	}
	// Continuing the deleted response itself is a 404.
	_, err = e.Run(ctx, decodeRequest(t, `{"model":"m","input":"x","previous_response_id":"`+first.ID+`"}`), nil)
	var apiErr *responses.APIError
	if !errors.As(err, &apiErr) || apiErr.Kind != responses.ENotFound || apiErr.Param != "previous_response_id" {
		t.Errorf("continuing a deleted response: %v", err)
	}
}

func TestUpstreamErrorBeforeFirstDelta(t *testing.T) {
	b := &fakeBackend{stream: func(*model.Request, func(model.Delta) error) error {
		return &responses.APIError{Kind: responses.ERateLimited, Message: "slow down"}
	}}
	resp, err := newEngine(t, b).Run(context.Background(), decodeRequest(t, `{"model":"m","input":"x"}`), nil)
	if resp == nil || resp.Status != responses.ResponseFailed {
		t.Fatalf("response %+v", resp)
	}
	var apiErr *responses.APIError
	if !errors.As(err, &apiErr) || apiErr.Kind != responses.ERateLimited {
		t.Errorf("Run's error %v, want the backend's rate_limited", err)
	}
}

// TestFinalEventAfterSave: a client that has the terminal event can read
// the response at once (read your writes, on any replica): the event goes
// out only once the final save is done, whatever the ending.
func TestFinalEventAfterSave(t *testing.T) {
	tests := []struct {
		name   string
		stream func(*model.Request, func(model.Delta) error) error
		status string
	}{
		{"completed", deltas(model.Delta{Kind: model.DeltaText, Text: "hi"}, model.Delta{Kind: model.DeltaFinish, FinishReason: model.FinishStop}), responses.StatusCompleted},
		{"incomplete", deltas(model.Delta{Kind: model.DeltaText, Text: "hi"}, model.Delta{Kind: model.DeltaFinish, FinishReason: model.FinishLength}), responses.StatusIncomplete},
		{"failed", func(*model.Request, func(model.Delta) error) error {
			return &responses.APIError{Kind: responses.EUpstream, Message: "boom"}
		}, "failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db, err := sqlite.Open(context.Background(), ":memory:", nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			e := engine.New(&fakeBackend{stream: tt.stream}, db, &engine.Options{Models: []string{"m"}})
			var terminal int
			sink := func(ev *responses.Event) error {
				if !ev.Terminal() {
					return nil
				}
				terminal++
				rec, err := db.GetResponse(context.Background(), ev.Response.ID)
				if err != nil {
					t.Errorf("at %s the response is not stored: %v", ev.Type, err)
					return nil
				}
				if rec.Status != tt.status {
					t.Errorf("at %s the stored status is %q, want %q", ev.Type, rec.Status, tt.status)
				}
				return nil
			}
			e.Run(context.Background(), decodeRequest(t, `{"model":"m","input":"x","stream":true}`), sink)
			if terminal != 1 {
				t.Fatalf("%d terminal events, want 1", terminal)
			}
		})
	}
}

// The model is offered a request's function tools alike whether they are
// all it has (offered as the request gave them) or sit beside a tool of
// another kind (offered from their definitions).
func TestFunctionsOfferedAlike(t *testing.T) {
	const functions = `{"type":"function","name":"a","description":"Tool a.","strict":true,"parameters":{"type":"object","properties":{"x":{"type":"string"}}}},` +
		`{"type":"function","name":"b","description":"","parameters":null},{"type":"function","name":"c"}`
	offered := func(tools string) []responses.Tool {
		t.Helper()
		b := &fakeBackend{stream: deltas(model.Delta{Kind: model.DeltaText, Text: "ok"})}
		if _, err := newEngine(t, b).Run(context.Background(), decodeRequest(t, `{"model":"m","input":"x","tools":[`+tools+`]}`), nil); err != nil {
			t.Fatal(err)
		}
		return b.requests[0].Tools
	}
	describe := func(ts []responses.Tool) []string {
		var out []string
		for _, tool := range ts {
			desc, strict := "<nil>", "<nil>"
			if tool.Description != nil && *tool.Description != "" {
				desc = *tool.Description
			}
			if tool.Strict != nil {
				strict = fmt.Sprint(*tool.Strict)
			}
			out = append(out, fmt.Sprintf("%s %s %s %s %s", tool.Type, tool.Name, desc, strict, tool.Parameters))
		}
		return out
	}
	alone := describe(offered(functions))
	beside := describe(offered(functions + `,{"type":"custom","name":"note"}`))
	if len(alone) != 3 || len(beside) != 4 || !slices.Equal(alone, beside[:3]) {
		t.Errorf("functions alone offered as\n%q\nbeside a custom tool as\n%q", alone, beside)
	}
	if alone[0] != `function a Tool a. true {"type":"object","properties":{"x":{"type":"string"}}}` {
		t.Errorf("function a offered as %q", alone[0])
	}
}
