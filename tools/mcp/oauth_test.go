package mcp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/oauth2"

	"github.com/loomgate/loom/internal/testutil"
	"github.com/loomgate/loom/tools"
	"github.com/loomgate/loom/tools/mcp/mcptest"
)

// oauthServer returns a Server for the OAuthServer's MCP endpoint, as the
// Provider builds one per request for an operator's server: trusted, with
// the server's shared OAuth handler.
func oauthServer(t *testing.T, c *Client, o *mcptest.OAuthServer, h *OAuth) *Server {
	t.Helper()
	return newServer(t, c, ServerConfig{Label: "secure", URL: o.MCPURL, Trusted: true, OAuth: h})
}

func callTool(ctx context.Context, s *Server, name, args string) (tools.Result, error) {
	sess, err := s.Open(ctx)
	if err != nil {
		return tools.Result{}, err
	}
	defer sess.Close()
	return sess.Call(ctx, tools.Call{CallID: "c1", Name: name, Arguments: args})
}

// noSecretIn fails if any secret the authorization server issued (or the
// client secret) appears in logs.
func noSecretIn(t *testing.T, o *mcptest.OAuthServer, logs string) {
	t.Helper()
	if logs == "" {
		t.Fatal("no logs were written: the check would be vacuous")
	}
	for _, s := range o.Secrets() {
		if strings.Contains(logs, s) {
			t.Errorf("a token or secret appears in the logs:\n%s", logs)
			return
		}
	}
}

func TestOAuthClientCredentials(t *testing.T) {
	o := mcptest.StartOAuthServer(t)
	var logs testutil.LockedBuffer
	c := loopbackClient(t, &ClientOptions{Logger: debugLogger(&logs)})
	h := c.NewOAuth("secure", o.MCPURL, &OAuthConfig{ClientID: o.ClientID, clientSecret: o.ClientSecret, Scopes: []string{"mcp:read"}})
	s := oauthServer(t, c, o, h)
	ctx := context.Background()
	defs, err := s.Tools(ctx)
	if err != nil {
		t.Fatalf("Tools: %v", err)
	}
	if len(defs) != 2 {
		t.Fatalf("tools: %+v", defs)
	}
	res, err := callTool(ctx, s, "echo", `{"text":"hi"}`)
	if err != nil || res.Text() != "echo: hi" {
		t.Fatalf("call: %q, %v", res.Text(), err)
	}
	if n := o.TokenRequests("client_credentials"); n != 1 {
		t.Errorf("client_credentials token requests = %d, want 1 (the token is cached)", n)
	}
	for _, r := range o.Resources() {
		if r != o.MCPURL {
			t.Errorf("token request resource = %q, want %q", r, o.MCPURL)
		}
	}
	noSecretIn(t, o, logs.String())
}

// TestOAuthRefreshOnce: the tokens expire while 20 requests run; every one
// of them is rejected, and one token request serves them all.
func TestOAuthRefreshOnce(t *testing.T) {
	for _, grant := range []string{"client_credentials", "refresh_token"} {
		t.Run(grant, func(t *testing.T) {
			o := mcptest.StartOAuthServer(t)
			var logs testutil.LockedBuffer
			c := loopbackClient(t, &ClientOptions{Logger: debugLogger(&logs)})
			cfg := &OAuthConfig{ClientID: o.ClientID, clientSecret: o.ClientSecret, Scopes: []string{"mcp:read"}}
			if grant == "refresh_token" {
				cfg.RefreshTokenFile = filepath.Join(t.TempDir(), "rt")
				if err := WriteSecretFile(cfg.RefreshTokenFile, o.IssueRefreshToken("mcp:read")); err != nil {
					t.Fatal(err)
				}
			}
			h := c.NewOAuth("secure", o.MCPURL, cfg)
			ctx := context.Background()
			if _, err := callTool(ctx, oauthServer(t, c, o, h), "echo", `{"text":"first"}`); err != nil {
				t.Fatal(err)
			}
			o.ExpireAccessTokens()
			// The first 20 rejections are held until all 20 happened, so
			// every request presents the expired token and every one asks
			// the handler to authorize, concurrently.
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
					res, err := callTool(ctx, oauthServer(t, c, o, h), "echo", fmt.Sprintf(`{"text":"%d"}`, i))
					if err == nil && res.Text() != fmt.Sprintf("echo: %d", i) {
						err = fmt.Errorf("got %q", res.Text())
					}
					errs[i] = err
				})
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
			if rejected < n {
				t.Fatalf("%d requests presented the expired token, want %d", rejected, n)
			}
			if got := o.TokenRequests(grant); got != 2 {
				t.Errorf("%s token requests = %d, want 2 (the first token, and one refresh for all %d requests)", grant, got, n)
			}
			noSecretIn(t, o, logs.String())
		})
	}
}

// TestOAuthStepUp: a call the token's scopes do not cover is answered 403
// insufficient_scope; loom gets a token with the scopes the challenge
// names and the call succeeds, and the other tools keep working.
func TestOAuthStepUp(t *testing.T) {
	o := mcptest.StartOAuthServer(t)
	c := loopbackClient(t, nil)
	h := c.NewOAuth("secure", o.MCPURL, &OAuthConfig{ClientID: o.ClientID, clientSecret: o.ClientSecret, Scopes: []string{"mcp:read"}})
	ctx := context.Background()
	if _, err := callTool(ctx, oauthServer(t, c, o, h), "echo", `{}`); err != nil {
		t.Fatal(err)
	}
	res, err := callTool(ctx, oauthServer(t, c, o, h), "admin", `{}`)
	if err != nil || res.Text() != "admin ok" {
		t.Fatalf("admin: %q, %v", res.Text(), err)
	}
	if got := o.TokenRequests("client_credentials"); got != 2 {
		t.Errorf("token requests = %d, want 2 (the first, and the step up)", got)
	}
	if res, err := callTool(ctx, oauthServer(t, c, o, h), "echo", `{"text":"x"}`); err != nil || res.Text() != "echo: x" {
		t.Fatalf("echo after step up: %q, %v", res.Text(), err)
	}
	if got := o.TokenRequests("client_credentials"); got != 2 {
		t.Errorf("token requests = %d after another call, want 2", got)
	}
}

// TestOAuthEndpointsPolicy: an operator's server is trusted, but the
// authorization server its metadata names is not: the SSRF policy judges
// it, and without an allowlist entry loopback is refused.
func TestOAuthEndpointsPolicy(t *testing.T) {
	o := mcptest.StartOAuthServer(t)
	strict, err := NewPolicy(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := NewClient(&ClientOptions{Policy: strict})
	h := c.NewOAuth("secure", o.MCPURL, &OAuthConfig{ClientID: o.ClientID, clientSecret: o.ClientSecret})
	_, err = oauthServer(t, c, o, h).Tools(context.Background())
	var oe *OAuthError
	if !errors.As(err, &oe) || !strings.Contains(err.Error(), "loopback") {
		t.Fatalf("Tools: %v, want an *OAuthError naming the policy's refusal", err)
	}
	if n := o.TokenRequests("client_credentials"); n != 0 {
		t.Errorf("%d token requests reached a refused authorization server", n)
	}
}

// TestAuthChallengeWithoutOAuth: a server loom runs no OAuth flow for (a
// request's server_url) answers with an OAuth challenge: the error says
// so, in words for the model and the client, with no token in it.
func TestAuthChallengeWithoutOAuth(t *testing.T) {
	o := mcptest.StartOAuthServer(t)
	c := loopbackClient(t, nil)
	for _, tc := range []struct {
		name, authorization, want string
	}{
		{"no token", "", "requires OAuth authorization (HTTP 401)"},
		{"bad token", "not-a-token", "refused the token in the tool's authorization field (HTTP 401, invalid_token)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newServer(t, c, ServerConfig{Label: "req", URL: o.MCPURL, Authorization: tc.authorization})
			_, err := s.Tools(context.Background())
			var ce *AuthChallengeError
			if !errors.As(err, &ce) {
				t.Fatalf("Tools: %v, want an *AuthChallengeError", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want it to say %q", err, tc.want)
			}
			if tc.authorization != "" && strings.Contains(err.Error(), tc.authorization) {
				t.Errorf("the error carries the token: %q", err)
			}
		})
	}
}

func TestLoadNamedServersOAuth(t *testing.T) {
	dir := t.TempDir()
	write := func(body string) string {
		p := filepath.Join(dir, "servers.json")
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	getenv := func(k string) string {
		if k == "GH_SECRET" {
			return "s3cret\n"
		}
		return ""
	}
	named, err := LoadNamedServers(write(`[
	 {"server_label":"gh","server_url":"https://mcp.example.com/mcp","tenants":["acme"],
	  "oauth":{"client_id":"loom","client_secret_env":"GH_SECRET","scopes":["repo"]}},
	 {"server_label":"lin","server_url":"https://linear.example.com/mcp",
	  "oauth":{"client_id":"loom","refresh_token_file":"lin.token"}}]`), &LoadOptions{Getenv: getenv})
	if err != nil {
		t.Fatal(err)
	}
	gh, lin := named["gh"], named["lin"]
	if gh.OAuth.ClientSecret() != "s3cret" {
		t.Errorf("client secret = %q, want it read from GH_SECRET and trimmed", gh.OAuth.ClientSecret())
	}
	if lin.OAuth.RefreshTokenFile != filepath.Join(dir, "lin.token") {
		t.Errorf("refresh_token_file = %q, want it next to the servers file", lin.OAuth.RefreshTokenFile)
	}
	if !gh.AllowsTenant("acme") || gh.AllowsTenant("other") || gh.AllowsTenant("") || !lin.AllowsTenant("anyone") {
		t.Error("tenants: want only acme for gh, everyone for lin")
	}
	for _, tc := range []struct{ body, want string }{
		{`[{"server_label":"a","server_url":"https://a/mcp","oauth":{"client_id":"x","client_secret":"inline"}}]`, "oauth.client_secret: secrets are never written"},
		{`[{"server_label":"a","server_url":"https://a/mcp","oauth":{"client_id":"x","refresh_token":"inline"}}]`, "oauth.refresh_token: secrets are never written"},
		{`[{"server_label":"a","server_url":"https://a/mcp","oauth":{"client_id":"x","client_secret_env":"NOPE"}}]`, "NOPE (client_secret_env) is empty or unset"},
		{`[{"server_label":"a","server_url":"https://a/mcp","oauth":{"client_id":"x"}}]`, "client credentials need client_id and a secret"},
		{`[{"server_label":"a","server_url":"https://a/mcp","authorization":"t","oauth":{"client_id":"x","client_secret_env":"GH_SECRET"}}]`, "authorization and oauth are exclusive"},
		{`[{"server_label":"a","server_url":"https://a/mcp","tenants":[]}]`, "tenants is empty"},
	} {
		_, err := LoadNamedServers(write(tc.body), &LoadOptions{Getenv: getenv})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.body, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "inline") {
			t.Errorf("the error repeats the secret: %v", err)
		}
	}
}

// TestTokenErrorRedacted: a failed token request's error keeps the OAuth
// error code and the status, never the response body, which an
// authorization server may fill with what it was sent.
func TestTokenErrorRedacted(t *testing.T) {
	const secret = "rt-secret-123"
	err := redactTokenError(&oauth2.RetrieveError{
		Response:         &http.Response{StatusCode: http.StatusBadRequest},
		Body:             []byte(`{"error":"invalid_grant","refresh_token":"` + secret + `"}`),
		ErrorCode:        "invalid_grant",
		ErrorDescription: "expired",
	})
	if strings.Contains(err.Error(), secret) {
		t.Errorf("the error carries the response body: %v", err)
	}
	if want := "(HTTP 400): invalid_grant: expired"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q, want it to say %q", err, want)
	}
}

// TestOAuthIssuerPinned: with oauth.issuer set, a protected resource
// metadata naming another authorization server is refused with a clear
// error before any token request: the client secret and the refresh token
// never reach that server. The configured one still works.
func TestOAuthIssuerPinned(t *testing.T) {
	o := mcptest.StartOAuthServer(t)
	other := mcptest.StartOAuthServer(t)
	o.AuthorizationServers = []string{other.AuthURL}
	c := loopbackClient(t, nil)
	cfg := &OAuthConfig{ClientID: o.ClientID, clientSecret: o.ClientSecret, Issuer: o.AuthURL, Scopes: []string{"mcp:read"},
		RefreshTokenFile: filepath.Join(t.TempDir(), "rt")}
	if err := WriteSecretFile(cfg.RefreshTokenFile, o.IssueRefreshToken("mcp:read")); err != nil {
		t.Fatal(err)
	}
	_, err := oauthServer(t, c, o, c.NewOAuth("secure", o.MCPURL, cfg)).Tools(context.Background())
	var oe *OAuthError
	if !errors.As(err, &oe) || !strings.Contains(err.Error(), "not the configured issuer "+o.AuthURL) {
		t.Fatalf("Tools: %v, want an *OAuthError naming the configured issuer", err)
	}
	for _, g := range []string{"refresh_token", "client_credentials"} {
		if n := other.TokenRequests(g); n != 0 {
			t.Errorf("%d %s token requests reached the authorization server the metadata named", n, g)
		}
	}

	// The metadata names the configured issuer (among others): it is used.
	o.AuthorizationServers = []string{other.AuthURL, o.AuthURL}
	if _, err := oauthServer(t, c, o, c.NewOAuth("secure", o.MCPURL, cfg)).Tools(context.Background()); err != nil {
		t.Fatalf("Tools with the configured issuer listed: %v", err)
	}
	if n := o.TokenRequests("refresh_token"); n != 1 {
		t.Errorf("refresh_token requests to the configured issuer = %d, want 1", n)
	}
}

// TestOAuthRefreshTokenReread: the refresh token in memory is refused
// (invalid_grant: another replica rotated it, or it was revoked) after a
// new loom mcp login wrote another to the file: loom reads the file again
// and recovers with the new token.
func TestOAuthRefreshTokenReread(t *testing.T) {
	o := mcptest.StartOAuthServer(t)
	c := loopbackClient(t, nil)
	cfg := &OAuthConfig{ClientID: o.ClientID, clientSecret: o.ClientSecret, Scopes: []string{"mcp:read"},
		RefreshTokenFile: filepath.Join(t.TempDir(), "rt")}
	old := o.IssueRefreshToken("mcp:read")
	if err := WriteSecretFile(cfg.RefreshTokenFile, old); err != nil {
		t.Fatal(err)
	}
	h := c.NewOAuth("secure", o.MCPURL, cfg)
	ctx := context.Background()
	if _, err := callTool(ctx, oauthServer(t, c, o, h), "echo", `{"text":"first"}`); err != nil {
		t.Fatal(err)
	}
	o.RevokeRefreshToken(old)
	if err := WriteSecretFile(cfg.RefreshTokenFile, o.IssueRefreshToken("mcp:read")); err != nil {
		t.Fatal(err)
	}
	o.ExpireAccessTokens()
	res, err := callTool(ctx, oauthServer(t, c, o, h), "echo", `{"text":"after"}`)
	if err != nil || res.Text() != "echo: after" {
		t.Fatalf("call after the refresh token was replaced: %q, %v", res.Text(), err)
	}
	if n := o.TokenRequests("refresh_token"); n != 3 {
		t.Errorf("refresh_token requests = %d, want 3 (the first, the refused one, the one with the new token)", n)
	}
}

// TestOAuthRefreshGrantsOneAtATime: a step up (Authorize's grant) and a
// token source refreshing an expired token at the same time: the second
// grant waits for the first, so the refresh token is never presented
// twice at once. The step up's grant is held at the authorization server
// until the other grant either arrives there (the bug) or waits for it.
func TestOAuthRefreshGrantsOneAtATime(t *testing.T) {
	o := mcptest.StartOAuthServer(t)
	o.ExpiresIn = 1 // every token is seen expired: every use refreshes
	c := loopbackClient(t, nil)
	cfg := &OAuthConfig{ClientID: o.ClientID, clientSecret: o.ClientSecret, Scopes: []string{"mcp:read"},
		RefreshTokenFile: filepath.Join(t.TempDir(), "rt")}
	if err := WriteSecretFile(cfg.RefreshTokenFile, o.IssueRefreshToken("mcp:read", "mcp:admin")); err != nil {
		t.Fatal(err)
	}
	h := c.NewOAuth("secure", o.MCPURL, cfg)
	ctx := context.Background()
	if _, err := callTool(ctx, oauthServer(t, c, o, h), "echo", `{}`); err != nil {
		t.Fatal(err)
	}
	readSource, _ := h.TokenSource(ctx)

	held, release := make(chan struct{}), make(chan struct{})
	var releaseOnce, holdOnce sync.Once
	letGo := func() { releaseOnce.Do(func() { close(release) }) }
	o.OnRefreshGrant = func(scope string) {
		if strings.Contains(scope, "mcp:admin") {
			holdOnce.Do(func() { close(held); <-release })
			return
		}
		select {
		case <-held: // another grant while the step up's is in flight
			letGo()
		default:
		}
	}
	h.onGrantWait = letGo

	stepUp := make(chan error, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, o.MCPURL, nil)
		req.Header.Set("Authorization", "Bearer stale")
		stepUp <- h.Authorize(ctx, req, &http.Response{StatusCode: http.StatusForbidden,
			Header: http.Header{"Www-Authenticate": {`Bearer error="insufficient_scope", scope="mcp:read mcp:admin"`}},
			Body:   http.NoBody})
	}()
	<-held
	if _, err := readSource.Token(); err != nil {
		t.Errorf("refreshing the expired token: %v", err)
	}
	if err := <-stepUp; err != nil {
		t.Errorf("step up: %v", err)
	}
	if n := o.MaxConcurrentRefreshGrants(); n != 1 {
		t.Errorf("%d refresh-token grants were in flight at once, want 1", n)
	}
}
