package mcp

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loomgate/loom/internal/testutil"
	"github.com/loomgate/loom/tools"
)

// TestIdleTimeoutEndsASilentAnswer: a server starts an SSE answer, sends
// one event and goes silent. Reading the answer through the client's HTTP
// stack fails with ErrIdleTimeout rather than waiting for the call
// timeout, and the server sees the request end.
func TestIdleTimeoutEndsASilentAnswer(t *testing.T) {
	gone := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		close(gone)
	}))
	defer srv.Close()
	c := NewClient(&ClientOptions{Transport: &http.Transport{}, IdleTimeout: 50 * time.Millisecond, Retry: RetryOptions{Max: -1}})
	// The test's bound, far past the idle timeout.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call"}`))
	resp, err := c.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if !errors.Is(err, ErrIdleTimeout) {
		t.Fatalf("read %q, err %v; want ErrIdleTimeout", body, err)
	}
	if !strings.Contains(string(body), "notifications/progress") {
		t.Errorf("the event before the silence was lost: %q", body)
	}
	resp.Body.Close()
	select {
	case <-gone:
	case <-ctx.Done():
		t.Fatal("the server's request did not end")
	}
}

// TestIdleTimeoutFailsAStalledCall: a real MCP server (the go-sdk's, on
// loopback) whose tools/call answer starts an SSE stream and then goes
// silent. The call ends with an error naming the idle timeout, long
// before the call timeout, and the server sees its request end.
func TestIdleTimeoutFailsAStalledCall(t *testing.T) {
	sdk := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "test", Version: "1"}, nil)
	textTool("stall", "never sent")(sdk)
	h := mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return sdk }, &mcpsdk.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	gone := make(chan struct{}, 1)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !strings.Contains(string(body), `"tools/call"`) {
			r.Body = io.NopCloser(strings.NewReader(string(body)))
			h.ServeHTTP(w, r)
			return
		}
		// The answer starts as a stream and stops.
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, ": working\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		gone <- struct{}{}
	}))
	defer ts.Close()
	logs := &testutil.LockedBuffer{}
	c := loopbackClient(t, &ClientOptions{IdleTimeout: 100 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	sess := open(t, newServer(t, c, ServerConfig{Label: "s", URL: ts.URL, Timeouts: Timeouts{Call: time.Minute}}))
	// The bound of the test, far past the idle timeout and short of the
	// call timeout.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := sess.Call(ctx, tools.Call{CallID: "c1", Name: "stall", Arguments: `{}`})
	if ctx.Err() != nil {
		t.Fatal("the stalled call was not ended by the idle timeout")
	}
	// Nothing else could end the call before the test's bound: the call
	// timeout is a minute. (The SDK reports the cut stream in its own
	// words, "request terminated without response".)
	if err == nil && !res.IsError {
		t.Errorf("result %+v; want the call to fail", res)
	}
	if !strings.Contains(logs.String(), "idle timeout") {
		t.Errorf("the idle timeout is not logged: %s", logs.String())
	}
	select {
	case <-gone:
	case <-ctx.Done():
		t.Fatal("the server's request did not end")
	}
}
