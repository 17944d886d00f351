package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loomgate/loom/tools"
)

func TestCallKeepsEveryContentBlock(t *testing.T) {
	ts, _ := startServer(t, nil, func(s *mcpsdk.Server) {
		s.AddTool(&mcpsdk.Tool{Name: "all", InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(context.Context, *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
				return &mcpsdk.CallToolResult{
					Content: []mcpsdk.Content{
						&mcpsdk.TextContent{Text: "one"},
						&mcpsdk.ImageContent{Data: []byte("png"), MIMEType: "image/png"},
						&mcpsdk.AudioContent{Data: []byte("wav"), MIMEType: "audio/wav"},
						&mcpsdk.ResourceLink{URI: "file:///a.txt", Name: "a"},
						&mcpsdk.EmbeddedResource{Resource: &mcpsdk.ResourceContents{URI: "file:///b.txt", Text: "bee"}},
						&mcpsdk.TextContent{Text: "two", Annotations: &mcpsdk.Annotations{Priority: 1}},
					},
					StructuredContent: map[string]any{"n": 42},
					IsError:           true,
				}, nil
			})
	})
	c := loopbackClient(t, nil)
	sess := open(t, newServer(t, c, ServerConfig{Label: "s", URL: ts.URL}))
	res, err := sess.Call(context.Background(), tools.Call{CallID: "c1", Name: "all", Arguments: `{}`})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || res.CallID != "c1" || res.InputRequired != nil {
		t.Fatalf("result = %+v", res)
	}
	var types []string
	for _, p := range res.Content {
		types = append(types, p.Type)
	}
	if got := strings.Join(types, ","); got != "text,image,audio,resource_link,resource,text" {
		t.Fatalf("content types = %s", got)
	}
	if res.Content[0].Text != "one" || res.Content[0].Raw != nil {
		t.Errorf("plain text part = %+v", res.Content[0])
	}
	if !strings.Contains(string(res.Content[1].Raw), `"mimeType":"image/png"`) {
		t.Errorf("image raw = %s", res.Content[1].Raw)
	}
	if !strings.Contains(string(res.Content[4].Raw), `"bee"`) {
		t.Errorf("embedded resource raw = %s", res.Content[4].Raw)
	}
	if res.Content[5].Text != "two" || !strings.Contains(string(res.Content[5].Raw), `"priority":1`) {
		t.Errorf("annotated text = %+v", res.Content[5])
	}
	if string(res.Structured) != `{"n":42}` {
		t.Errorf("structured = %s", res.Structured)
	}
}

// TestMRTRManual: a first call returns the server's input requests as
// they are; the retry sends the answers under the same keys and the state
// byte for byte.
func TestMRTRManual(t *testing.T) {
	const state = `opaque "state" with \ and <tags> and ünïcode`
	var gotState atomic.Value
	ts, _ := startServer(t, nil, func(s *mcpsdk.Server) {
		s.AddTool(&mcpsdk.Tool{Name: "confirm", InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(_ context.Context, req *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
				if r, ok := req.Params.InputResponses["ok"].(*mcpsdk.ElicitResult); ok {
					gotState.Store(req.Params.RequestState)
					return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: "action=" + r.Action}}}, nil
				}
				return &mcpsdk.CallToolResult{
					InputRequests: mcpsdk.InputRequestMap{
						"ok": &mcpsdk.ElicitParams{Message: "Sure?", RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"ok": map[string]any{"type": "boolean"}}}},
					},
					RequestState: state,
				}, nil
			})
	})
	c := loopbackClient(t, nil)
	srv := newServer(t, c, ServerConfig{Label: "s", URL: ts.URL, Capabilities: Capabilities{Elicitation: true}})
	sess := open(t, srv)
	res, err := sess.Call(context.Background(), tools.Call{CallID: "c", Name: "confirm"})
	if err != nil {
		t.Fatal(err)
	}
	ir := res.InputRequired
	if ir == nil || ir.State != state || len(ir.Requests) != 1 || ir.Requests["ok"].Method != MethodElicit {
		t.Fatalf("InputRequired = %+v", ir)
	}
	if !strings.Contains(string(ir.Requests["ok"].Params), `"message":"Sure?"`) {
		t.Errorf("params = %s", ir.Requests["ok"].Params)
	}
	res, err = sess.Call(context.Background(), tools.Call{CallID: "c", Name: "confirm", Input: &tools.Input{
		Responses: map[string]json.RawMessage{"ok": json.RawMessage(`{"action":"accept","content":{"ok":true}}`)},
		State:     ir.State,
	}})
	if err != nil {
		t.Fatal(err)
	}
	if res.InputRequired != nil || res.Text() != "action=accept" {
		t.Fatalf("retry result = %+v", res)
	}
	if gotState.Load() != state {
		t.Fatalf("server got state %q", gotState.Load())
	}
	// A bad answer is refused before anything is sent.
	_, err = sess.Call(context.Background(), tools.Call{Name: "confirm", Input: &tools.Input{Responses: map[string]json.RawMessage{"ok": json.RawMessage(`[1]`)}}})
	var ie *InputError
	if !errors.As(err, &ie) || ie.Key != "ok" {
		t.Fatalf("bad answer: %v", err)
	}
}

// TestLoadShedding: requestState-only results are retried inside Call with
// a short backoff, then reported as an InputRequired without requests.
func TestLoadShedding(t *testing.T) {
	var calls atomic.Int32
	shedFor := int32(2)
	ts, _ := startServer(t, nil, func(s *mcpsdk.Server) {
		s.AddTool(&mcpsdk.Tool{Name: "busy", InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(_ context.Context, req *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
				n := calls.Add(1)
				if n <= atomic.LoadInt32(&shedFor) {
					return &mcpsdk.CallToolResult{InputRequests: mcpsdk.InputRequestMap{}, RequestState: "shed"}, nil
				}
				return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: "state=" + req.Params.RequestState}}}, nil
			})
	})
	c := loopbackClient(t, nil)
	sess := open(t, newServer(t, c, ServerConfig{Label: "s", URL: ts.URL}))
	res, err := sess.Call(context.Background(), tools.Call{Name: "busy"})
	if err != nil {
		t.Fatal(err)
	}
	if res.InputRequired != nil || res.Text() != "state=shed" || calls.Load() != 3 {
		t.Fatalf("after shedding twice: %+v, %d calls", res, calls.Load())
	}

	calls.Store(0)
	atomic.StoreInt32(&shedFor, 100)
	res, err = sess.Call(context.Background(), tools.Call{Name: "busy"})
	if err != nil {
		t.Fatal(err)
	}
	if res.InputRequired == nil || len(res.InputRequired.Requests) != 0 || res.InputRequired.State != "shed" {
		t.Fatalf("still shedding: %+v", res)
	}
	if n := calls.Load(); n != LoadShedRetries+1 {
		t.Fatalf("%d calls, want %d", n, LoadShedRetries+1)
	}
}

func TestServerErrorIsToolError(t *testing.T) {
	ts, _ := startServer(t, nil, textTool("ok", "fine"))
	c := loopbackClient(t, nil)
	sess := open(t, newServer(t, c, ServerConfig{Label: "s", URL: ts.URL}))
	res, err := sess.Call(context.Background(), tools.Call{CallID: "x", Name: "nope"})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || res.Err == nil || !strings.Contains(res.Text(), "MCP error") {
		t.Fatalf("unknown tool: %+v", res)
	}
	res, err = sess.Call(context.Background(), tools.Call{CallID: "y", Name: "ok", Arguments: `not json`})
	if err != nil || !res.IsError || !strings.Contains(res.Text(), "JSON object") {
		t.Fatalf("bad arguments: %+v, %v", res, err)
	}
}

// TestCleanupSession: a server offering cleanup_session gets it once per
// called session, in Cleanup; the model is not offered it.
func TestCleanupSession(t *testing.T) {
	var cleanups atomic.Int32
	ts, _ := startServer(t, nil, func(s *mcpsdk.Server) {
		textTool("work", "done")(s)
		s.AddTool(&mcpsdk.Tool{Name: CleanupTool, InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(context.Context, *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
				cleanups.Add(1)
				return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{}}, nil
			})
	})
	c := loopbackClient(t, nil)
	srv := newServer(t, c, ServerConfig{Label: "s", URL: ts.URL})
	defs, err := srv.Tools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(defs) != 1 || defs[0].Name != "work" {
		t.Fatalf("offered %v", defs)
	}
	sess := open(t, srv)
	if _, err := sess.Call(context.Background(), tools.Call{Name: "work"}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := sess.Cleanup(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if n := cleanups.Load(); n != 1 {
		t.Fatalf("cleanup_session called %d times", n)
	}
	// A session of a server without it: Cleanup is a no-op.
	ts2, rec2 := startServer(t, nil, textTool("work", "done"))
	sess2 := open(t, newServer(t, c, ServerConfig{Label: "t", URL: ts2.URL}))
	if err := sess2.Cleanup(context.Background()); err != nil {
		t.Fatal(err)
	}
	if rec2.count("tools/call") != 0 {
		t.Fatal("a call was made")
	}
}

// TestCloseStopsHungCall: Close does not wait for a running call, which
// then fails, and later calls get ErrClosed.
func TestCloseStopsHungCall(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	ts, _ := startServer(t, nil, func(s *mcpsdk.Server) {
		s.AddTool(&mcpsdk.Tool{Name: "hang", InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(ctx context.Context, _ *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
				select {
				case started <- struct{}{}:
				default:
				}
				select {
				case <-release:
				case <-ctx.Done():
				}
				return &mcpsdk.CallToolResult{}, nil
			})
	})
	// Registered after the server's cleanup, so it runs first and the
	// server can shut down.
	t.Cleanup(func() { close(release) })
	c := loopbackClient(t, nil)
	srv := newServer(t, c, ServerConfig{Label: "s", URL: ts.URL})
	sess, err := srv.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := sess.Call(context.Background(), tools.Call{Name: "hang"})
		errc <- err
	}()
	<-started // the call is in the server's handler, which holds it until the test ends
	if err := sess.Close(); err != nil {
		t.Fatal(err)
	}
	// The handler never returns before the test's cleanup, so only Close
	// can end the call; the bound only keeps a broken Close from hanging
	// the test.
	select {
	case err := <-errc:
		if err == nil {
			t.Fatal("hung call succeeded after Close")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("call still running 30s after Close")
	}
	if _, err := sess.Call(context.Background(), tools.Call{Name: "hang"}); !errors.Is(err, tools.ErrClosed) {
		t.Fatalf("Call after Close = %v", err)
	}
	if err := sess.Cleanup(context.Background()); !errors.Is(err, tools.ErrClosed) {
		t.Fatalf("Cleanup after Close = %v", err)
	}
}

func TestCallTimeout(t *testing.T) {
	release := make(chan struct{})
	ts, _ := startServer(t, nil, func(s *mcpsdk.Server) {
		s.AddTool(&mcpsdk.Tool{Name: "slow", InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(ctx context.Context, _ *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
				// A stateless server does not learn of the client's
				// cancellation: the handler answers only when the test
				// ends, so only the call timeout can end the call.
				select {
				case <-ctx.Done():
				case <-release:
				}
				return &mcpsdk.CallToolResult{}, nil
			})
	})
	// Registered after the server's cleanup, so it runs first and the
	// server can shut down.
	t.Cleanup(func() { close(release) })
	c := loopbackClient(t, nil)
	sess := open(t, newServer(t, c, ServerConfig{Label: "s", URL: ts.URL, Timeouts: Timeouts{Call: 200 * time.Millisecond}}))
	// The test's bound, far past the call timeout.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := sess.Call(ctx, tools.Call{Name: "slow"})
	if ctx.Err() != nil {
		t.Fatal("the call was not ended by its timeout")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want deadline exceeded", err)
	}
}

func TestAllowedTools(t *testing.T) {
	ts, rec := startServer(t, nil, func(s *mcpsdk.Server) {
		textTool("a", "A")(s)
		textTool("b", "B")(s)
	})
	c := loopbackClient(t, nil)
	srv := newServer(t, c, ServerConfig{Label: "s", URL: ts.URL, AllowedTools: []string{"b"}})
	defs, err := srv.Tools(context.Background())
	if err != nil || len(defs) != 1 || defs[0].Name != "b" {
		t.Fatalf("Tools = %v, %v", defs, err)
	}
	sess := open(t, srv)
	if _, err := sess.Call(context.Background(), tools.Call{Name: "a"}); !errors.Is(err, tools.ErrUnknownTool) {
		t.Fatalf("call to a filtered tool: %v", err)
	}
	if rec.count("tools/call") != 0 {
		t.Fatal("filtered tool reached the server")
	}
}

// TestRetries: 503 and 429 are retried (bounded), 500 is not.
func TestRetries(t *testing.T) {
	for _, tt := range []struct {
		status int
		want   int // tools/call attempts
	}{
		{http.StatusServiceUnavailable, 3},
		{http.StatusTooManyRequests, 3},
		{http.StatusInternalServerError, 1},
	} {
		ts, rec := startServer(t, nil, textTool("t", "ok"))
		rec.before = func(w http.ResponseWriter, _ *http.Request, method string) bool {
			if method != "tools/call" {
				return false
			}
			w.Header().Set("Retry-After", "0")
			http.Error(w, "no", tt.status)
			return true
		}
		c := loopbackClient(t, &ClientOptions{Retry: RetryOptions{Max: 2, WaitMin: time.Millisecond, WaitMax: 10 * time.Millisecond}})
		sess := open(t, newServer(t, c, ServerConfig{Label: "s", URL: ts.URL}))
		res, err := sess.Call(context.Background(), tools.Call{Name: "t"})
		if err == nil {
			t.Errorf("%d: call succeeded: %+v", tt.status, res)
		}
		if n := rec.count("tools/call"); n != tt.want {
			t.Errorf("%d: %d attempts, want %d", tt.status, n, tt.want)
		}
	}
}
