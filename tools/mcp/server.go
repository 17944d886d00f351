package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"

	"github.com/loomgate/loom/tools"
)

// CleanupTool is the tool that vLLM's and gpt-oss's tool servers offer to
// drop a session's state. If a server offers it, Session.Cleanup calls it;
// it is not offered to the model unless AllowedTools names it.
const CleanupTool = "cleanup_session"

// Protocol versions loom speaks, newest first.
const (
	ProtocolStateless = "2026-07-28" // stateless, MRTR (SEP-2575, SEP-2322)
	protocolLegacy    = "2025-11-25" // the newest session-based version
)

// ServerConfig describes one MCP server as a request's mcp tool (or the
// operator's configuration) gives it.
type ServerConfig struct {
	// Label names the server (server_label); required.
	Label string
	// URL is the server's streamable HTTP endpoint (server_url); required.
	URL string
	// Headers are sent with every request to this server and no other.
	// Names are canonicalized; protocol-owned names (Mcp-*, Content-Type,
	// Accept, Host, ...) are refused with a *HeaderError.
	Headers map[string]string
	// Authorization is the tool's authorization field: an access token
	// sent as "Authorization: Bearer <token>".
	Authorization string
	// AllowedTools, if non-nil, limits the tools offered and callable.
	AllowedTools []string
	// Tenant is the tenant whose request uses the server: tool lists a
	// server marks cacheScope "private" are cached per tenant (and per
	// credentials).
	Tenant string
	// Trusted skips the SSRF policy: set it only for servers the operator
	// configured, never for a request-supplied URL.
	Trusted bool
	// Capabilities are the client capabilities advertised to the server:
	// only what the engine will answer.
	Capabilities Capabilities
	// Roots answer roots/list (MRTR, or a legacy server's in-session
	// request); none by default.
	Roots []Root
	// ElicitationHandler answers an elicitation/create that a session-based
	// server sends inside its session while a call is running (a stateless
	// server uses MRTR instead, and the engine answers between rounds). It
	// receives the request's params and returns an ElicitResult. Nil
	// declines every elicitation. It must not block past ctx.
	ElicitationHandler InputHandler
	// SamplingHandler answers a session-based server's in-session
	// sampling/createMessage with a CreateMessageResult. Nil refuses it.
	SamplingHandler InputHandler
	// Timeouts bound each operation; zero fields take defaults.
	Timeouts Timeouts
	// Logger overrides the Client's logger for this server.
	Logger *slog.Logger
	// OAuth, if set, authorizes this server's requests: the SDK's
	// transport asks it for a token before each request and calls its
	// Authorize on a 401 or 403, then retries once. Only for servers the
	// operator configured; its fetches should use Client.OAuthHTTPClient.
	OAuth auth.OAuthHandler
}

// LogValue keeps credentials out of logs if a ServerConfig is logged: only
// header names are shown, and whether an authorization is set.
func (c ServerConfig) LogValue() slog.Value {
	names := make([]string, 0, len(c.Headers))
	for n := range c.Headers {
		names = append(names, n)
	}
	slices.Sort(names)
	return slog.GroupValue(
		slog.String("label", c.Label),
		slog.String("url", c.URL),
		slog.Any("headers", names),
		slog.Bool("authorization", c.Authorization != ""),
	)
}

// Capabilities says which server-to-client requests loom answers for a
// server. Nothing is advertised by default.
type Capabilities struct {
	// Elicitation advertises form elicitation (elicitation/create).
	Elicitation bool
	// Sampling advertises sampling/createMessage.
	Sampling bool
	// Roots advertises roots/list.
	Roots bool
}

// Root is a root offered to a server (roots/list).
type Root struct {
	URI  string `json:"uri"`
	Name string `json:"name,omitempty"`
}

// InputHandler answers one server-to-client request: method
// elicitation/create, sampling/createMessage or roots/list, with its params
// and its result as raw JSON, the same shapes as in an MRTR round.
type InputHandler func(ctx context.Context, req tools.InputRequest) (json.RawMessage, error)

// Timeouts bound the operations on a server.
type Timeouts struct {
	// Connect bounds opening a session (server/discover, or initialize);
	// default 10s.
	Connect time.Duration
	// List bounds listing the tools, all pages; default 30s.
	List time.Duration
	// Call bounds one round of a tool call; default 2m.
	Call time.Duration
}

func (t Timeouts) withDefaults() Timeouts {
	if t.Connect <= 0 {
		t.Connect = 10 * time.Second
	}
	if t.List <= 0 {
		t.List = 30 * time.Second
	}
	if t.Call <= 0 {
		t.Call = 2 * time.Minute
	}
	return t
}

// Server is one MCP server, a tools.Server. Build one per request with
// Client.NewServer: it carries that request's credentials, and is cheap.
type Server struct {
	c        *Client
	label    string
	url      string
	trusted  bool
	creds    *credentials
	auth     authContext
	allowed  map[string]bool // nil: all
	roots    []Root
	timeouts Timeouts
	logger   *slog.Logger
	sdk      *mcpsdk.Client
	oauth    auth.OAuthHandler
	// peer are the server's attributes on the spans of its calls.
	peer []attribute.KeyValue

	// last is the list this Server last got (from the cache or the
	// server): Open's sessions consult it rather than list again.
	last atomic.Pointer[toolList]
}

var _ tools.Server = (*Server)(nil)

// NewServer validates cfg and returns its Server. It checks the URL
// against the Policy (resolving the host: ctx bounds that) unless cfg is
// Trusted, and the headers against the protocol's. The errors are a
// *PolicyError or a *HeaderError, both the request's fault (400), or a
// plain error for a missing label or URL.
func (c *Client) NewServer(ctx context.Context, cfg *ServerConfig) (*Server, error) {
	if cfg == nil || cfg.Label == "" {
		return nil, errors.New("mcp: server without a label")
	}
	if cfg.URL == "" {
		return nil, fmt.Errorf("mcp: server %q has no URL", cfg.Label)
	}
	var u *url.URL
	var err error
	if cfg.Trusted {
		u, err = parseHTTPURL(cfg.URL)
	} else {
		u, err = c.policy.CheckURL(ctx, cfg.URL)
	}
	if err != nil {
		return nil, err
	}
	creds, err := newCredentials(origin(u.Scheme, u.Host), cfg.Headers, cfg.Authorization)
	if err != nil {
		return nil, err
	}
	logger := cfg.Logger
	if logger == nil {
		logger = c.logger
	}
	s := &Server{
		c:        c,
		label:    cfg.Label,
		url:      cfg.URL,
		trusted:  cfg.Trusted,
		creds:    creds,
		auth:     creds.authContext(c.cache.hmacKey[:], cacheIdentity(cfg)),
		roots:    slices.Clone(cfg.Roots),
		timeouts: cfg.Timeouts.withDefaults(),
		logger:   logger.With("mcp_server", cfg.Label),
		oauth:    cfg.OAuth,
	}
	if c.tracing {
		s.peer = peerAttributes(u)
	}
	if cfg.AllowedTools != nil {
		s.allowed = make(map[string]bool, len(cfg.AllowedTools))
		for _, n := range cfg.AllowedTools {
			s.allowed[n] = true
		}
	}
	s.sdk = mcpsdk.NewClient(&mcpsdk.Implementation{Name: c.name, Version: c.ver}, s.sdkOptions(cfg))
	s.sdk.AddSendingMiddleware(s.traceCalls, traceMeta)
	if len(s.roots) > 0 {
		roots := make([]*mcpsdk.Root, len(s.roots))
		for i, r := range s.roots {
			roots[i] = &mcpsdk.Root{URI: r.URI, Name: r.Name}
		}
		s.sdk.AddRoots(roots...)
	}
	return s, nil
}

// cacheIdentity is who, besides the credentials, a private tool list is
// cached for: the tenant, and for a server with OAuth the server's own
// identity (its label's tokens), so that a list fetched with the
// operator's OAuth token is never served to a request-supplied server at
// the same URL without one.
func cacheIdentity(cfg *ServerConfig) string {
	if cfg.OAuth == nil {
		return cfg.Tenant
	}
	return cfg.Tenant + "\x00oauth\x00" + cfg.Label
}

// sdkOptions builds the SDK client options: capabilities set explicitly
// (a nil Capabilities would advertise roots), automatic MRTR off (the
// engine runs the rounds, with the model in the loop), and handlers only
// for what is advertised, since the SDK infers capabilities from handlers.
func (s *Server) sdkOptions(cfg *ServerConfig) *mcpsdk.ClientOptions {
	caps := &mcpsdk.ClientCapabilities{}
	opts := &mcpsdk.ClientOptions{
		Logger:         s.logger,
		Capabilities:   caps,
		MultiRoundTrip: &mcpsdk.MultiRoundTripOptions{Disabled: true},
	}
	if cfg.Capabilities.Roots {
		caps.RootsV2 = &mcpsdk.RootCapabilities{}
	}
	if cfg.Capabilities.Elicitation {
		caps.Elicitation = &mcpsdk.ElicitationCapabilities{Form: &mcpsdk.FormElicitationCapabilities{}}
		opts.ElicitationHandler = s.legacyElicit(cfg.ElicitationHandler)
	}
	if cfg.Capabilities.Sampling {
		caps.Sampling = &mcpsdk.SamplingCapabilities{}
		opts.CreateMessageHandler = s.legacySample(cfg.SamplingHandler)
	}
	return opts
}

// Name returns the server's label.
func (s *Server) Name() string { return s.label }

// URL returns the server's URL.
func (s *Server) URL() string { return s.url }

// Roots returns the roots/list result for this server (a ListRootsResult),
// for the engine to answer an MRTR roots/list request with.
func (s *Server) Roots() json.RawMessage {
	roots := s.roots
	if roots == nil {
		roots = []Root{}
	}
	b, _ := json.Marshal(struct {
		Roots []Root `json:"roots"`
	}{roots})
	return b
}

var _ tools.Server = (*Server)(nil)

// Capabilities implements tools.Server: the server's URL and roots; a
// request's server (Provider.Servers) declares its policies too.
func (s *Server) Capabilities() tools.Capabilities {
	return tools.Capabilities{Kind: tools.KindMCP, URL: s.url, Roots: s.Roots()}
}

// Tools lists the server's tools: from the Cache when fresh, else from the
// server (concurrent misses list once). AllowedTools filters the list, and
// cleanup_session is held back unless allowed by name.
func (s *Server) Tools(ctx context.Context) ([]tools.Definition, error) {
	list, err := s.toolList(ctx)
	if err != nil {
		return nil, err
	}
	return s.offered(list), nil
}

func (s *Server) offered(list *toolList) []tools.Definition {
	_, hasCleanup := list.byName[CleanupTool]
	if s.allowed == nil && !hasCleanup {
		return list.defs // shared and immutable: the caller only reads it
	}
	out := make([]tools.Definition, 0, len(list.defs))
	for _, d := range list.defs {
		if s.allowed != nil && !s.allowed[d.Name] || s.allowed == nil && d.Name == CleanupTool {
			continue
		}
		out = append(out, d)
	}
	return out
}

func (s *Server) toolList(ctx context.Context) (*toolList, error) {
	if l, ok := s.c.cache.get(s.url, s.auth); ok {
		s.last.Store(l)
		return l, nil
	}
	l, err := s.c.cache.do(ctx, s.url, s.auth, func() (*toolList, error) {
		cs, err := s.connect(ctx)
		if err != nil {
			return nil, err
		}
		defer cs.Close()
		l, ttl, scope, err := s.listAll(ctx, cs)
		if err != nil {
			return nil, err
		}
		s.c.cache.put(s.url, s.auth, l, ttl, scope)
		return l, nil
	})
	if err != nil {
		return nil, err
	}
	s.last.Store(l)
	return l, nil
}

// maxPages bounds a paginated tools/list: a server that keeps returning a
// cursor cannot keep loom listing.
const maxPages = 64

// listAll lists every page on cs. The cache hints are the most
// conservative of the pages': the shortest ttlMs, private if any page is.
func (s *Server) listAll(ctx context.Context, cs *mcpsdk.ClientSession) (*toolList, time.Duration, string, error) {
	ctx, cancel := context.WithTimeout(s.requestContext(ctx), s.timeouts.List)
	defer cancel()
	l := &toolList{byName: make(map[string]toolInfo), legacy: isLegacy(cs)}
	var ttl time.Duration = -1
	scope := "public"
	params := &mcpsdk.ListToolsParams{}
	for page := 0; ; page++ {
		if page == maxPages {
			return nil, 0, "", fmt.Errorf("mcp: server %q: tools/list has more than %d pages", s.label, maxPages)
		}
		res, err := cs.ListTools(ctx, params)
		if err != nil {
			return nil, 0, "", s.wrap("listing tools", err)
		}
		if t := time.Duration(res.TTLMs) * time.Millisecond; ttl < 0 || t < ttl {
			ttl = t
		}
		if res.CacheScope == "private" {
			scope = "private"
		}
		for _, t := range res.Tools {
			d, headers := definition(t)
			if _, dup := l.byName[d.Name]; dup {
				continue
			}
			l.byName[d.Name] = toolInfo{index: len(l.defs), paramsHeaders: headers}
			l.defs = append(l.defs, d)
		}
		if res.NextCursor == "" {
			break
		}
		params = &mcpsdk.ListToolsParams{Cursor: res.NextCursor}
	}
	return l, max(ttl, 0), scope, nil
}

// definition converts an MCP tool. The SDK decodes schemas into maps, so
// they are re-encoded with sorted keys: not the server's order, but the
// same bytes for the same schema, which is what prompt caches need.
func definition(t *mcpsdk.Tool) (tools.Definition, bool) {
	d := tools.Definition{Name: t.Name, Description: t.Description}
	mcp := tools.MCPDetails{Title: t.Title}
	if t.InputSchema != nil {
		d.Parameters, _ = json.Marshal(t.InputSchema)
	}
	if len(d.Parameters) == 0 || string(d.Parameters) == "null" {
		d.Parameters = json.RawMessage(`{"type":"object","properties":{}}`)
	}
	if t.OutputSchema != nil {
		mcp.OutputSchema, _ = json.Marshal(t.OutputSchema)
	}
	if t.Annotations != nil {
		mcp.Annotations, _ = json.Marshal(t.Annotations)
		if mcp.Title == "" {
			mcp.Title = t.Annotations.Title
		}
	}
	if mcp.Title != "" || mcp.OutputSchema != nil || mcp.Annotations != nil {
		d.MCP = &mcp
	}
	return d, bytes.Contains(d.Parameters, []byte(`"x-mcp-header"`))
}

// Open opens a session for one response: server/discover for a stateless
// server, initialize for a session-based one. The session holds the
// request's credentials; close it with Session.Close.
func (s *Server) Open(ctx context.Context) (tools.Session, error) {
	cs, err := s.connect(ctx)
	if err != nil {
		return nil, err
	}
	return newSession(s, cs), nil
}

// connect opens an SDK session. Stateless 2026-07-28 first; the SDK falls
// back to initialize (2025-11-25) when server/discover fails with anything
// but a modern error. A URL known to be legacy skips the probe.
func (s *Server) connect(ctx context.Context) (*mcpsdk.ClientSession, error) {
	ctx = s.requestContext(ctx)
	cctx, cancel := context.WithTimeout(ctx, s.timeouts.Connect)
	defer cancel()
	var opts *mcpsdk.ClientSessionOptions
	legacy := s.c.knownLegacy(s.url)
	if legacy {
		opts = &mcpsdk.ClientSessionOptions{ProtocolVersion: protocolLegacy}
	}
	t := &mcpsdk.StreamableClientTransport{
		Endpoint:   s.url,
		HTTPClient: s.c.http,
		MaxRetries: 2,
		// loom needs no server-initiated stream: a legacy server's
		// requests during a call come on that call's response stream.
		DisableStandaloneSSE: true,
		OAuthHandler:         s.oauth,
	}
	cs, err := s.sdk.Connect(cctx, t, opts)
	if err != nil {
		return nil, s.wrap("connecting", err)
	}
	if l := isLegacy(cs); l != legacy {
		s.c.rememberEra(s.url, l)
	}
	return cs, nil
}

// requestContext carries what the transport needs to know per request:
// the credentials, and whether the policy applies.
func (s *Server) requestContext(ctx context.Context) context.Context {
	ctx = withCredentials(ctx, s.creds)
	if s.oauth == nil {
		ctx = withoutOAuth(ctx)
	}
	if s.trusted {
		ctx = withTrusted(ctx)
	}
	return ctx
}

func isLegacy(cs *mcpsdk.ClientSession) bool {
	r := cs.InitializeResult()
	return r == nil || r.ProtocolVersion < ProtocolStateless
}

// ServerError is a failure to talk to a server (connect, list, call): the
// server's label, what was being done, and why. Err may be a
// *PolicyError (a refused address, found at dial time), a context error,
// or the SDK's transport error. Its text names the server, never a
// credential.
type ServerError struct {
	Server string
	Op     string
	Err    error
}

func (e *ServerError) Error() string {
	return fmt.Sprintf("mcp: server %q: %s: %v", e.Server, e.Op, e.Err)
}

func (e *ServerError) Unwrap() error { return e.Err }

func (s *Server) wrap(op string, err error) error {
	// An OAuth challenge or a failed OAuth step says it all: the SDK's
	// wrapping around it (the request, the URL) would only bury it.
	var ce *AuthChallengeError
	var oe *OAuthError
	switch {
	case errors.As(err, &ce):
		err = ce
	case errors.As(err, &oe):
		err = oe
	}
	return &ServerError{Server: s.label, Op: op, Err: err}
}

func parseHTTPURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return nil, &PolicyError{URL: raw, Reason: "url", Err: errors.New("it is not an absolute URL")}
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, &PolicyError{URL: raw, Reason: "scheme"}
	}
	return u, nil
}
