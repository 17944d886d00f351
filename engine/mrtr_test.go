package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/loomgate/loom/engine"
	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/store/sqlite"
	"github.com/loomgate/loom/tools"
	"github.com/loomgate/loom/tools/toolstest"
)

// mrtrBackend answers model turns (requests offering tools) from a script
// and loom's side requests (sampling, elicitation by the model: no tools)
// with side.
type mrtrBackend struct {
	mu    sync.Mutex
	turns [][]model.Delta
	side  func(req *model.Request) string

	turnReqs, sideReqs []*model.Request
}

func (b *mrtrBackend) Stream(ctx context.Context, req *model.Request, emit func(model.Delta) error) error {
	b.mu.Lock()
	var ds []model.Delta
	if len(req.Tools) == 0 {
		b.sideReqs = append(b.sideReqs, req)
		text := "no answer"
		if b.side != nil {
			text = b.side(req)
		}
		ds = []model.Delta{{Kind: model.DeltaText, Text: text}, {Kind: model.DeltaUsage, Usage: responses.Usage{InputTokens: 3, OutputTokens: 2}}}
	} else {
		n := len(b.turnReqs)
		b.turnReqs = append(b.turnReqs, req)
		ds = []model.Delta{{Kind: model.DeltaText, Text: "done"}}
		if n < len(b.turns) {
			ds = b.turns[n]
		}
	}
	b.mu.Unlock()
	for _, d := range ds {
		if err := emit(d); err != nil {
			return err
		}
	}
	return nil
}

// lastOutput is the last function_call_output the model saw in a request.
func lastOutput(req *model.Request) string {
	for i := len(req.Items) - 1; i >= 0; i-- {
		if req.Items[i].Type == responses.ItemFunctionCallOutput {
			return req.Items[i].OutputString()
		}
	}
	return ""
}

func openStore(t *testing.T, path string) engine.Store {
	t.Helper()
	db, err := sqlite.Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func mrtrEngine(t *testing.T, b model.Backend, st engine.Store, srv *toolstest.Server, rounds int) *engine.Engine {
	t.Helper()
	return engine.New(b, st, &engine.Options{Models: []string{"m"}, MaxInputRounds: rounds,
		ToolProviders: []engine.ToolProvider{&toolstest.Provider{Type: "fake", List: []tools.Server{srv}}}})
}

const mrtrRequest = `{"model":"m","input":"x","tools":[{"type":"fake"}]}`

func inputRequired(state string, reqs map[string]tools.InputRequest) tools.Result {
	return tools.Result{InputRequired: &tools.InputRequired{Requests: reqs, State: state}}
}

func textResult(s string) tools.Result { return tools.Result{Content: []tools.Content{tools.Text(s)}} }

func items(resp *responses.Response, typ string) []responses.Item {
	var out []responses.Item
	for _, it := range resp.Output {
		if it.Type == typ {
			out = append(out, it)
		}
	}
	return out
}

// The state carries bytes JSON would mangle if it were not kept exact.
const oddState = "st\u00e9te \x00 \"q\" \\ <&>"

func TestMRTRAnsweredByLoom(t *testing.T) {
	samplingParams := json.RawMessage(`{"messages":[{"role":"user","content":{"type":"text","text":"Capital of France?"}}],"systemPrompt":"Be brief.","maxTokens":7}`)
	elicitParams := json.RawMessage(`{"mode":"form","message":"Your name?","requestedSchema":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}}`)
	tests := []struct {
		name   string
		policy string
		roots  json.RawMessage
		method string
		params json.RawMessage
		side   func(*model.Request) string
		want   string // the answer the retry carries
	}{
		{"sampling", "", nil, "sampling/createMessage", samplingParams, func(*model.Request) string { return "Paris" },
			`{"content":{"text":"Paris","type":"text"},"model":"m","role":"assistant","stopReason":"endTurn"}`},
		{"roots none", "", nil, "roots/list", json.RawMessage(`{}`), nil, `{"roots":[]}`},
		{"roots configured", "", json.RawMessage(`{"roots":[{"uri":"file:///work","name":"work"}]}`), "roots/list", json.RawMessage(`{}`), nil,
			`{"roots":[{"uri":"file:///work","name":"work"}]}`},
		{"decline", "decline", nil, "elicitation/create", elicitParams, nil, `{"action":"decline"}`},
		{"model valid", "model", nil, "elicitation/create", elicitParams, func(*model.Request) string { return "Here you go:\n```json\n{\"name\": \"Ada\"}\n```" },
			`{"action":"accept","content":{"name":"Ada"}}`},
		{"model invalid", "model", nil, "elicitation/create", elicitParams, func(*model.Request) string { return `{"name": 5}` }, `{"action":"decline"}`},
		{"model no json", "model", nil, "elicitation/create", elicitParams, func(*model.Request) string { return "DECLINE" }, `{"action":"decline"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := &toolstest.Server{Label: "A", ToolNames: []string{"lookup"}, Log: &toolstest.Log{}, Elicitation: tt.policy, RootsResult: tt.roots,
				CallFunc: func(ctx context.Context, c tools.Call) (tools.Result, error) {
					if c.Input == nil {
						return inputRequired(oddState, map[string]tools.InputRequest{"k": {Method: tt.method, Params: tt.params}}), nil
					}
					return textResult("answered " + string(c.Input.Responses["k"])), nil
				}}
			b := &mrtrBackend{turns: [][]model.Delta{{call(0, "lookup")}}, side: tt.side}
			e := mrtrEngine(t, b, openStore(t, ":memory:"), srv, 0)
			resp, err := e.Run(context.Background(), decodeRequest(t, mrtrRequest), nil)
			if err != nil {
				t.Fatal(err)
			}
			calls := srv.Calls()
			if len(calls) != 2 {
				t.Fatalf("%d calls, want 2", len(calls))
			}
			retry := calls[1]
			if retry.Input == nil || retry.Input.State != oddState || retry.Name != "lookup" || retry.Arguments != "{}" {
				t.Fatalf("retry %+v", retry)
			}
			if keys := slices.Sorted(maps.Keys(retry.Input.Responses)); !slices.Equal(keys, []string{"k"}) {
				t.Fatalf("retry keys %v", keys)
			}
			if got := canonical(t, retry.Input.Responses["k"]); got != canonical(t, json.RawMessage(tt.want)) {
				t.Errorf("answer %s, want %s", got, tt.want)
			}
			mc := items(resp, responses.ItemMCPCall)
			if len(mc) != 1 || mc[0].Status != responses.StatusCompleted || !strings.Contains(string(mc[0].CallFields().Output), "answered") {
				t.Fatalf("mcp_call items %+v", mc)
			}
			if resp.Status != responses.ResponseCompleted || len(b.turnReqs) != 2 || !strings.Contains(lastOutput(b.turnReqs[1]), "answered") {
				t.Errorf("the model did not see the result: status %s, %d turns", resp.Status, len(b.turnReqs))
			}
			switch tt.name {
			case "sampling":
				sr := b.sideReqs[0]
				if sr.Instructions != "Be brief." || sr.MaxOutputTokens != 7 || len(sr.Tools) != 0 || len(sr.Items) != 1 || sr.Items[0].Text() != "Capital of France?" || sr.Items[0].Role != "user" {
					t.Errorf("sampling request %+v", sr)
				}
				if resp.Usage == nil || resp.Usage.OutputTokens < 2 {
					t.Errorf("sampling usage not counted: %+v", resp.Usage)
				}
			case "model valid":
				sr := b.sideReqs[0]
				last := sr.Items[len(sr.Items)-1]
				if len(sr.Tools) != 0 || !strings.Contains(last.OutputString(), "Your name?") || !strings.Contains(last.OutputString(), `"required":["name"]`) ||
					sr.Items[0].Text() != "x" {
					t.Errorf("elicitation request to the model: %+v", sr.Items)
				}
			}
		})
	}
}

func canonical(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func TestMRTRRoundBound(t *testing.T) {
	srv := &toolstest.Server{Label: "A", ToolNames: []string{"lookup"}, Log: &toolstest.Log{},
		CallFunc: func(ctx context.Context, c tools.Call) (tools.Result, error) {
			return inputRequired("again", map[string]tools.InputRequest{"r": {Method: "roots/list", Params: json.RawMessage(`{}`)}}), nil
		}}
	b := &mrtrBackend{turns: [][]model.Delta{{call(0, "lookup")}}}
	resp, err := mrtrEngine(t, b, openStore(t, ":memory:"), srv, 3).Run(context.Background(), decodeRequest(t, mrtrRequest), nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(srv.Calls()); n != 4 {
		t.Errorf("%d calls, want 1 + 3 rounds", n)
	}
	mc := items(resp, responses.ItemMCPCall)
	if len(mc) != 1 || mc[0].Status != "failed" || mc[0].ToolFields().Error == nil || !strings.Contains(*mc[0].ToolFields().Error, "3 times") {
		t.Fatalf("mcp_call %+v", mc)
	}
	if out := lastOutput(b.turnReqs[1]); !strings.Contains(out, "asked for more input 3 times") {
		t.Errorf("the model was told %q", out)
	}
}

// Load shedding is retried in one layer, the server's session (tools/mcp
// waits and retries with the new requestState): a result that still asks
// for nothing has outlasted those retries, and the engine stops the call
// at once rather than retrying it again round after round. The model is
// told, and the loop goes on.
func TestMRTRLoadShedding(t *testing.T) {
	var retries atomic.Int32
	srv := &toolstest.Server{Label: "A", ToolNames: []string{"lookup"}, Log: &toolstest.Log{},
		CallFunc: func(ctx context.Context, c tools.Call) (tools.Result, error) {
			if c.Input != nil {
				retries.Add(1)
			}
			return inputRequired("busy", nil), nil
		}}
	b := &mrtrBackend{turns: [][]model.Delta{{call(0, "lookup")}}}
	resp, err := mrtrEngine(t, b, openStore(t, ":memory:"), srv, 0).Run(context.Background(), decodeRequest(t, mrtrRequest), nil)
	if err != nil {
		t.Fatal(err)
	}
	if mc := items(resp, responses.ItemMCPCall); len(mc) != 1 || mc[0].Status != "failed" {
		t.Fatalf("mcp_call %+v", mc)
	}
	if n := retries.Load(); n != 0 {
		t.Errorf("the engine retried a shedding server %d times; its session retries", n)
	}
	if out := lastOutput(b.turnReqs[1]); !strings.Contains(out, "too busy") {
		t.Errorf("the model was told %q", out)
	}
}

// TestMRTRClientRoundTrip asks the client, across two Run calls on two
// Engines over one SQLite file (another replica, or a restart): the
// pending call is resumed from the store with the client's answer, loom's
// own answer to the other key of the round, and the exact state.
func TestMRTRClientRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loom.db")
	elicit := json.RawMessage(`{"mode":"form","message":"Confirm?","requestedSchema":{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]}}`)
	newServer := func() *toolstest.Server {
		return &toolstest.Server{Label: "A", ToolNames: []string{"lookup"}, Log: &toolstest.Log{}, Elicitation: "client",
			CallFunc: func(ctx context.Context, c tools.Call) (tools.Result, error) {
				if c.Input == nil {
					return inputRequired(oddState, map[string]tools.InputRequest{
						"confirm": {Method: "elicitation/create", Params: elicit},
						"roots":   {Method: "roots/list", Params: json.RawMessage(`{}`)},
					}), nil
				}
				return textResult(fmt.Sprintf("confirm=%s roots=%s", c.Input.Responses["confirm"], c.Input.Responses["roots"])), nil
			}}
	}
	srv1 := newServer()
	b1 := &mrtrBackend{turns: [][]model.Delta{{{Kind: model.DeltaText, Text: "Let me check."}, call(0, "lookup")}}}
	first, err := mrtrEngine(t, b1, openStore(t, path), srv1, 0).Run(context.Background(), decodeRequest(t, mrtrRequest), nil)
	if err != nil {
		t.Fatal(err)
	}
	if first.Status != responses.ResponseCompleted || len(b1.turnReqs) != 1 {
		t.Fatalf("first response %s after %d turns", first.Status, len(b1.turnReqs))
	}
	mc := items(first, responses.ItemMCPCall)
	if len(mc) != 1 || mc[0].Status != responses.StatusIncomplete || mc[0].CallFields().Output != nil || mc[0].ToolFields().Error != nil {
		t.Fatalf("waiting mcp_call %+v", mc)
	}
	reqs := items(first, responses.ItemMCPInputRequest)
	if len(reqs) != 1 {
		t.Fatalf("no mcp_input_request in %+v", first.Output)
	}
	ir := reqs[0]
	raw, _ := json.Marshal(ir)
	var wire map[string]any
	json.Unmarshal(raw, &wire)
	asked, _ := wire["input_requests"].(map[string]any)
	confirm, _ := asked["confirm"].(map[string]any)
	if wire["server_label"] != "A" || wire["name"] != "lookup" || wire["arguments"] != "{}" || len(asked) != 1 || confirm["method"] != "elicitation/create" ||
		!strings.Contains(fmt.Sprint(confirm["params"]), "Confirm?") || strings.Contains(string(raw), "busy") {
		t.Fatalf("mcp_input_request %s", raw)
	}

	// Another replica answers the follow-up.
	srv2 := newServer()
	b2 := &mrtrBackend{}
	e2 := mrtrEngine(t, b2, openStore(t, path), srv2, 0)
	follow := func(id, body string) (*responses.Response, error) {
		return e2.Run(context.Background(), decodeRequest(t, `{"model":"m","previous_response_id":"`+first.ID+`","tools":[{"type":"fake"}],"input":[`+body+`]}`), nil)
	}
	bad := []struct{ body, param string }{
		{`{"type":"mcp_input_response","request_id":"mcpi_nope","input_responses":{"confirm":{"action":"accept","content":{"ok":true}}}}`, "input[0].request_id"},
		{`{"type":"mcp_input_response","request_id":"` + ir.ID + `","input_responses":{"other":{"action":"decline"}}}`, "input[0].input_responses"},
		{`{"type":"mcp_input_response","request_id":"` + ir.ID + `","input_responses":{"confirm":{"action":"accept","content":{"ok":"yes"}}}}`, "input[0].input_responses.confirm.content"},
		{`{"type":"mcp_input_response","request_id":"` + ir.ID + `","input_responses":{"confirm":{"action":"maybe"}}}`, "input[0].input_responses.confirm.action"},
	}
	for _, tt := range bad {
		_, err := follow(first.ID, tt.body)
		var apiErr *responses.APIError
		if !errors.As(err, &apiErr) || apiErr.Kind != responses.EInvalid || apiErr.Param != tt.param {
			t.Errorf("%s: %v, want 400 %s", tt.body, err, tt.param)
		}
	}
	if n := len(srv2.Calls()); n != 0 {
		t.Fatalf("a refused follow-up called the server %d times", n)
	}
	// The Open Responses dialect's vendor-prefixed type is accepted too.
	second, err := follow(first.ID, `{"type":"loom:mcp_input_response","request_id":"`+ir.ID+`","input_responses":{"confirm":{"action":"accept","content":{"ok":true}}}}`)
	if err != nil {
		t.Fatal(err)
	}
	calls := srv2.Calls()
	if len(calls) != 1 {
		t.Fatalf("%d calls on the second replica, want 1", len(calls))
	}
	in := calls[0].Input
	if in == nil || in.State != oddState || calls[0].Name != "lookup" || calls[0].Arguments != "{}" {
		t.Fatalf("resumed call %+v", calls[0])
	}
	if got := canonical(t, in.Responses["confirm"]); got != `{"action":"accept","content":{"ok":true}}` {
		t.Errorf("client answer %s", got)
	}
	if got := canonical(t, in.Responses["roots"]); got != `{"roots":[]}` {
		t.Errorf("loom's answer of the first round %s", got)
	}
	mc = items(second, responses.ItemMCPCall)
	if second.Status != responses.ResponseCompleted || len(mc) != 1 || mc[0].Status != responses.StatusCompleted || !strings.Contains(string(mc[0].CallFields().Output), "confirm=") {
		t.Fatalf("second response %s, mcp_call %+v", second.Status, mc)
	}
	if len(b2.turnReqs) != 1 || !strings.Contains(lastOutput(b2.turnReqs[0]), `confirm={\"action\":\"accept\"`) && !strings.Contains(lastOutput(b2.turnReqs[0]), `confirm={"action":"accept"`) {
		t.Fatalf("the model did not see the result: %+v", b2.turnReqs)
	}
	// The model sees the call once: the waiting call of the first
	// response is not in its history.
	n := 0
	for _, it := range b2.turnReqs[0].Items {
		if it.Type == responses.ItemFunctionCall {
			n++
		}
	}
	if n != 1 {
		t.Errorf("the model saw %d function calls, want 1: %+v", n, b2.turnReqs[0].Items)
	}
	// Answering again is refused.
	_, err = e2.Run(context.Background(), decodeRequest(t, `{"model":"m","previous_response_id":"`+second.ID+`","tools":[{"type":"fake"}],"input":[`+
		`{"type":"mcp_input_response","request_id":"`+ir.ID+`","input_responses":{"confirm":{"action":"decline"}}}]}`), nil)
	var apiErr *responses.APIError
	if !errors.As(err, &apiErr) || apiErr.Param != "input[0].request_id" || !strings.Contains(apiErr.Message, "already answered") {
		t.Errorf("answering twice: %v", err)
	}
	// Without the server in the request's tools, the call cannot resume.
	_, err = e2.Run(context.Background(), decodeRequest(t, `{"model":"m","previous_response_id":"`+first.ID+`","input":[`+
		`{"type":"mcp_input_response","request_id":"`+ir.ID+`","input_responses":{"confirm":{"action":"decline"}}}]}`), nil)
	if !errors.As(err, &apiErr) || apiErr.Param != "tools" {
		t.Errorf("resuming without the server: %v", err)
	}
}

// TestMRTRClientWithoutStore declines: without store there is no
// follow-up to answer in.
func TestMRTRClientWithoutStore(t *testing.T) {
	srv := &toolstest.Server{Label: "A", ToolNames: []string{"lookup"}, Log: &toolstest.Log{}, Elicitation: "client",
		CallFunc: func(ctx context.Context, c tools.Call) (tools.Result, error) {
			if c.Input == nil {
				return inputRequired("s", map[string]tools.InputRequest{"k": {Method: "elicitation/create", Params: json.RawMessage(`{"message":"?"}`)}}), nil
			}
			return textResult("got " + string(c.Input.Responses["k"])), nil
		}}
	b := &mrtrBackend{turns: [][]model.Delta{{call(0, "lookup")}}}
	resp, err := mrtrEngine(t, b, openStore(t, ":memory:"), srv, 0).Run(context.Background(),
		decodeRequest(t, `{"model":"m","input":"x","store":false,"tools":[{"type":"fake"}]}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if mc := items(resp, responses.ItemMCPCall); len(mc) != 1 || !strings.Contains(string(mc[0].CallFields().Output), "decline") || len(items(resp, responses.ItemMCPInputRequest)) != 0 {
		t.Fatalf("output %+v", resp.Output)
	}
}
