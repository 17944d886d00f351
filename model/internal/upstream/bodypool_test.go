package upstream

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/loomgate/loom/model"
)

// bigBody is a body large enough to be pooled, and a copy of its bytes.
func bigBody(t *testing.T, n int) (*Body, []byte) {
	t.Helper()
	w := NewBody(n+64, nil, nil)
	w.String("model", "m")
	w.String("text", strings.Repeat("0123456789", n/10))
	want, err := NewBody(n+64, nil, nil).finishCopy(w)
	if err != nil {
		t.Fatal(err)
	}
	return w, want
}

// finishCopy is w's bytes as Finish will write them, in a buffer of its
// own (w is left unfinished).
func (x *Body) finishCopy(w *Body) ([]byte, error) {
	x.b = append(x.b[:0], w.b...)
	b, err := x.Finish()
	return bytes.Clone(b), err
}

// scribble takes buffers from the pool and overwrites them: a buffer
// handed back while a request still writes from it shows up as a data
// race (the race detector sees the socket write read it) and as bytes
// the upstream did not expect.
func scribble(size int) {
	for range 4 {
		b := bodyPool.Get(size)
		b = b[:cap(b)]
		for i := range b {
			b[i] = 'X'
		}
		putBody(b)
	}
}

var discardEmit = func(model.Delta) error { return nil }

func readWholeDiscard(r io.Reader, _ func(model.Delta) error) error {
	return ReadWhole(r, func([]byte) error { return nil })
}

// TestSendHandsBodyBack: a large body sent through loom's own transport
// goes back to the pool once the exchange is over, arriving intact, also
// through a caller's http.Transport; one sent through an http.Client or
// another RoundTripper (whose reading of it loom cannot follow) and a
// small one do not.
func TestSendHandsBodyBack(t *testing.T) {
	var got []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, _ = io.ReadAll(r.Body)
		io.WriteString(w, `{"choices":[]}`)
	}))
	defer srv.Close()
	logger := slog.New(slog.DiscardHandler)
	for _, tt := range []struct {
		name     string
		opts     model.HTTPOptions
		size     int
		returned int64
	}{
		{"own transport", model.HTTPOptions{Logger: logger}, 100 << 10, 1},
		{"own transport, small body", model.HTTPOptions{Logger: logger}, 1 << 10, 0},
		{"caller's client", model.HTTPOptions{Logger: logger, HTTPClient: &http.Client{}}, 100 << 10, 0},
		{"caller's transport", model.HTTPOptions{Logger: logger, Transport: &http.Transport{}}, 100 << 10, 1},
		{"caller's round tripper", model.HTTPOptions{Logger: logger, Transport: roundTripper{&http.Transport{}}}, 100 << 10, 0},
	} {
		c := NewClient(srv.URL+"/v1", "", Config{HTTPOptions: tt.opts})
		w, want := bigBody(t, tt.size)
		before := bodyReturned.Load()
		if err := c.Send(context.Background(), w, true, discardEmit, readWholeDiscard); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if n := bodyReturned.Load() - before; n != tt.returned {
			t.Errorf("%s: %d buffers handed back, want %d", tt.name, n, tt.returned)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: the upstream got %d bytes, not the %d sent", tt.name, len(got), len(want))
		}
	}
}

// roundTripper is a RoundTripper other than net/http's.
type roundTripper struct{ next http.RoundTripper }

func (r roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	return r.next.RoundTrip(req)
}

// rawUpstream is a loopback TCP server whose connections the test
// drives by hand; each accepted connection goes to conns. (A small
// receive buffer here would slow the tests down to the zero-window
// probes of TCP; the client's small send buffer and the kernel's default
// receive buffer, ~128 KB before it grows with reading, leave most of a
// 1 MB body unwritten while the test holds the connection.)
func rawUpstream(t *testing.T) (url string, conns <-chan net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	ch := make(chan net.Conn, 8)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(ch)
				return
			}
			t.Cleanup(func() { c.Close() })
			ch <- c
		}
	}()
	return "http://" + ln.Addr().String() + "/v1", ch
}

// smallWrites makes c's transport dial with a small send buffer, so
// that the socket holds little of a body and the write of the rest
// waits for the upstream to read it.
func smallWrites(c *Client) {
	tr := pooledTransport(time.Second)
	dial := tr.DialContext
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err == nil {
			_ = conn.(*net.TCPConn).SetWriteBuffer(4 << 10)
		}
		return conn, err
	}
	c.httpDo = tr.RoundTrip
}

// readRequestHead reads the request line and headers, and returns what
// the reader holds of the body.
func readRequestHead(t *testing.T, r *bufio.Reader) {
	t.Helper()
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the request head: %v", err)
		}
		if line == "\r\n" {
			return
		}
	}
}

// checkReceived reads what is left of the body on conn (until the
// client closes it or the whole body came) and checks it is a prefix of
// want's body.
func checkReceived(t *testing.T, conn net.Conn, r *bufio.Reader, want []byte) {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second)) // a bound, not a synchronisation
	got, _ := io.ReadAll(io.LimitReader(r, int64(len(want))))
	if !bytes.HasPrefix(want, got) {
		i := 0
		for i < len(got) && got[i] == want[i] {
			i++
		}
		t.Fatalf("the upstream got %d bytes that differ from the body from byte %d (%q...)", len(got), i, got[i:min(i+16, len(got))])
	}
}

// heldRequest is a request whose head the upstream has read, and the
// rest of its body waiting on conn.
type heldRequest struct {
	conn net.Conn
	r    *bufio.Reader
}

func nextRequest(t *testing.T, conns <-chan net.Conn) heldRequest {
	t.Helper()
	conn := <-conns
	r := bufio.NewReaderSize(conn, 1<<10)
	readRequestHead(t, r)
	return heldRequest{conn, r}
}

const (
	answerOK  = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 14\r\n\r\n{\"choices\":[]}"
	answer400 = "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
	answer503 = "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 2\r\n\r\n{}"
)

// TestSendKeepsBodyWhileWritten: an upstream answers before it read the
// body (a 200: net/http goes on writing the body after Send returned,
// for up to 50 ms before it gives up the connection; a 400, not retried;
// a 503, retried, and a 200 for the retry), or the caller cancels while
// the body is being written. Once Send returns, the buffers the pool
// gives out are scribbled over, and the upstream must still read the
// first attempt's body as sent. Run with -race.
func TestSendKeepsBodyWhileWritten(t *testing.T) {
	const size = 1 << 20
	// sync.Pool drops some of what it is given under the race
	// detector: a few rounds make it likely that a buffer handed back
	// early is the one scribbled over.
	const rounds = 4
	logger := slog.New(slog.DiscardHandler)
	for _, tt := range []struct {
		name    string
		retries int
		// answer answers the first request (and any retry, on conns).
		answer func(t *testing.T, first heldRequest, conns <-chan net.Conn, want []byte, cancel func())
		ok     func(error) bool
	}{
		{"early answer", -1, func(t *testing.T, first heldRequest, _ <-chan net.Conn, _ []byte, _ func()) {
			io.WriteString(first.conn, answerOK)
		}, func(err error) bool { return err == nil }},
		{"error answer", -1, func(t *testing.T, first heldRequest, _ <-chan net.Conn, _ []byte, _ func()) {
			io.WriteString(first.conn, answer400)
		}, func(err error) bool { return err != nil }},
		{"early answer, retried", 1, func(t *testing.T, first heldRequest, conns <-chan net.Conn, want []byte, _ func()) {
			io.WriteString(first.conn, answer503)
			second := nextRequest(t, conns)
			checkReceived(t, second.conn, second.r, want)
			io.WriteString(second.conn, answerOK)
		}, func(err error) bool { return err == nil }},
		{"cancelled while writing", -1, func(t *testing.T, _ heldRequest, _ <-chan net.Conn, _ []byte, cancel func()) {
			cancel()
		}, func(err error) bool { return errors.Is(err, context.Canceled) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for range rounds {
				url, conns := rawUpstream(t)
				c := NewClient(url, "", Config{HTTPOptions: model.HTTPOptions{Logger: logger, Retries: tt.retries,
					RetryWaitMin: time.Millisecond, RetryWaitMax: time.Millisecond}})
				smallWrites(c)
				w, want := bigBody(t, size)
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() { done <- c.Send(ctx, w, true, discardEmit, readWholeDiscard) }()
				first := nextRequest(t, conns)
				tt.answer(t, first, conns, want, cancel)
				if err := <-done; !tt.ok(err) {
					t.Fatalf("Send returned %v", err)
				}
				cancel()
				scribble(size)
				checkReceived(t, first.conn, first.r, want)
			}
		})
	}
}
