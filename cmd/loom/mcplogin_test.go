package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"

	"github.com/loomgate/loom/tools"
	"github.com/loomgate/loom/tools/mcp"
	"github.com/loomgate/loom/tools/mcp/mcptest"
)

// TestMCPLogin: loom mcp login runs the authorization-code flow against a
// loopback authorization server (the test plays the browser: it opens the
// printed URL, which redirects to loom's loopback listener), writes the
// refresh token where the servers file says, and that token then works
// for loom's refresh-token grant.
func TestMCPLogin(t *testing.T) {
	for _, tc := range []struct {
		name         string
		clientID     bool // pre-registered; else dynamic registration
		confidential bool // dynamic registration issues a secret anyway
		resource     bool // the block names a resource other than the metadata's
	}{
		{name: "pre-registered", clientID: true},
		{name: "dynamic registration"},
		{name: "dynamic registration issuing a secret", confidential: true},
		{name: "configured resource", clientID: true, resource: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := mcptest.StartOAuthServer(t)
			o.RegisterConfidential = tc.confidential
			dir := t.TempDir()
			block := map[string]any{"refresh_token_file": "lin.token", "scopes": []string{"mcp:read"}}
			if tc.resource {
				// The server takes tokens for its origin, which the block
				// names; its metadata names the endpoint.
				o.Resource = strings.TrimSuffix(o.MCPURL, "/mcp")
				block["resource"] = o.Resource
			}
			env := map[string]string{"LOOM_MCP_ALLOW": "127.0.0.1"}
			if tc.clientID {
				block["client_id"] = o.ClientID
				block["client_secret_env"] = "LIN_SECRET"
				env["LIN_SECRET"] = o.ClientSecret
			}
			servers, _ := json.Marshal([]map[string]any{{"server_label": "lin", "server_url": o.MCPURL, "oauth": block}})
			path := filepath.Join(dir, "servers.json")
			if err := os.WriteFile(path, servers, 0o600); err != nil {
				t.Fatal(err)
			}

			out, w := io.Pipe()
			done := make(chan error, 1)
			go func() {
				done <- run([]string{"mcp", "login", "lin", "--mcp-servers", path, "--timeout", "1m"}, func(k string) string { return env[k] }, w, io.Discard)
				w.Close()
			}()
			// The browser: open the URL loom prints, follow the redirects
			// (to loom's listener), and read loom's output to the end.
			var printed strings.Builder
			sc := bufio.NewScanner(out)
			opened := false
			for sc.Scan() {
				line := sc.Text()
				printed.WriteString(line + "\n")
				if u := strings.TrimSpace(line); !opened && strings.HasPrefix(u, o.AuthURL+"/authorize?") {
					opened = true
					resp, err := http.Get(u)
					if err != nil {
						t.Fatalf("browser: %v", err)
					}
					body, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if !strings.Contains(string(body), "logged in") {
						t.Errorf("the browser was shown %q", body)
					}
				}
			}
			if err := <-done; err != nil {
				t.Fatalf("loom mcp login: %v\n%s", err, printed.String())
			}
			if !opened {
				t.Fatalf("no authorization URL printed:\n%s", printed.String())
			}
			if n := o.TokenRequests("authorization_code"); n != 1 {
				t.Errorf("authorization_code token requests = %d, want 1", n)
			}
			rt, err := os.ReadFile(filepath.Join(dir, "lin.token"))
			if err != nil {
				t.Fatal(err)
			}
			if fi, _ := os.Stat(filepath.Join(dir, "lin.token")); fi.Mode().Perm() != 0o600 {
				t.Errorf("token file mode %v, want 0600", fi.Mode().Perm())
			}
			if strings.Contains(printed.String(), strings.TrimSpace(string(rt))) {
				t.Error("loom mcp login printed the refresh token")
			}
			if want := `add "issuer": "` + o.AuthURL + `"`; !strings.Contains(printed.String(), "the authorization server "+o.AuthURL) || !strings.Contains(printed.String(), want) {
				t.Errorf("the issuer logged in to is not printed, or not to pin (%s):\n%s", want, printed.String())
			}
			if !tc.clientID {
				if !strings.Contains(printed.String(), `add "client_id": "dyn-`) {
					t.Fatalf("the dynamically registered client is not named:\n%s", printed.String())
				}
				if got := o.RegisteredAuthMethods(); len(got) != 1 || got[0] != "none" {
					t.Errorf("registrations asked for token_endpoint_auth_method %q, want [none] (a public client)", got)
				}
				// The operator adds the client id, as told.
				id := printed.String()[strings.Index(printed.String(), `"dyn-`)+1:]
				block["client_id"] = id[:strings.Index(id, `"`)]
				secretFile := filepath.Join(dir, "lin.token.client_secret")
				if tc.confidential {
					// ... and the client secret's file, as told.
					if want := `add "client_secret_file": "` + secretFile + `"`; !strings.Contains(printed.String(), want) {
						t.Fatalf("the issued client secret's file is not named (%s):\n%s", want, printed.String())
					}
					if fi, err := os.Stat(secretFile); err != nil || fi.Mode().Perm() != 0o600 {
						t.Fatalf("client secret file: %v, %v; want mode 0600", fi, err)
					}
					block["client_secret_file"] = secretFile
				} else if _, err := os.Stat(secretFile); err == nil {
					t.Error("a client secret file was written for a public client")
				}
				if strings.Contains(printed.String(), `"client_secret_file"`) != tc.confidential {
					t.Errorf("client_secret_file printed for a public client:\n%s", printed.String())
				}
				servers, _ = json.Marshal([]map[string]any{{"server_label": "lin", "server_url": o.MCPURL, "oauth": block}})
				if err := os.WriteFile(path, servers, 0o600); err != nil {
					t.Fatal(err)
				}
			}

			// loom serve's side: the written token gets access tokens.
			named, err := mcp.LoadNamedServers(path, &mcp.LoadOptions{Getenv: func(k string) string { return env[k] }})
			if err != nil {
				t.Fatal(err)
			}
			policy, _ := mcp.NewPolicy(&mcp.PolicyOptions{Allow: "127.0.0.1"})
			c := mcp.NewClient(&mcp.ClientOptions{Policy: policy})
			lin := named["lin"]
			s, err := c.NewServer(context.Background(), &mcp.ServerConfig{Label: "lin", URL: lin.URL, Trusted: true, OAuth: c.NewOAuth("lin", lin.URL, lin.OAuth)})
			if err != nil {
				t.Fatal(err)
			}
			sess, err := s.Open(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			defer sess.Close()
			res, err := sess.Call(context.Background(), tools.Call{CallID: "c", Name: "echo", Arguments: `{"text":"after login"}`})
			if err != nil || res.Text() != "echo: after login" {
				t.Fatalf("call with the login's token: %q, %v", res.Text(), err)
			}
			if n := o.TokenRequests("refresh_token"); n != 1 {
				t.Errorf("refresh_token token requests = %d, want 1", n)
			}
			for _, r := range o.Resources() {
				if r != cmp.Or(o.Resource, o.MCPURL) {
					t.Errorf("a token request asked for the resource %q, want %q", r, cmp.Or(o.Resource, o.MCPURL))
				}
			}
		})
	}
}

// TestMCPLoginIssuerPinned: with oauth.issuer set, a login whose server
// names another authorization server is refused before the flow starts:
// no URL to open, no registration or token request to that server.
func TestMCPLoginIssuerPinned(t *testing.T) {
	for _, tc := range []struct {
		name     string
		clientID bool
	}{{"pre-registered", true}, {"dynamic registration", false}} {
		t.Run(tc.name, func(t *testing.T) {
			o := mcptest.StartOAuthServer(t)
			other := mcptest.StartOAuthServer(t)
			o.AuthorizationServers = []string{other.AuthURL}
			block := map[string]any{"refresh_token_file": "lin.token", "issuer": o.AuthURL}
			env := map[string]string{"LOOM_MCP_ALLOW": "127.0.0.1", "LIN_SECRET": other.ClientSecret}
			if tc.clientID {
				block["client_id"], block["client_secret_env"] = other.ClientID, "LIN_SECRET"
			}
			servers, _ := json.Marshal([]map[string]any{{"server_label": "lin", "server_url": o.MCPURL, "oauth": block}})
			path := filepath.Join(t.TempDir(), "servers.json")
			if err := os.WriteFile(path, servers, 0o600); err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			err := run([]string{"mcp", "login", "lin", "--mcp-servers", path, "--timeout", "1m"}, func(k string) string { return env[k] }, &out, io.Discard)
			if err == nil || !strings.Contains(err.Error(), "not the configured issuer") {
				t.Fatalf("loom mcp login: %v, want a refusal naming the configured issuer", err)
			}
			if strings.Contains(out.String(), "/authorize?") {
				t.Errorf("an authorization URL was printed:\n%s", out.String())
			}
			for _, g := range []string{"authorization_code", "refresh_token", "client_credentials"} {
				if n := other.TokenRequests(g); n != 0 {
					t.Errorf("%d %s token requests reached the other authorization server", n, g)
				}
			}
			if n := other.Registrations(); n != 0 {
				t.Errorf("%d dynamic registrations reached the other authorization server", n)
			}
		})
	}
}

// TestLoginCallback: a redirect to loom's loopback listener without the
// state of the login in progress (anyone on the machine may send one) is
// refused and does not take the real redirect's place; an error's
// description is printed without its control characters.
func TestLoginCallback(t *testing.T) {
	redirect := &url.URL{Scheme: "http", Host: "127.0.0.1:1", Path: "/callback"}
	get := func(h http.Handler, query string) int {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/callback?"+query, nil))
		return rec.Code
	}

	codes := make(chan callbackResult, 1)
	var state expectedState
	state.set("the-state")
	h := callbackHandler(redirect, &state, codes)
	if code := get(h, "code=forged&state=other"); code != http.StatusBadRequest {
		t.Errorf("a redirect with another state: HTTP %d, want 400", code)
	}
	if code := get(h, "error=access_denied&state=other"); code != http.StatusBadRequest {
		t.Errorf("an error redirect with another state: HTTP %d, want 400", code)
	}
	if code := get(h, "code=real&state=the-state"); code != http.StatusOK {
		t.Errorf("the login's redirect: HTTP %d, want 200", code)
	}
	if r := <-codes; r.err != nil || r.res.Code != "real" {
		t.Errorf("the login received %+v, %v; want the code real", r.res, r.err)
	}

	codes = make(chan callbackResult, 1)
	h = callbackHandler(redirect, &state, codes)
	get(h, "error=access_denied&state=the-state&error_description="+url.QueryEscape("denied\x1b[2J\r\nloom: logged in\x07"))
	r := <-codes
	if r.err == nil || strings.ContainsFunc(r.err.Error(), unicode.IsControl) || !strings.Contains(r.err.Error(), "access_denied denied[2Jloom: logged in") {
		t.Errorf("error %q, want the description without control characters", r.err)
	}
}
