package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/responses"
)

func TestLocalShellIsClientExecuted(t *testing.T) {
	b := scriptedTurns(
		[]model.Delta{{Kind: model.DeltaToolCall, ToolIndex: 0, ToolCallID: "call_ls", ToolName: "local_shell", ToolArguments: `{"command":["ls","-la"],"timeout_ms":5000}`}},
		[]model.Delta{{Kind: model.DeltaText, Text: "two files"}},
	)
	e := newEngine(t, b)
	ctx := context.Background()
	first, err := e.Run(ctx, decodeRequest(t, `{"model":"m","input":"list files","tools":[{"type":"local_shell"}]}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.requests[0].Tools) != 1 || b.requests[0].Tools[0].Name != "local_shell" {
		t.Fatalf("the model was offered %+v", b.requests[0].Tools)
	}
	if len(first.Output) != 1 || first.Output[0].Type != "local_shell_call" || first.Output[0].CallFields().CallID != "call_ls" {
		t.Fatalf("output %+v", first.Output)
	}
	var action struct {
		Type      string   `json:"type"`
		Command   []string `json:"command"`
		TimeoutMS int      `json:"timeout_ms"`
	}
	json.Unmarshal(first.Output[0].ToolFields().Action, &action)
	if action.Type != "exec" || len(action.Command) != 2 || action.Command[1] != "-la" || action.TimeoutMS != 5000 {
		t.Errorf("action %s", first.Output[0].ToolFields().Action)
	}
	if len(b.requests) != 1 {
		t.Fatalf("loom ran the client's tool itself: %d model turns", len(b.requests))
	}

	// The client runs it and sends the output back.
	body := `{"model":"m","previous_response_id":"` + first.ID + `","tools":[{"type":"local_shell"}],` +
		`"input":[{"type":"local_shell_call_output","call_id":"call_ls","output":"a.txt\nb.txt"}]}`
	second, err := e.Run(ctx, decodeRequest(t, body), nil)
	if err != nil {
		t.Fatal(err)
	}
	if second.Output[0].Text() != "two files" {
		t.Errorf("answer %+v", second.Output)
	}
	items := b.requests[1].Items
	last := items[len(items)-1]
	call := items[len(items)-2]
	if call.Type != responses.ItemFunctionCall || call.CallFields().Name != "local_shell" || last.OutputString() != "a.txt\nb.txt" {
		t.Errorf("the model saw %+v then %+v", call, last)
	}

	// An output for no call is refused.
	bad := `{"model":"m","tools":[{"type":"local_shell"}],"input":[{"type":"local_shell_call_output","call_id":"nope","output":"x"}]}`
	_, err = e.Run(ctx, decodeRequest(t, bad), nil)
	var apiErr *responses.APIError
	if !errors.As(err, &apiErr) || apiErr.Param != "input[0].call_id" {
		t.Errorf("orphan output: %v", err)
	}
}
