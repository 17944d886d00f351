package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.uber.org/goleak"

	"github.com/loomgate/loom/engine"
	"github.com/loomgate/loom/model/mockllm"
	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/server"
	"github.com/loomgate/loom/store"
	"github.com/loomgate/loom/tools"
	"github.com/loomgate/loom/tools/toolstest"
)

// socketClient is openai-go's WebSocket client for loom, asking for the
// Open Responses dialect so that every event can be validated as sent.
type socketClient struct {
	t    *testing.T
	conn *openai.BetaResponseConnection
}

func dialSocket(ctx context.Context, t *testing.T, h *harness) *socketClient {
	t.Helper()
	client := openai.NewClient(option.WithBaseURL(h.BaseURL), option.WithAPIKey("test"),
		option.WithHeader(server.DialectHeader, "openresponses"), option.WithMaxRetries(0))
	conn, err := client.Beta.Responses.Connect(ctx, openai.BetaResponseConnectionOptions{})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(conn.Abort)
	return &socketClient{t: t, conn: conn}
}

// create sends a response.create with the given body fields.
func (c *socketClient) create(ctx context.Context, body map[string]any) {
	c.t.Helper()
	msg := map[string]any{"type": "response.create", "model": "mock-model"}
	for k, v := range body {
		msg[k] = v
	}
	raw, _ := json.Marshal(msg)
	if err := c.conn.SendRaw(ctx, raw); err != nil {
		c.t.Fatalf("send: %v", err)
	}
}

// socketEvent is what a test looks at in one received event.
type socketEvent struct {
	Type           string `json:"type"`
	SequenceNumber *int   `json:"sequence_number"`
	Status         int    `json:"status"`
	Response       struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	} `json:"response"`
	Error struct {
		Code  string  `json:"code"`
		Param *string `json:"param"`
	} `json:"error"`
	raw json.RawMessage
}

// next receives one event, validated against the Open Responses schema.
func (c *socketClient) next(ctx context.Context) socketEvent {
	c.t.Helper()
	raw, err := c.conn.RecvRaw(ctx)
	if err != nil {
		c.t.Fatalf("receive: %v", err)
	}
	var ev socketEvent
	if err := json.Unmarshal(raw, &ev); err != nil {
		c.t.Fatalf("event is not JSON: %s", raw)
	}
	ev.raw = raw
	if ev.Type == "error" && ev.SequenceNumber == nil {
		validateSocketError(c.t, raw)
	} else {
		validateEventIn(c.t, responses.DialectOpenResponses, raw)
	}
	return ev
}

// response receives one response's events, up to its terminal event, and
// checks their order: response.created first, sequence numbers 0, 1, 2,
// ... It returns the events; an error event ends it early.
func (c *socketClient) response(ctx context.Context) []socketEvent {
	c.t.Helper()
	var evs []socketEvent
	for range 10000 {
		ev := c.next(ctx)
		evs = append(evs, ev)
		if ev.Type == "error" && ev.SequenceNumber == nil {
			return evs
		}
		if ev.SequenceNumber == nil || *ev.SequenceNumber != len(evs)-1 {
			c.t.Fatalf("event %d (%s) has sequence_number %v, want %d", len(evs)-1, ev.Type, ev.SequenceNumber, len(evs)-1)
		}
		if len(evs) == 1 && ev.Type != "response.created" {
			c.t.Fatalf("first event is %s, want response.created", ev.Type)
		}
		switch ev.Type {
		case "response.completed", "response.failed", "response.incomplete", "response.cancelled":
			return evs
		}
	}
	c.t.Fatal("no terminal event in 10000 events")
	return nil
}

func finalOf(t *testing.T, evs []socketEvent) socketEvent {
	t.Helper()
	last := evs[len(evs)-1]
	if last.Type != "response.completed" {
		t.Fatalf("response ended with %s: %s", last.Type, last.raw)
	}
	return last
}

// validateSocketError checks a WebSocket error envelope against its schema.
func validateSocketError(t testing.TB, raw []byte) {
	t.Helper()
	schemas(t)
	socketErrorSchema.once.Do(func() { socketErrorSchema.s, socketErrorSchema.err = compileSchema("WebSocketErrorEvent") })
	if socketErrorSchema.err != nil {
		t.Fatal(socketErrorSchema.err)
	}
	validateAgainst(t, socketErrorSchema.s, raw, "websocket error event")
}

func TestWebSocketOneResponseMatchesSSE(t *testing.T) {
	forEachUpstream(t, func(t *testing.T, h *harness) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		const script = "#reason thinking first\n#say Hello over a socket."
		c := dialSocket(ctx, t, h)
		c.create(ctx, map[string]any{"input": script})
		evs := c.response(ctx)
		finalOf(t, evs)

		// The same request over SSE: the same events in the same order.
		sse := postStreamTypes(t, h, map[string]any{"model": "mock-model", "input": script, "stream": true})
		var got []string
		for _, ev := range evs {
			got = append(got, ev.Type)
		}
		if !slices.Equal(got, sse) {
			t.Errorf("socket event types\n%v\nSSE event types\n%v", got, sse)
		}
	})
}

// postStreamTypes posts a streamed request in the Open Responses dialect and
// returns its event types in order.
func postStreamTypes(t *testing.T, h *harness, body map[string]any) []string {
	t.Helper()
	raw, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, h.BaseURL+"/responses", strings.NewReader(string(raw)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(server.DialectHeader, "openresponses")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var types []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var head struct{ Type string }
		json.Unmarshal([]byte(data), &head)
		types = append(types, head.Type)
	}
	return types
}

// validateAgainstNamed validates data against a component schema of the
// Open Responses document by name.
func validateAgainstNamed(t testing.TB, name string, data []byte) {
	t.Helper()
	s, err := compileSchema(name)
	if err != nil {
		t.Fatalf("compile %s: %v", name, err)
	}
	validateAgainst(t, s, data, name)
}

// socketErrorSchema is the compiled WebSocketErrorEvent schema.
var socketErrorSchema struct {
	once sync.Once
	s    *jsonschema.Schema
	err  error
}

// compileSchema compiles one component schema of the Open Responses
// document.
func compileSchema(name string) (*jsonschema.Schema, error) {
	raw, err := os.ReadFile("testdata/openresponses-openapi.json")
	if err != nil {
		return nil, err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, err
	}
	return c.Compile(schemaURL + "#/components/schemas/" + name)
}

func TestWebSocketSequentialResponses(t *testing.T) {
	h := newHarness(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := dialSocket(ctx, t, h)
	seen := map[string]bool{}
	for i, text := range []string{"one", "two", "three"} {
		// openai-go's typed client event.
		err := c.conn.Send(ctx, openai.BetaResponsesClientEventUnionParam{OfResponseCreate: &openai.BetaResponsesClientEventResponseCreateParam{
			Model: "mock-model",
			Input: openai.BetaResponsesClientEventResponseCreateInputUnionParam{OfString: openai.String("#say " + text)},
		}})
		if err != nil {
			t.Fatal(err)
		}
		final := finalOf(t, c.response(ctx))
		if seen[final.Response.ID] {
			t.Fatalf("response %d reuses id %s", i, final.Response.ID)
		}
		seen[final.Response.ID] = true
		// Stored by default: any replica can read it. (The engine saves
		// right after the terminal event is sent, so wait for it.)
		if status := waitStored(ctx, t, h, final.Response.ID); status != "completed" {
			t.Errorf("response %d stored as %q", i, status)
		}
	}
	if n := len(h.Mock.Requests()); n != 3 {
		t.Errorf("upstream got %d requests, want 3", n)
	}
}

// lastUserTexts returns the text of every user message of the upstream's
// latest request, on either upstream.
func lastPrompt(t *testing.T, h *harness) string {
	t.Helper()
	reqs := h.Mock.Requests()
	if len(reqs) == 0 {
		t.Fatal("the upstream got no request")
	}
	return promptOf(reqs[len(reqs)-1])
}

// promptOf is a recorded upstream request's prompt: the completions
// prompt's text, else the chat body.
func promptOf(r mockllm.Request) string {
	if r.Completion != nil {
		return r.Completion.PromptText
	}
	return string(r.Body)
}

func TestWebSocketStoreFalseContinuation(t *testing.T) {
	forEachUpstream(t, func(t *testing.T, h *harness) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		c := dialSocket(ctx, t, h)
		c.create(ctx, map[string]any{"input": "#say first answer\nfirst question", "store": false})
		first := finalOf(t, c.response(ctx))
		c.create(ctx, map[string]any{"input": "#say second answer\nsecond question", "store": false,
			"previous_response_id": first.Response.ID})
		finalOf(t, c.response(ctx))
		// The first response ended (and would have been saved) before
		// the second started.
		if _, err := h.Store.GetResponse(ctx, first.Response.ID); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("store false response was stored (err %v)", err)
		}
		prompt := lastPrompt(t, h)
		for _, want := range []string{"first question", "first answer", "second question"} {
			if !strings.Contains(prompt, want) {
				t.Errorf("the continued prompt lacks %q:\n%s", want, prompt)
			}
		}
	})
}

func TestWebSocketPreviousNotFound(t *testing.T) {
	h := newHarness(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := dialSocket(ctx, t, h)
	c.create(ctx, map[string]any{"input": "hi", "previous_response_id": "resp_nowhere"})
	ev := c.next(ctx)
	if ev.Type != "error" || ev.Error.Code != "previous_response_not_found" || ev.Status != http.StatusBadRequest ||
		ev.Error.Param == nil || *ev.Error.Param != "previous_response_id" {
		t.Fatalf("got %s, want a previous_response_not_found error event", ev.raw)
	}
	// The connection goes on.
	c.create(ctx, map[string]any{"input": "#say still here"})
	final := finalOf(t, c.response(ctx))
	waitStored(ctx, t, h, final.Response.ID)
	// A streamed response is saved twice (in_progress at its start, then
	// final); the rejected request is saved never.
	if ids := h.Store.savedIDs(); len(ids) != 1 || ids[0] != final.Response.ID {
		t.Errorf("saved %v, want only %s (the rejected request stores nothing)", ids, final.Response.ID)
	}
}

func TestWebSocketFailedContinuationEvicts(t *testing.T) {
	h := newHarness(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := dialSocket(ctx, t, h)
	c.create(ctx, map[string]any{"input": "#say cached", "store": false})
	first := finalOf(t, c.response(ctx))
	// A continuation that fails: its output answers no call.
	c.create(ctx, map[string]any{"previous_response_id": first.Response.ID, "store": false,
		"input": []any{map[string]any{"type": "function_call_output", "call_id": "call_none", "output": "x"}}})
	if ev := c.next(ctx); ev.Type != "error" || ev.Status != http.StatusBadRequest {
		t.Fatalf("got %s, want a 400 error event", ev.raw)
	}
	c.create(ctx, map[string]any{"previous_response_id": first.Response.ID, "store": false, "input": "again"})
	if ev := c.next(ctx); ev.Type != "error" || ev.Error.Code != "previous_response_not_found" {
		t.Fatalf("got %s, want previous_response_not_found after the failed continuation", ev.raw)
	}
}

func TestWebSocketReconnectRecovers(t *testing.T) {
	h := newHarness(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := dialSocket(ctx, t, h)
	c.create(ctx, map[string]any{"input": "#say remembered\nfirst question", "store": false})
	first := finalOf(t, c.response(ctx))
	c.conn.Close()

	// A new connection has no cache: the id is unknown there ...
	c = dialSocket(ctx, t, h)
	c.create(ctx, map[string]any{"input": "next", "store": false, "previous_response_id": first.Response.ID})
	if ev := c.next(ctx); ev.Type != "error" || ev.Error.Code != "previous_response_not_found" {
		t.Fatalf("got %s, want previous_response_not_found on a new connection", ev.raw)
	}
	// ... and the client recovers by sending its full input.
	c.create(ctx, map[string]any{"store": false, "input": []any{
		map[string]any{"type": "message", "role": "user", "content": "first question"},
		map[string]any{"type": "message", "role": "assistant", "content": []any{map[string]any{"type": "output_text", "text": "remembered"}}},
		map[string]any{"type": "message", "role": "user", "content": "#say recovered\nsecond question"},
	}})
	finalOf(t, c.response(ctx))
	prompt := lastPrompt(t, h)
	if !strings.Contains(prompt, "remembered") || !strings.Contains(prompt, "second question") {
		t.Errorf("recovered prompt lacks the resent history:\n%s", prompt)
	}
}

func TestWebSocketBusyConnectionRefusesAThirdCreate(t *testing.T) {
	h := newHarness(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := dialSocket(ctx, t, h)
	// The first stalls upstream until the test ends it; the second
	// waits behind it; the third is refused.
	c.create(ctx, map[string]any{"input": "#say long\n#stall 2"})
	if err := h.Mock.WaitStarted(ctx, 1); err != nil {
		t.Fatal(err)
	}
	c.create(ctx, map[string]any{"input": "#say queued"})
	c.create(ctx, map[string]any{"input": "#say refused"})
	var refused bool
	for range 100 {
		ev := c.next(ctx)
		if ev.Type == "error" && ev.SequenceNumber == nil {
			if ev.Error.Code != "response_in_progress" || ev.Status != http.StatusConflict {
				t.Fatalf("got %s, want response_in_progress", ev.raw)
			}
			refused = true
			break
		}
	}
	if !refused {
		t.Fatal("the third create was not refused")
	}
	// Ending the stalled upstream request lets the queued one run.
	h.Mock.Close()
	for ended := false; !ended; {
		switch c.next(ctx).Type {
		case "response.completed", "response.failed", "response.incomplete", "response.cancelled":
			ended = true
		}
	}
	finalOf(t, c.response(ctx))
}

// TestWebSocketDisconnect: a client that goes away mid-response cancels
// the upstream request, the response is stored as cancelled, and nothing
// the connection started is left running.
//
// Not parallel: the leak check looks at every goroutine in the process.
func TestWebSocketDisconnect(t *testing.T) {
	h := newHarness(t, nil)
	baseline := goleak.IgnoreCurrent()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	transport := &http.Transport{}
	conn, _, err := websocket.Dial(ctx, strings.Replace(h.BaseURL, "http", "ws", 1)+"/responses",
		&websocket.DialOptions{HTTPClient: &http.Client{Transport: transport}})
	if err != nil {
		t.Fatal(err)
	}
	msg, _ := json.Marshal(map[string]any{"type": "response.create", "model": "mock-model",
		"input": "#say This sentence is long enough for several chunks.\n#stall 3"})
	if err := conn.Write(ctx, websocket.MessageText, msg); err != nil {
		t.Fatal(err)
	}
	var id string
	for range 100 {
		_, data, err := conn.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var ev socketEvent
		json.Unmarshal(data, &ev)
		if ev.Type == "response.created" {
			id = ev.Response.ID
		}
		if ev.Type == "response.output_text.delta" {
			break
		}
	}
	conn.CloseNow()

	if err := h.Mock.WaitCancelled(ctx, 1); err != nil {
		t.Fatalf("the upstream request was not cancelled: %v (stats %+v)", err, h.Mock.Stats())
	}
	if status := waitStored(ctx, t, h, id); status != "cancelled" {
		t.Errorf("stored response %s has status %q, want cancelled", id, status)
	}
	transport.CloseIdleConnections()
	h.Upstream.CloseIdleConnections()
	goleak.VerifyNone(t, baseline)
}

// TestWebSocketShutdown: the server's shutdown closes an idle socket with
// 1001 going away, and WaitSockets returns once it is closed.
func TestWebSocketShutdown(t *testing.T) {
	h := newHarness(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, _, err := websocket.Dial(ctx, strings.Replace(h.BaseURL, "http", "ws", 1)+"/responses", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseNow()
	h.Server.CloseSockets()
	_, _, err = conn.Read(ctx)
	if status := websocket.CloseStatus(err); status != websocket.StatusGoingAway {
		t.Fatalf("read after shutdown: %v, want close status 1001", err)
	}
	if err := h.Server.WaitSockets(ctx); err != nil {
		t.Fatalf("WaitSockets: %v", err)
	}
}

// TestWebSocketDisconnectDuringToolCall: a client that leaves while loom
// runs a server tool for it cancels the call, and the response's one
// cleanup pass still runs over the called tool before its session closes.
func TestWebSocketDisconnectDuringToolCall(t *testing.T) {
	log := &toolstest.Log{}
	started := make(chan struct{})
	srv := &toolstest.Server{Label: "A", ToolNames: []string{"a1"}, Log: log,
		CallFunc: func(ctx context.Context, c tools.Call) (tools.Result, error) {
			close(started)
			<-ctx.Done()
			return tools.Result{}, ctx.Err()
		}}
	provider := &toolstest.Provider{Type: "fake", List: []tools.Server{srv}}
	h := newHarness(t, &harnessOptions{ToolProviders: []engine.ToolProvider{provider}})
	baseline := goleak.IgnoreCurrent()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	transport := &http.Transport{}
	conn, _, err := websocket.Dial(ctx, strings.Replace(h.BaseURL, "http", "ws", 1)+"/responses",
		&websocket.DialOptions{HTTPClient: &http.Client{Transport: transport}})
	if err != nil {
		t.Fatal(err)
	}
	msg, _ := json.Marshal(map[string]any{"type": "response.create", "model": "mock-model",
		"input": "#call a1 {}\n#then\n#say done", "tools": []any{map[string]any{"type": "fake"}}})
	if err := conn.Write(ctx, websocket.MessageText, msg); err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("the tool was never called")
	}
	conn.CloseNow()
	// The handler returns once the response has ended and its context
	// closed the sessions.
	if !h.WaitIdle(10 * time.Second) {
		t.Fatal("the socket handler did not return")
	}
	for _, p := range toolstest.CheckLifecycle(log, []string{"A"}) {
		t.Error(p)
	}
	transport.CloseIdleConnections()
	h.Upstream.CloseIdleConnections()
	goleak.VerifyNone(t, baseline)
}
