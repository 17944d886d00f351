package main

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

	"github.com/loomgate/loom/internal/loadgen"
)

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
	held := &heldBackTransport{rt: loadgen.PooledTransport(64), release: headers, done: lateRead}
	rp.Transport = held
	// What the proxy logs, for the failure's message: read once the
	// client has read the whole answer, which ends after the proxy's copy.
	proxyLog := make(chan string, 16)
	rp.ErrorLog = log.New(logLines(proxyLog), "", 0)
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
		t.Fatalf("read the stream: %v (after %d events; proxy: %q; transport's late read: %v)", err, bytes.Count(body, []byte("data: ")), drain(proxyLog), held.lateErr)
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

// logLines is a log's writer that sends each write (a log line) on a
// channel, dropping what does not fit.
type logLines chan<- string

func (c logLines) Write(p []byte) (int, error) {
	select {
	case c <- string(p):
	default:
	}
	return len(p), nil
}

// drain is what is on c now.
func drain(c <-chan string) []string {
	var lines []string
	for {
		select {
		case l := <-c:
			lines = append(lines, l)
		default:
			return lines
		}
	}
}
