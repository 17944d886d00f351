package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// Issue 35, finding 9: the WebSocket caps and age are flags, and reach the
// server.
func TestWebSocketLimitFlags(t *testing.T) {
	base := []string{"--upstream-url", "http://127.0.0.1:1/v1"}
	cfg, err := parseServeFlags(base, env(nil))
	if err != nil || cfg.WebSocketMaxConnections != 1024 || cfg.WebSocketMaxConnectionsPerTenant != 256 || cfg.WebSocketMaxAge != time.Hour {
		t.Errorf("defaults: %v %d %d %s", err, cfg.WebSocketMaxConnections, cfg.WebSocketMaxConnectionsPerTenant, cfg.WebSocketMaxAge)
	}
	cfg, err = parseServeFlags(append(base, "--websocket-max-connections", "0"), env(map[string]string{
		"LOOM_WEBSOCKET_MAX_CONNECTIONS_PER_TENANT": "3", "LOOM_WEBSOCKET_MAX_AGE": "15m"}))
	if err != nil || cfg.WebSocketMaxConnections != 0 || cfg.WebSocketMaxConnectionsPerTenant != 3 || cfg.WebSocketMaxAge != 15*time.Minute {
		t.Errorf("set: %v %+v", err, cfg)
	}
	for _, bad := range [][]string{{"--websocket-max-connections", "-1"}, {"--websocket-max-connections-per-tenant", "-1"}, {"--websocket-max-age", "-1s"}} {
		if _, err := parseServeFlags(append(base, bad...), env(nil)); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}

	c := testConfig(t, upstreamForTenants(t))
	c.APIKeys, c.WebSocketMaxConnectionsPerTenant = []string{"sk-1"}, 1
	m, _ := runMain(t, c, io.Discard)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	opts := &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer sk-1"}}}
	first, _, err := websocket.Dial(ctx, "ws://"+m.Addr()+"/v1/responses", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer first.CloseNow()
	_, resp, err := websocket.Dial(ctx, "ws://"+m.Addr()+"/v1/responses", opts)
	if err == nil || resp == nil || resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("the second connection with --websocket-max-connections-per-tenant 1: %v %v, want a 429", err, resp)
	}
	body, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(body), `"too_many_websockets"`) || resp.Header.Get("Retry-After") == "" {
		t.Errorf("refusal: %s, Retry-After %q", body, resp.Header.Get("Retry-After"))
	}
}
