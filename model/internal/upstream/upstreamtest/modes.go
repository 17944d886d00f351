package upstreamtest

// The two ways a backend reads a turn: streamed, where it must say when
// the upstream paused, and whole (Request.Whole), which must give what the
// stream gives.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/model/mockllm"
	"github.com/loomgate/loom/responses"
)

// wholeScripts are turns of the scripted upstream that every backend must
// read the same whether it streams them or asks for the whole answer.
var wholeScripts = []struct{ name, script string }{
	{"text", "#say Hello there, world."},
	{"reasoning then text", "#reason Think first, then answer.\n#say Done."},
	{"unicode", "#say Ça va 💖, 世界"},
	{"two calls", "#call get_weather {\"city\":\"Paris\"}\n#call get_weather {\"city\":\"Oslo\"}"},
	{"cut by length", "#tokens 12\n#finish length"},
	{"content filter", "#say No.\n#finish content_filter"},
	{"cached tokens", "#say cached\n#cached 2"},
}

// turnSummary is what a turn's deltas say, independent of how the text
// was split into deltas.
type turnSummary struct {
	Kinds  []model.DeltaKind // in order, repeats of the same kind folded
	Text   map[model.DeltaKind]string
	Calls  []string // name and whole arguments, by ToolIndex
	IDs    int      // calls that came with an id
	Usage  []responses.Usage
	Finish []string
}

func summarize(deltas []model.Delta) turnSummary {
	s := turnSummary{Text: map[model.DeltaKind]string{}}
	for _, d := range deltas {
		if n := len(s.Kinds); n == 0 || s.Kinds[n-1] != d.Kind {
			s.Kinds = append(s.Kinds, d.Kind)
		}
		switch d.Kind {
		case model.DeltaText, model.DeltaReasoning, model.DeltaPreamble:
			s.Text[d.Kind] += d.Text
		case model.DeltaToolCall:
			for len(s.Calls) <= d.ToolIndex {
				s.Calls = append(s.Calls, "")
			}
			if d.ToolName != "" {
				s.Calls[d.ToolIndex] += d.ToolName + ":"
			}
			if d.ToolCallID != "" {
				s.IDs++
			}
			s.Calls[d.ToolIndex] += d.ToolArguments
		case model.DeltaUsage:
			s.Usage = append(s.Usage, d.Usage)
		case model.DeltaFinish:
			s.Finish = append(s.Finish, d.FinishReason)
		}
	}
	return s
}

// testWholeMatchesStream runs each script against the scripted upstream
// twice, streamed and whole (Request.Whole), and wants the same deltas:
// the same text per kind, calls, usage and finish reason, in the same
// order. The whole request must have asked for stream false.
func testWholeMatchesStream(t *testing.T, w Wire) {
	mock := mockllm.New(nil)
	srv := httptest.NewServer(mock)
	t.Cleanup(srv.Close)
	t.Cleanup(mock.Close)
	b := w.New(srv.URL+"/v1", "", Options{})
	for _, sc := range wholeScripts {
		t.Run(sc.name, func(t *testing.T) {
			var got [2]turnSummary
			for i, whole := range []bool{false, true} {
				req := UserReq(sc.script)
				req.Tools = []responses.Tool{{Type: responses.ToolFunction, Name: "get_weather",
					Parameters: []byte(`{"type":"object","properties":{"city":{"type":"string"}}}`)}}
				req.Whole = whole
				deltas, err := Collect(context.Background(), b, req)
				if err != nil {
					t.Fatalf("whole=%t: %v", whole, err)
				}
				got[i] = summarize(deltas)
				if stream := lastStream(t, mock); stream == whole {
					t.Fatalf("whole=%t: the upstream request had stream %t", whole, stream)
				}
			}
			if !reflect.DeepEqual(got[0], got[1]) {
				t.Errorf("streamed and whole turns differ:\nstreamed %+v\nwhole    %+v", got[0], got[1])
			}
			if len(got[0].Finish) != 1 || len(got[0].Usage) != 1 || got[0].Usage[0].OutputTokens == 0 {
				t.Errorf("want one usage with output tokens and one finish, got %+v", got[0])
			}
		})
	}
	// Failures map the same way in both modes.
	for _, script := range []string{"#fail 503 engine down", "#garbage", "#fail 429"} {
		var kind [2]string
		for i, whole := range []bool{false, true} {
			req := UserReq(script)
			req.Whole = whole
			_, err := Collect(context.Background(), w.New(srv.URL+"/v1", "", Options{Retries: -1}), req)
			var merr *responses.APIError
			if !errors.As(err, &merr) {
				t.Fatalf("%s whole=%t: err = %v, want a *responses.APIError", script, whole, err)
			}
			kind[i] = merr.Kind
		}
		if kind[0] != kind[1] {
			t.Errorf("%s: streamed error kind %q, whole %q", script, kind[0], kind[1])
		}
	}
}

// testWholeErrorObject: a whole answer that is an engine's error object
// (200, {"error":{...}}) is an upstream error with the engine's words in
// the log's error, not an empty turn.
func testWholeErrorObject(t *testing.T, w Wire) {
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		rw.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(rw, `{"error":{"message":"engine dead","type":"InternalServerError","code":500}}`)
	}))
	defer srv.Close()
	req := UserReq("hi")
	req.Whole = true
	deltas, err := Collect(context.Background(), w.New(srv.URL+"/v1", "", Options{}), req)
	var merr *responses.APIError
	if !errors.As(err, &merr) || merr.Kind != responses.EUpstream || !strings.Contains(err.Error(), "engine dead") || len(deltas) != 0 {
		t.Fatalf("err = %v after %d deltas, want an upstream error naming the engine's message", err, len(deltas))
	}
}

// lastStream is the stream flag of the scripted upstream's last request.
func lastStream(t *testing.T, mock *mockllm.Server) bool {
	t.Helper()
	reqs := mock.Requests()
	if len(reqs) == 0 {
		t.Fatal("the upstream got no request")
	}
	last := reqs[len(reqs)-1]
	switch {
	case last.Chat != nil:
		return last.Chat.Stream
	case last.Completion != nil:
		return last.Completion.Stream
	}
	t.Fatal(fmt.Sprintf("the upstream's last request is neither chat nor completions: %s", strings.TrimSpace(string(last.Body))))
	return false
}

// testPauseWhenUpstreamWaits: the backend emits a DeltaPause when the
// upstream has sent everything it had, and not between the events of a
// burst. The upstream sends one event and waits until the backend has
// paused after it (the test hangs to its bound otherwise); then it sends
// a burst of events in one write, which must come with far fewer pauses
// than events.
func testPauseWhenUpstreamWaits(t *testing.T, w Wire) {
	const burst = 64
	paused := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		rw.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(rw, w.First)
		rw.(http.Flusher).Flush()
		select {
		case <-paused:
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(rw, strings.Repeat(w.First, burst)+w.Finished("stop"))
	}))
	defer srv.Close()
	// The bound of the test, not an assertion on time.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	texts, pauses, closed := 0, 0, false
	err := w.New(srv.URL+"/v1", "", Options{}).Stream(ctx, UserReq("hi"), func(d model.Delta) error {
		switch d.Kind {
		case model.DeltaText:
			texts++
		case model.DeltaPause:
			if texts > 0 {
				pauses++
				if !closed {
					close(paused)
					closed = true
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Stream: %v (paused after the first event: %t)", err, closed)
	}
	if texts < burst {
		t.Fatalf("%d text deltas, want at least %d", texts, burst)
	}
	t.Logf("%d text deltas, %d pauses", texts, pauses)
	if pauses > burst/4 {
		t.Errorf("%d pauses for a burst of %d events written at once: the backend pauses between buffered events", pauses, burst)
	}
}
