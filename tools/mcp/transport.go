package mcp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/hashicorp/go-retryablehttp"
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
// (go-retryablehttp), then base, whose dialer enforces the Policy.
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
		rc := &retryablehttp.Client{
			// The inner client must not follow redirects: the outer one
			// does, through authTransport, which decides per hop whether
			// credentials go along.
			HTTPClient: &http.Client{Transport: base, CheckRedirect: func(*http.Request, []*http.Request) error {
				return http.ErrUseLastResponse
			}},
			Logger:       nil, // it would log URLs; loom logs what it needs itself
			RetryWaitMin: retry.WaitMin,
			RetryWaitMax: retry.WaitMax,
			RetryMax:     retry.Max,
			CheckRetry:   retryPolicy,
			Backoff: func(lo, hi time.Duration, attempt int, resp *http.Response) time.Duration {
				return min(retryablehttp.DefaultBackoff(lo, hi, attempt, resp), hi)
			},
			// Hand the last response (a 429 or 503) to the SDK as is, so it
			// reports the server's status rather than a bare "giving up".
			ErrorHandler: retryablehttp.PassthroughErrorHandler,
		}
		rt = &retryablehttp.RoundTripper{Client: rc}
	}
	return &http.Client{
		Transport:     &authTransport{next: rt},
		CheckRedirect: sameOriginRedirects,
	}
}

// retryPolicy retries only what cannot have been processed by the server:
// a connection that never opened, 429 and 503. A tools/call is not
// idempotent, so a failure after the request may have reached the server
// (a reset mid-response, a 500, a timeout) is never retried.
func retryPolicy(ctx context.Context, resp *http.Response, err error) (bool, error) {
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	if err != nil {
		return isConnectFailure(err), nil
	}
	return resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable, nil
}

func isConnectFailure(err error) bool {
	var pe *PolicyError
	if errors.As(err, &pe) {
		return false // refused by loom; asking again changes nothing
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var dns *net.DNSError
	return errors.As(err, &dns) && (dns.IsTemporary || dns.IsTimeout)
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
