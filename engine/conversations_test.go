package engine_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/store"
	"github.com/loomgate/loom/tools"
	"github.com/loomgate/loom/tools/toolstest"
)

// TestMRTRClientThroughConversation: a call that waits for the client's
// input in a response on a conversation is resumed by the next response on
// that conversation (another engine on the same store), as it is through
// previous_response_id; the conversation then holds both turns.
func TestMRTRClientThroughConversation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loom.db")
	elicit := json.RawMessage(`{"mode":"form","message":"Confirm?","requestedSchema":{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]}}`)
	newServer := func() *toolstest.Server {
		return &toolstest.Server{Label: "A", ToolNames: []string{"lookup"}, Log: &toolstest.Log{}, Elicitation: "client",
			CallFunc: func(ctx context.Context, c tools.Call) (tools.Result, error) {
				if c.Input == nil {
					return inputRequired(oddState, map[string]tools.InputRequest{"confirm": {Method: "elicitation/create", Params: elicit}}), nil
				}
				return textResult("confirmed " + string(c.Input.Responses["confirm"])), nil
			}}
	}
	ctx := context.Background()
	e1 := mrtrEngine(t, &mrtrBackend{turns: [][]model.Delta{{call(0, "lookup")}}}, openStore(t, path), newServer(), 0)
	conv, err := e1.CreateConversation(ctx, nil, map[string]string{"k": "v"})
	if err != nil {
		t.Fatal(err)
	}
	on := `"conversation":{"id":"` + conv.ID + `"},"tools":[{"type":"fake"}]`
	first, err := e1.Run(ctx, decodeRequest(t, `{"model":"m","input":"look it up",`+on+`}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	reqs := items(first, responses.ItemMCPInputRequest)
	if len(reqs) != 1 {
		t.Fatalf("no mcp_input_request in %+v", first.Output)
	}

	srv2 := newServer()
	b2 := &mrtrBackend{}
	e2 := mrtrEngine(t, b2, openStore(t, path), srv2, 0)
	second, err := e2.Run(ctx, decodeRequest(t, `{"model":"m",`+on+`,"input":[`+
		`{"type":"mcp_input_response","request_id":"`+reqs[0].ID+`","input_responses":{"confirm":{"action":"accept","content":{"ok":true}}}}]}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	calls := srv2.Calls()
	if len(calls) != 1 || calls[0].Input == nil || calls[0].Input.State != oddState {
		t.Fatalf("the waiting call was not resumed with its state: %+v", calls)
	}
	mc := items(second, responses.ItemMCPCall)
	if second.Status != responses.ResponseCompleted || len(mc) != 1 || !strings.Contains(string(mc[0].CallFields().Output), "confirmed") {
		t.Fatalf("second response %s, mcp_call %+v", second.Status, mc)
	}
	all, _, err := e2.ConversationItems(ctx, conv.ID, store.Page{})
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, it := range all {
		types = append(types, it.Type)
	}
	// Turn one: the user's message, the tool listing, the waiting call
	// and its input request; turn two: the client's answer, the call
	// resumed, the model's answer.
	want := "message,mcp_list_tools,mcp_call,mcp_input_request,mcp_input_response,mcp_call,message"
	if joined := strings.Join(types, ","); joined != want {
		t.Errorf("conversation items %s, want %s", joined, want)
	}
}
