package model

import (
	"log/slog"
	"net/http"
	"time"
)

// Defaults used when an HTTPOptions field is left zero.
const (
	DefaultRetries          = 2
	DefaultRetryWaitMin     = 100 * time.Millisecond
	DefaultRetryWaitMax     = 1 * time.Second
	DefaultConnectTimeout   = 10 * time.Second
	DefaultFirstByteTimeout = 120 * time.Second
	DefaultIdleTimeout      = 60 * time.Second
	DefaultWholeTimeout     = 10 * time.Minute
	// The default client's connection buffers, held for as long as a
	// stream is open. The write buffer holds only the request, then sits
	// idle for the whole stream (a larger body is written past it,
	// straight to the connection). The SSE reader reads through the read
	// buffer: 1 KB holds a few chunks, and each open stream keeps 3 KB
	// less than with net/http's 4 KB.
	DefaultReadBufferSize  = 1 << 10
	DefaultWriteBufferSize = 1 << 10
)

// HTTPOptions configures how a backend talks to its upstream engine. Both
// backends embed it in their Options, and their shared upstream client
// reads it, so each knob is named, documented and defaulted once. The zero
// value of every field means its default.
type HTTPOptions struct {
	// HTTPClient sends the requests. Its Timeout must be zero (a whole-
	// request timeout would cut long streams); ConnectTimeout does not
	// apply to it. Default: a pooled client with ConnectTimeout.
	HTTPClient *http.Client
	// Transport, when set and HTTPClient is not, sends each request
	// straight to its RoundTrip: no redirects are followed and no cookies
	// kept, as an engine's URL is configured, not discovered (a 3xx is
	// the upstream's invalid response). Credentials in the URL's userinfo
	// are sent as basic auth when there is no API key, as http.Client
	// does. Without both, a pooled net/http Transport tuned for one
	// engine (ConnectTimeout, kept connections, a cap on response
	// headers) is used this way.
	Transport http.RoundTripper
	// Logger receives retry notices. Default: slog.Default().
	Logger *slog.Logger
	// Retries is how many times a request is retried after a connection
	// error, a 429 or a 5xx, before any of the response body was read.
	// Zero means DefaultRetries; a negative value disables retries.
	Retries int
	// RetryWaitMin and RetryWaitMax bound the exponential backoff between
	// retries (a Retry-After header is honoured up to RetryWaitMax).
	RetryWaitMin time.Duration
	RetryWaitMax time.Duration
	// ConnectTimeout bounds dialing the upstream (default client only).
	ConnectTimeout time.Duration
	// FirstByteTimeout bounds the time from sending the request, retries
	// included, to the first byte of the response body. Prefill of a long
	// prompt on a busy engine happens inside it, so it is generous.
	FirstByteTimeout time.Duration
	// IdleTimeout bounds the silence between two reads of the response
	// body once it started: an engine that stalls mid-stream fails the
	// turn with a 504 whose code is upstream_idle_timeout instead of
	// holding the response.
	IdleTimeout time.Duration
	// WholeTimeout bounds the wait for a non-streamed answer (a Request
	// with Whole set: a client that asked for no stream), from sending
	// the request to its first byte. The engine sends nothing before the
	// answer is complete, so it bounds the whole generation; past it the
	// turn fails with a 504. It bounds chat's tokenize call too.
	WholeTimeout time.Duration

	// SessionHeader names the request header that carries a turn's
	// session key (Route.Session) upstream, for a router in front of the
	// engines (default DefaultSessionHeader; SGLang's gateway reads
	// X-SMG-Routing-Key).
	SessionHeader string
	// CacheSalt, when set, is a secret from which each tenant gets a
	// cache_salt of its own (HMAC-SHA256 of the tenant under it, in hex),
	// sent in every request body: vLLM shares a cached prefix only
	// between requests of the same salt, so no tenant's cache serves
	// another's (prefix-cache timing is a side channel). Never logged.
	CacheSalt string
	// ProbeInterval is the first wait before an engine taken out (it
	// refused a connection or answered 5xx) is probed with GET
	// <base>/models; the wait doubles after each failed probe, up to
	// MaxProbeInterval. Default DefaultProbeInterval.
	ProbeInterval time.Duration
	// Observer, when set, is told each engine's requests, in-flight
	// count, health and tokens (the Prometheus metrics).
	Observer EngineObserver
}
