package httpretry

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/hashicorp/go-retryablehttp"
)

// Policy is one caller's retry settings. The zero Policy sends once.
type Policy struct {
	// Retries is the number of attempts after the first; zero or less
	// means none.
	Retries int
	// WaitMin and WaitMax bound the exponential backoff between attempts;
	// a server's Retry-After is honoured up to WaitMax.
	WaitMin, WaitMax time.Duration
	// Idempotent says the server may receive the request twice, so a
	// failure after it may have been sent (a reset, a stale keep-alive
	// connection, a 500) is retried too: any transport error, 429 and
	// every 5xx except 501, which will not change. Otherwise only what
	// the server cannot have acted on is retried: a connection that never
	// opened (a dial error, a temporary DNS failure), 429 and 503.
	Idempotent bool
	// Final, if set, reports errors that asking again cannot change (a
	// refusal of loom's own making, say); they are never retried.
	Final func(error) bool
	// Logger, if set, gets Notice at warn before every retry, with the
	// attempt number. The notice must not carry the URL (its query may hold
	// a key) or any credential.
	Logger *slog.Logger
	Notice string
}

// The policy keeps go-retryablehttp's contracts.
var (
	_ retryablehttp.CheckRetry = (*Policy)(nil).shouldRetry
	_ retryablehttp.Backoff    = cappedBackoff
)

// shouldRetry says whether an attempt that ended with resp or err is
// tried again; its error is the context's when the request was cancelled.
func (p *Policy) shouldRetry(ctx context.Context, resp *http.Response, err error) (bool, error) {
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	if err != nil {
		if p.Final != nil && p.Final(err) {
			return false, nil
		}
		// Every transport error here came before a response was handed
		// on (dial, TLS, reset, EOF on a stale keep-alive connection).
		return p.Idempotent || neverConnected(err), nil
	}
	switch code := resp.StatusCode; {
	case code == http.StatusTooManyRequests, code == http.StatusServiceUnavailable:
		return true, nil
	default:
		return p.Idempotent && code >= 500 && code != http.StatusNotImplemented, nil
	}
}

// neverConnected reports a failure to open a connection: the request
// cannot have reached the server.
func neverConnected(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var dns *net.DNSError
	return errors.As(err, &dns) && (dns.IsTemporary || dns.IsTimeout)
}

// cappedBackoff is retryablehttp's exponential backoff, except that a
// Retry-After header never makes us wait longer than maxWait: the caller is
// waiting, and a long Retry-After is better reported as the 429 or 503
// it came with.
func cappedBackoff(minWait, maxWait time.Duration, attempt int, resp *http.Response) time.Duration {
	return min(retryablehttp.DefaultBackoff(minWait, maxWait, attempt, resp), maxWait)
}
