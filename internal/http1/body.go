package http1

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
)

// body is a response's body: net/http's reader of the framing (length,
// chunks or until close) over the connection, which it hands back to the
// Transport once it was read to its end. Closed before that, it closes
// the connection: what is left of the answer is not read (an engine
// stops generating when its client goes away).
type body struct {
	rc   io.ReadCloser
	ctx  context.Context
	c    *conn
	t    *Transport
	keep bool        // the response lets the connection be reused
	done atomic.Bool // the connection was handed back or closed
	eof  bool        // read to its end (set by Read only)
}

var errBodyClosed = errors.New("http1: read on a closed response body")

func (b *body) Read(p []byte) (int, error) {
	if b.done.Load() {
		// The connection may serve another request now: never read
		// it again.
		if b.eof {
			return 0, io.EOF
		}
		return 0, errBodyClosed
	}
	n, err := b.rc.Read(p)
	switch {
	case err == io.EOF:
		b.eof = true
		if b.done.CompareAndSwap(false, true) {
			b.t.release(b.c, b.keep)
		}
	case err != nil:
		if b.done.CompareAndSwap(false, true) {
			b.c.cut()
		}
		if b.ctx.Err() != nil {
			// Cut by the request's context: say why, not the
			// deadline that did it.
			err = context.Cause(b.ctx)
		}
	}
	return n, err
}

// Close closes the connection unless the body was read to its end; a
// Read blocked on another goroutine then returns.
func (b *body) Close() error {
	if b.done.CompareAndSwap(false, true) {
		b.c.cut()
	}
	return nil
}
