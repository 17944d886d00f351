package httpretry

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// counting sends through a fresh pool and counts the attempts.
type counting struct {
	pool     *http.Transport
	attempts atomic.Int32
}

func newCounting(t *testing.T) *counting {
	c := &counting{pool: &http.Transport{}}
	t.Cleanup(c.pool.CloseIdleConnections)
	return c
}

func (c *counting) send(req *http.Request) (*http.Response, error) {
	c.attempts.Add(1)
	return c.pool.RoundTrip(req)
}

func fastPolicy(idempotent bool) Policy {
	return Policy{Retries: 2, WaitMin: time.Nanosecond, WaitMax: time.Nanosecond, Idempotent: idempotent}
}

func post(t *testing.T, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"a":1}`))
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// TestStatuses: which answers are tried again, for a request that may
// reach the server twice and for one that may not.
func TestStatuses(t *testing.T) {
	for _, tt := range []struct {
		status     int
		idempotent int32 // attempts with Idempotent
		once       int32 // attempts without
	}{
		{http.StatusOK, 1, 1},
		{http.StatusBadRequest, 1, 1},
		{http.StatusTooManyRequests, 3, 3},
		{http.StatusInternalServerError, 3, 1},
		{http.StatusNotImplemented, 1, 1},
		{http.StatusBadGateway, 3, 1},
		{http.StatusServiceUnavailable, 3, 3},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(tt.status)
			_, _ = io.WriteString(w, "last")
		}))
		for _, idempotent := range []bool{true, false} {
			c := newCounting(t)
			p := fastPolicy(idempotent)
			resp, err := p.Do(post(t, srv.URL), c.send)
			if err != nil {
				t.Fatalf("%d: %v", tt.status, err)
			}
			// The last answer is handed on whole.
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.status || string(body) != "last" {
				t.Errorf("%d: got %d %q", tt.status, resp.StatusCode, body)
			}
			want := tt.once
			if idempotent {
				want = tt.idempotent
			}
			if n := c.attempts.Load(); n != want {
				t.Errorf("%d, idempotent %v: %d attempts, want %d", tt.status, idempotent, n, want)
			}
		}
		srv.Close()
	}
}

// TestTransportErrors: a refused connection is retried whatever the
// request; a connection dropped after the request was sent only when the
// request may reach the server twice; an error the caller says is final
// never.
func TestTransportErrors(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + l.Addr().String()
	l.Close()
	dropped := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	defer dropped.Close()
	errFinal := errors.New("refused")
	final := func(err error) bool { return errors.Is(err, errFinal) }
	for _, tt := range []struct {
		name       string
		url        string
		idempotent bool
		final      bool
		want       int32
	}{
		{"refused", refused, false, false, 3},
		{"refused, idempotent", refused, true, false, 3},
		{"dropped", dropped.URL, false, false, 1},
		{"dropped, idempotent", dropped.URL, true, false, 3},
		{"final", refused, true, true, 1},
	} {
		c := newCounting(t)
		send := c.send
		p := fastPolicy(tt.idempotent)
		if tt.final {
			p.Final = final
			send = func(req *http.Request) (*http.Response, error) {
				c.attempts.Add(1)
				return nil, errFinal
			}
		}
		resp, err := p.Do(post(t, tt.url), send)
		if err == nil {
			resp.Body.Close()
			t.Fatalf("%s: no error", tt.name)
		}
		if n := c.attempts.Load(); n != tt.want {
			t.Errorf("%s: %d attempts, want %d (%v)", tt.name, n, tt.want, err)
		}
	}
}

// TestBodies: every retry sends the whole body again (from GetBody); a
// body that cannot be sent again is not retried.
func TestBodies(t *testing.T) {
	var mu sync.Mutex
	var bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		mu.Unlock()
		http.Error(w, "busy", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	c := newCounting(t)
	p := fastPolicy(false)
	resp, err := p.Do(post(t, srv.URL), c.send)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if strings.Join(bodies, " ") != `{"a":1} {"a":1} {"a":1}` {
		t.Errorf("bodies sent: %q", bodies)
	}

	c = newCounting(t)
	req := post(t, srv.URL)
	req.GetBody = nil
	req.Body = io.NopCloser(strings.NewReader(`{"b":2}`))
	resp, err = p.Do(req, c.send)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if n := c.attempts.Load(); n != 1 || resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("a body without GetBody: %d attempts, status %d", n, resp.StatusCode)
	}
}

// TestCancelledWhileWaiting: a request cancelled during the backoff
// returns the context's error at once, without another attempt.
func TestCancelledWhileWaiting(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "3600")
		http.Error(w, "busy", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := newCounting(t)
	send := func(req *http.Request) (*http.Response, error) {
		resp, err := c.send(req)
		cancel() // the answer is in; the wait that follows is cut
		return resp, err
	}
	p := Policy{Retries: 2, WaitMin: time.Hour, WaitMax: time.Hour}
	resp, err := p.Do(post(t, srv.URL).WithContext(ctx), send)
	if !errors.Is(err, context.Canceled) || resp != nil {
		t.Fatalf("got %v, %v", resp, err)
	}
	if n := c.attempts.Load(); n != 1 {
		t.Errorf("%d attempts, want 1", n)
	}
}

// TestTransport: as an http.Client's transport, the retries are invisible
// to the client but for the final answer.
func TestTransport(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) < 3 {
			http.Error(w, "busy", http.StatusTooManyRequests)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	defer srv.Close()
	pool := &http.Transport{}
	defer pool.CloseIdleConnections()
	client := &http.Client{Transport: NewTransport(pool, fastPolicy(false))}
	resp, err := client.Post(srv.URL, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "ok" || n.Load() != 3 {
		t.Errorf("got %d %q after %d attempts", resp.StatusCode, body, n.Load())
	}
}
