package main

import (
	"context"
	"crypto/subtle"
	"errors"
	"flag"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"

	"github.com/loomgate/loom/tools/mcp"
)

const mcpUsage = `loom mcp login LABEL: log loom in to the MCP server LABEL of --mcp-servers.

It runs the OAuth authorization-code flow once: it prints a URL to open in a
browser, waits for the authorization server to redirect back to a loopback
address, and writes the refresh token to the oauth block's refresh_token_file,
from which loom serve gets access tokens. The client is the block's client_id
(with its secret, if any), else one registered dynamically as a public client.

Flags (each also read from LOOM_<NAME>):
  --mcp-servers FILE   the servers file loom serve uses
  --mcp-allow HOSTS    hosts the authorization server may be on although private or loopback
  --timeout DURATION   how long to wait for the browser (default 5m)
`

// loginTimeout bounds the whole login: a person has to act.
const loginTimeout = 5 * time.Minute

func runMCP(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "login" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			fmt.Fprint(stdout, mcpUsage)
			return nil
		}
		fmt.Fprint(stderr, mcpUsage)
		return configErrorf("loom mcp: the only subcommand is login")
	}
	fs := flag.NewFlagSet("mcp login", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	servers := fs.String("mcp-servers", "", "")
	allow := fs.String("mcp-allow", "", "")
	timeout := fs.Duration("timeout", loginTimeout, "")
	// The label comes first (loom mcp login LABEL --flags) or last.
	rest := args[1:]
	var label string
	if len(rest) > 0 && len(rest[0]) > 0 && rest[0][0] != '-' {
		label, rest = rest[0], rest[1:]
	}
	if err := parseServeEnvAndArgsTail(fs, rest, getenv, &label); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, mcpUsage)
			return nil
		}
		return err
	}
	switch {
	case label == "":
		return configErrorf("loom mcp login: which server? (loom mcp login LABEL)")
	case *servers == "":
		return configErrorf("loom mcp login: --mcp-servers (or LOOM_MCP_SERVERS) is required")
	}
	named, err := mcp.LoadNamedServers(*servers, &mcp.LoadOptions{Getenv: getenv})
	if err != nil {
		return fmt.Errorf("--mcp-servers: %w", err)
	}
	srv, ok := named[label]
	switch {
	case !ok:
		return configErrorf("loom mcp login: no server %q in %s", label, *servers)
	case srv.OAuth == nil || srv.OAuth.RefreshTokenFile == "":
		return configErrorf("loom mcp login: server %q has no oauth.refresh_token_file to write", label)
	}
	policy, err := mcp.NewPolicy(&mcp.PolicyOptions{Allow: *allow})
	if err != nil {
		return configErrorf("--mcp-allow: %v", err)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	res, err := mcpLogin(ctx, mcp.NewClient(&mcp.ClientOptions{Policy: policy, Logger: logger}), &srv, stdout)
	if err != nil {
		return fmt.Errorf("loom mcp login %s: %w", label, err)
	}
	if err := mcp.WriteSecretFile(srv.OAuth.RefreshTokenFile, res.refreshToken); err != nil {
		return fmt.Errorf("loom mcp login %s: writing the refresh token: %w", label, err)
	}
	fmt.Fprintf(stdout, "Logged in to %s with the authorization server %s: the refresh token is in %s.\n", label, res.issuer, srv.OAuth.RefreshTokenFile)
	if srv.OAuth.Issuer == "" {
		fmt.Fprintf(stdout, "Pin that authorization server: add \"issuer\": %q to the oauth block of %s (loom serve then sends the client secret and the refresh token to it only).\n", res.issuer, label)
	}
	if srv.OAuth.ClientID == "" {
		fmt.Fprintf(stdout, "The client was registered dynamically: add \"client_id\": %q to the oauth block of %s.\n", res.clientID, label)
		if res.clientSecret != "" {
			// Asked for a public client, the server issued a secret
			// anyway: the refresh token is bound to it, so serve needs it.
			secretFile := srv.OAuth.RefreshTokenFile + ".client_secret"
			if err := mcp.WriteSecretFile(secretFile, res.clientSecret); err != nil {
				return fmt.Errorf("loom mcp login %s: writing the client secret the authorization server issued: %w", label, err)
			}
			fmt.Fprintf(stdout, "The authorization server issued the client a secret, now in %s: add \"client_secret_file\": %q to the oauth block of %s.\n", secretFile, secretFile, label)
		}
	}
	return nil
}

// parseServeEnvAndArgsTail parses flags as loom serve does (environment
// first), and takes a label left after the flags.
func parseServeEnvAndArgsTail(fs *flag.FlagSet, args []string, getenv func(string) string, label *string) error {
	rest, err := parseEnvThenFlags(fs, args, getenv)
	if err != nil {
		return err
	}
	switch {
	case len(rest) == 1 && *label == "":
		*label = rest[0]
	case len(rest) > 0:
		return configErrorf("unexpected arguments: %v", rest)
	}
	return nil
}

type loginResult struct {
	refreshToken string
	clientID     string
	clientSecret string // a dynamically registered client's, if the server issued one
	issuer       string // the authorization server logged in to
}

// mcpLogin runs the authorization-code flow for srv with the go-sdk's
// handler: it connects, the server's 401 starts the flow, the person
// consents in a browser, and the loopback listener receives the code.
func mcpLogin(ctx context.Context, client *mcp.Client, srv *mcp.NamedServer, stdout io.Writer) (*loginResult, error) {
	cfg := srv.OAuth
	ln, redirect, err := listenLoopback(cfg.RedirectURL)
	if err != nil {
		return nil, err
	}
	defer ln.Close()
	codes := make(chan callbackResult, 1)
	var state expectedState
	callback := &http.Server{Handler: callbackHandler(redirect, &state, codes), ReadHeaderTimeout: 10 * time.Second}
	go callback.Serve(ln)
	defer callback.Close()

	var res loginResult
	lh := &loginHandler{client: client, srv: srv}
	hc := &auth.AuthorizationCodeHandlerConfig{
		RedirectURL: redirect.String(),
		AuthorizationCodeFetcher: func(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
			authURL, err := lh.withResource(args.URL)
			if err != nil {
				return nil, err
			}
			u, _ := url.Parse(authURL)
			state.set(u.Query().Get("state"))
			fmt.Fprintf(stdout, "Open this URL in a browser to log loom in to %s:\n\n  %s\n\nWaiting for the redirect to %s ...\n", srv.Label, authURL, redirect)
			select {
			case r := <-codes:
				return r.res, r.err
			case <-ctx.Done():
				return nil, fmt.Errorf("no authorization came back: %w", ctx.Err())
			}
		},
		RequestRefreshToken: true,
		Client:              lh.httpClient(client.OAuthHTTPClient()),
		NewTokenSource: func(ctx context.Context, c *oauth2.Config, tok *oauth2.Token) (oauth2.TokenSource, error) {
			res.refreshToken, res.clientID, res.clientSecret = tok.RefreshToken, c.ClientID, c.ClientSecret
			return c.TokenSource(ctx, tok), nil
		},
	}
	if len(cfg.Scopes) > 0 {
		hc.ScopeFilter = func(discovered []string) []string {
			out := slices.Clone(cfg.Scopes)
			for _, s := range discovered {
				if !slices.Contains(out, s) {
					out = append(out, s)
				}
			}
			return out
		}
	}
	if cfg.ClientID != "" {
		pre := &oauthex.ClientCredentials{ClientID: cfg.ClientID}
		if s := cfg.ClientSecret(); s != "" {
			pre.ClientSecretAuth = &oauthex.ClientSecretAuth{ClientSecret: s}
		}
		hc.PreregisteredClient = pre
	} else {
		// A public client: loom serve then needs no secret, only the
		// refresh token (PKCE protects the code).
		hc.DynamicClientRegistrationConfig = &auth.DynamicClientRegistrationConfig{Metadata: &oauthex.ClientRegistrationMetadata{
			ClientName:              "loom",
			RedirectURIs:            []string{redirect.String()},
			GrantTypes:              []string{"authorization_code", "refresh_token"},
			TokenEndpointAuthMethod: "none",
		}}
	}
	if lh.flow, err = auth.NewAuthorizationCodeHandler(hc); err != nil {
		return nil, err
	}
	lh.hc = hc
	s, err := client.NewServer(ctx, &mcp.ServerConfig{Label: srv.Label, URL: srv.URL, Headers: srv.Headers, Trusted: true, OAuth: lh,
		Timeouts: mcp.Timeouts{Connect: loginTimeout}})
	if err != nil {
		return nil, err
	}
	// Listing the tools proves the token works.
	if _, err := s.Tools(ctx); err != nil {
		return nil, err
	}
	if res.refreshToken == "" {
		return nil, errors.New("the authorization server issued no refresh token (it may not offer offline_access or the refresh_token grant to this client)")
	}
	res.issuer = lh.found.Issuer
	return &res, nil
}

// loginHandler runs loom serve's discovery before the go-sdk's
// authorization-code flow: the login then knows the issuer (to print it),
// refuses another authorization server than a pinned oauth.issuer, sends
// the code to the token endpoint loom serve will use, no other, and asks
// for the resource loom serve asks for (oauth.resource, else the
// metadata's; the go-sdk's flow knows only the metadata's).
type loginHandler struct {
	client *mcp.Client
	srv    *mcp.NamedServer
	hc     *auth.AuthorizationCodeHandlerConfig
	flow   *auth.AuthorizationCodeHandler
	found  *mcp.OAuthDiscovery // set by the first Authorize
}

func (l *loginHandler) TokenSource(ctx context.Context) (oauth2.TokenSource, error) {
	return l.flow.TokenSource(ctx)
}

func (l *loginHandler) Authorize(ctx context.Context, req *http.Request, resp *http.Response) error {
	if l.found == nil {
		found, err := l.client.DiscoverOAuth(ctx, l.srv.Label, req.URL.String(), resp.Header, l.srv.OAuth)
		if err != nil {
			resp.Body.Close()
			return err
		}
		l.found = found
		if l.hc.PreregisteredClient != nil {
			// The go-sdk's flow then refuses an authorization server
			// other than this one before it sends the client's secret.
			l.hc.PreregisteredClient.Issuer = found.Issuer
		}
	}
	return l.flow.Authorize(ctx, req, resp)
}

// httpClient is base with a transport that lets a token request (a form
// POST with a grant_type) go only to the discovered token endpoint.
func (l *loginHandler) httpClient(base *http.Client) *http.Client {
	c := *base
	next := c.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	c.Transport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/x-www-form-urlencoded" {
			return next.RoundTrip(r)
		}
		if l.found == nil || r.URL.String() != l.found.TokenEndpoint {
			return nil, fmt.Errorf("a token request to %s, not the discovered token endpoint", r.URL.Redacted())
		}
		if r.Body == nil || l.found.Resource == "" {
			return next.RoundTrip(r)
		}
		b, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
		r.Body.Close()
		if err != nil {
			return nil, err
		}
		form, err := url.ParseQuery(string(b))
		if err != nil {
			return nil, err
		}
		form.Set("resource", l.found.Resource)
		body := form.Encode()
		r = r.Clone(r.Context())
		r.Body, r.ContentLength = io.NopCloser(strings.NewReader(body)), int64(len(body))
		r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(body)), nil }
		return next.RoundTrip(r)
	})
	return &c
}

// withResource returns the authorization URL with loom serve's resource.
func (l *loginHandler) withResource(authURL string) (string, error) {
	u, err := url.Parse(authURL)
	if err != nil {
		return "", fmt.Errorf("the authorization URL: %w", err)
	}
	if l.found == nil || l.found.Resource == "" {
		return authURL, nil
	}
	q := u.Query()
	q.Set("resource", l.found.Resource)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// listenLoopback listens on the configured redirect's loopback address, or
// on a free port of 127.0.0.1 (RFC 8252: any port of a loopback redirect).
func listenLoopback(configured string) (net.Listener, *url.URL, error) {
	u := &url.URL{Scheme: "http", Host: "127.0.0.1:0", Path: "/callback"}
	if configured != "" {
		var err error
		if u, err = url.Parse(configured); err != nil || u.Scheme != "http" {
			return nil, nil, configErrorf("oauth.redirect_url must be an http URL on a loopback address, got %q", configured)
		}
		if ip := net.ParseIP(u.Hostname()); u.Hostname() != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return nil, nil, configErrorf("oauth.redirect_url must be on a loopback address, got %q", configured)
		}
	}
	ln, err := net.Listen("tcp", u.Host)
	if err != nil {
		return nil, nil, fmt.Errorf("listening for the redirect: %w", err)
	}
	if u.Port() == "0" || u.Port() == "" {
		u.Host = ln.Addr().String()
	}
	return ln, u, nil
}

type callbackResult struct {
	res *auth.AuthorizationResult
	err error
}

// expectedState is the state of the authorization request in progress:
// the callback takes only a redirect that carries it.
type expectedState struct {
	mu    sync.Mutex
	state string
}

func (e *expectedState) set(s string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.state = s
}

func (e *expectedState) matches(s string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.state != "" && subtle.ConstantTimeCompare([]byte(e.state), []byte(s)) == 1
}

// callbackHandler receives the authorization server's redirect: the code
// (or the error) goes to codes, once. A redirect without the expected
// state (anyone may send one to a loopback port) is answered 400 and
// ignored: it must not take the place of the real one.
func callbackHandler(redirect *url.URL, state *expectedState, codes chan<- callbackResult) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != redirect.Path {
			http.NotFound(w, r)
			return
		}
		q := r.URL.Query()
		if !state.matches(q.Get("state")) {
			http.Error(w, "loom: this redirect is not for the login in progress (its state does not match)", http.StatusBadRequest)
			return
		}
		if e := q.Get("error"); e != "" {
			e, desc := printable(e), printable(q.Get("error_description"))
			fmt.Fprintf(w, "loom: the authorization server refused: %s", html.EscapeString(e))
			select {
			case codes <- callbackResult{err: fmt.Errorf("the authorization server refused: %s %s", e, desc)}:
			default:
			}
			return
		}
		select {
		case codes <- callbackResult{res: &auth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}}:
			fmt.Fprint(w, "loom is logged in. You can close this tab.")
		default:
			http.Error(w, "loom: this login is already done", http.StatusConflict)
		}
	})
}

// printable drops control characters (say, terminal escapes) from what
// the authorization server's redirect says, before loom prints it.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return -1
		}
		return r
	}, s)
}
