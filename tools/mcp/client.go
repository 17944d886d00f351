package mcp

import (
	"log/slog"
	"net/http"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/loomgate/loom/telemetry"
)

// ClientOptions configures a Client. Nil means defaults.
type ClientOptions struct {
	// Policy is the SSRF policy for request-supplied server URLs; nil
	// means NewPolicy(nil): no allowlist, every private address refused.
	Policy *Policy
	// Cache is the tool-list cache; nil means NewCache(nil).
	Cache *Cache
	// Transport is the base HTTP transport. Nil means a pooled transport
	// that dials through Policy.DialContext. A custom transport must dial
	// through the policy itself, or the dial-time check is lost.
	Transport http.RoundTripper
	// Retry bounds the retries of each HTTP request.
	Retry RetryOptions
	// IdleTimeout bounds the silence while a server's answer is read
	// (between two reads of the body, an SSE stream's included): past it
	// the call fails with ErrIdleTimeout. Default 60s; the per-call
	// timeouts of ServerConfig still bound the whole call.
	IdleTimeout time.Duration
	// Logger receives loom's own MCP logs and the SDK's; nil discards.
	// Nothing logged carries a credential.
	Logger *slog.Logger
	// Name and Version identify loom to servers (clientInfo); defaults
	// "loom" and "dev".
	Name, Version string
	// TracerProvider records a client span per JSON-RPC call to a server
	// (traceCalls); nil records none (the trace context still reaches
	// the servers).
	TracerProvider trace.TracerProvider
	// EraTTL is how long loom remembers that a server URL only speaks the
	// session-based protocol, so later connections skip the
	// server/discover probe (the spec's "remember era per origin");
	// default 10 minutes.
	EraTTL time.Duration
}

// Client is what every MCP server loom talks to shares: one HTTP client
// (one connection pool) whose dialer enforces the Policy, the tool-list
// Cache, and what loom learned about servers' protocol eras. It is built
// once, at startup; Servers are cheap and built per request, from the
// request's (or the operator's) description of a server. A Client is safe
// for concurrent use.
type Client struct {
	policy *Policy
	cache  *Cache
	http   *http.Client
	// oauthHTTP fetches OAuth metadata and tokens: its own pool, always
	// dialed through the Policy, never carrying a server's credentials.
	oauthHTTP *http.Client
	logger    *slog.Logger
	name      string
	ver       string
	eraTTL    time.Duration
	// tracer records the calls' spans when tracing is set.
	tracer  trace.Tracer
	tracing bool

	eras sync.Map // server URL -> time.Time until which it is known legacy
}

// NewClient returns a Client.
func NewClient(opts *ClientOptions) *Client {
	var o ClientOptions
	if opts != nil {
		o = *opts
	}
	c := &Client{policy: o.Policy, cache: o.Cache, logger: o.Logger, name: o.Name, ver: o.Version, eraTTL: o.EraTTL,
		tracer: telemetry.Tracer(o.TracerProvider, "github.com/loomgate/loom/tools/mcp"), tracing: o.TracerProvider != nil}
	if c.policy == nil {
		c.policy, _ = NewPolicy(nil) // an empty allowlist cannot fail to parse
	}
	if c.cache == nil {
		c.cache = NewCache(nil)
	}
	if c.logger == nil {
		c.logger = slog.New(slog.DiscardHandler)
	}
	if c.name == "" {
		c.name = "loom"
	}
	if c.ver == "" {
		c.ver = "dev"
	}
	if c.eraTTL <= 0 {
		c.eraTTL = 10 * time.Minute
	}
	base := o.Transport
	oauthBase := o.Transport
	if base == nil {
		base = newBaseTransport(c.policy)
		oauthBase = newBaseTransport(c.policy)
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 60 * time.Second
	}
	base = &idleTransport{next: base, timeout: o.IdleTimeout, log: c.logger}
	c.http = newHTTPClient(base, o.Retry)
	c.oauthHTTP = newOAuthHTTPClient(oauthBase, o.Retry)
	return c
}

// Policy returns the client's SSRF policy.
func (c *Client) Policy() *Policy { return c.policy }

// OAuthHTTPClient returns the HTTP client for OAuth endpoints (protected
// resource and authorization server metadata, registration, tokens): every
// address it dials is checked by the Policy, even for a server the operator
// configured, since those endpoints come from metadata a server serves.
func (c *Client) OAuthHTTPClient() *http.Client { return c.oauthHTTP }

// Cache returns the client's tool-list cache.
func (c *Client) Cache() *Cache { return c.cache }

func (c *Client) knownLegacy(url string) bool {
	v, ok := c.eras.Load(url)
	if !ok {
		return false
	}
	if time.Now().After(v.(time.Time)) {
		c.eras.CompareAndDelete(url, v)
		return false
	}
	return true
}

func (c *Client) rememberEra(url string, legacy bool) {
	if legacy {
		c.eras.Store(url, time.Now().Add(c.eraTTL))
	} else {
		c.eras.Delete(url)
	}
}
