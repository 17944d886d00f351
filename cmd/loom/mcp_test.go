package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loomgate/loom/model/mockllm"
)

// Tests of loom serve's MCP flags (issue 5): --mcp-allow (LOOM_MCP_ALLOW)
// and --mcp-elicitation, read and wired into the MCP client's policy.

func TestMCPFlags(t *testing.T) {
	cfg, err := parseServeFlags([]string{"--upstream-url", "http://127.0.0.1:1/v1"}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MCPAllow != "" || cfg.MCPElicitation != "client" {
		t.Errorf("defaults: allow %q, elicitation %q; want none and client", cfg.MCPAllow, cfg.MCPElicitation)
	}
	cfg, err = parseServeFlags([]string{"--upstream-url", "http://127.0.0.1:1/v1", "--mcp-elicitation", "decline"},
		env(map[string]string{"LOOM_MCP_ALLOW": "127.0.0.1,::1", "LOOM_MCP_ELICITATION": "model"}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MCPAllow != "127.0.0.1,::1" || cfg.MCPElicitation != "decline" {
		t.Errorf("allow %q, elicitation %q; want the environment's allowlist and the flag's policy", cfg.MCPAllow, cfg.MCPElicitation)
	}
	if _, err := parseServeFlags([]string{"--upstream-url", "http://127.0.0.1:1/v1", "--mcp-elicitation", "ask"}, env(nil)); err == nil {
		t.Error("--mcp-elicitation ask accepted")
	}
	// An allowlist that does not parse stops loom from starting.
	m := NewMain(&Config{Addr: "127.0.0.1:0", UpstreamURL: "http://127.0.0.1:1/v1", UpstreamAPI: "chat",
		Store: ":memory:", EventDialect: "openai", MCPAllow: "10.0.0.0/99", MCPElicitation: "client",
		RequestTimeout: time.Minute, MaxBodyBytes: 1 << 20}, slog.New(slog.DiscardHandler))
	if err := m.Open(context.Background()); err == nil || !strings.Contains(err.Error(), "--mcp-allow") {
		t.Errorf("Open with a bad allowlist: %v", err)
	}
	m.Close()
}

// TestServeMCPAllow runs loom serve with and without --mcp-allow against an
// MCP server on loopback: refused with a 400 by default, reached when
// allowlisted.
func TestServeMCPAllow(t *testing.T) {
	s := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "t", Version: "1"}, nil)
	s.AddTool(&mcpsdk.Tool{Name: "ping", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
			return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: "pong"}}}, nil
		})
	mcpSrv := httptest.NewServer(mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return s },
		&mcpsdk.StreamableHTTPOptions{Stateless: true, JSONResponse: true}))
	t.Cleanup(mcpSrv.Close)
	mock := mockllm.New(nil)
	up := httptest.NewServer(mock)
	t.Cleanup(up.Close)
	t.Cleanup(mock.Close)

	body := `{"model":"m","input":"#call t__ping {}\n#then\n#say done",` +
		`"tools":[{"type":"mcp","server_label":"t","server_url":"` + mcpSrv.URL + `","require_approval":"never"}]}`
	for _, tt := range []struct {
		allow  string
		status int
	}{{"", http.StatusBadRequest}, {"127.0.0.1,::1", http.StatusOK}} {
		t.Run("allow="+tt.allow, func(t *testing.T) {
			m := NewMain(&Config{Addr: "127.0.0.1:0", UpstreamURL: up.URL + "/v1", UpstreamAPI: "chat",
				Store: filepath.Join(t.TempDir(), "loom.db"), EventDialect: "openai", MCPAllow: tt.allow, MCPElicitation: "client",
				ShutdownTimeout: 5 * time.Second, RequestTimeout: time.Minute, MaxBodyBytes: 1 << 20}, slog.New(slog.DiscardHandler))
			if err := m.Open(context.Background()); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { m.Close() })
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- m.Run(ctx) }()
			t.Cleanup(func() {
				cancel()
				select {
				case <-done:
				case <-time.After(30 * time.Second):
					t.Error("Run did not return after shutdown")
				}
			})
			resp, err := http.Post("http://"+m.Addr()+"/v1/responses", "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.status, raw)
			}
			switch tt.status {
			case http.StatusBadRequest:
				if !strings.Contains(string(raw), `"param":"tools[0].server_url"`) || !strings.Contains(string(raw), "loopback") {
					t.Errorf("refusal %s", raw)
				}
			case http.StatusOK:
				if !strings.Contains(string(raw), `"type":"mcp_call"`) || !strings.Contains(string(raw), `"output":"pong"`) {
					t.Errorf("no mcp_call with output pong: %s", raw)
				}
			}
		})
	}
}
