package mcp

import (
	"errors"
	"io"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"
)

// ErrIdleTimeout is the error of a read from an MCP server's response
// that sent nothing for the idle timeout: a server that stopped sending
// in the middle of an answer (an SSE stream that went silent) fails the
// call instead of holding it until the call timeout.
var ErrIdleTimeout = errors.New("mcp: the server sent nothing within the idle timeout")

// idleTransport bounds the silence while the answer to a POST (every
// JSON-RPC request) is read: each read that yields data re-arms a timer,
// and when the timer fires the body is closed, which ends the read in
// progress.
type idleTransport struct {
	next    http.RoundTripper
	timeout time.Duration
	log     *slog.Logger
}

func (t *idleTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodPost {
		// Only answers to requests: a legacy session's standalone GET
		// stream of server messages may rightly stay silent for long.
		return t.next.RoundTrip(req)
	}
	resp, err := t.next.RoundTrip(req)
	if err != nil || resp.Body == nil || resp.Body == http.NoBody {
		return resp, err
	}
	b := &idleBody{body: resp.Body}
	// The server's origin and path, never its query or credentials.
	where := req.URL.Scheme + "://" + req.URL.Host + req.URL.Path
	b.timer = time.AfterFunc(t.timeout, func() {
		b.fired.Store(true)
		t.log.Warn("mcp: the server stopped sending its answer; cut at the idle timeout", "server", where, "idle_timeout", t.timeout)
		b.body.Close()
	})
	b.timeout = t.timeout
	resp.Body = b
	return resp, nil
}

// CloseIdleConnections closes the idle connections of the pool below, as
// http.Client.CloseIdleConnections expects of a wrapping transport.
func (t *idleTransport) CloseIdleConnections() {
	if c, ok := t.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

type idleBody struct {
	body    io.ReadCloser
	timer   *time.Timer
	timeout time.Duration
	fired   atomic.Bool
}

func (b *idleBody) Read(p []byte) (int, error) {
	n, err := b.body.Read(p)
	if b.fired.Load() {
		return n, ErrIdleTimeout
	}
	if n > 0 {
		b.timer.Reset(b.timeout)
	}
	return n, err
}

func (b *idleBody) Close() error {
	b.timer.Stop()
	return b.body.Close()
}
