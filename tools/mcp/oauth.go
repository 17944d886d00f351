package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// OAuthConfig is the oauth block of a server in the --mcp-servers file:
// how loom gets access tokens for an MCP server behind OAuth 2.1 without a
// person. Secrets are never in the file itself: the client secret comes
// from an environment variable or a file, the refresh token from a file
// (which `loom mcp login` writes).
type OAuthConfig struct {
	// ClientID is the client registered with the authorization server.
	// Required for client credentials; with a refresh token, the client
	// the token was issued to (without one, loom mcp login registers a
	// client dynamically and prints its ID to put here).
	ClientID string `json:"client_id,omitempty"`
	// ClientSecretEnv names the environment variable holding the client
	// secret; ClientSecretFile is a file holding it. At most one.
	ClientSecretEnv  string `json:"client_secret_env,omitempty"`
	ClientSecretFile string `json:"client_secret_file,omitempty"`
	// RefreshTokenFile is where the operator's refresh token is: with it,
	// loom uses the refresh-token grant; without it, client credentials.
	// loom mcp login writes it, and loom rewrites it when the
	// authorization server rotates the token.
	RefreshTokenFile string `json:"refresh_token_file,omitempty"`
	// Scopes are requested with every token (a 403 insufficient_scope
	// adds the scopes the server asks for).
	Scopes []string `json:"scopes,omitempty"`
	// Resource is the RFC 8707 resource tokens are requested for; default
	// the one the server's protected resource metadata names, else its URL.
	Resource string `json:"resource,omitempty"`
	// RedirectURL is the loopback redirect loom mcp login listens on (a
	// pre-registered client must have it registered); default
	// http://127.0.0.1:<free port>/callback.
	RedirectURL string `json:"redirect_url,omitempty"`
	// Issuer pins the authorization server: the issuer identifier (RFC
	// 8414) loom accepts. Set, discovery refuses a protected resource
	// metadata that names another authorization server, so the client
	// secret and the refresh token go to this one only; loom mcp login
	// prints the issuer it used. Unset, loom trusts whichever server the
	// MCP server's metadata names.
	Issuer string `json:"issuer,omitempty"`

	clientSecret string // resolved at load time, never marshalled
}

// Validate checks the block of server label and resolves the client
// secret with getenv (only cmd/loom reads the environment).
// LoadNamedServers calls it; a block built in code needs it before
// Client.NewOAuth.
func (o *OAuthConfig) Validate(label string, getenv func(string) string) error {
	if o.ClientSecretEnv != "" && o.ClientSecretFile != "" {
		return fmt.Errorf("server %q: oauth: client_secret_env and client_secret_file are exclusive", label)
	}
	switch {
	case o.ClientSecretEnv != "":
		if getenv == nil {
			getenv = func(string) string { return "" }
		}
		o.clientSecret = strings.TrimSpace(getenv(o.ClientSecretEnv))
		if o.clientSecret == "" {
			return fmt.Errorf("server %q: oauth: the environment variable %s (client_secret_env) is empty or unset", label, o.ClientSecretEnv)
		}
	case o.ClientSecretFile != "":
		b, err := os.ReadFile(o.ClientSecretFile)
		if err != nil {
			return fmt.Errorf("server %q: oauth: client_secret_file: %w", label, err)
		}
		o.clientSecret = strings.TrimSpace(string(b))
		if o.clientSecret == "" {
			return fmt.Errorf("server %q: oauth: client_secret_file %s is empty", label, o.ClientSecretFile)
		}
	}
	if o.RefreshTokenFile == "" {
		// Client credentials: a confidential client.
		if o.ClientID == "" || o.clientSecret == "" {
			return fmt.Errorf("server %q: oauth: client credentials need client_id and a secret (client_secret_env or client_secret_file); or give refresh_token_file (see loom mcp login)", label)
		}
	}
	if o.Issuer != "" {
		if u, err := url.Parse(o.Issuer); err != nil || u.Scheme == "" || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			return fmt.Errorf("server %q: oauth: issuer must be an absolute URL without a query or a fragment", label)
		}
	}
	if o.Resource != "" {
		if u, err := url.Parse(o.Resource); err != nil || u.Scheme == "" || u.Host == "" || u.Fragment != "" {
			return fmt.Errorf("server %q: oauth: resource must be an absolute URI without a fragment", label)
		}
	}
	return nil
}

// ClientSecret returns the resolved client secret (for loom mcp login).
func (o *OAuthConfig) ClientSecret() string { return o.clientSecret }

// OAuth gets and refreshes access tokens for one operator-configured
// server: an auth.OAuthHandler that every request to the server shares.
//
// The first request goes without a token; its 401 makes the SDK's
// transport call Authorize, which discovers the protected resource and
// authorization server metadata and requests a token (client credentials,
// or the refresh-token grant). Tokens are kept in memory per scope set; an
// expired one is refreshed by the first request that needs it while the
// others wait for it (oauth2.ReuseTokenSource), and Authorize runs one at a
// time: a request whose token was already replaced while it waited just
// retries with the new one, so 20 requests rejected at once cause one
// token request. A 403 insufficient_scope adds the challenged scopes (step
// up). Every fetch goes through the Client's OAuth HTTP client, which the
// SSRF policy guards. No token or secret is logged or put in an error.
type OAuth struct {
	label     string
	serverURL string
	cfg       OAuthConfig
	http      *http.Client
	logger    *slog.Logger

	mu      sync.Mutex // held by Authorize: one token request at a time
	meta    *oauthMeta
	scopes  []string                      // the scope set in use
	sources map[string]oauth2.TokenSource // by scope set
	current oauth2.TokenSource            // sources[key(scopes)], or nil

	// rtMu is held for the whole of every refresh-token grant (Authorize's
	// and every token source's): two grants never present the same refresh
	// token at once, which an authorization server that rotates refresh
	// tokens may take for a replay and answer by revoking them all. It
	// guards refreshToken.
	rtMu         sync.Mutex
	refreshToken string // "" until read from the file, or after invalid_grant
	// onGrantWait, if set (by tests), runs when a refresh-token grant
	// waits for another to finish.
	onGrantWait func()
}

// oauthMeta is what discovery found: where to ask for tokens, how the
// client authenticates there, and for which resource.
type oauthMeta struct {
	issuer    string
	tokenURL  string
	authStyle oauth2.AuthStyle
	resource  string
}

var _ auth.OAuthHandler = (*OAuth)(nil)

// NewOAuth returns the handler for the server label at serverURL. cfg must
// have been validated (LoadNamedServers does it).
func (c *Client) NewOAuth(label, serverURL string, cfg *OAuthConfig) *OAuth {
	return &OAuth{
		label:     label,
		serverURL: serverURL,
		cfg:       *cfg,
		http:      c.oauthHTTP,
		logger:    c.logger.With("mcp_server", label),
		scopes:    slices.Clone(cfg.Scopes),
		sources:   map[string]oauth2.TokenSource{},
	}
}

// TokenSource implements auth.OAuthHandler: the token source of the scope
// set in use, nil before the first Authorize.
func (o *OAuth) TokenSource(context.Context) (oauth2.TokenSource, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.current, nil
}

// tokenTimeout bounds one discovery or token request.
const tokenTimeout = 30 * time.Second

// Authorize implements auth.OAuthHandler; the transport calls it on a 401
// or 403 and retries the request once if it returns nil.
func (o *OAuth) Authorize(ctx context.Context, req *http.Request, resp *http.Response) error {
	challenges, _ := oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	errCode, challengeScopes, metadataURL := bearerChallenge(challenges)
	if resp.StatusCode == http.StatusForbidden && errCode != "insufficient_scope" {
		// Forbidden for another reason: no new token helps. The retry
		// gets the same 403, which the call reports.
		return nil
	}

	o.mu.Lock()
	defer o.mu.Unlock()
	if o.current != nil {
		tok, err := o.current.Token()
		sent := strings.TrimSpace(strings.TrimPrefix(req.Header.Get("Authorization"), "Bearer "))
		if err == nil && tok.AccessToken != sent && !(resp.StatusCode == http.StatusForbidden && !subset(challengeScopes, o.scopes)) {
			// Another request got a new token while this one was in
			// flight: retry with it.
			return nil
		}
	}
	ctx, cancel := context.WithTimeout(ctx, tokenTimeout)
	defer cancel()
	if o.meta == nil {
		meta, err := o.discover(ctx, req.URL.String(), metadataURL)
		if err != nil {
			return &OAuthError{Server: o.label, Op: "discovering the authorization server", Err: err}
		}
		o.meta = meta
	}
	scopes := o.scopes
	if resp.StatusCode == http.StatusForbidden {
		scopes = union(o.scopes, challengeScopes)
		o.logger.InfoContext(ctx, "mcp oauth: stepping up scope", "scopes", strings.Join(scopes, " "))
	} else if len(scopes) == 0 && len(challengeScopes) > 0 {
		scopes = challengeScopes
	}
	key := strings.Join(scopes, " ")
	if src := o.sources[key]; src != nil && src != o.current {
		// A token for this scope set is cached (a step up seen before).
		o.current, o.scopes = src, scopes
		return nil
	}
	// The token in use was rejected (or there is none): a new one.
	g := &grant{o: o, scopes: scopes}
	tok, err := g.Token()
	if err != nil {
		return err
	}
	src := oauth2.ReuseTokenSource(tok, g)
	o.sources[key] = src
	o.current, o.scopes = src, scopes
	return nil
}

// discover finds the token endpoint: the protected resource metadata
// (from the challenge's resource_metadata, else the well-known URLs), then
// the authorization server's metadata.
func (o *OAuth) discover(ctx context.Context, resourceURL, metadataURL string) (*oauthMeta, error) {
	var prm *oauthex.ProtectedResourceMetadata
	var errs []error
	for _, u := range prmURLs(metadataURL, resourceURL) {
		p, err := oauthex.GetProtectedResourceMetadata(ctx, u.url, u.resource, o.http)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if p != nil && len(p.AuthorizationServers) > 0 {
			prm = p
			break
		}
	}
	if prm == nil {
		return nil, fmt.Errorf("no protected resource metadata naming an authorization server: %w", errors.Join(errs...))
	}
	issuer := prm.AuthorizationServers[0]
	if o.cfg.Issuer != "" {
		// Pinned: no request (not even for metadata) goes to another
		// authorization server than the configured one.
		i := slices.IndexFunc(prm.AuthorizationServers, func(s string) bool { return sameIssuer(s, o.cfg.Issuer) })
		if i < 0 {
			return nil, fmt.Errorf("the protected resource metadata names the authorization server %s, not the configured issuer %s (oauth.issuer)", strings.Join(prm.AuthorizationServers, ", "), o.cfg.Issuer)
		}
		issuer = prm.AuthorizationServers[i]
	}
	asm, err := auth.GetAuthServerMetadata(ctx, issuer, o.http)
	if err != nil {
		return nil, err
	}
	if asm == nil || asm.TokenEndpoint == "" {
		return nil, fmt.Errorf("the authorization server %s publishes no metadata with a token endpoint", issuer)
	}
	if o.cfg.Issuer != "" && !sameIssuer(asm.Issuer, o.cfg.Issuer) {
		return nil, fmt.Errorf("the authorization server's metadata names the issuer %s, not the configured issuer %s (oauth.issuer)", asm.Issuer, o.cfg.Issuer)
	}
	meta := &oauthMeta{issuer: asm.Issuer, tokenURL: asm.TokenEndpoint, resource: o.cfg.Resource}
	if meta.resource == "" {
		meta.resource = prm.Resource
	}
	switch {
	case o.cfg.clientSecret == "":
		meta.authStyle = oauth2.AuthStyleInParams // a public client: client_id only
	case slices.Contains(asm.TokenEndpointAuthMethodsSupported, "client_secret_basic"):
		meta.authStyle = oauth2.AuthStyleInHeader
	case slices.Contains(asm.TokenEndpointAuthMethodsSupported, "client_secret_post"):
		meta.authStyle = oauth2.AuthStyleInParams
	default:
		meta.authStyle = oauth2.AuthStyleInHeader // RFC 8414's default
	}
	o.logger.InfoContext(ctx, "mcp oauth: discovered", "issuer", meta.issuer, "token_endpoint", meta.tokenURL, "resource", meta.resource)
	return meta, nil
}

// sameIssuer compares issuer identifiers, a trailing slash aside.
func sameIssuer(a, b string) bool {
	return strings.TrimSuffix(a, "/") == strings.TrimSuffix(b, "/")
}

// OAuthDiscovery is what discovery found for a server, as loom serve
// will use it: loom mcp login runs the same discovery, so that it logs in
// to the authorization server and for the resource loom serve uses.
type OAuthDiscovery struct {
	Issuer        string // the authorization server's issuer identifier
	TokenEndpoint string
	Resource      string // the RFC 8707 resource tokens are requested for
}

// DiscoverOAuth runs loom serve's discovery for the server label at
// serverURL, given the 401 answer's header (its challenge may name the
// protected resource metadata): the pinned issuer (cfg.Issuer) is
// enforced. cfg must have been validated.
func (c *Client) DiscoverOAuth(ctx context.Context, label, serverURL string, challenge http.Header, cfg *OAuthConfig) (*OAuthDiscovery, error) {
	challenges, _ := oauthex.ParseWWWAuthenticate(challenge.Values("WWW-Authenticate"))
	_, _, metadataURL := bearerChallenge(challenges)
	meta, err := c.NewOAuth(label, serverURL, cfg).discover(ctx, serverURL, metadataURL)
	if err != nil {
		return nil, &OAuthError{Server: label, Op: "discovering the authorization server", Err: err}
	}
	return &OAuthDiscovery{Issuer: meta.issuer, TokenEndpoint: meta.tokenURL, Resource: meta.resource}, nil
}

type prmURL struct{ url, resource string }

// prmURLs are where protected resource metadata may be: the challenge's
// resource_metadata, then the well-known URL at the endpoint's path, then
// at the root (RFC 9728, as the MCP spec orders them).
func prmURLs(metadataURL, resourceURL string) []prmURL {
	var out []prmURL
	if metadataURL != "" {
		out = append(out, prmURL{metadataURL, resourceURL})
	}
	u, err := url.Parse(resourceURL)
	if err != nil {
		return out
	}
	u.RawQuery, u.Fragment = "", ""
	at := *u
	at.Path = "/.well-known/oauth-protected-resource/" + strings.TrimLeft(u.Path, "/")
	out = append(out, prmURL{at.String(), resourceURL})
	root := *u
	root.Path = "/.well-known/oauth-protected-resource"
	u.Path = ""
	return append(out, prmURL{root.String(), u.String()})
}

// grant requests tokens for one scope set: client credentials, or the
// refresh-token grant with the operator's refresh token. It is the
// refreshing source under an oauth2.ReuseTokenSource, which calls it for
// one caller at a time.
type grant struct {
	o      *OAuth
	scopes []string
}

func (g *grant) Token() (*oauth2.Token, error) {
	o := g.o
	ctx, cancel := context.WithTimeout(context.Background(), tokenTimeout)
	defer cancel()
	if o.cfg.RefreshTokenFile == "" {
		return g.request(ctx, "")
	}
	if !o.rtMu.TryLock() {
		if o.onGrantWait != nil {
			o.onGrantWait()
		}
		o.rtMu.Lock()
	}
	defer o.rtMu.Unlock()
	rt, err := o.loadRefreshToken()
	if err != nil {
		return nil, &OAuthError{Server: o.label, Op: "reading the refresh token", Err: err}
	}
	tok, err := g.request(ctx, rt)
	var re *oauth2.RetrieveError
	if errors.As(err, &re) && re.ErrorCode == "invalid_grant" {
		// The token in memory is no longer good: a new loom mcp login, or
		// another replica's rotation, may have written a new one to the
		// file. Read it again, and try once more if it changed.
		o.refreshToken = ""
		if fresh, ferr := o.loadRefreshToken(); ferr == nil && fresh != rt {
			o.logger.Info("mcp oauth: the refresh token was refused; retrying with the one now in the file", "file", o.cfg.RefreshTokenFile)
			tok, err = g.request(ctx, fresh)
		}
	}
	if err != nil {
		return nil, &OAuthError{Server: o.label, Op: "requesting a token (refresh token)", Err: redactTokenError(err)}
	}
	if tok.RefreshToken != "" {
		o.rotateRefreshToken(tok.RefreshToken)
	}
	o.logger.Info("mcp oauth: token issued", "grant", "refresh token", "scopes", strings.Join(g.scopes, " "), "expires", tok.Expiry)
	return tok, nil
}

// request asks the token endpoint for a token: with the refresh token rt,
// or client credentials if rt is "". A client-credentials error is
// returned as an *OAuthError; a refresh-token one as it came, for Token
// to tell invalid_grant.
func (g *grant) request(ctx context.Context, rt string) (*oauth2.Token, error) {
	o := g.o
	params := url.Values{}
	if o.meta.resource != "" {
		params.Set("resource", o.meta.resource)
	}
	if rt != "" {
		params.Set("grant_type", "refresh_token")
		params.Set("refresh_token", rt)
	}
	cfg := &clientcredentials.Config{
		ClientID:       o.cfg.ClientID,
		ClientSecret:   o.cfg.clientSecret,
		TokenURL:       o.meta.tokenURL,
		Scopes:         g.scopes,
		EndpointParams: params,
		AuthStyle:      o.meta.authStyle,
	}
	tok, err := cfg.Token(context.WithValue(ctx, oauth2.HTTPClient, o.http))
	if rt != "" {
		return tok, err
	}
	if err != nil {
		return nil, &OAuthError{Server: o.label, Op: "requesting a token (client credentials)", Err: redactTokenError(err)}
	}
	o.logger.Info("mcp oauth: token issued", "grant", "client credentials", "scopes", strings.Join(g.scopes, " "), "expires", tok.Expiry)
	return tok, nil
}

// loadRefreshToken returns the refresh token in memory, reading the file
// when there is none (at the first grant, and after an invalid_grant).
// The caller holds rtMu.
func (o *OAuth) loadRefreshToken() (string, error) {
	if o.refreshToken != "" {
		return o.refreshToken, nil
	}
	b, err := os.ReadFile(o.cfg.RefreshTokenFile)
	if err != nil {
		return "", fmt.Errorf("%w (run `loom mcp login %s` to get one)", err, o.label)
	}
	rt := strings.TrimSpace(string(b))
	if rt == "" {
		return "", fmt.Errorf("%s is empty (run `loom mcp login %s`)", o.cfg.RefreshTokenFile, o.label)
	}
	o.refreshToken = rt
	return rt, nil
}

// rotateRefreshToken keeps a new refresh token the authorization server
// issued in place of the old one, in memory and in the file, so that a
// restart (or another replica sharing the file) does not present a token
// the server has invalidated. The caller holds rtMu.
func (o *OAuth) rotateRefreshToken(rt string) {
	if rt == o.refreshToken {
		return
	}
	o.refreshToken = rt
	if err := WriteSecretFile(o.cfg.RefreshTokenFile, rt); err != nil {
		o.logger.Warn("mcp oauth: the rotated refresh token could not be saved; the next restart will need loom mcp login", "file", o.cfg.RefreshTokenFile, "err", err)
	}
}

// WriteSecretFile writes a secret to path, readable by its owner only,
// replacing the file atomically.
func WriteSecretFile(path, secret string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".loom-secret-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.WriteString(secret + "\n"); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// OAuthError is a failed OAuth step for a server: discovery or a token
// request. Its text names the server and the step, never a token or a
// secret.
type OAuthError struct {
	Server string
	Op     string
	Err    error
}

func (e *OAuthError) Error() string {
	return fmt.Sprintf("mcp: server %q: oauth: %s: %v", e.Server, e.Op, e.Err)
}

func (e *OAuthError) Unwrap() error { return e.Err }

// redactTokenError keeps what a failed token request says (the OAuth error
// code, its description, the status) and drops the response body, which
// is the authorization server's to fill.
func redactTokenError(err error) error {
	var re *oauth2.RetrieveError
	if !errors.As(err, &re) {
		return err
	}
	msg := "the authorization server refused"
	if re.Response != nil {
		msg += fmt.Sprintf(" (HTTP %d)", re.Response.StatusCode)
	}
	if re.ErrorCode != "" {
		msg += ": " + re.ErrorCode
	}
	if re.ErrorDescription != "" {
		msg += ": " + re.ErrorDescription
	}
	return errors.New(msg)
}

// bearerChallenge returns the Bearer challenge's error, scopes and
// resource_metadata.
func bearerChallenge(cs []oauthex.Challenge) (errCode string, scopes []string, metadataURL string) {
	for _, c := range cs {
		if c.Scheme != "bearer" {
			continue
		}
		return c.Params["error"], strings.Fields(c.Params["scope"]), c.Params["resource_metadata"]
	}
	return "", nil, ""
}

// union returns a's scopes then b's not in a.
func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, s := range b {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

func subset(a, b []string) bool {
	for _, s := range a {
		if !slices.Contains(b, s) {
			return false
		}
	}
	return true
}
