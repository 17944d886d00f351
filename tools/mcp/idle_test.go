package mcp

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
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
