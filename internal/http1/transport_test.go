package http1

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// connCounter counts the connections a test server accepted.
type connCounter struct{ n atomic.Int32 }

func (c *connCounter) state(_ net.Conn, s http.ConnState) {
	if s == http.StateNew {
		c.n.Add(1)
	}
}

func newServer(t *testing.T, h http.HandlerFunc) (*httptest.Server, *connCounter) {
	t.Helper()
	var cc connCounter
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnState = cc.state
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &cc
}

// holdUntilGone is a handler's answer that starts (first, when not
// empty) and then holds until its client goes away, which it reports by
// closing gone; a client that never goes is the test's failure after
// 10 s (waitGone).
func holdUntilGone(w http.ResponseWriter, r *http.Request, first string, gone chan struct{}) {
	if first != "" {
		io.WriteString(w, first)
		w.(http.Flusher).Flush()
	}
	select {
	case <-r.Context().Done():
		close(gone)
	case <-time.After(10 * time.Second):
	}
}

// waitGone waits for holdUntilGone's report, for 10 s at the most.
func waitGone(t *testing.T, gone <-chan struct{}) {
	t.Helper()
	select {
	case <-gone:
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not see its client go away")
	}
}

func post(t *testing.T, ctx context.Context, url, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer k")
	return req
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return string(b)
}

// TestRequestOnTheWire: what the server reads is the request as sent:
// method, path and query, Host, headers, the body with its length.
func TestRequestOnTheWire(t *testing.T) {
	type seen struct {
		method, uri, host, ctype, auth, body string
		length                               int64
		chunked                              bool
	}
	got := make(chan seen, 1)
	srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.Method, r.RequestURI, r.Host, r.Header.Get("Content-Type"), r.Header.Get("Authorization"),
			string(b), r.ContentLength, len(r.TransferEncoding) > 0}
		io.WriteString(w, "ok")
	})
	tr := New(nil)
	defer tr.CloseIdleConnections()
	big := strings.Repeat("x", 100<<10) // past the small messages' pool
	for _, body := range []string{`{"a":1}`, big} {
		resp, err := tr.RoundTrip(post(t, context.Background(), srv.URL+"/v1/chat/completions?x=1", body))
		if err != nil {
			t.Fatal(err)
		}
		if s := readAll(t, resp); resp.StatusCode != 200 || s != "ok" {
			t.Fatalf("response %d %q", resp.StatusCode, s)
		}
		want := seen{"POST", "/v1/chat/completions?x=1", strings.TrimPrefix(srv.URL, "http://"), "application/json",
			"Bearer k", body, int64(len(body)), false}
		if s := <-got; s != want {
			t.Errorf("server saw %+v", fmt.Sprintf("%.200v", s))
		}
	}
}

// TestConnectionReused: requests one after another share one connection
// when each body is read to its end, whatever its framing.
func TestConnectionReused(t *testing.T) {
	srv, conns := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/chunked":
			io.WriteString(w, "a")
			w.(http.Flusher).Flush()
			io.WriteString(w, "b")
		case "/empty":
			w.WriteHeader(http.StatusNoContent)
		default:
			w.Header().Set("Content-Length", "2")
			io.WriteString(w, "ab")
		}
	})
	tr := New(nil)
	defer tr.CloseIdleConnections()
	for i, path := range []string{"/chunked", "/length", "/empty", "/chunked", "/length"} {
		resp, err := tr.RoundTrip(post(t, context.Background(), srv.URL+path, "{}"))
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		want := "ab"
		if path == "/empty" {
			want = ""
		}
		if s := readAll(t, resp); s != want {
			t.Fatalf("%s: body %q, want %q", path, s, want)
		}
	}
	if n := conns.n.Load(); n != 1 {
		t.Errorf("%d connections for 5 requests in a row, want 1", n)
	}
}

// TestBodyClosedEarlyClosesConnection: a body closed before its end cuts
// the connection, so the server sees its client go away, and the next
// request gets a new one.
func TestBodyClosedEarlyClosesConnection(t *testing.T) {
	gone := make(chan struct{})
	srv, conns := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/plain" {
			return
		}
		holdUntilGone(w, r, "first", gone)
	})
	tr := New(nil)
	defer tr.CloseIdleConnections()
	resp, err := tr.RoundTrip(post(t, context.Background(), srv.URL+"/hold", "{}"))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(resp.Body, buf); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	waitGone(t, gone)
	if _, err := resp.Body.Read(buf); !errors.Is(err, errBodyClosed) {
		t.Errorf("read after close: %v", err)
	}
	resp, err = tr.RoundTrip(post(t, context.Background(), srv.URL+"/plain", "{}"))
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	if n := conns.n.Load(); n != 2 {
		t.Errorf("%d connections, want 2 (the cut one is not reused)", n)
	}
}

// TestKeptConnectionClosedByServer: kept connections the server closed
// while they were idle (all at once, as when the engine restarts) cost
// the next request one attempt: it is sent again, with its whole body,
// on a connection dialled for it, not on another dead kept one.
func TestKeptConnectionClosedByServer(t *testing.T) {
	var (
		mu     sync.Mutex
		bodies []string
	)
	arrived := make(chan struct{}, 2)
	both := make(chan struct{})
	srv, conns := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		mu.Unlock()
		if r.URL.Path == "/pair" {
			// Two requests at once: two connections to keep.
			arrived <- struct{}{}
			<-both
		}
		io.WriteString(w, "ok")
	})
	tr := New(nil)
	defer tr.CloseIdleConnections()
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			resp, err := tr.RoundTrip(post(t, context.Background(), srv.URL+"/pair", "{}"))
			if err != nil {
				t.Error(err)
				return
			}
			readAll(t, resp)
		})
	}
	<-arrived
	<-arrived
	close(both)
	wg.Wait()
	if n := len(tr.idle.conns); n != 2 {
		t.Fatalf("%d connections kept, want 2", n)
	}
	srv.CloseClientConnections()

	var reused []bool
	var wrote atomic.Int32
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		GotConn:      func(info httptrace.GotConnInfo) { reused = append(reused, info.Reused) },
		WroteRequest: func(httptrace.WroteRequestInfo) { wrote.Add(1) },
	})
	// A body past inlineBody, written from the request's reader: the
	// second attempt reads it again from GetBody.
	big := `{"n":1,"pad":"` + strings.Repeat("x", inlineBody) + `"}`
	resp, err := tr.RoundTrip(post(t, ctx, srv.URL, big))
	if err != nil {
		t.Fatalf("after the server closed its connections: %v", err)
	}
	readAll(t, resp)
	if fmt.Sprint(reused) != "[true false]" || conns.n.Load() != 3 {
		t.Errorf("attempts (reused) %v over %d connections, want [true false] over 3", reused, conns.n.Load())
	}
	// Every attempt that got a connection reported its write.
	if int(wrote.Load()) != len(reused) {
		t.Errorf("GotConn %d times, WroteRequest %d", len(reused), wrote.Load())
	}
	mu.Lock()
	defer mu.Unlock()
	if bodies[len(bodies)-1] != big {
		t.Errorf("the server's last body has %d bytes, want the %d sent", len(bodies[len(bodies)-1]), len(big))
	}
}

// TestClosedWhileIdleNotReused: a kept connection the server closed is
// seen closed before it is reused (closedByPeer), so the request goes
// straight to a new connection instead of failing on the old one first.
func TestClosedWhileIdleNotReused(t *testing.T) {
	srv, conns := newServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	var gotConn []bool // Reused, per attempt
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) { gotConn = append(gotConn, info.Reused) }})
	tr := New(nil)
	defer tr.CloseIdleConnections()
	tr.idle.check = 0 // look at every reuse
	resp, err := tr.RoundTrip(post(t, ctx, srv.URL, "{}"))
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	tr.idle.mu.Lock()
	kept := tr.idle.conns[0].nc
	tr.idle.mu.Unlock()
	if closedByPeer(kept) {
		t.Fatal("a live idle connection looks closed")
	}
	srv.CloseClientConnections()
	// The server's FIN reaches the kept connection (bounded wait).
	for i := 0; !closedByPeer(kept); i++ {
		if i == 1000 {
			t.Fatal("the server's close never showed on the kept connection")
		}
		time.Sleep(time.Millisecond)
	}
	resp, err = tr.RoundTrip(post(t, ctx, srv.URL, "{}"))
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	if fmt.Sprint(gotConn) != "[false false]" || conns.n.Load() != 2 {
		t.Errorf("attempts (reused) %v over %d connections, want [false false] over 2", gotConn, conns.n.Load())
	}
}

// TestCancel: a cancelled context ends a round trip waiting for the head
// and a read waiting for the body, with the context's cause, and the
// server sees its client go away.
func TestCancel(t *testing.T) {
	for _, stage := range []string{"head", "body"} {
		t.Run(stage, func(t *testing.T) {
			gone := make(chan struct{})
			srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
				// net/http watches for its client going away once
				// the request body is read.
				io.Copy(io.Discard, r.Body)
				first := ""
				if stage == "body" {
					first = "first"
				}
				holdUntilGone(w, r, first, gone)
			})
			tr := New(nil)
			defer tr.CloseIdleConnections()
			cause := errors.New("the caller gave up")
			ctx, cancel := context.WithCancelCause(context.Background())
			req := post(t, ctx, srv.URL, "{}")
			if stage == "head" {
				// Cancelled once the request is on the wire.
				ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
					WroteRequest: func(httptrace.WroteRequestInfo) { cancel(cause) }})
				req = req.WithContext(ctx)
				if _, err := tr.RoundTrip(req); !errors.Is(err, cause) {
					t.Fatalf("RoundTrip: %v, want the cause", err)
				}
			} else {
				resp, err := tr.RoundTrip(req)
				if err != nil {
					t.Fatal(err)
				}
				buf := make([]byte, 5)
				if _, err := io.ReadFull(resp.Body, buf); err != nil {
					t.Fatal(err)
				}
				cancel(cause)
				if _, err := resp.Body.Read(buf); !errors.Is(err, cause) {
					t.Fatalf("Read: %v, want the cause", err)
				}
				resp.Body.Close()
			}
			waitGone(t, gone)
		})
	}
}

// rawServer answers every request on a connection with reply, as raw
// bytes, and then closes the connection when closeAfter is set.
func rawServer(t *testing.T, reply string, closeAfter bool) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for range 10 {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for range 10 {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					io.Copy(io.Discard, req.Body)
					io.WriteString(c, reply)
					if closeAfter {
						return
					}
				}
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}

// TestResponseFramings: a 100 Continue is skipped; a body that ends with
// the connection is read to its end and its connection not kept.
func TestResponseFramings(t *testing.T) {
	for _, tt := range []struct {
		name, reply string
		closeAfter  bool
		want        string
		close       bool
	}{
		{"continue", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", false, "ok", false},
		{"until close", "HTTP/1.1 200 OK\r\n\r\nto the end", true, "to the end", true},
		{"connection close", "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", true, "ok", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			url := rawServer(t, tt.reply, tt.closeAfter)
			tr := New(nil)
			defer tr.CloseIdleConnections()
			resp, err := tr.RoundTrip(post(t, context.Background(), url, "{}"))
			if err != nil {
				t.Fatal(err)
			}
			if s := readAll(t, resp); s != tt.want || resp.Close != tt.close {
				t.Errorf("body %q close %v, want %q %v", s, resp.Close, tt.want, tt.close)
			}
			tr.idle.mu.Lock()
			kept := len(tr.idle.conns)
			tr.idle.mu.Unlock()
			if want := map[bool]int{true: 0, false: 1}[tt.close]; kept != want {
				t.Errorf("%d connections kept, want %d", kept, want)
			}
		})
	}
}

// TestBadRequestNotSent: a request that cannot be written as it is fails
// before anything is sent.
func TestBadRequestNotSent(t *testing.T) {
	srv, conns := newServer(t, func(w http.ResponseWriter, r *http.Request) {})
	tr := New(nil)
	defer tr.CloseIdleConnections()
	for name, change := range map[string]func(*http.Request){
		"header value": func(r *http.Request) { r.Header.Set("X-A", "a\r\nX-B: b") },
		"header name":  func(r *http.Request) { r.Header["Bad Name"] = []string{"v"} },
		"scheme":       func(r *http.Request) { r.URL.Scheme = "https" },
		"short body":   func(r *http.Request) { r.ContentLength = 100 },
	} {
		req := post(t, context.Background(), srv.URL, "{}")
		change(req)
		if _, err := tr.RoundTrip(req); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if n := conns.n.Load(); n != 0 {
		t.Errorf("%d connections made for bad requests", n)
	}
}

// TestConcurrentUse: many goroutines share a Transport; every answer is
// its own request's, and no more connections are kept than MaxIdleConns.
func TestConcurrentUse(t *testing.T) {
	srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(w, r.Body)
	})
	tr := New(&Options{MaxIdleConns: 3})
	defer tr.CloseIdleConnections()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 20 {
				body := fmt.Sprintf("%d-%d", g, i)
				resp, err := tr.RoundTrip(post(t, context.Background(), srv.URL, body))
				if err != nil {
					t.Error(err)
					return
				}
				if s := readAll(t, resp); s != body {
					t.Errorf("got %q for %q", s, body)
				}
			}
		})
	}
	wg.Wait()
	tr.idle.mu.Lock()
	defer tr.idle.mu.Unlock()
	if len(tr.idle.conns) > 3 {
		t.Errorf("%d connections kept, MaxIdleConns 3", len(tr.idle.conns))
	}
}

// TestIdleConnTimeout: a kept connection unused for IdleConnTimeout is
// closed; one used again before is kept.
func TestIdleConnTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &pool{max: 4, timeout: time.Minute}
		client1, server1 := net.Pipe()
		client2, server2 := net.Pipe()
		defer server1.Close()
		defer server2.Close()
		p.put(&conn{nc: client1, stop: func() bool { return true }})
		time.Sleep(30 * time.Second)
		p.put(&conn{nc: client2, stop: func() bool { return true }})
		time.Sleep(45 * time.Second) // the first is 75 s old, the second 45 s
		synctest.Wait()
		if _, err := server1.Read(make([]byte, 1)); err != io.EOF {
			t.Errorf("the older connection: read %v, want EOF (closed)", err)
		}
		if c := p.take(); c == nil || c.nc != client2 {
			t.Fatalf("take: %v, want the newer connection", c)
		}
	})
}

// TestCancelledBeforeSending: a request whose context is already done is
// not sent, and fails with the context's cause.
func TestCancelledBeforeSending(t *testing.T) {
	srv, conns := newServer(t, func(w http.ResponseWriter, r *http.Request) {})
	tr := New(nil)
	defer tr.CloseIdleConnections()
	cause := errors.New("gone before it started")
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(cause)
	if _, err := tr.RoundTrip(post(t, ctx, srv.URL, "{}")); !errors.Is(err, cause) {
		t.Errorf("RoundTrip: %v, want the cause", err)
	}
	if n := conns.n.Load(); n != 0 {
		t.Errorf("%d connections made", n)
	}
}
