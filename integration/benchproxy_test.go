package integration

import (
	"bytes"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/loomgate/loom/internal/testutil"
)

// fullDuplex serves the benchmarks' bare reverse proxy with the HTTP/1
// server's full-duplex mode on. Without it the proxy cuts a stream now
// and then (golang/go#40747): the proxy forwards its inbound request body
// as the outbound one, and its transport, after copying the declared
// Content-Length, reads that body once more to check that nothing follows
// (net/http transfer.go, transferWriter.writeBody). When the upstream's
// response headers come back first, the proxy writes them to the client,
// and the server, before writing a response's headers, drains and closes
// any request body the handler has not read to the end (server.go,
// chunkWriter.writeHeader). The transport's late read then fails with
// "http: invalid Read on closed Body", persistConn.writeLoop closes the
// upstream connection, and the response still streaming on it ends with
// "ReverseProxy read error during body copy: ... use of closed network
// connection" and the client's "unexpected EOF". Full-duplex mode leaves
// the request body to the handler; the proxy itself stays a bare
// httputil.ReverseProxy.
func fullDuplex(proxy http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := http.NewResponseController(w).EnableFullDuplex(); err != nil {
			http.Error(w, "bench proxy: full duplex: "+err.Error(), http.StatusInternalServerError)
			return
		}
		proxy.ServeHTTP(w, r)
	})
}

// TestFullDuplexProxyKeepsStream orders the race fullDuplex is for with
// explicit signals: the transport's read after the request body's
// declared length waits until the client has the response headers, and
// the upstream sends the rest of its stream only after that read. Without
// full-duplex mode the read fails and the stream is cut short (the
// proxy's "use of closed network connection"); with it the client reads
// every event.
func TestFullDuplexProxyKeepsStream(t *testing.T) {
	const events = 50
	headers := make(chan struct{})  // the client has the response headers
	lateRead := make(chan struct{}) // the transport's extra read returned
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			t.Errorf("upstream: read body: %v", err)
		}
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		for i := range events {
			fmt.Fprintf(w, "data: %d\n\n", i)
			rc.Flush()
			if i == 0 {
				<-lateRead
			}
		}
	}))
	defer up.Close()
	target, err := url.Parse(up.URL)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	held := &heldBackTransport{rt: pooledTransport(), release: headers, done: lateRead}
	rp.Transport = held
	var proxyLog testutil.LockedBuffer
	rp.ErrorLog = log.New(&proxyLog, "", 0)
	proxy := httptest.NewServer(fullDuplex(rp))
	defer proxy.Close()

	resp, err := http.Post(proxy.URL+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"mock-model"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	close(headers)
	body, err := io.ReadAll(resp.Body)
	<-lateRead // held.lateErr is written before
	if err != nil {
		t.Fatalf("read the stream: %v (after %d events; proxy: %q; transport's late read: %v)", err, bytes.Count(body, []byte("data: ")), proxyLog.String(), held.lateErr)
	}
	if n := bytes.Count(body, []byte("data: ")); n != events {
		t.Errorf("got %d events, want %d", n, events)
	}
	if held.lateErr != nil {
		t.Errorf("the transport's read after the body: %v, want io.EOF", held.lateErr)
	}
}

// heldBackTransport holds the transport's read of a request body after
// its declared length until release is closed, records what that read
// returned, and closes done.
type heldBackTransport struct {
	rt      http.RoundTripper
	release <-chan struct{}
	done    chan<- struct{}
	once    sync.Once
	lateErr error // what the held-back read returned, if not io.EOF
}

func (h *heldBackTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r.Body = &heldBackBody{ReadCloser: r.Body, left: r.ContentLength, t: h}
	return h.rt.RoundTrip(r)
}

type heldBackBody struct {
	io.ReadCloser
	left int64
	t    *heldBackTransport
}

func (b *heldBackBody) Read(p []byte) (int, error) {
	if b.left > 0 {
		n, err := b.ReadCloser.Read(p)
		b.left -= int64(n)
		return n, err
	}
	<-b.t.release
	n, err := b.ReadCloser.Read(p)
	b.t.once.Do(func() {
		if err != io.EOF {
			b.t.lateErr = err
		}
		close(b.t.done)
	})
	return n, err
}
