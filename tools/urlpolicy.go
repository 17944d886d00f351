package tools

import (
	"context"
	"errors"
	"net"
	"net/url"
	"strings"
)

// URLPolicy decides which URLs loom may fetch on a request's or a model's
// behalf, so that a URL it was given cannot make it a proxy into its own
// network (SSRF). tools/mcp's Policy, which checks MCP server URLs,
// implements it; the engine fetches image URLs through one and the web
// search tool opens pages through one.
type URLPolicy interface {
	// CheckURL refuses a URL before anything is sent.
	CheckURL(ctx context.Context, raw string) (*url.URL, error)
	// DialContext refuses the very address dialed (DNS rebinding, and a
	// redirect to a host the first check did not see).
	DialContext(ctx context.Context, network, address string) (net.Conn, error)
}

// Refusal is a policy's refusal, or a fetch that failed through one, in
// words for a client or a model: the policy's own words, without the
// transport's wrapping or the package prefix tools/mcp writes for logs.
func Refusal(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	msg := err.Error()
	if i := strings.Index(msg, "mcp: "); i >= 0 {
		msg = msg[i+len("mcp: "):]
	}
	return msg
}
