package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loomgate/loom/internal/testutil"
	"github.com/loomgate/loom/tools"
)

// recorder wraps an MCP HTTP handler and records what reached it.
type recorder struct {
	mu       sync.Mutex
	methods  map[string]int // JSON-RPC method (or HTTP method for bodiless requests)
	requests []recorded
	// before, if set, may answer a request itself (return true).
	before func(w http.ResponseWriter, r *http.Request, method string) bool
}

type recorded struct {
	HTTPMethod string
	RPCMethod  string
	Header     http.Header
}

func (rec *recorder) count(method string) int {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.methods[method]
}

func (rec *recorder) all() []recorded {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]recorded(nil), rec.requests...)
}

func (rec *recorder) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		method := r.Method
		if r.Body != nil && r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var msg struct {
				Method string `json:"method"`
			}
			if json.Unmarshal(body, &msg) == nil && msg.Method != "" {
				method = msg.Method
			}
		}
		rec.mu.Lock()
		if rec.methods == nil {
			rec.methods = make(map[string]int)
		}
		rec.methods[method]++
		rec.requests = append(rec.requests, recorded{HTTPMethod: r.Method, RPCMethod: method, Header: r.Header.Clone()})
		before := rec.before
		rec.mu.Unlock()
		if before != nil && before(w, r, method) {
			return
		}
		next.ServeHTTP(w, r)
	})
}

// startServer serves an in-process go-sdk server, stateless (2026-07-28),
// on loopback.
func startServer(t testing.TB, opts *mcpsdk.ServerOptions, register func(*mcpsdk.Server)) (*httptest.Server, *recorder) {
	t.Helper()
	ts, rec := newUnstartedServer(t, opts, register)
	ts.Start()
	return ts, rec
}

// newUnstartedServer is startServer before Start, for a test that sets
// the http.Server's hooks (ConnState) first.
func newUnstartedServer(t testing.TB, opts *mcpsdk.ServerOptions, register func(*mcpsdk.Server)) (*httptest.Server, *recorder) {
	t.Helper()
	s := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "test", Version: "1"}, opts)
	register(s)
	rec := &recorder{}
	h := mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return s }, &mcpsdk.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	ts := httptest.NewUnstartedServer(rec.wrap(h))
	t.Cleanup(ts.Close)
	return ts, rec
}

func textTool(name, text string) func(*mcpsdk.Server) {
	return func(s *mcpsdk.Server) {
		s.AddTool(&mcpsdk.Tool{Name: name, InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(context.Context, *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
				return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: text}}}, nil
			})
	}
}

// loopbackClient returns a Client whose policy admits loopback, as an
// operator's --mcp-allow=127.0.0.1,::1 does.
func loopbackClient(t testing.TB, opts *ClientOptions) *Client {
	t.Helper()
	var o ClientOptions
	if opts != nil {
		o = *opts
	}
	if o.Policy == nil {
		p, err := NewPolicy(&PolicyOptions{Allow: "127.0.0.1,::1"})
		if err != nil {
			t.Fatal(err)
		}
		o.Policy = p
	}
	return NewClient(&o)
}

func newServer(t testing.TB, c *Client, cfg ServerConfig) *Server {
	t.Helper()
	s, err := c.NewServer(context.Background(), &cfg)
	if err != nil {
		t.Fatalf("NewServer: %v", err)
	}
	return s
}

func open(t testing.TB, s *Server) tools.Session {
	t.Helper()
	sess, err := s.Open(context.Background())
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = sess.Close() })
	return sess
}

// debugLogger returns a JSON logger at debug level into logs.
func debugLogger(logs *testutil.LockedBuffer) *slog.Logger {
	return slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
