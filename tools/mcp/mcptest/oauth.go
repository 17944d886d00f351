package mcptest

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// OAuthServer is an MCP server behind OAuth 2.1 on loopback, for tests: an
// authorization server (metadata, dynamic registration, an authorization
// endpoint that consents at once, a token endpoint with the
// client-credentials, refresh-token and authorization-code grants, PKCE
// S256 required) and, on another port, the MCP server it protects, which
// publishes its protected resource metadata and checks every request's
// bearer token. It records what a test asserts on: the token requests, by
// grant, and every token and secret it issued.
type OAuthServer struct {
	// AuthURL is the authorization server's issuer; MCPURL the protected
	// MCP endpoint (its resource).
	AuthURL, MCPURL string
	// ClientID and ClientSecret are a registered confidential client.
	ClientID, ClientSecret string
	// Scopes are the scopes a token needs for any request; ToolScopes
	// maps a tool to the further scope a call to it needs (a 403
	// insufficient_scope otherwise: step up).
	Scopes     []string
	ToolScopes map[string]string
	// OnInvalidToken, if set, runs before a request with an unknown (say
	// expired) token is answered 401: a test holds the answers there
	// until enough requests were rejected at once. Set it before the
	// requests start.
	OnInvalidToken func()
	// AuthorizationServers, if set, are the authorization servers the
	// protected resource metadata names instead of AuthURL (a test points
	// it at another server). Set it before the requests start.
	AuthorizationServers []string
	// ExpiresIn is the expires_in of the access tokens issued, in seconds
	// (default 3600; under 10, a client sees them expired at once and
	// refreshes before every request). Set it before the requests start.
	ExpiresIn int
	// OnRefreshGrant, if set, runs while a refresh-token grant is in
	// flight (counted by MaxConcurrentRefreshGrants), with the grant's
	// scope parameter: a test holds a grant there. Set it before the
	// requests it watches start.
	OnRefreshGrant func(scope string)
	// Resource is the resource the token endpoint accepts (default
	// MCPURL; another one is invalid_target). Set it before the requests.
	Resource string
	// RegisterConfidential makes dynamic registration issue a client
	// secret (client_secret_basic) whatever the client asked for.
	RegisterConfidential bool

	mu       sync.Mutex
	access   map[string][]string // access token -> its scopes
	refresh  map[string][]string // refresh token -> the scopes it may get
	codes    map[string]authCode
	clients  map[string]string // client id -> secret ("" for a public client)
	requests map[string]int    // token requests by grant_type
	issued   []string          // every token and secret issued
	resource []string          // the resource parameter of each token request
	regs     int               // dynamic registrations
	regAuth  []string          // the token_endpoint_auth_method each registration asked for
	// refresh-token grants in flight, and the most at once
	refreshing, maxRefreshing int
}

type authCode struct {
	clientID, redirect, challenge string
	scopes                        []string
}

// StartOAuthServer starts an OAuthServer whose MCP server offers the tools
// echo (returns its argument "text") and admin (returns "admin ok"); a
// call to admin needs the scope mcp:admin beyond mcp:read. Its tool list
// is cacheable for an hour, per client (cacheScope private).
func StartOAuthServer(t testing.TB) *OAuthServer {
	t.Helper()
	o := &OAuthServer{
		ClientID:   "loom-test",
		Scopes:     []string{"mcp:read"},
		ToolScopes: map[string]string{"admin": "mcp:admin"},
		access:     map[string][]string{},
		refresh:    map[string][]string{},
		codes:      map[string]authCode{},
		clients:    map[string]string{},
		requests:   map[string]int{},
	}
	o.ClientSecret = o.newSecret()
	o.clients[o.ClientID] = o.ClientSecret

	as := httptest.NewServer(http.HandlerFunc(o.serveAuth))
	t.Cleanup(as.Close)
	o.AuthURL = as.URL

	// The tool list may be cached for an hour: after the first listing,
	// a client's requests are its sessions and calls.
	srv := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "oauth-test", Version: "1"}, &mcpsdk.ServerOptions{
		SetCacheable: func(_ context.Context, _ mcpsdk.Request, c *mcpsdk.Cacheable) {
			c.TTLMs = int(time.Hour / time.Millisecond)
			c.CacheScope = "private"
		}})
	srv.AddTool(&mcpsdk.Tool{Name: "echo", InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`)},
		func(_ context.Context, req *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
			var args struct{ Text string }
			_ = json.Unmarshal(req.Params.Arguments, &args)
			return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: "echo: " + args.Text}}}, nil
		})
	srv.AddTool(&mcpsdk.Tool{Name: "admin", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
			return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: "admin ok"}}}, nil
		})
	mcpHandler := mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return srv },
		&mcpsdk.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	mux := http.NewServeMux()
	rs := httptest.NewUnstartedServer(mux)
	o.MCPURL = "http://" + rs.Listener.Addr().String() + "/mcp"
	mux.HandleFunc("GET /.well-known/oauth-protected-resource/mcp", func(w http.ResponseWriter, _ *http.Request) {
		servers := []string{o.AuthURL}
		if o.AuthorizationServers != nil {
			servers = o.AuthorizationServers
		}
		writeJSON(w, http.StatusOK, map[string]any{
			"resource":              o.MCPURL,
			"authorization_servers": servers,
			"scopes_supported":      []string{"mcp:read", "mcp:admin"},
		})
	})
	mux.Handle("/mcp", o.protect(mcpHandler))
	rs.Start()
	t.Cleanup(rs.Close)
	return o
}

// TokenRequests returns how many token requests of grant_type were made.
func (o *OAuthServer) TokenRequests(grantType string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.requests[grantType]
}

// MaxConcurrentRefreshGrants returns the most refresh-token grants that
// were in flight at once.
func (o *OAuthServer) MaxConcurrentRefreshGrants() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.maxRefreshing
}

// RevokeRefreshToken makes a refresh token invalid (invalid_grant), as an
// authorization server does with a rotated or reused one.
func (o *OAuthServer) RevokeRefreshToken(rt string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.refresh, rt)
}

// Registrations returns how many clients registered dynamically.
func (o *OAuthServer) Registrations() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.regs
}

// RegisteredAuthMethods returns the token_endpoint_auth_method each
// dynamic registration asked for ("" if none).
func (o *OAuthServer) RegisteredAuthMethods() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.regAuth)
}

// Resources returns the resource parameter of every token request.
func (o *OAuthServer) Resources() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.resource)
}

// Secrets returns every secret the server knows: the client secret, and
// every access and refresh token it issued. None may appear in a log.
func (o *OAuthServer) Secrets() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string{o.ClientSecret}, o.issued...)
}

// IssueRefreshToken provisions a refresh token for the registered client,
// as an operator's earlier login would have: it may get scopes.
func (o *OAuthServer) IssueRefreshToken(scopes ...string) string {
	rt := o.newSecret()
	o.mu.Lock()
	defer o.mu.Unlock()
	o.refresh[rt] = scopes
	return rt
}

// ExpireAccessTokens makes every access token issued so far invalid, as
// their expiry would: the MCP server answers them 401 invalid_token.
func (o *OAuthServer) ExpireAccessTokens() {
	o.mu.Lock()
	defer o.mu.Unlock()
	clear(o.access)
}

func (o *OAuthServer) newSecret() string {
	s := rand.Text()
	o.mu.Lock()
	o.issued = append(o.issued, s)
	o.mu.Unlock()
	return s
}

// protect checks the bearer token of every MCP request: none or an unknown
// one is a 401 naming the resource metadata; a tool call the token's
// scopes do not cover is a 403 insufficient_scope naming the scopes needed
// (read from the Mcp-Method and Mcp-Name headers every 2026-07-28 client
// sends).
func (o *OAuthServer) protect(next http.Handler) http.Handler {
	prm := strings.TrimSuffix(o.MCPURL, "/mcp") + "/.well-known/oauth-protected-resource/mcp"
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		o.mu.Lock()
		scopes, known := o.access[token]
		o.mu.Unlock()
		if !ok || !known {
			challenge := `Bearer resource_metadata="` + prm + `", scope="` + strings.Join(o.Scopes, " ") + `"`
			if ok {
				challenge += `, error="invalid_token"`
				if o.OnInvalidToken != nil {
					o.OnInvalidToken()
				}
			}
			w.Header().Set("WWW-Authenticate", challenge)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		need := slices.Clone(o.Scopes)
		if r.Header.Get("Mcp-Method") == "tools/call" {
			if s := o.ToolScopes[r.Header.Get("Mcp-Name")]; s != "" {
				need = append(need, s)
			}
		}
		for _, s := range need {
			if !slices.Contains(scopes, s) {
				w.Header().Set("WWW-Authenticate", `Bearer error="insufficient_scope", scope="`+strings.Join(need, " ")+`", resource_metadata="`+prm+`"`)
				http.Error(w, "insufficient scope", http.StatusForbidden)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

func (o *OAuthServer) serveAuth(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/.well-known/oauth-authorization-server":
		writeJSON(w, http.StatusOK, map[string]any{
			"issuer":                                o.AuthURL,
			"authorization_endpoint":                o.AuthURL + "/authorize",
			"token_endpoint":                        o.AuthURL + "/token",
			"registration_endpoint":                 o.AuthURL + "/register",
			"scopes_supported":                      []string{"mcp:read", "mcp:admin", "offline_access"},
			"response_types_supported":              []string{"code"},
			"grant_types_supported":                 []string{"authorization_code", "refresh_token", "client_credentials"},
			"token_endpoint_auth_methods_supported": []string{"client_secret_basic", "client_secret_post", "none"},
			"code_challenge_methods_supported":      []string{"S256"},
		})
	case "/register":
		var meta struct {
			RedirectURIs []string `json:"redirect_uris"`
			AuthMethod   string   `json:"token_endpoint_auth_method"`
		}
		if err := json.NewDecoder(r.Body).Decode(&meta); err != nil || len(meta.RedirectURIs) == 0 {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_client_metadata"})
			return
		}
		id := "dyn-" + rand.Text()
		res := map[string]any{"client_id": id, "redirect_uris": meta.RedirectURIs, "token_endpoint_auth_method": "none"}
		secret := ""
		if o.RegisterConfidential {
			secret = o.newSecret()
			res["client_secret"], res["token_endpoint_auth_method"] = secret, "client_secret_basic"
		}
		o.mu.Lock()
		o.regs++
		o.regAuth = append(o.regAuth, meta.AuthMethod)
		o.clients[id] = secret
		o.mu.Unlock()
		writeJSON(w, http.StatusCreated, res)
	case "/authorize":
		o.authorize(w, r)
	case "/token":
		o.token(w, r)
	default:
		http.NotFound(w, r)
	}
}

// authorize consents at once: it redirects to redirect_uri with a code.
func (o *OAuthServer) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	o.mu.Lock()
	_, known := o.clients[q.Get("client_id")]
	o.mu.Unlock()
	redirect, err := url.Parse(q.Get("redirect_uri"))
	if !known || err != nil || q.Get("response_type") != "code" || q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" {
		http.Error(w, "bad authorization request", http.StatusBadRequest)
		return
	}
	code := rand.Text()
	o.mu.Lock()
	o.codes[code] = authCode{clientID: q.Get("client_id"), redirect: q.Get("redirect_uri"), challenge: q.Get("code_challenge"), scopes: strings.Fields(q.Get("scope"))}
	o.mu.Unlock()
	v := redirect.Query()
	v.Set("code", code)
	v.Set("state", q.Get("state"))
	redirect.RawQuery = v.Encode()
	http.Redirect(w, r, redirect.String(), http.StatusFound)
}

func (o *OAuthServer) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_request"})
		return
	}
	id, secret, basic := r.BasicAuth()
	if !basic {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	grantType := r.PostForm.Get("grant_type")
	o.mu.Lock()
	o.requests[grantType]++
	o.resource = append(o.resource, r.PostForm.Get("resource"))
	want, known := o.clients[id]
	o.mu.Unlock()
	if !known || want != secret {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid_client"})
		return
	}
	if resource := cmp.Or(o.Resource, o.MCPURL); r.PostForm.Get("resource") != resource {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_target"})
		return
	}
	scopes := strings.Fields(r.PostForm.Get("scope"))
	var newRefresh bool
	switch grantType {
	case "client_credentials":
		if want == "" {
			writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "unauthorized_client"})
			return
		}
	case "refresh_token":
		o.mu.Lock()
		o.refreshing++
		o.maxRefreshing = max(o.maxRefreshing, o.refreshing)
		o.mu.Unlock()
		if o.OnRefreshGrant != nil {
			o.OnRefreshGrant(r.PostForm.Get("scope"))
		}
		o.mu.Lock()
		// No longer in flight before any answer is written: the client
		// cannot start its next grant before this one is counted out.
		o.refreshing--
		allowed, ok := o.refresh[r.PostForm.Get("refresh_token")]
		o.mu.Unlock()
		if !ok {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_grant"})
			return
		}
		if len(scopes) == 0 {
			scopes = allowed
		}
		for _, s := range scopes {
			if !slices.Contains(allowed, s) {
				writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_scope"})
				return
			}
		}
	case "authorization_code":
		o.mu.Lock()
		c, ok := o.codes[r.PostForm.Get("code")]
		delete(o.codes, r.PostForm.Get("code"))
		o.mu.Unlock()
		sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
		if !ok || c.clientID != id || c.redirect != r.PostForm.Get("redirect_uri") || base64.RawURLEncoding.EncodeToString(sum[:]) != c.challenge {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_grant"})
			return
		}
		scopes, newRefresh = c.scopes, true
	default:
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "unsupported_grant_type"})
		return
	}
	at := o.newSecret()
	expiresIn := 3600
	if o.ExpiresIn > 0 {
		expiresIn = o.ExpiresIn
	}
	res := map[string]any{"access_token": at, "token_type": "Bearer", "expires_in": expiresIn, "scope": strings.Join(scopes, " ")}
	o.mu.Lock()
	o.access[at] = scopes
	o.mu.Unlock()
	if newRefresh {
		rt := o.newSecret()
		o.mu.Lock()
		o.refresh[rt] = append(slices.Clone(scopes), "mcp:read", "mcp:admin")
		o.mu.Unlock()
		res["refresh_token"] = rt
	}
	writeJSON(w, http.StatusOK, res)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
