package mcp

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/loomgate/loom/internal/testutil"
	"github.com/loomgate/loom/tools"
)

func TestNewCredentials(t *testing.T) {
	tests := []struct {
		name    string
		headers map[string]string
		auth    string
		bad     string // canonical name of the refused header; "" = accepted
		want    http.Header
	}{
		{name: "canonicalized", headers: map[string]string{"x-api-key": "k", "X-TRACE": "t"},
			want: http.Header{"X-Api-Key": {"k"}, "X-Trace": {"t"}}},
		{name: "bearer", auth: "tok", want: http.Header{"Authorization": {"Bearer tok"}}},
		{name: "bearer kept", auth: "Bearer tok", want: http.Header{"Authorization": {"Bearer tok"}}},
		{name: "authorization header", headers: map[string]string{"authorization": "Basic x"}, want: http.Header{"Authorization": {"Basic x"}}},
		{name: "both authorizations", headers: map[string]string{"Authorization": "Basic x"}, auth: "tok", bad: "Authorization"},
		{name: "session id", headers: map[string]string{"mcp-session-id": "evil"}, bad: "Mcp-Session-Id"},
		{name: "protocol version", headers: map[string]string{"MCP-Protocol-Version": "2020-01-01"}, bad: "Mcp-Protocol-Version"},
		{name: "mcp method", headers: map[string]string{"Mcp-Method": "x"}, bad: "Mcp-Method"},
		{name: "mcp param", headers: map[string]string{"mcp-param-region": "x"}, bad: "Mcp-Param-Region"},
		{name: "content type", headers: map[string]string{"content-type": "text/plain"}, bad: "Content-Type"},
		{name: "accept", headers: map[string]string{"Accept": "*/*"}, bad: "Accept"},
		{name: "host", headers: map[string]string{"host": "other"}, bad: "Host"},
		{name: "content length", headers: map[string]string{"Content-Length": "1"}, bad: "Content-Length"},
		{name: "transfer encoding", headers: map[string]string{"transfer-encoding": "chunked"}, bad: "Transfer-Encoding"},
		{name: "duplicate", headers: map[string]string{"x-a": "1", "X-A": "2"}, bad: "X-A"},
		{name: "crlf", headers: map[string]string{"X-A": "1\r\nMcp-Session-Id: evil"}, bad: "X-A"},
		{name: "bad name", headers: map[string]string{"X A": "1"}, bad: "X A"},
		{name: "crlf token", auth: "tok\r\nX: y", bad: "Authorization"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := newCredentials("http://x", tt.headers, tt.auth)
			if tt.bad != "" {
				var he *HeaderError
				if !errors.As(err, &he) || he.Name != tt.bad {
					t.Fatalf("err = %v, want a *HeaderError for %s", err, tt.bad)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(c.header) != len(tt.want) {
				t.Fatalf("header = %v, want %v", c.header, tt.want)
			}
			for k, v := range tt.want {
				if c.header.Get(k) != v[0] {
					t.Fatalf("header = %v, want %v", c.header, tt.want)
				}
			}
		})
	}
}

// TestCredentialsReachOwnServerOnly: two servers share one Client (one
// connection pool); each request carries its own server's credentials and
// no other's, and the protocol's headers are the SDK's.
func TestCredentialsReachOwnServerOnly(t *testing.T) {
	tsA, recA := startServer(t, nil, textTool("a", "A"))
	tsB, recB := startServer(t, nil, textTool("b", "B"))
	c := loopbackClient(t, nil)
	srvA := newServer(t, c, ServerConfig{Label: "A", URL: tsA.URL, Authorization: "secret-A", Headers: map[string]string{"x-api-key": "key-A"}})
	srvB := newServer(t, c, ServerConfig{Label: "B", URL: tsB.URL, Headers: map[string]string{"X-Tenant": "b"}})
	var wg sync.WaitGroup
	for _, s := range []*Server{srvA, srvB, srvA, srvB} {
		wg.Go(func() {
			if _, err := s.Tools(context.Background()); err != nil {
				t.Error(err)
				return
			}
			sess, err := s.Open(context.Background())
			if err != nil {
				t.Error(err)
				return
			}
			defer sess.Close()
			name := strings.ToLower(s.Name())
			if _, err := sess.Call(context.Background(), tools.Call{Name: name}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for _, r := range recA.all() {
		if r.Header.Get("Authorization") != "Bearer secret-A" || r.Header.Get("X-Api-Key") != "key-A" || r.Header.Get("X-Tenant") != "" {
			t.Errorf("A got %s with headers %v", r.RPCMethod, r.Header)
		}
		if r.Header.Get("Mcp-Method") != r.RPCMethod || r.Header.Get("Mcp-Protocol-Version") != ProtocolStateless {
			t.Errorf("A: protocol headers %v for %s", r.Header, r.RPCMethod)
		}
	}
	for _, r := range recB.all() {
		if r.Header.Get("Authorization") != "" || r.Header.Get("X-Api-Key") != "" || r.Header.Get("X-Tenant") != "b" {
			t.Errorf("B got %s with headers %v", r.RPCMethod, r.Header)
		}
	}
	if recA.count("tools/call") != 2 || recB.count("tools/call") != 2 {
		t.Fatalf("calls: A %d, B %d", recA.count("tools/call"), recB.count("tools/call"))
	}
}

// TestSecretsNeverLogged runs listing, calls, a failing server and the
// logging of a ServerConfig with a debug-level logger, and finds no secret
// in the logs.
func TestSecretsNeverLogged(t *testing.T) {
	const token, key = "tok-SECRET-1", "key-SECRET-2"
	var logs testutil.LockedBuffer
	ts, _ := startServer(t, nil, textTool("t", "ok"))
	failing, rec := startServer(t, nil, textTool("t", "ok"))
	rec.before = func(w http.ResponseWriter, _ *http.Request, method string) bool {
		if method == "tools/call" {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return true
		}
		return false
	}
	c := loopbackClient(t, &ClientOptions{Logger: debugLogger(&logs), Retry: RetryOptions{Max: 1, WaitMin: 1, WaitMax: 1}})
	for _, u := range []string{ts.URL, failing.URL} {
		cfg := ServerConfig{Label: "s", URL: u, Authorization: token, Headers: map[string]string{"X-Api-Key": key}}
		debugLogger(&logs).Info("configured", "server", cfg)
		srv := newServer(t, c, cfg)
		if _, err := srv.Tools(context.Background()); err != nil {
			t.Fatal(err)
		}
		sess := open(t, srv)
		res, err := sess.Call(context.Background(), tools.Call{Name: "t"})
		debugLogger(&logs).Info("called", "result", res.Text(), "error", err)
		res, err = sess.Call(context.Background(), tools.Call{Name: "missing"})
		debugLogger(&logs).Info("called", "result", res.Text(), "error", err, "err", res.Err)
	}
	out := logs.String()
	if !strings.Contains(out, "configured") || !strings.Contains(out, "X-Api-Key") {
		t.Fatalf("nothing logged: %s", out)
	}
	for _, secret := range []string{token, key} {
		if strings.Contains(out, secret) {
			t.Fatalf("secret %q in logs:\n%s", secret, out)
		}
	}
}
