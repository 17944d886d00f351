package mcp

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loomgate/loom/tools"
)

// TestGivingUpKeepsThePool: requests to a failing MCP server whose retries
// run out (a 503 every time, a refused connection) leave the idle
// connections to the other servers sharing the Client's pool, so the calls
// after them do not dial again. Two calls to the healthy server are held
// until both arrived, so that two connections are open and then idle.
func TestGivingUpKeepsThePool(t *testing.T) {
	arrived := make(chan struct{}, 2)
	both := make(chan struct{})
	healthy, _ := newUnstartedServer(t, nil, func(s *mcpsdk.Server) {
		s.AddTool(&mcpsdk.Tool{Name: "hold", InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(ctx context.Context, _ *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
				arrived <- struct{}{}
				select {
				case <-both:
				case <-ctx.Done():
				}
				return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: "ok"}}}, nil
			})
	})
	var dials atomic.Int32
	healthy.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			dials.Add(1)
		}
	}
	healthy.Start()
	shedding, rec := startServer(t, nil, textTool("t", "ok"))
	rec.before = func(w http.ResponseWriter, _ *http.Request, method string) bool {
		if method == "tools/call" {
			http.Error(w, "overloaded", http.StatusServiceUnavailable)
			return true
		}
		return false
	}
	// A port nothing listens on any more: every dial is refused.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + l.Addr().String() + "/mcp"
	l.Close()

	c := loopbackClient(t, &ClientOptions{Retry: RetryOptions{Max: 2, WaitMin: time.Millisecond, WaitMax: time.Millisecond}})
	srv := newServer(t, c, ServerConfig{Label: "healthy", URL: healthy.URL})
	sessions := []tools.Session{open(t, srv), open(t, srv)}
	// The bound of the test, not an assertion on time.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	twoAtOnce := func() {
		t.Helper()
		errs := make(chan error, 2)
		for _, sess := range sessions {
			go func() {
				_, err := sess.Call(ctx, tools.Call{Name: "hold"})
				errs <- err
			}()
		}
		for range 2 {
			select {
			case <-arrived:
			case <-ctx.Done():
				t.Fatal("the two calls did not both arrive")
			}
		}
		both <- struct{}{}
		both <- struct{}{}
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
	}
	twoAtOnce()
	before := dials.Load()
	if before < 2 {
		t.Fatalf("%d connections to the healthy server, want at least 2 open at once", before)
	}

	sess := open(t, newServer(t, c, ServerConfig{Label: "shedding", URL: shedding.URL}))
	if _, err := sess.Call(ctx, tools.Call{Name: "t"}); err == nil {
		t.Fatal("no error for a 503 every time")
	}
	if n := rec.count("tools/call"); n != 3 {
		t.Fatalf("%d attempts at the shedding server, want 3", n)
	}
	if _, err := newServer(t, c, ServerConfig{Label: "refused", URL: refused}).Open(ctx); err == nil {
		t.Fatal("no error from a server that refuses connections")
	}

	twoAtOnce()
	if n := dials.Load(); n != before {
		t.Errorf("%d connections dialled to the healthy server, %d before: giving up on another server's request closed the pool's idle ones", n, before)
	}
}
