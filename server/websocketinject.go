package server

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/coder/websocket"

	"github.com/loomgate/loom/engine"
	"github.com/loomgate/loom/responses"
)

// response.inject (beta in OpenAI's WebSocket mode) adds input items to a
// response while it runs:
//
//	{"type":"response.inject","response_id":"resp_...","input":[...]}
//
// The items wait in the response's engine.Inbox; the response takes them
// before its next model turn (a model that has answered meanwhile gets one
// more turn to read them), and they join the response's input. Taken, they
// are acknowledged with response.inject.created on the response's lane,
// numbered in its sequence. A response that ends without taking them (it
// ended, it waits for the client's tool calls, it failed) hands them back
// in response.inject.failed with code response_already_completed and the
// input as sent: the client sends them in a new response.create. An id the
// connection did not run (or ran too long ago) gets response_not_found.
//
// loom injects messages of role user, developer or system with text
// content: a response here never waits on a client's tool output while it
// runs (a client call ends it), so a tool output has nothing to resume.

// injectMessage is a response.inject client event.
type injectMessage struct {
	ResponseID string          `json:"response_id"`
	Input      json.RawMessage `json:"input"`
}

// inject handles a response.inject: the items go to the response's inbox,
// or the client is told why not.
func (sc *socketConn) inject(data []byte) {
	var msg injectMessage
	if err := json.Unmarshal(data, &msg); err != nil {
		sc.sendError("", responses.BadRequest("", "a response.inject has a string response_id and a list of input items"))
		return
	}
	if msg.ResponseID == "" {
		sc.sendError("", responses.BadRequest("response_id", "a response.inject needs the response_id of the response to add input to"))
		return
	}
	run, running := sc.findRun(msg.ResponseID)
	stream := ""
	if run != nil {
		stream = run.lane.name
	}
	items, apiErr := injectedItems(msg.Input)
	if apiErr != nil {
		sc.sendError(stream, apiErr)
		return
	}
	switch {
	case run == nil:
		sc.injectNotFound(msg)
	case !running || !run.inbox.Add(engine.Injection{Items: items,
		Taken:   func() { run.lane.injectCreated(run) },
		Dropped: func() { run.lane.injectFailed(run, msg.Input) }}):
		run.lane.injectFailed(run, msg.Input)
	}
}

// findRun returns the response of the connection with id: running in a
// lane, or among the latest that ended (running false). nil when the
// connection knows no such response.
func (sc *socketConn) findRun(id string) (run *laneRun, running bool) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	for _, l := range sc.lanes.byName {
		if r := l.running; r != nil && r.id == id {
			return r, true
		}
	}
	for _, r := range sc.lanes.ended {
		if r.id == id {
			return r, false
		}
	}
	return nil, false
}

// injectedItems decodes and checks the input of a response.inject.
func injectedItems(raw json.RawMessage) ([]responses.Item, *responses.APIError) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, responses.BadRequest("input", "a response.inject needs input: a list of input items")
	}
	var in responses.Input
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, responses.BadRequest("input", "input must be a list of input items: %v", err)
	}
	if len(in.Items) == 0 {
		return nil, responses.BadRequest("input", "a response.inject needs at least one input item")
	}
	for i, it := range in.Items {
		param := "input[" + strconv.Itoa(i) + "]"
		if it.Type != "" && it.Type != responses.ItemMessage {
			return nil, responses.Unsupported(param+".type",
				"loom injects messages only (this is a %s): a response never waits on a client's tool output while it runs", it.Type)
		}
		switch it.Role {
		case "user", "developer", "system":
		default:
			return nil, responses.BadRequest(param+".role", "an injected message has role user, developer or system, not %q", it.Role)
		}
		for j, p := range it.Content {
			if p.Type != responses.PartInputText {
				return nil, responses.Unsupported(fmt.Sprintf("%s.content[%d]", param, j), "an injected message holds text (input_text), not %s", p.Type)
			}
		}
	}
	return in.Items, nil
}

// injectCreated tells the client that run took its injected input.
func (l *socketLane) injectCreated(run *laneRun) {
	l.addEvent(run, "response.inject.created", func(b []byte) []byte {
		b = append(b, `,"response_id":`...)
		return strconv.AppendQuote(b, run.id)
	})
}

// injectFailed hands input back to the client: run ended without taking
// it.
func (l *socketLane) injectFailed(run *laneRun, input json.RawMessage) {
	l.addEvent(run, "response.inject.failed", func(b []byte) []byte {
		b = append(b, `,"response_id":`...)
		b = strconv.AppendQuote(b, run.id)
		b = append(b, `,"error":{"code":"response_already_completed","message":"the response has ended without reading this input; send it in a new response.create"},"input":`...)
		return append(b, input...)
	})
}

// injectNotFound answers an injection into a response the connection does
// not know, on the default stream (no lane is known).
func (sc *socketConn) injectNotFound(msg injectMessage) {
	ev := struct {
		Type           string          `json:"type"`
		SequenceNumber int             `json:"sequence_number"`
		ResponseID     string          `json:"response_id"`
		Error          injectError     `json:"error"`
		Input          json.RawMessage `json:"input"`
	}{Type: sc.dialect.EventType("response.inject.failed"), ResponseID: msg.ResponseID, Input: msg.Input,
		Error: injectError{Code: "response_not_found", Message: "no response with this id is running on this connection"}}
	b, _ := json.Marshal(ev)
	sc.c.Write(sc.ctx, websocket.MessageText, b)
}

type injectError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}
