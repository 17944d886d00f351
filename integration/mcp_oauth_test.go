package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loomgate/loom/engine"
	"github.com/loomgate/loom/internal/testutil"
	"github.com/loomgate/loom/model/chat"
	"github.com/loomgate/loom/model/mockllm"
	"github.com/loomgate/loom/server"
	"github.com/loomgate/loom/store/sqlite"
	"github.com/loomgate/loom/tools/mcp"
	"github.com/loomgate/loom/tools/mcp/mcptest"
)

// TestMCPOAuthThroughLoom: operator-configured MCP servers behind a real
// OAuth flow on loopback (mcptest.OAuthServer: discovery, token endpoint,
// bearer checks), called through Responses requests: a client-credentials
// server and a refresh-token server (the file loom mcp login writes); the
// tokens expire while 20 requests run and are refreshed once for all of
// them; a 403 insufficient_scope is stepped up; a tenant not on the
// server's list cannot use it; a request-supplied server_url that
// challenges gets a clear item; and no token or secret is in any log line.
func TestMCPOAuthThroughLoom(t *testing.T) {
	o := mcptest.StartOAuthServer(t)
	logs := &testutil.LockedBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))

	// The operator's files: the servers, a refresh token, and the client
	// secret in the environment.
	dir := t.TempDir()
	if err := mcp.WriteSecretFile(filepath.Join(dir, "linear.token"), o.IssueRefreshToken("mcp:read")); err != nil {
		t.Fatal(err)
	}
	servers, _ := json.Marshal([]map[string]any{
		{"server_label": "secure", "server_url": o.MCPURL, "require_approval": "never", "tenants": []string{"acme"},
			"oauth": map[string]any{"client_id": o.ClientID, "client_secret_env": "SECURE_SECRET", "scopes": []string{"mcp:read"}}},
		{"server_label": "linear", "server_url": o.MCPURL, "require_approval": "never",
			"oauth": map[string]any{"client_id": o.ClientID, "client_secret_file": "secret", "refresh_token_file": "linear.token"}},
	})
	for name, body := range map[string]string{"servers.json": string(servers), "secret": o.ClientSecret} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	getenv := func(k string) string {
		if k == "SECURE_SECRET" {
			return o.ClientSecret
		}
		return ""
	}
	named, err := mcp.LoadNamedServers(filepath.Join(dir, "servers.json"), &mcp.LoadOptions{Getenv: getenv})
	if err != nil {
		t.Fatal(err)
	}

	mock := mockllm.New(nil)
	mockSrv := httptest.NewServer(mock)
	t.Cleanup(mockSrv.Close)
	t.Cleanup(mock.Close)
	db, err := sqlite.Open(context.Background(), ":memory:", &sqlite.Options{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	// The authorization server is on loopback: the operator admits it
	// with --mcp-allow, which the OAuth fetches pass like any other.
	policy, err := mcp.NewPolicy(&mcp.PolicyOptions{Allow: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	provider := &mcp.Provider{Client: mcp.NewClient(&mcp.ClientOptions{Policy: policy, Logger: logger}), Named: named}
	eng := engine.New(chat.New(mockSrv.URL+"/v1", "test-key", &chat.Options{}), db,
		&engine.Options{Logger: logger, ToolProviders: []engine.ToolProvider{provider}})
	loom := httptest.NewServer(server.New(eng, &server.Options{Logger: logger,
		Authenticators: []server.Authenticator{server.APIKeys{{Key: "key-acme", Tenant: "acme"}, {Key: "key-other", Tenant: "other"}}}}))
	t.Cleanup(loom.Close)

	post := func(key string, body map[string]any) (int, []byte) {
		b, _ := json.Marshal(body)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, loom.URL+"/v1/responses", strings.NewReader(string(b)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, []byte(err.Error())
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, raw
	}
	// call makes a response that calls one tool of a configured server
	// and returns that call's output.
	call := func(key, label, tool, args string) (string, error) {
		status, raw := post(key, map[string]any{"model": "mock-model",
			"input": fmt.Sprintf("#call %s__%s %s\n#then\n#say done", label, tool, args),
			"tools": []any{map[string]any{"type": "mcp", "server_label": label}}})
		if status != http.StatusOK {
			return "", fmt.Errorf("status %d: %s", status, raw)
		}
		var r mcptResponse
		if err := json.Unmarshal(raw, &r); err != nil {
			return "", err
		}
		for _, it := range r.Output {
			if it.Type == "mcp_call" && it.Output != nil {
				return *it.Output, nil
			}
		}
		return "", fmt.Errorf("no mcp_call with an output in %s", raw)
	}

	// A client-credentials server and a refresh-token server.
	if out, err := call("key-acme", "secure", "echo", `{"text":"hi"}`); err != nil || out != "echo: hi" {
		t.Fatalf("secure echo: %q, %v", out, err)
	}
	if out, err := call("key-other", "linear", "echo", `{"text":"lin"}`); err != nil || out != "echo: lin" {
		t.Fatalf("linear echo: %q, %v", out, err)
	}
	if cc, rt := o.TokenRequests("client_credentials"), o.TokenRequests("refresh_token"); cc != 1 || rt != 1 {
		t.Fatalf("token requests: %d client_credentials, %d refresh_token; want 1 and 1", cc, rt)
	}

	// The tokens expire; 20 requests present the expired token at once
	// (the first 20 rejections are held until all happened).
	o.ExpireAccessTokens()
	const n = 20
	var mu sync.Mutex
	rejected, all := 0, make(chan struct{})
	o.OnInvalidToken = func() {
		mu.Lock()
		rejected++
		if rejected == n {
			close(all)
		}
		mu.Unlock()
		<-all
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			want := fmt.Sprintf("echo: %d", i)
			if out, err := call("key-acme", "secure", "echo", fmt.Sprintf(`{"text":"%d"}`, i)); err != nil || out != want {
				errs[i] = fmt.Errorf("request %d: %q, %v", i, out, err)
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if got := o.TokenRequests("client_credentials"); got != 2 {
		t.Errorf("client_credentials token requests = %d after the expiry, want 2: one refresh for all %d requests", got, n)
	}

	// Step up: admin needs mcp:admin, which the token lacks.
	if out, err := call("key-acme", "secure", "admin", `{}`); err != nil || out != "admin ok" {
		t.Fatalf("admin: %q, %v", out, err)
	}
	if got := o.TokenRequests("client_credentials"); got != 3 {
		t.Errorf("client_credentials token requests = %d after the step up, want 3", got)
	}

	// A tenant not on secure's list: a 400 naming the server, and the
	// server never hears of it.
	before := o.TokenRequests("client_credentials")
	status, raw := post("key-other", map[string]any{"model": "mock-model", "input": "hi",
		"tools": []any{map[string]any{"type": "mcp", "server_label": "secure"}}})
	if msg := mcptAPIError(t, status, raw, "tools[0].server_label"); !strings.Contains(msg, "not available to this tenant") {
		t.Errorf("tenant refusal: %s", msg)
	}
	if o.TokenRequests("client_credentials") != before {
		t.Error("a refused tenant's request got a token")
	}

	// A request-supplied server_url behind OAuth: no flow, a clear item.
	status, raw = post("key-acme", map[string]any{"model": "mock-model", "input": "hi",
		"tools": []any{map[string]any{"type": "mcp", "server_label": "theirs", "server_url": o.MCPURL}}})
	if status != http.StatusOK {
		t.Fatalf("request-supplied server: %d %s", status, raw)
	}
	var r mcptResponse
	json.Unmarshal(raw, &r)
	item := r.only(t, "mcp_list_tools")
	if !strings.Contains(string(item.Error), "requires OAuth authorization") {
		t.Errorf("mcp_list_tools error %s, want it to say the server requires OAuth authorization", item.Error)
	}

	text := logs.String()
	if !strings.Contains(text, "mcp oauth: token issued") {
		t.Fatal("loom logged no token issue: the log check proves nothing")
	}
	for _, secret := range o.Secrets() {
		for line := range strings.Lines(text) {
			if strings.Contains(line, secret) {
				t.Errorf("a token or secret in a log line: %s", line)
			}
		}
	}
}

// TestMCPOAuthChallengeOnCall: a request-supplied server lists its tools
// freely but answers a call with an OAuth challenge. loom runs no OAuth
// flow for it: the call fails, the client's mcp_call item and the model's
// tool output both say the server requires OAuth authorization.
func TestMCPOAuthChallengeOnCall(t *testing.T) {
	ms := mcptStart(t, nil, "echo")
	ms.challenge = "tools/call"
	h := mcptHarness(t, nil)
	r := mcptCreate(t, h, map[string]any{"model": "mock-model", "input": "#call s__echo {}\n#then\n#say done",
		"tools": []any{mcptTool("s", ms.URL, map[string]any{"require_approval": "never"})}})
	call := r.only(t, "mcp_call")
	const want = "requires OAuth authorization (HTTP 401)"
	if call.Status != "failed" || !strings.Contains(string(call.Error), want) {
		t.Errorf("mcp_call status %q error %s, want failed saying %q", call.Status, call.Error, want)
	}
	told := false
	for _, m := range mcptToolMessages(t, h) {
		told = told || strings.Contains(m, want)
	}
	if !told {
		t.Errorf("the model was not told the server requires OAuth: %q", mcptToolMessages(t, h))
	}
}
