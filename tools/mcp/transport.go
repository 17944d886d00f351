package mcp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/loomgate/loom/internal/httpretry"
)

// RetryOptions bounds the retries of one HTTP request to an MCP server.
type RetryOptions struct {
	// Max is the number of retries after the first attempt; 0 means 2, a
	// negative value disables retries.
	Max int
	// WaitMin and WaitMax bound the backoff between attempts (defaults
	// 100ms and 2s). A server's Retry-After is honoured up to WaitMax.
	WaitMin, WaitMax time.Duration
}

// newHTTPClient builds the one http.Client every server of a Client
// shares: credentials from the context (authTransport), then retries
// (internal/httpretry, loom's one retry rule), then base, whose dialer
// enforces the Policy. A request whose retries run out leaves the pool's
// other idle connections alone, so one failing server does not make the
// requests to every other one dial again.
//
// The client has no overall Timeout: a tools/call answered as an SSE
// stream lasts as long as the tool runs. Every request is bounded by its
// context instead (the per-call timeouts of ServerConfig).
func newHTTPClient(base http.RoundTripper, retry RetryOptions) *http.Client {
	rt := base
	if retry.Max >= 0 {
		if retry.Max == 0 {
			retry.Max = 2
		}
		if retry.WaitMin <= 0 {
			retry.WaitMin = 100 * time.Millisecond
		}
		if retry.WaitMax <= 0 {
			retry.WaitMax = 2 * time.Second
		}
		// A tools/call is not idempotent: only what cannot have been
		// processed by the server is retried (a connection that never
		// opened, 429 and 503), never a reset mid-response, a 500 or a
		// timeout. The last response (a 429 or 503) goes to the SDK as
		// is, so it reports the server's status. No retry notice: loom
		// logs what it needs itself, never a URL.
		rt = httpretry.NewTransport(base, httpretry.Policy{
			Retries: retry.Max, WaitMin: retry.WaitMin, WaitMax: retry.WaitMax,
			Final: refusedByPolicy,
		})
	}
	return &http.Client{
		Transport:     &authTransport{next: rt},
		CheckRedirect: sameOriginRedirects,
	}
}

// newOAuthHTTPClient builds the client for OAuth endpoints: the same
// retries, no credentials attached (authTransport is left out), and a
// context stripped of the trusted mark, so the Policy judges every dial even
// when the flow started from an operator's server.
func newOAuthHTTPClient(base http.RoundTripper, retry RetryOptions) *http.Client {
	c := newHTTPClient(base, retry)
	c.Transport = untrustedTransport{next: c.Transport.(*authTransport).next}
	return c
}

type untrustedTransport struct{ next http.RoundTripper }

func (t untrustedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if trustedFrom(req.Context()) {
		req = req.WithContext(context.WithValue(req.Context(), trustedKey{}, false))
	}
	return t.next.RoundTrip(req)
}

// refusedByPolicy: a URL or address refused by loom's Policy; asking again
// changes nothing.
func refusedByPolicy(err error) bool {
	var pe *PolicyError
	return errors.As(err, &pe)
}

// sameOriginRedirects follows a few redirects within the server's origin
// (some servers redirect /mcp to /mcp/) and refuses any other: a redirect
// elsewhere is a way around the policy and the credentials' binding.
func sameOriginRedirects(req *http.Request, via []*http.Request) error {
	if len(via) >= 3 {
		return errors.New("mcp: too many redirects")
	}
	if origin(req.URL.Scheme, req.URL.Host) != origin(via[0].URL.Scheme, via[0].URL.Host) {
		return fmt.Errorf("mcp: refusing a redirect to another origin (%s)", req.URL.Host)
	}
	return nil
}

// newBaseTransport is the default base transport: pooled connections,
// dialed through the policy, no proxy from the environment (a proxy would
// make the dialed address the proxy's, and the policy moot).
func newBaseTransport(p *Policy) *http.Transport {
	return &http.Transport{
		Proxy:                 nil,
		DialContext:           p.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   32,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
}
