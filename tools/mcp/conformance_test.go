package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loomgate/loom/tools"
	"github.com/loomgate/loom/tools/mcp/mcptest"
	"github.com/loomgate/loom/tools/toolstest"
)

// TestConformance runs the tools.Server suite on MCP servers: a go-sdk
// server in the test (stateless 2026-07-28), with a tool that blocks until
// its call is given up; npm's server-everything (session-based
// 2025-11-25), whose long-running operation blocks; and the go-sdk's
// everything-server (stateless), whose tools never wait. The call timeout
// is far off: only the call's context or the session's end may stop a
// call.
func TestConformance(t *testing.T) {
	t.Run("gosdk", func(t *testing.T) {
		toolstest.Run(t, func(t *testing.T) toolstest.Fixture {
			var blocked atomic.Int64
			// The go-sdk's stateless handler does not end a tool's context
			// when the client goes: blocked calls end with the test, before
			// the server closes (cleanups run last first).
			release := make(chan struct{})
			ts, _ := startServer(t, nil, func(s *mcpsdk.Server) {
				s.AddTool(&mcpsdk.Tool{Name: "echo", InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`)},
					func(_ context.Context, req *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
						var args struct{ Text string }
						_ = json.Unmarshal(req.Params.Arguments, &args)
						return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: "echo: " + args.Text}}}, nil
					})
				s.AddTool(&mcpsdk.Tool{Name: "block", InputSchema: json.RawMessage(`{"type":"object"}`)},
					func(ctx context.Context, _ *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
						blocked.Add(1)
						select {
						case <-ctx.Done():
							return nil, ctx.Err()
						case <-release:
							return nil, errors.New("the test is over")
						}
					})
			})
			t.Cleanup(func() { close(release) })
			f := mcpFixture(t, ts.URL, nil, tools.Call{CallID: "call_1", Name: "echo", Arguments: `{"text":"hi"}`}, "echo: hi")
			f.Block = func(tools.Session) (tools.Call, func() bool) {
				before := blocked.Load()
				return tools.Call{CallID: "call_block", Name: "block", Arguments: `{}`}, func() bool { return blocked.Load() > before }
			}
			return f
		})
	})

	t.Run("server-everything", func(t *testing.T) {
		if testing.Short() {
			t.Skip("runs a Node MCP server")
		}
		addr, _ := mcptest.StartNodeEverything(t)
		toolstest.Run(t, func(t *testing.T) toolstest.Fixture {
			calls := &toolCalls{next: newBaseTransport(mustPolicy(t, "127.0.0.1"))}
			f := mcpFixture(t, "http://"+addr+"/mcp", calls, tools.Call{CallID: "call_1", Name: "echo", Arguments: `{"message":"hi"}`}, "hi")
			f.Block = func(tools.Session) (tools.Call, func() bool) {
				const name = "trigger-long-running-operation"
				before := calls.count(name)
				return tools.Call{CallID: "call_block", Name: name, Arguments: `{"duration":3600,"steps":1}`},
					func() bool { return calls.count(name) > before }
			}
			return f
		})
	})

	t.Run("everything-server", func(t *testing.T) {
		if testing.Short() {
			t.Skip("builds and runs the go-sdk everything-server")
		}
		srvURL := mcptest.StartEverything(t)
		toolstest.Run(t, func(t *testing.T) toolstest.Fixture {
			return mcpFixture(t, srvURL, nil, tools.Call{CallID: "call_1", Name: "test_simple_text", Arguments: `{}`}, "")
		})
	})
}

// mcpFixture is an MCP server at url, through transport if set; its call
// call answers with text containing want.
func mcpFixture(t *testing.T, url string, transport http.RoundTripper, call tools.Call, want string) toolstest.Fixture {
	c := loopbackClient(t, &ClientOptions{Transport: transport})
	srv := newServer(t, c, ServerConfig{Label: "conformance", URL: url, Timeouts: Timeouts{Call: time.Hour}})
	return toolstest.Fixture{
		Server: srv,
		Call:   call,
		Check: func(res tools.Result) error {
			if res.Text() == "" || !strings.Contains(res.Text(), want) {
				return fmt.Errorf("text %q, want %q in it", res.Text(), want)
			}
			return nil
		},
		URL: url,
	}
}

// toolCalls is a transport that counts the tools/call requests it sends,
// by tool, as they leave (a blocked call's answer never comes).
type toolCalls struct {
	next  http.RoundTripper
	calls sync.Map // tool name -> *atomic.Int64
}

func (tc *toolCalls) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPost && req.GetBody != nil {
		if body, err := req.GetBody(); err == nil {
			var msg struct {
				Method string `json:"method"`
				Params struct {
					Name string `json:"name"`
				} `json:"params"`
			}
			if json.NewDecoder(body).Decode(&msg) == nil && msg.Method == "tools/call" {
				n, _ := tc.calls.LoadOrStore(msg.Params.Name, new(atomic.Int64))
				n.(*atomic.Int64).Add(1)
			}
		}
	}
	return tc.next.RoundTrip(req)
}

func (tc *toolCalls) count(name string) int64 {
	if n, ok := tc.calls.Load(name); ok {
		return n.(*atomic.Int64).Load()
	}
	return 0
}
