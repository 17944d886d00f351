package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/loomgate/loom/engine"
	"github.com/loomgate/loom/internal/testutil"
	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/server"
	"github.com/loomgate/loom/store/sqlite"
)

// laneServer starts a server on backend b for a lane test. When the test
// ends (its client has closed its connection: dialSocket), every
// connection must end, lanes and all.
func laneServer(t *testing.T, b model.Backend) string {
	t.Helper()
	srv, s := newSocketServer(t, b, nil)
	srv.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.WaitSockets(ctx); err != nil {
			t.Errorf("the connections did not end: %v", err)
		}
		srv.Close()
	})
	return srv.URL
}

// laneEvent is what the lane tests look at in an event.
type laneEvent struct {
	Type           string  `json:"type"`
	SequenceNumber *int    `json:"sequence_number"`
	StreamID       *string `json:"stream_id"`
	Status         int     `json:"status"`
	Delta          string  `json:"delta"`
	ResponseID     string  `json:"response_id"`
	Response       struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	} `json:"response"`
	Error struct {
		Code  string  `json:"code"`
		Param *string `json:"param"`
	} `json:"error"`
	Input json.RawMessage `json:"input"`
	raw   []byte
}

func (ev laneEvent) stream() string {
	if ev.StreamID == nil {
		return ""
	}
	return *ev.StreamID
}

func (ev laneEvent) terminal() bool {
	switch ev.Type {
	case "response.completed", "response.failed", "response.incomplete", "response.cancelled":
		return true
	}
	return false
}

// sendJSON writes one client event.
func sendJSON(t *testing.T, ctx context.Context, c *websocket.Conn, msg map[string]any) {
	t.Helper()
	b, _ := json.Marshal(msg)
	if err := c.Write(ctx, websocket.MessageText, b); err != nil {
		t.Fatal(err)
	}
}

// createOn sends a response.create of input on lane stream ("" for the
// default stream), with the other fields of extra.
func createOn(t *testing.T, ctx context.Context, c *websocket.Conn, stream, input string, extra map[string]any) {
	t.Helper()
	msg := map[string]any{"type": "response.create", "model": "m", "input": input}
	if stream != "" {
		msg["stream_id"] = stream
	}
	for k, v := range extra {
		msg[k] = v
	}
	sendJSON(t, ctx, c, msg)
}

// readEvent reads one event.
func readEvent(t *testing.T, ctx context.Context, c *websocket.Conn) laneEvent {
	t.Helper()
	_, data, err := c.Read(ctx)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	var ev laneEvent
	if err := json.Unmarshal(data, &ev); err != nil {
		t.Fatalf("event is not JSON: %s", data)
	}
	ev.raw = data
	return ev
}

// syncReader makes sure the server's reader has handled every message
// sent before: it sends an unknown event and reads up to its error (the
// reader handles messages in order). Events read on the way are returned.
func syncReader(t *testing.T, ctx context.Context, c *websocket.Conn) []laneEvent {
	t.Helper()
	sendJSON(t, ctx, c, map[string]any{"type": "test.sync"})
	var seen []laneEvent
	for range 1000 {
		ev := readEvent(t, ctx, c)
		if ev.Type == "error" && ev.Error.Param != nil && *ev.Error.Param == "type" {
			return seen
		}
		seen = append(seen, ev)
	}
	t.Fatal("no answer to the sync message")
	return nil
}

// lastUserText returns the text of the last user message of a model
// request: what the test's backends switch on.
func lastUserText(req *model.Request) string {
	for i := len(req.Items) - 1; i >= 0; i-- {
		it := req.Items[i]
		if it.Type == responses.ItemMessage && it.Role == "user" && len(it.Content) > 0 {
			return it.Content[0].Text
		}
	}
	return ""
}

// say emits text as the model's whole answer.
func say(emit func(model.Delta) error, text string) error {
	if err := emit(model.Delta{Kind: model.DeltaText, Text: text}); err != nil {
		return err
	}
	return emit(model.Delta{Kind: model.DeltaFinish, FinishReason: model.FinishStop})
}

// TestWebSocketLanesInterleave: a response on lane b runs and completes
// while lane a's is still running, on one connection; every event carries
// its lane's stream_id, and each lane's events are numbered in order.
func TestWebSocketLanesInterleave(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{})
	url := laneServer(t, backendFunc(func(ctx context.Context, req *model.Request, emit func(model.Delta) error) error {
		if lastUserText(req) == "slow" {
			if err := emit(model.Delta{Kind: model.DeltaText, Text: "slow "}); err != nil {
				return err
			}
			close(started)
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
			return say(emit, "done")
		}
		return say(emit, "quick")
	}))
	ctx, c := dialSocket(t, url)
	createOn(t, ctx, c, "a", "slow", nil)
	<-started
	createOn(t, ctx, c, "b", "fast", nil)

	next := map[string]int{}
	ended := map[string]string{}
	for len(ended) < 2 {
		ev := readEvent(t, ctx, c)
		lane := ev.stream()
		if lane != "a" && lane != "b" {
			t.Fatalf("event without its lane's stream_id: %s", ev.raw)
		}
		if ev.SequenceNumber == nil || *ev.SequenceNumber != next[lane] {
			t.Fatalf("lane %s: event %s numbered %v, want %d", lane, ev.Type, ev.SequenceNumber, next[lane])
		}
		next[lane]++
		if ev.terminal() {
			ended[lane] = ev.Type
			if lane == "b" {
				if _, ok := ended["a"]; ok {
					t.Fatal("lane a ended before lane b: the lanes did not run at once")
				}
				// b is done while a still waits: now a may end.
				close(release)
			}
		}
	}
	if ended["a"] != "response.completed" || ended["b"] != "response.completed" {
		t.Fatalf("lanes ended with %v", ended)
	}
}

// TestWebSocketDefaultStreamHasNoStreamID: a client that sends no
// stream_id sees no stream_id on any event, error or not.
func TestWebSocketDefaultStreamHasNoStreamID(t *testing.T) {
	url := laneServer(t, answer("hi"))
	ctx, c := dialSocket(t, url)
	createOn(t, ctx, c, "", "hello", nil)
	for {
		ev := readEvent(t, ctx, c)
		if strings.Contains(string(ev.raw), "stream_id") {
			t.Fatalf("a default-stream event has a stream_id: %s", ev.raw)
		}
		if ev.terminal() {
			break
		}
	}
	createOn(t, ctx, c, "", "x", map[string]any{"model": "nope"})
	if ev := readEvent(t, ctx, c); ev.Type != "error" || strings.Contains(string(ev.raw), "stream_id") {
		t.Fatalf("got %s, want an error event without stream_id", ev.raw)
	}
}

// TestWebSocketLaneFailureLeavesOthers: a lane whose request is refused,
// or whose upstream fails, gets its error on that lane; another lane's
// running response goes on to complete.
func TestWebSocketLaneFailureLeavesOthers(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{})
	url := laneServer(t, backendFunc(func(ctx context.Context, req *model.Request, emit func(model.Delta) error) error {
		switch lastUserText(req) {
		case "slow":
			close(started)
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
			return say(emit, "done")
		case "boom":
			return fmt.Errorf("the upstream broke")
		}
		return say(emit, "quick")
	}))
	ctx, c := dialSocket(t, url)
	createOn(t, ctx, c, "a", "slow", nil)
	<-started
	createOn(t, ctx, c, "b", "x", map[string]any{"model": "no-such-model"})
	ev := readEvent(t, ctx, c)
	for ev.stream() == "a" {
		ev = readEvent(t, ctx, c)
	}
	if ev.Type != "error" || ev.stream() != "b" || ev.Error.Param == nil || *ev.Error.Param != "model" {
		t.Fatalf("got %s, want lane b's error naming model", ev.raw)
	}
	createOn(t, ctx, c, "b", "boom", nil)
	for {
		ev := readEvent(t, ctx, c)
		if ev.stream() == "b" && ev.terminal() {
			if ev.Type != "response.failed" {
				t.Fatalf("lane b ended with %s, want response.failed", ev.raw)
			}
			break
		}
	}
	close(release)
	for {
		ev := readEvent(t, ctx, c)
		if ev.stream() == "a" && ev.terminal() {
			if ev.Type != "response.completed" {
				t.Fatalf("lane a ended with %s after lane b failed", ev.raw)
			}
			return
		}
	}
}

// TestWebSocketCloseCancelsEveryLane: the client leaving cancels the
// running response of every lane.
func TestWebSocketCloseCancelsEveryLane(t *testing.T) {
	var startedWG, cancelledWG sync.WaitGroup
	startedWG.Add(2)
	cancelledWG.Add(2)
	url := laneServer(t, backendFunc(func(ctx context.Context, req *model.Request, emit func(model.Delta) error) error {
		startedWG.Done()
		<-ctx.Done()
		cancelledWG.Done()
		return ctx.Err()
	}))
	ctx, c := dialSocket(t, url)
	createOn(t, ctx, c, "a", "one", nil)
	createOn(t, ctx, c, "b", "two", nil)
	waitGroup(t, ctx, &startedWG, "both lanes' upstream calls to start")
	c.CloseNow()
	waitGroup(t, ctx, &cancelledWG, "both lanes' upstream calls to be cancelled")
}

// waitGroup waits for wg, or fails the test once ctx is done.
func waitGroup(t *testing.T, ctx context.Context, wg *sync.WaitGroup, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatalf("gave up waiting for %s", what)
	}
}

// TestWebSocketStreamIDChecked: a stream_id that is not 1-256 characters
// of [A-Za-z0-9_.-] is an error event naming stream_id, on the default
// stream; a valid one of 256 characters runs.
func TestWebSocketStreamIDChecked(t *testing.T) {
	url := laneServer(t, answer("hi"))
	ctx, c := dialSocket(t, url)
	for _, bad := range []any{"", strings.Repeat("x", 257), "a b", "é", "a/b", 7} {
		sendJSON(t, ctx, c, map[string]any{"type": "response.create", "model": "m", "input": "hi", "stream_id": bad})
		ev := readEvent(t, ctx, c)
		if ev.Type != "error" || ev.Status != http.StatusBadRequest || ev.Error.Param == nil || *ev.Error.Param != "stream_id" || ev.StreamID != nil {
			t.Fatalf("stream_id %q: got %s, want a 400 naming stream_id, without stream_id", bad, ev.raw)
		}
	}
	long := strings.Repeat("Az09_.-", 37)[:256]
	createOn(t, ctx, c, long, "hi", nil)
	for {
		ev := readEvent(t, ctx, c)
		if ev.stream() != long {
			t.Fatalf("event of a 256-character lane: %s", ev.raw)
		}
		if ev.terminal() {
			break
		}
	}
}

// TestWebSocketLaneLimits: a 17th active response is refused, and so is a
// 33rd named stream, each with an error event naming stream_id on the
// refused lane; a lane already open still takes responses.
func TestWebSocketLaneLimits(t *testing.T) {
	release := make(chan struct{})
	url := laneServer(t, backendFunc(func(ctx context.Context, req *model.Request, emit func(model.Delta) error) error {
		if lastUserText(req) == "hold" {
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return say(emit, "ok")
	}))
	ctx, c := dialSocket(t, url)
	// 16 held responses on 8 lanes, two each (one runs, one waits).
	for i := range 16 {
		createOn(t, ctx, c, fmt.Sprintf("held%d", i%8), "hold", nil)
	}
	createOn(t, ctx, c, "one-more", "hold", nil)
	ev := readEvent(t, ctx, c)
	for ev.Type != "error" {
		ev = readEvent(t, ctx, c)
	}
	if ev.stream() != "one-more" || ev.Error.Code != "too_many_active_responses" || ev.Error.Param == nil || *ev.Error.Param != "stream_id" {
		t.Fatalf("got %s, want too_many_active_responses naming stream_id on lane one-more", ev.raw)
	}
	close(release)
	for ended := 0; ended < 16; {
		if ev := readEvent(t, ctx, c); ev.terminal() {
			ended++
		}
	}
	// The refused create opened no lane: 8 are open, 24 more may be.
	for i := range 24 {
		createOn(t, ctx, c, fmt.Sprintf("more%d", i), "hi", nil)
		for ev := readEvent(t, ctx, c); !ev.terminal(); ev = readEvent(t, ctx, c) {
			if ev.Type == "error" {
				t.Fatalf("lane %d of 32: %s", 9+i, ev.raw)
			}
		}
	}
	createOn(t, ctx, c, "thirty-third", "hi", nil)
	ev = readEvent(t, ctx, c)
	if ev.Type != "error" || ev.stream() != "thirty-third" || ev.Error.Code != "too_many_streams" || ev.Error.Param == nil || *ev.Error.Param != "stream_id" {
		t.Fatalf("got %s, want too_many_streams naming stream_id", ev.raw)
	}
	// An open lane, and the default stream, still run.
	for _, lane := range []string{"held3", ""} {
		createOn(t, ctx, c, lane, "hi", nil)
		ev := readEvent(t, ctx, c)
		for !ev.terminal() && ev.Type != "error" {
			ev = readEvent(t, ctx, c)
		}
		if ev.Type != "response.completed" || ev.stream() != lane {
			t.Fatalf("lane %q after the limit: %s", lane, ev.raw)
		}
	}
}

// TestWebSocketLanesKeepTheirOwnContinuation: each lane keeps its latest
// store false response, so that lane a continues its own after lane b
// ran one; a new lane forks from lane b's.
func TestWebSocketLanesKeepTheirOwnContinuation(t *testing.T) {
	var mu sync.Mutex
	var prompts [][]string
	url := laneServer(t, backendFunc(func(ctx context.Context, req *model.Request, emit func(model.Delta) error) error {
		var texts []string
		for _, it := range req.Items {
			for _, p := range it.Content {
				texts = append(texts, p.Text)
			}
		}
		mu.Lock()
		prompts = append(prompts, texts)
		mu.Unlock()
		return say(emit, "answer to "+lastUserText(req))
	}))
	ctx, c := dialSocket(t, url)
	run := func(lane, input, previous string) laneEvent {
		t.Helper()
		extra := map[string]any{"store": false}
		if previous != "" {
			extra["previous_response_id"] = previous
		}
		createOn(t, ctx, c, lane, input, extra)
		for {
			ev := readEvent(t, ctx, c)
			if ev.Type == "error" || ev.terminal() {
				return ev
			}
		}
	}
	a1 := run("a", "question a1", "")
	b1 := run("b", "question b1", "")
	a2 := run("a", "question a2", a1.Response.ID)
	if a2.Type != "response.completed" {
		t.Fatalf("lane a continuing its own store false response: %s", a2.raw)
	}
	mu.Lock()
	last := strings.Join(prompts[len(prompts)-1], "|")
	mu.Unlock()
	if last != "question a1|answer to question a1|question a2" {
		t.Errorf("lane a's continuation read %q", last)
	}
	fork := run("c", "question c1", b1.Response.ID)
	if fork.Type != "response.completed" || fork.stream() != "c" {
		t.Fatalf("lane c forking from lane b's response: %s", fork.raw)
	}
	mu.Lock()
	last = strings.Join(prompts[len(prompts)-1], "|")
	mu.Unlock()
	if last != "question b1|answer to question b1|question c1" {
		t.Errorf("the fork read %q", last)
	}
}

// TestWebSocketInject: input injected into a running response joins the
// model's next turn (one more turn when the model had answered), with
// response.inject.created on the response's lane, numbered in its
// sequence; the response's input lists it.
func TestWebSocketInject(t *testing.T) {
	for _, stream := range []string{"", "lane-1"} {
		t.Run("stream="+stream, func(t *testing.T) {
			firstTurn := make(chan struct{})
			finishFirst := make(chan struct{})
			var mu sync.Mutex
			var turns [][]responses.Item
			url := laneServer(t, backendFunc(func(ctx context.Context, req *model.Request, emit func(model.Delta) error) error {
				mu.Lock()
				turns = append(turns, req.Items)
				n := len(turns)
				mu.Unlock()
				if n == 1 {
					if err := emit(model.Delta{Kind: model.DeltaText, Text: "working on it"}); err != nil {
						return err
					}
					close(firstTurn)
					select {
					case <-finishFirst:
					case <-ctx.Done():
						return ctx.Err()
					}
					return emit(model.Delta{Kind: model.DeltaFinish, FinishReason: model.FinishStop})
				}
				return say(emit, "taking the injected note into account")
			}))
			ctx, c := dialSocket(t, url)
			createOn(t, ctx, c, stream, "write a poem", nil)
			var evs []laneEvent
			evs = append(evs, readEvent(t, ctx, c))
			if evs[0].Type != "response.created" {
				t.Fatalf("first event %s", evs[0].raw)
			}
			id := evs[0].Response.ID
			<-firstTurn
			sendJSON(t, ctx, c, map[string]any{"type": "response.inject", "response_id": id,
				"input": []any{map[string]any{"type": "message", "role": "user", "content": "make it rhyme"}}})
			evs = append(evs, syncReader(t, ctx, c)...)
			close(finishFirst)
			for !evs[len(evs)-1].terminal() {
				evs = append(evs, readEvent(t, ctx, c))
			}
			var injected bool
			for i, ev := range evs {
				if ev.SequenceNumber == nil || *ev.SequenceNumber != i {
					t.Fatalf("event %d (%s) numbered %v", i, ev.Type, ev.SequenceNumber)
				}
				if ev.stream() != stream {
					t.Fatalf("event %s on stream %q, want %q", ev.raw, ev.stream(), stream)
				}
				if ev.Type == "response.inject.created" {
					injected = true
					if ev.ResponseID != id {
						t.Errorf("inject.created names %q, want %s", ev.ResponseID, id)
					}
				}
			}
			if !injected {
				t.Fatal("no response.inject.created")
			}
			if last := evs[len(evs)-1]; last.Type != "response.completed" {
				t.Fatalf("ended with %s", last.raw)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(turns) != 2 {
				t.Fatalf("%d model turns, want 2 (one more for the injected input)", len(turns))
			}
			var texts []string
			for _, it := range turns[1] {
				for _, p := range it.Content {
					texts = append(texts, it.Role+": "+p.Text)
				}
			}
			if got, want := strings.Join(texts, " | "), "user: write a poem | assistant: working on it | user: make it rhyme"; got != want {
				t.Errorf("the second turn read %q, want %q", got, want)
			}
			// The stored response's input lists the injected message.
			res, err := http.Get(url + "/v1/responses/" + id + "/input_items?order=asc")
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			var list struct {
				Data []struct {
					Role    string
					Content []struct{ Text string }
				}
			}
			json.NewDecoder(res.Body).Decode(&list)
			if len(list.Data) != 2 || list.Data[1].Role != "user" || len(list.Data[1].Content) != 1 || list.Data[1].Content[0].Text != "make it rhyme" {
				t.Errorf("stored input %+v, want the request's message and the injected one", list.Data)
			}
		})
	}
}

// TestWebSocketInjectTooLate: an injection into a response that has ended
// is answered with response.inject.failed, code
// response_already_completed, handing the input back; one into an id the
// connection does not know with response_not_found.
func TestWebSocketInjectTooLate(t *testing.T) {
	url := laneServer(t, answer("done"))
	ctx, c := dialSocket(t, url)
	createOn(t, ctx, c, "a", "hi", nil)
	var final laneEvent
	for final = readEvent(t, ctx, c); !final.terminal(); final = readEvent(t, ctx, c) {
	}
	input := []any{map[string]any{"role": "user", "content": "too late"}}
	sendJSON(t, ctx, c, map[string]any{"type": "response.inject", "response_id": final.Response.ID, "input": input})
	ev := readEvent(t, ctx, c)
	if ev.Type != "response.inject.failed" || ev.Error.Code != "response_already_completed" || ev.ResponseID != final.Response.ID ||
		ev.stream() != "a" || ev.SequenceNumber == nil || *ev.SequenceNumber != *final.SequenceNumber+1 {
		t.Fatalf("got %s, want response.inject.failed response_already_completed on lane a, numbered after %d", ev.raw, *final.SequenceNumber)
	}
	if !strings.Contains(string(ev.Input), "too late") {
		t.Errorf("the input was not handed back: %s", ev.raw)
	}
	sendJSON(t, ctx, c, map[string]any{"type": "response.inject", "response_id": "resp_elsewhere", "input": input})
	if ev := readEvent(t, ctx, c); ev.Type != "response.inject.failed" || ev.Error.Code != "response_not_found" || ev.StreamID != nil {
		t.Fatalf("got %s, want response_not_found on the default stream", ev.raw)
	}
}

// TestWebSocketInjectChecked: what loom cannot inject is an error event
// naming the field, on the target's lane; the response goes on.
func TestWebSocketInjectChecked(t *testing.T) {
	started := make(chan struct{})
	release := make(chan struct{})
	url := laneServer(t, backendFunc(func(ctx context.Context, req *model.Request, emit func(model.Delta) error) error {
		close(started)
		select {
		case <-release:
		case <-ctx.Done():
			return ctx.Err()
		}
		return say(emit, "ok")
	}))
	ctx, c := dialSocket(t, url)
	createOn(t, ctx, c, "a", "hi", nil)
	created := readEvent(t, ctx, c)
	<-started
	// The events written before the upstream call are out of the way.
	syncReader(t, ctx, c)
	for _, tc := range []struct {
		msg   map[string]any
		param string
	}{
		{map[string]any{"input": []any{map[string]any{"role": "user", "content": "x"}}}, "response_id"},
		{map[string]any{"response_id": created.Response.ID}, "input"},
		{map[string]any{"response_id": created.Response.ID, "input": []any{}}, "input"},
		{map[string]any{"response_id": created.Response.ID, "input": []any{map[string]any{"type": "function_call_output", "call_id": "c", "output": "x"}}}, "input[0].type"},
		{map[string]any{"response_id": created.Response.ID, "input": []any{map[string]any{"role": "assistant", "content": "x"}}}, "input[0].role"},
		{map[string]any{"response_id": created.Response.ID, "input": []any{map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "input_image", "image_url": "https://example.com/x.png"}}}}}, "input[0].content[0]"},
	} {
		tc.msg["type"] = "response.inject"
		sendJSON(t, ctx, c, tc.msg)
		ev := readEvent(t, ctx, c)
		if ev.Type != "error" || ev.Status != http.StatusBadRequest || ev.Error.Param == nil || *ev.Error.Param != tc.param {
			t.Fatalf("%v: got %s, want a 400 naming %s", tc.msg, ev.raw, tc.param)
		}
		if tc.param != "response_id" && ev.stream() != "a" {
			t.Errorf("%v: the error is not on the response's lane: %s", tc.msg, ev.raw)
		}
	}
	close(release)
	for ev := readEvent(t, ctx, c); !ev.terminal(); ev = readEvent(t, ctx, c) {
		if ev.Type == "response.inject.created" {
			t.Fatalf("a refused injection was taken: %s", ev.raw)
		}
	}
}

// TestWebSocketInjectHandedBackAtClientCall: a response that ends
// waiting for the client's function call has no next turn: the input
// injected into it is handed back with response.inject.failed after its
// terminal event, and the model never reads it.
func TestWebSocketInjectHandedBackAtClientCall(t *testing.T) {
	called := make(chan struct{})
	release := make(chan struct{})
	var turns int
	url := laneServer(t, backendFunc(func(ctx context.Context, req *model.Request, emit func(model.Delta) error) error {
		turns++
		if err := emit(model.Delta{Kind: model.DeltaToolCall, ToolIndex: 0, ToolCallID: "call_1", ToolName: "lookup", ToolArguments: "{}"}); err != nil {
			return err
		}
		close(called)
		select {
		case <-release:
		case <-ctx.Done():
			return ctx.Err()
		}
		return emit(model.Delta{Kind: model.DeltaFinish, FinishReason: model.FinishToolCalls})
	}))
	ctx, c := dialSocket(t, url)
	createOn(t, ctx, c, "a", "look it up", map[string]any{"tools": []any{
		map[string]any{"type": "function", "name": "lookup", "parameters": map[string]any{"type": "object"}}}})
	created := readEvent(t, ctx, c)
	<-called
	sendJSON(t, ctx, c, map[string]any{"type": "response.inject", "response_id": created.Response.ID,
		"input": []any{map[string]any{"role": "user", "content": "one more thing"}}})
	syncReader(t, ctx, c)
	close(release)
	var final laneEvent
	for final = readEvent(t, ctx, c); !final.terminal(); final = readEvent(t, ctx, c) {
		if final.Type == "response.inject.created" {
			t.Fatalf("the injection was taken by a response with no next turn: %s", final.raw)
		}
	}
	if final.Type != "response.completed" {
		t.Fatalf("ended with %s", final.raw)
	}
	ev := readEvent(t, ctx, c)
	if ev.Type != "response.inject.failed" || ev.Error.Code != "response_already_completed" || ev.stream() != "a" ||
		!strings.Contains(string(ev.Input), "one more thing") || *ev.SequenceNumber != *final.SequenceNumber+1 {
		t.Fatalf("got %s, want the input handed back after the response's end", ev.raw)
	}
	if turns != 1 {
		t.Errorf("%d model turns, want 1", turns)
	}
}

// TestWebSocketLanePanic: a panic while a lane runs its response is
// caught, in a named lane (it would end the process) and in the default
// stream (net/http recovered it, but the connection's teardown was
// skipped and its slot under the caps kept for good): the lane gets a
// server error, the log has the panic with its stack, and the connection
// is closed and released.
func TestWebSocketLanePanic(t *testing.T) {
	for _, lane := range []string{"a", ""} {
		t.Run("stream "+lane, func(t *testing.T) {
			logs := &testutil.LockedBuffer{}
			srv, s := newSocketServer(t, backendFunc(func(ctx context.Context, req *model.Request, emit func(model.Delta) error) error {
				panic("scripted panic in the model backend")
			}), &server.Options{Logger: slog.New(slog.NewJSONHandler(logs, nil))})
			srv.Start()
			t.Cleanup(srv.Close)
			ctx, c := dialSocket(t, srv.URL)
			createOn(t, ctx, c, lane, "anything", nil)
			sawError := false
			for range 100 {
				_, data, err := c.Read(ctx)
				if err != nil {
					if websocket.CloseStatus(err) == -1 && ctx.Err() != nil {
						t.Fatalf("the connection was not closed: %v", err)
					}
					break
				}
				var ev laneEvent
				if json.Unmarshal(data, &ev) == nil && ev.Type == "error" {
					if ev.stream() != lane || ev.Status != http.StatusInternalServerError {
						t.Fatalf("error event %s: want a 500 on lane %q", data, lane)
					}
					sawError = true
				}
			}
			if !sawError {
				t.Fatal("no error event on the lane that panicked")
			}
			wctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := s.WaitSockets(wctx); err != nil {
				t.Fatalf("the connection was not released: %v", err)
			}
			line := findLog(t, logs, "websocket lane panicked")
			if line == nil || !strings.Contains(fmt.Sprint(line["stack"]), "websocketlanes.go") {
				t.Fatalf("no log line with the panic's stack: %s", logs.String())
			}
		})
	}
}

// heldLog is a slog handler that holds the engine's "response" log line,
// written after a response's terminal event went out and before RunWith
// returns, until release is closed: it keeps open the window between the
// client seeing a response end and the server's bookkeeping after it.
type heldLog struct {
	release chan struct{}
}

func (h heldLog) Enabled(context.Context, slog.Level) bool { return true }
func (h heldLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "response" {
		<-h.release
	}
	return nil
}
func (h heldLog) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h heldLog) WithGroup(string) slog.Handler      { return h }

// heldLogServer is laneServer with the engine logging through a heldLog.
func heldLogServer(t *testing.T, b model.Backend) string {
	t.Helper()
	release := make(chan struct{})
	db, err := sqlite.Open(context.Background(), ":memory:", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	eng := engine.New(b, db, &engine.Options{Models: []string{"m"}, Logger: slog.New(heldLog{release: release})})
	s := server.New(eng, nil)
	srv := httptest.NewServer(s)
	var once sync.Once
	t.Cleanup(func() {
		once.Do(func() { close(release) })
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.WaitSockets(ctx); err != nil {
			t.Errorf("the connections did not end: %v", err)
		}
		srv.Close()
	})
	return srv.URL
}

// TestWebSocketForkRightAfterCompleted: a store false response is kept
// before its response.completed goes out, so that another lane may fork
// from it the moment the client sees it end (it was kept only once the
// engine had returned, after its log line and cleanup: the fork got
// previous_response_not_found).
func TestWebSocketForkRightAfterCompleted(t *testing.T) {
	url := heldLogServer(t, backendFunc(func(ctx context.Context, req *model.Request, emit func(model.Delta) error) error {
		return say(emit, fmt.Sprintf("%d items", len(req.Items)))
	}))
	ctx, c := dialSocket(t, url)
	createOn(t, ctx, c, "a", "first", map[string]any{"store": false})
	ev := readEvent(t, ctx, c)
	for !ev.terminal() {
		ev = readEvent(t, ctx, c)
	}
	if ev.Type != "response.completed" {
		t.Fatalf("lane a: %s", ev.raw)
	}
	// Lane a's engine is still held in its log line.
	createOn(t, ctx, c, "b", "second", map[string]any{"store": false, "previous_response_id": ev.Response.ID})
	ev = readEvent(t, ctx, c)
	if ev.Type == "error" {
		t.Fatalf("the fork right after response.completed: %s", ev.raw)
	}
}

// TestWebSocketRoomRightAfterCompleted: a response stops counting against
// the connection's 16 when its terminal event is written, so a client
// that keeps 16 going and sends the next create on a response.completed
// is not refused (it counted until the engine had returned).
func TestWebSocketRoomRightAfterCompleted(t *testing.T) {
	hold := make(chan struct{})
	url := heldLogServer(t, backendFunc(func(ctx context.Context, req *model.Request, emit func(model.Delta) error) error {
		if lastUserText(req) == "hold" {
			select {
			case <-hold:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return say(emit, "ok")
	}))
	ctx, c := dialSocket(t, url)
	for i := range 15 {
		createOn(t, ctx, c, fmt.Sprintf("held%d", i), "hold", nil)
	}
	createOn(t, ctx, c, "quick", "hi", nil)
	for ev := readEvent(t, ctx, c); !ev.terminal() || ev.stream() != "quick"; ev = readEvent(t, ctx, c) {
		if ev.Type == "error" {
			t.Fatalf("before the limit: %s", ev.raw)
		}
	}
	// quick's engine is still held in its log line; 15 are running.
	createOn(t, ctx, c, "next", "hi", nil)
	for {
		ev := readEvent(t, ctx, c)
		if ev.Type == "error" {
			t.Fatalf("the create sent on response.completed: %s", ev.raw)
		}
		if ev.stream() == "next" && ev.Type == "response.created" {
			break
		}
	}
	close(hold)
}

// TestWebSocketFailedForkLeavesTheOtherLane: a fork from another lane's
// store false response that fails does not evict that lane's response
// (it did: the lane that did nothing lost its continuation).
func TestWebSocketFailedForkLeavesTheOtherLane(t *testing.T) {
	url := laneServer(t, backendFunc(func(ctx context.Context, req *model.Request, emit func(model.Delta) error) error {
		if lastUserText(req) == "fail" {
			return &responses.APIError{Kind: responses.EUpstream, Type: responses.ErrUpstream, Code: "upstream_error", Message: "scripted failure"}
		}
		return say(emit, "ok")
	}))
	ctx, c := dialSocket(t, url)
	end := func(lane string) laneEvent {
		t.Helper()
		for {
			// A refused create is an error event with a status.
			if ev := readEvent(t, ctx, c); ev.stream() == lane && (ev.terminal() || ev.Type == "error" && ev.Status != 0) {
				return ev
			}
		}
	}
	createOn(t, ctx, c, "a", "first", map[string]any{"store": false})
	first := end("a")
	if first.Type != "response.completed" {
		t.Fatalf("lane a: %s", first.raw)
	}
	createOn(t, ctx, c, "b", "fail", map[string]any{"store": false, "previous_response_id": first.Response.ID})
	if ev := end("b"); ev.Type != "response.failed" {
		t.Fatalf("the fork did not fail: %s", ev.raw)
	}
	// Lane b's next response starts once the failed one's create has
	// returned, eviction and all.
	createOn(t, ctx, c, "b", "next", nil)
	end("b")
	createOn(t, ctx, c, "a", "again", map[string]any{"store": false, "previous_response_id": first.Response.ID})
	if ev := end("a"); ev.Type != "response.completed" {
		t.Fatalf("lane a continuing its own response after b's fork failed: %s", ev.raw)
	}
}
