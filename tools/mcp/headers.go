package mcp

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"go.opentelemetry.io/otel/trace"
	"golang.org/x/net/http/httpguts"

	"github.com/loomgate/loom/telemetry"
)

// HeaderError reports a header a request may not send to an MCP server.
// The engine maps it to a 400 (param "tools[i].headers" or
// "tools[i].authorization"): the request is refused rather than the header
// silently dropped, so a client never believes a header was sent when it
// was not.
type HeaderError struct {
	// Name is the header's canonical name.
	Name string
	// Reason says why, in words fit for the client.
	Reason string
}

func (e *HeaderError) Error() string {
	return fmt.Sprintf("mcp: header %q: %s", e.Name, e.Reason)
}

// protocolHeaders are owned by the MCP transport or by HTTP itself. A
// client-supplied header never replaces them: a vLLM bug let a client's
// header override its session header. Names are canonical. Anything with
// the Mcp- prefix is protocol-owned too (Mcp-Session-Id, Mcp-Method,
// Mcp-Name, Mcp-Param-*, and MCP-Protocol-Version, whose canonical form is
// Mcp-Protocol-Version).
var protocolHeaders = map[string]bool{
	"Accept":              true,
	"Accept-Encoding":     true,
	"Connection":          true,
	"Content-Encoding":    true,
	"Content-Length":      true,
	"Content-Type":        true,
	"Expect":              true,
	"Host":                true,
	"Keep-Alive":          true,
	"Last-Event-Id":       true,
	"Proxy-Authorization": true,
	"Proxy-Connection":    true,
	"Te":                  true,
	"Trailer":             true,
	"Transfer-Encoding":   true,
	"Upgrade":             true,
}

// credentials are what one server's requests carry on loom's behalf: the
// tool's authorization and headers, validated and canonicalized. They are
// bound to the server's origin and attached by authTransport, so they reach
// that server only.
type credentials struct {
	origin string // scheme://host[:port] of the server URL
	header http.Header
}

// newCredentials validates and canonicalizes a request's headers and
// authorization. authorization is the bare token of the tool's
// authorization field; it becomes "Authorization: Bearer <token>".
func newCredentials(origin string, headers map[string]string, authorization string) (*credentials, error) {
	h := make(http.Header, len(headers)+1)
	for name, value := range headers {
		if !httpguts.ValidHeaderFieldName(name) {
			return nil, &HeaderError{Name: name, Reason: "not a valid header name"}
		}
		canon := http.CanonicalHeaderKey(name)
		if protocolHeaders[canon] || strings.HasPrefix(canon, "Mcp-") || strings.HasPrefix(canon, "Sec-") {
			return nil, &HeaderError{Name: canon, Reason: "owned by the MCP protocol or HTTP; it cannot be set"}
		}
		if !validHeaderValue(value) {
			return nil, &HeaderError{Name: canon, Reason: "value contains characters not allowed in a header"}
		}
		if _, dup := h[canon]; dup {
			return nil, &HeaderError{Name: canon, Reason: "given twice (header names are case-insensitive)"}
		}
		h[canon] = []string{value}
	}
	if authorization != "" {
		if _, dup := h["Authorization"]; dup {
			return nil, &HeaderError{Name: "Authorization", Reason: "given both in headers and in authorization"}
		}
		token := strings.TrimSpace(authorization)
		if !validHeaderValue(token) || token == "" {
			return nil, &HeaderError{Name: "Authorization", Reason: "the authorization token contains characters not allowed in a header"}
		}
		// The field is an OAuth access token; accept one already prefixed.
		if len(token) < 7 || !strings.EqualFold(token[:7], "bearer ") {
			token = "Bearer " + token
		}
		h["Authorization"] = []string{token}
	}
	return &credentials{origin: origin, header: h}, nil
}

// authContext is a keyed hash of the tenant and the credentials: what the
// tool-list cache keys private lists by, so that a list one tenant's
// request fetched is never served to another tenant, even with the same
// (or no) credentials. The key is random per cache, so the hash reveals
// nothing about a secret even to someone reading memory or keys; the
// secret itself is never a key.
type authContext [sha256.Size]byte

func (c *credentials) authContext(key []byte, tenant string) authContext {
	var out authContext
	if (c == nil || len(c.header) == 0) && tenant == "" {
		return out // the anonymous context
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(tenant))
	mac.Write([]byte{0})
	if c == nil {
		mac.Sum(out[:0])
		return out
	}
	names := make([]string, 0, len(c.header))
	for n := range c.header {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		mac.Write([]byte(n))
		mac.Write([]byte{0})
		for _, v := range c.header[n] {
			mac.Write([]byte(v))
			mac.Write([]byte{0})
		}
		mac.Write([]byte{1})
	}
	mac.Sum(out[:0])
	return out
}

type credentialsKey struct{}

func withCredentials(ctx context.Context, c *credentials) context.Context {
	if c == nil || len(c.header) == 0 {
		return ctx
	}
	return context.WithValue(ctx, credentialsKey{}, c)
}

// authTransport adds the credentials found in a request's context to that
// request, if and only if it goes to the origin they were given for. The
// go-sdk has no per-request header hook, and one http.Client (one
// connection pool) serves every server and every request, so the
// credentials travel in the context: the SDK keeps context values on every
// request of a session, including the DELETE that ends it.
//
// It never replaces a header already on the request: those are the SDK's
// (Content-Type, Accept, Mcp-*), and newCredentials refused any name that
// could collide with them in the first place.
type authTransport struct {
	next http.RoundTripper
}

func (t *authTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.roundTrip(req)
	if err == nil {
		c, _ := req.Context().Value(credentialsKey{}).(*credentials)
		sent := req.Header.Get("Authorization") != "" ||
			c != nil && origin(req.URL.Scheme, req.URL.Host) == c.origin && c.header.Get("Authorization") != ""
		if cerr := challenged(req, resp, sent); cerr != nil {
			return nil, cerr
		}
	}
	return resp, err
}

func (t *authTransport) roundTrip(req *http.Request) (*http.Response, error) {
	c, _ := req.Context().Value(credentialsKey{}).(*credentials)
	traced := trace.SpanContextFromContext(req.Context()).IsValid()
	if !traced && (c == nil || origin(req.URL.Scheme, req.URL.Host) != c.origin) {
		return t.next.RoundTrip(req)
	}
	// RoundTrip must not modify the caller's request.
	r := req.Clone(req.Context())
	// The request's trace goes to every MCP server; loom's traceparent
	// wins over one a client put in the tool's headers.
	telemetry.Inject(r.Context(), r.Header)
	if c == nil || origin(req.URL.Scheme, req.URL.Host) != c.origin {
		return t.next.RoundTrip(r)
	}
	for name, values := range c.header {
		if _, set := r.Header[name]; !set {
			r.Header[name] = values
		}
	}
	return t.next.RoundTrip(r)
}

func origin(scheme, host string) string {
	scheme = strings.ToLower(scheme)
	host = strings.ToLower(host)
	switch {
	case scheme == "http" && strings.HasSuffix(host, ":80"):
		host = strings.TrimSuffix(host, ":80")
	case scheme == "https" && strings.HasSuffix(host, ":443"):
		host = strings.TrimSuffix(host, ":443")
	}
	return scheme + "://" + host
}

// validHeaderValue reports whether v can be sent as a header value: no
// control characters (CR and LF would split the header), tabs allowed.
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}
