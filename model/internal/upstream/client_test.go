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
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loomgate/loom/internal/testutil"
	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/responses"
)

func readAll(body io.Reader, emit func(model.Delta) error) error {
	return ReadSSE(body, func([]byte) error { return nil }, func() error { return nil })
}

// TestIdleTimeout: the upstream sends a chunk, then holds the stream
// open. The turn fails with a 504 coded upstream_idle_timeout, and the
// upstream sees its request cancelled.
func TestIdleTimeout(t *testing.T) {
	cancelled := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {}\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		close(cancelled)
	}))
	defer srv.Close()
	c := NewClient(srv.URL+"/v1/chat/completions", "", Config{HTTPOptions: model.HTTPOptions{IdleTimeout: 50 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)}})
	// The bound of the test, not an assertion on time.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := c.Stream(ctx, []byte("{}"), func(model.Delta) error { return nil }, readAll)
	var merr *responses.APIError
	if !errors.As(err, &merr) || merr.Kind != responses.ETimeout || merr.Code != CodeIdleTimeout {
		t.Fatalf("err = %#v, want a 504 coded %s", err, CodeIdleTimeout)
	}
	select {
	case <-cancelled:
	case <-ctx.Done():
		t.Fatal("the upstream request was not cancelled")
	}
}

// TestFailureIsLogged: a refusal by the engine is logged at warn with the
// endpoint's path, the status and the engine's message, with the key and
// anything that looks like a credential removed; a dial failure logs the
// dial error.
func TestFailureIsLogged(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"error":{"message":"The model 'gpt-oss-2b' does not exist (key my-upstream-key, Authorization: Bearer tok123456, sk-abcdef123456, api_key=zzz999)"}}`)
	}))
	defer srv.Close()
	var logs testutil.LockedBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	c := NewClient(srv.URL+"/v1/chat/completions", "my-upstream-key", Config{Name: "chat completions", HTTPOptions: model.HTTPOptions{Logger: log, Retries: -1}})
	err := c.Stream(context.Background(), []byte("{}"), func(model.Delta) error { return nil }, readAll)
	if err == nil {
		t.Fatal("no error for a 404")
	}
	out := logs.String()
	for _, want := range []string{"level=WARN", "upstream request failed", "path=/v1/chat/completions", "upstream_status=404", "does not exist"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q: %s", want, out)
		}
	}
	for _, secret := range []string{"my-upstream-key", "tok123456", "sk-abcdef123456", "zzz999"} {
		if strings.Contains(out, secret) {
			t.Errorf("log carries the secret %q: %s", secret, out)
		}
	}

	// An address nobody listens on: connection refused.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	var dialLogs testutil.LockedBuffer
	c = NewClient("http://"+addr+"/v1/chat/completions", "", Config{Name: "chat completions", HTTPOptions: model.HTTPOptions{Logger: slog.New(slog.NewTextHandler(&dialLogs, nil)), Retries: -1}})
	err = c.Stream(context.Background(), []byte("{}"), func(model.Delta) error { return nil }, readAll)
	var merr *responses.APIError
	if !errors.As(err, &merr) || merr.Kind != responses.EUpstream {
		t.Fatalf("err = %v, want a 502", err)
	}
	if out := dialLogs.String(); !strings.Contains(out, "connection refused") || !strings.Contains(out, "level=WARN") {
		t.Errorf("the dial error is not logged: %s", out)
	}
}

// TestGivingUpKeepsThePool: a request whose retries run out (503 every
// time) leaves the other idle connections to the engine in the pool, so
// the requests after it do not dial again. Two requests are held until
// both arrived, so that two connections are open and then idle.
func TestGivingUpKeepsThePool(t *testing.T) {
	var dials atomic.Int32
	arrived := make(chan struct{}, 2)
	both := make(chan struct{})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.URL.Query().Get("fail") != "" {
			http.Error(w, "loading", http.StatusServiceUnavailable)
			return
		}
		arrived <- struct{}{}
		select {
		case <-both:
		case <-r.Context().Done():
		}
		_, _ = io.WriteString(w, "{}")
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			dials.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	pool := &http.Transport{MaxIdleConnsPerHost: 8}
	defer pool.CloseIdleConnections()
	opts := model.HTTPOptions{HTTPClient: &http.Client{Transport: pool}, Logger: slog.New(slog.DiscardHandler),
		RetryWaitMin: time.Millisecond, RetryWaitMax: time.Millisecond}
	ok := NewClient(srv.URL+"/v1/chat/completions", "", Config{HTTPOptions: opts})
	failing := NewClient(srv.URL+"/v1/chat/completions?fail=1", "", Config{HTTPOptions: opts})
	read := func(r io.Reader, _ func(model.Delta) error) error {
		return ReadWhole(r, func([]byte) error { return nil })
	}
	emit := func(model.Delta) error { return nil }
	// The bound of the test, not an assertion on time.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	twoAtOnce := func() {
		t.Helper()
		errs := make(chan error, 2)
		for range 2 {
			go func() { errs <- ok.Whole(ctx, []byte("{}"), emit, read) }()
		}
		for range 2 {
			select {
			case <-arrived:
			case <-ctx.Done():
				t.Fatal("the two requests did not both arrive")
			}
		}
		both <- struct{}{}
		both <- struct{}{}
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
	}
	twoAtOnce()
	if err := failing.Whole(ctx, []byte("{}"), emit, read); err == nil {
		t.Fatal("no error for a 503 every time")
	}
	twoAtOnce()
	if n := dials.Load(); n != 2 {
		t.Errorf("%d connections dialled, want 2: giving up on a request closed the pool's idle ones", n)
	}
}

// TestSenders: without an http.Client the request goes straight to the
// transport, which follows no redirect and sends the URL's credentials
// as basic auth when there is no key; a caller's http.Client follows its
// redirects. Either way the API key wins over the URL's credentials.
func TestSenders(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.URL.Path == "/old" {
			http.Redirect(w, r, "/v1", http.StatusTemporaryRedirect)
			return
		}
		io.WriteString(w, r.Header.Get("Authorization"))
	}))
	defer srv.Close()
	pool := &http.Transport{}
	defer pool.CloseIdleConnections()
	withUser := strings.Replace(srv.URL, "://", "://ann:pw@", 1)
	for _, tt := range []struct {
		name, url, key string
		opts           model.HTTPOptions
		auth           string // the Authorization the upstream saw; "" for a failure
	}{
		{"transport, key", srv.URL + "/v1", "k1", model.HTTPOptions{Transport: pool}, "Bearer k1"},
		{"transport, userinfo", withUser + "/v1", "", model.HTTPOptions{Transport: pool}, "Basic YW5uOnB3"},
		{"transport, userinfo and key", withUser + "/v1", "k1", model.HTTPOptions{Transport: pool}, "Bearer k1"},
		{"default transport, userinfo", withUser + "/v1", "", model.HTTPOptions{}, "Basic YW5uOnB3"},
		{"transport, redirect", srv.URL + "/old", "k1", model.HTTPOptions{Transport: pool}, ""},
		{"client, userinfo", withUser + "/v1", "", model.HTTPOptions{HTTPClient: &http.Client{Transport: pool}}, "Basic YW5uOnB3"},
		{"client, redirect", srv.URL + "/old", "k1", model.HTTPOptions{HTTPClient: &http.Client{Transport: pool}}, "Bearer k1"},
	} {
		tt.opts.Logger, tt.opts.Retries = slog.New(slog.DiscardHandler), -1
		c := NewClient(tt.url, tt.key, Config{HTTPOptions: tt.opts})
		var got string
		read := func(r io.Reader, _ func(model.Delta) error) error {
			b, err := io.ReadAll(r)
			got = string(b)
			return err
		}
		err := c.Whole(context.Background(), []byte("{}"), func(model.Delta) error { return nil }, read)
		switch {
		case tt.auth == "" && err == nil:
			t.Errorf("%s: no error, the upstream saw %q", tt.name, got)
		case tt.auth != "" && (err != nil || got != tt.auth):
			t.Errorf("%s: the upstream saw %q (err %v), want %q", tt.name, got, err, tt.auth)
		}
	}
}

// TestEndlessResponseHeader: an upstream whose response head never ends
// fails the request with a 502 once the head passes
// maxResponseHeaderBytes, and the connection is dropped there: the
// upstream cannot make loom read (and hold) more than a bound. The
// upstream writes until the client closes the connection, or up to
// endless bytes, past which the cap has failed.
func TestEndlessResponseHeader(t *testing.T) {
	const endless = 256 << 20
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	written := make(chan int64, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			written <- 0
			return
		}
		defer conn.Close()
		r := bufio.NewReader(conn)
		for { // the request head; its small body is left unread
			line, err := r.ReadString('\n')
			if err != nil || line == "\r\n" {
				break
			}
		}
		n, _ := io.WriteString(conn, "HTTP/1.1 200 OK\r\nX-Endless: ")
		chunk := bytes.Repeat([]byte("a"), 64<<10)
		total := int64(n)
		for total < endless {
			n, err := conn.Write(chunk)
			total += int64(n)
			if err != nil {
				break
			}
		}
		written <- total
	}()

	c := NewClient("http://"+ln.Addr().String()+"/v1/chat/completions", "", Config{HTTPOptions: model.HTTPOptions{
		Logger: slog.New(slog.DiscardHandler), Retries: -1}})
	defer c.CloseIdleConnections()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	err = c.Stream(context.Background(), []byte("{}"), func(model.Delta) error { return nil }, readAll)
	runtime.ReadMemStats(&after)
	var merr *responses.APIError
	if !errors.As(err, &merr) || merr.Kind != responses.EUpstream {
		t.Fatalf("err = %v, want a 502", err)
	}
	// What the client read is at most the cap; what the upstream wrote
	// past it sits in the socket buffers of loopback (a few MB at most).
	if n := <-written; n >= 64<<20 {
		t.Errorf("the upstream wrote %d MB of one header before the client dropped it", n>>20)
	}
	// Everything allocated during the request bounds what the heap grew
	// by: the line of a 1 MiB head grows by appends, ~7 MB in all; a 10
	// MB one (net/http's default cap) takes ten times that.
	if grown := after.TotalAlloc - before.TotalAlloc; grown > 16<<20 {
		t.Errorf("%d MB allocated while reading an endless header", grown>>20)
	}
}
