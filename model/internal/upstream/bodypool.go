package upstream

import (
	"context"
	"net/http/httptrace"
	"sync/atomic"

	"github.com/loomgate/loom/internal/bufpool"
)

// A large request body (a long history: ~106 KB for 1000 messages) is
// written into a buffer from bodyPool and handed back once net/http can
// no longer read it, instead of being left to the collector per request.
// Small bodies are allocated as before: their garbage is small and they
// are sent without the trace that follows the writing of a pooled one.
var bodyPool = bufpool.Pool{Min: bufpool.BodyMin, Max: bufpool.BodyMax}

// bodyReturned counts buffers handed back to the pool (for tests).
var bodyReturned atomic.Int64

func putBody(b []byte) {
	if bodyPool.Put(b) {
		bodyReturned.Add(1)
	}
}

// bodyLease is a pooled body while net/http may read it. net/http reads
// a request's body while it writes the request, on each attempt (the
// transport's own retry on a dead kept-alive connection, GetBody for
// httpretry's), and that writing may go on after RoundTrip returned (a
// response that came before the whole body was written; RoundTrip's doc
// says the body may be closed later, in another goroutine). The body
// must stay an io.NopCloser around a *bytes.Reader (client.go:
// newRequest), so its Close says nothing; what does is the transport's
// trace: every attempt that can read the body first gets a connection
// (GotConn) and, when it has finished with it, whether written or
// failed, reports WroteRequest once. The lease holds one count for the
// caller's exchange and one for each attempt between the two; the
// buffer goes back when all are over. An attempt that got a connection
// and never reached the write reports nothing: its buffer is left to the
// collector, never reused early.
//
// This holds for net/http's Transport (HTTP/1 and HTTP/2), so only a
// Client that sends straight to one leases bodies (client.go: pool); any
// other RoundTripper may read a body however it likes.
type bodyLease struct {
	buf   []byte
	holds atomic.Int32
	trace httptrace.ClientTrace
}

func newBodyLease(buf []byte) *bodyLease {
	l := &bodyLease{buf: buf}
	l.holds.Store(1)
	l.trace.GotConn = l.gotConn
	l.trace.WroteRequest = l.wroteRequest
	return l
}

// context is ctx with the lease's trace (composed with any trace ctx has).
func (l *bodyLease) context(ctx context.Context) context.Context {
	return httptrace.WithClientTrace(ctx, &l.trace)
}

func (l *bodyLease) gotConn(httptrace.GotConnInfo)           { l.holds.Add(1) }
func (l *bodyLease) wroteRequest(httptrace.WroteRequestInfo) { l.release() }

// release drops one hold; the last hands the buffer back.
func (l *bodyLease) release() {
	if l.holds.Add(-1) == 0 {
		putBody(l.buf)
	}
}
