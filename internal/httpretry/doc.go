// Package httpretry is loom's one rule for sending an HTTP request again:
// which failures are retried, how long to wait between attempts, and the
// loop that does it. The upstream client of the model backends
// (Policy.Do over its pooled http.Client) and the MCP client (Transport,
// an http.RoundTripper, since the go-sdk takes an *http.Client) both use
// it, each with its own Policy: retry count, waits, retry notice, and
// whether the request may reach the server twice.
//
// A request is retried only before its response is handed on, so never
// once a byte of a response body was read, and only if its body can be
// sent again (no body, or GetBody set, as http.NewRequest does for byte
// bodies).
//
// The policy keeps go-retryablehttp's contracts (CheckRetry, Backoff) and
// uses its DefaultBackoff (exponential, Retry-After honoured), capped at
// the policy's WaitMax. go-retryablehttp's own Client is not used: on
// every request it gives up on (retries run out, a connection error, a
// cancelled wait) it closes all idle connections of the pool it sends
// through, which is shared by every request to the engine, or to every
// MCP server, and makes them dial again.
package httpretry
