package http1

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"slices"
	"strconv"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/loomgate/loom/internal/bufpool"
)

// Defaults of Options' zero fields.
const (
	DefaultConnectTimeout  = 10 * time.Second
	DefaultMaxIdleConns    = 64
	DefaultIdleConnTimeout = 90 * time.Second // net/http's DefaultTransport's
	DefaultReadBufferSize  = 4 << 10
)

// Options configures a Transport; a zero field means its default.
type Options struct {
	// ConnectTimeout bounds dialing a connection.
	ConnectTimeout time.Duration
	// MaxIdleConns is how many unused connections are kept for reuse.
	MaxIdleConns int
	// IdleConnTimeout closes a kept connection unused for this long.
	IdleConnTimeout time.Duration
	// ReadBufferSize is each connection's read buffer, held for as long
	// as the connection is open: a stream's body is read through it.
	ReadBufferSize int
}

// Transport is an http.RoundTripper for http:// URLs (package doc). It
// is safe for concurrent use; its zero value is not usable: see New.
type Transport struct {
	dialer         net.Dialer
	readBufferSize int
	idle           pool
}

// New returns a Transport configured by o (nil: every default).
func New(o *Options) *Transport {
	var opts Options
	if o != nil {
		opts = *o
	}
	return &Transport{
		dialer:         net.Dialer{Timeout: cmp.Or(opts.ConnectTimeout, DefaultConnectTimeout), KeepAlive: 30 * time.Second},
		readBufferSize: cmp.Or(opts.ReadBufferSize, DefaultReadBufferSize),
		idle: pool{max: cmp.Or(opts.MaxIdleConns, DefaultMaxIdleConns),
			timeout: cmp.Or(opts.IdleConnTimeout, DefaultIdleConnTimeout), check: checkAfter},
	}
}

// CloseIdleConnections closes the connections kept for reuse; those in
// use are not touched.
func (t *Transport) CloseIdleConnections() { t.idle.closeAll() }

// errNothingBack marks a failure on a kept connection before any byte of
// the response came: the server closed it while it was idle, so the
// request can go once more on a new connection.
var errNothingBack = errors.New("http1: the kept connection was closed before a response came")

// RoundTrip implements http.RoundTripper. It writes the request and reads
// the response's head on the caller's goroutine; the response body reads
// the connection, which goes back to the pool once the body was read to
// its end (and is closed when the body is closed before that).
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	out, err := newOutgoing(req)
	if err != nil {
		closeBody(req)
		return nil, err
	}
	defer out.release()

	ctx := req.Context()
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	trace := httptrace.ContextClientTrace(ctx)
	addr := req.URL.Host
	if req.URL.Port() == "" {
		addr = net.JoinHostPort(req.URL.Hostname(), "80")
	}
	// One more attempt when a kept connection turns out closed, on a
	// connection dialled for it (when one kept connection is dead, say
	// after the engine restarted, the others likely are too), if the
	// request can be sent again (outgoing.rewind).
	for attempt := range 2 {
		if attempt > 0 {
			if err := out.rewind(req); err != nil {
				return nil, err
			}
		}
		c, err := t.conn(ctx, addr, attempt == 0)
		if err != nil {
			return nil, err
		}
		if trace != nil && trace.GotConn != nil {
			trace.GotConn(httptrace.GotConnInfo{Conn: c.nc, Reused: c.reused})
		}
		resp, err := c.roundTrip(ctx, req, out, trace)
		if err == nil {
			if resp.Body == http.NoBody {
				// Nothing to read: the connection is free now.
				t.release(c, !resp.Close)
			} else {
				resp.Body = &body{rc: resp.Body, ctx: ctx, c: c, t: t, keep: !resp.Close}
			}
			return resp, nil
		}
		c.cut()
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		if !errors.Is(err, errNothingBack) {
			return nil, err
		}
	}
	return nil, errNothingBack
}

// conn returns a kept connection when kept is set and there is one, or
// dials a new one.
func (t *Transport) conn(ctx context.Context, addr string, kept bool) (*conn, error) {
	if kept {
		if c := t.idle.take(); c != nil {
			return c, nil
		}
	}
	nc, err := t.dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	return &conn{nc: nc, br: bufio.NewReaderSize(nc, t.readBufferSize)}, nil
}

// dial dials on a goroutine of its own, which ends with it. The dialer's
// frames take ~2.4 KB of stack; on the caller's goroutine, already deep
// in a request (~5 KB into a handler's 8 KB stack), they would grow that
// stack to 16 KB, which the stream then keeps for as long as it is open.
// A dial costs far more than the goroutine.
func (t *Transport) dial(ctx context.Context, addr string) (net.Conn, error) {
	type dialed struct {
		nc  net.Conn
		err error
	}
	done := make(chan dialed, 1)
	go func() {
		nc, err := t.dialer.DialContext(ctx, "tcp", addr)
		done <- dialed{nc, err}
	}()
	d := <-done
	return d.nc, d.err
}

// release hands c back to the pool when keep is set and its cancel hook
// did not run (a cut connection is never reused), and closes it otherwise.
func (t *Transport) release(c *conn, keep bool) {
	if c.stop() && keep && c.br.Buffered() == 0 {
		t.idle.put(c)
		return
	}
	c.nc.Close()
}

// conn is one connection to the origin.
type conn struct {
	nc     net.Conn
	br     *bufio.Reader
	reused bool      // it served a request before
	since  time.Time // when it was put back, unused since
	// stop removes the hook that cuts the connection when the request's
	// context is done, and reports whether it removed it before it ran.
	stop func() bool
}

// cut closes c, in use: its request is over (failed, or its body closed
// early), and the hook that would cut it on the context is removed.
func (c *conn) cut() {
	c.stop()
	c.nc.Close()
}

// aLongTimeAgo is a deadline in the past: set on a connection, it makes
// its blocked reads and writes return at once.
var aLongTimeAgo = time.Unix(1, 0)

// roundTrip writes msg and reads the response's head. A cancelled ctx
// cuts the connection (its deadline in the past), which ends a blocked
// write or read.
func (c *conn) roundTrip(ctx context.Context, req *http.Request, out *outgoing, trace *httptrace.ClientTrace) (*http.Response, error) {
	c.stop = context.AfterFunc(ctx, func() { c.nc.SetDeadline(aLongTimeAgo) })
	err := out.writeTo(c.nc)
	if trace != nil && trace.WroteRequest != nil {
		trace.WroteRequest(httptrace.WroteRequestInfo{Err: err})
	}
	if err != nil && c.reused {
		return nil, fmt.Errorf("%w: %w", errNothingBack, err)
	}
	// After a failed write the server may still have answered (a 413
	// before the whole body): read what it sent, and fail with the
	// write's error if there is nothing.
	if _, perr := c.br.Peek(1); perr != nil {
		switch {
		case err != nil:
			return nil, err
		case c.reused:
			return nil, fmt.Errorf("%w: %w", errNothingBack, perr)
		}
		return nil, perr
	}
	return readResponse(c.br, req, err != nil)
}

// readResponse reads the response's head, past any 100 Continue; cut
// marks a request whose writing failed, whose connection is not reused.
func readResponse(br *bufio.Reader, req *http.Request, cut bool) (*http.Response, error) {
	for range 8 {
		resp, err := http.ReadResponse(br, req)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode == http.StatusContinue {
			continue
		}
		if resp.StatusCode < 200 {
			resp.Body.Close()
			return nil, fmt.Errorf("http1: unsupported informational response %s", resp.Status)
		}
		resp.Close = resp.Close || cut
		return resp, nil
	}
	return nil, errors.New("http1: too many 100 Continue responses")
}

// A body up to inlineBody bytes is copied behind the request's head and
// sent with it in one write; a larger one is written after the head,
// straight from the request's reader (a *bytes.Reader's WriteTo: one
// write, no copy), as copying it would cost more than the second write
// and hold the body twice (a 300k-item history's is ~11 MB).
const inlineBody = 64 << 10

// messages lends the buffers the heads (and inline bodies) are written in.
var messages = bufpool.Pool{Min: 0, Max: inlineBody + 8<<10}

// outgoing is a request as it goes on the wire: msg, its head and an
// inline body; body, a larger body of n bytes to write after it.
type outgoing struct {
	msg  []byte
	body io.ReadCloser
	n    int64
}

// release hands msg back and closes the body.
func (o *outgoing) release() {
	messages.Put(o.msg)
	if o.body != nil {
		o.body.Close()
	}
}

// rewind makes o ready to be sent again: msg holds an inline body; a
// larger one is read again from the request's GetBody, without which the
// request is not sent twice.
func (o *outgoing) rewind(req *http.Request) error {
	if o.body == nil {
		return nil
	}
	if req.GetBody == nil {
		return errNothingBack
	}
	body, err := req.GetBody()
	if err != nil {
		return err
	}
	o.body.Close()
	o.body = body
	return nil
}

// writeTo writes the request to w.
func (o *outgoing) writeTo(w io.Writer) error {
	if _, err := w.Write(o.msg); err != nil || o.body == nil {
		return err
	}
	n, err := io.Copy(w, o.body)
	if err == nil && n != o.n {
		err = fmt.Errorf("http1: a request body of %d bytes for ContentLength %d", n, o.n)
	}
	return err
}

// closeBody closes the request's body, as a RoundTripper must.
func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// newOutgoing builds the request's head (and copies an inline body
// behind it; a body of unknown length, ContentLength 0 with a Body, is
// read whole and sent with its length). It takes over the request's
// body, which release closes.
func newOutgoing(req *http.Request) (*outgoing, error) {
	if req.URL == nil || req.URL.Scheme != "http" {
		return nil, errors.New("http1: only http:// URLs are supported")
	}
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	if !httpguts.ValidHostHeader(host) {
		return nil, fmt.Errorf("http1: invalid Host %q", host)
	}
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	if !httpguts.ValidHeaderFieldName(method) {
		return nil, fmt.Errorf("http1: invalid method %q", method)
	}
	var unsized []byte
	n := req.ContentLength
	if n == 0 && req.Body != nil && req.Body != http.NoBody {
		var err error
		if unsized, err = io.ReadAll(req.Body); err != nil {
			return nil, err
		}
		n = int64(len(unsized))
	}
	if n < 0 || n > 0 && req.Body == nil {
		return nil, fmt.Errorf("http1: unsupported ContentLength %d", n)
	}
	inline := n <= inlineBody || unsized != nil

	size := 512
	if inline {
		size += int(n)
	}
	b, err := appendHead(messages.Get(max(size, 4<<10)), req, method, host, n)
	if err != nil {
		return nil, err
	}
	switch {
	case unsized != nil:
		closeBody(req)
		return &outgoing{msg: append(b, unsized...)}, nil
	case n == 0:
		closeBody(req)
		return &outgoing{msg: b}, nil
	case !inline:
		return &outgoing{msg: b, body: req.Body, n: n}, nil
	}
	head := len(b)
	b = slices.Grow(b, int(n))[:head+int(n)]
	_, err = io.ReadFull(req.Body, b[head:])
	closeBody(req)
	if err != nil {
		return nil, fmt.Errorf("http1: reading the request body of ContentLength %d: %w", n, err)
	}
	return &outgoing{msg: b}, nil
}

// appendHead appends the request's head to b: the request line, Host,
// the request's headers (checked: a value with a line break, say, would
// be another header on the wire), Content-Length, and the blank line.
func appendHead(b []byte, req *http.Request, method, host string, n int64) ([]byte, error) {
	b = append(b, method...)
	b = append(b, ' ')
	b = append(b, req.URL.RequestURI()...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, host...)
	b = append(b, "\r\n"...)
	for k, vs := range req.Header {
		switch k {
		case "Host", "Content-Length", "Transfer-Encoding", "Trailer":
			continue // from the request's fields, as net/http does
		}
		if !httpguts.ValidHeaderFieldName(k) {
			return nil, fmt.Errorf("http1: invalid header name %q", k)
		}
		for _, v := range vs {
			if !httpguts.ValidHeaderFieldValue(v) {
				return nil, fmt.Errorf("http1: invalid value of header %q", k)
			}
			b = append(b, k...)
			b = append(b, ": "...)
			b = append(b, v...)
			b = append(b, "\r\n"...)
		}
	}
	if n > 0 || method == http.MethodPost || method == http.MethodPut || method == http.MethodPatch {
		b = append(b, "Content-Length: "...)
		b = strconv.AppendInt(b, n, 10)
		b = append(b, "\r\n"...)
	}
	if req.Close {
		b = append(b, "Connection: close\r\n"...)
	}
	b = append(b, "\r\n"...)
	return b, nil
}
