package mockllm

import (
	"context"
	"crypto/sha256"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"
)

// Server is the scripted upstream. It is an http.Handler; wrap it in
// httptest.NewServer or an http.Server. It is safe for concurrent use.
type Server struct {
	opts Options
	log  *slog.Logger
	mux  *http.ServeMux

	closeOnce sync.Once
	closed    chan struct{}

	mu       sync.Mutex
	requests []Request
	stats    Stats
	changed  chan struct{} // closed and replaced whenever stats change
	attempts map[[sha256.Size]byte]int

	cache *prefixCache // nil without Options.PrefixCache
}

// New returns a Server. A nil opts means the defaults. It panics on an
// unknown Options.ReasoningField.
func New(opts *Options) *Server {
	o := opts.resolve()
	s := &Server{
		opts:     o,
		log:      o.Logger,
		mux:      http.NewServeMux(),
		closed:   make(chan struct{}),
		changed:  make(chan struct{}),
		attempts: make(map[[sha256.Size]byte]int),
	}
	if o.PrefixCache != nil {
		s.cache = newPrefixCache(o.PrefixCache)
	}
	// One handler per endpoint, each in its own file.
	s.mux.HandleFunc("POST /v1/chat/completions", s.handleChat)
	s.mux.HandleFunc("POST /v1/completions", s.handleCompletions)
	s.mux.HandleFunc("GET /v1/models", s.handleModels)
	s.mux.HandleFunc("POST /tokenize", s.handleTokenize)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "mockllm: no route for "+r.Method+" "+r.URL.Path, "")
	})
	return s
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Close ends every stall and pause in progress, dropping those
// connections, so that an httptest.Server wrapping s can shut down. The
// Server keeps answering new requests, but they no longer stall.
func (s *Server) Close() {
	s.closeOnce.Do(func() { close(s.closed) })
}

// errClosed reports that Close interrupted a wait.
var errClosed = errors.New("mockllm: server closed")

// sleep waits for d, for the client to go away (ctx.Err()), or for Close
// (errClosed). A d of 0 returns nil at once; a negative d waits without
// end, which is how #stall is made.
func (s *Server) sleep(ctx context.Context, d time.Duration) error {
	if d == 0 {
		return nil
	}
	var timeout <-chan time.Time
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-timeout:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-s.closed:
		return errClosed
	}
}

// waitOutcome maps a failed sleep to how the request ended: the client
// went away, or Close interrupted it (and the connection is dropped).
func (s *Server) waitOutcome(err error) {
	if errors.Is(err, errClosed) {
		s.abort()
	}
	s.end(outcomeCancelled)
}

// abort counts the request as failed and drops the connection without
// finishing the response, like an engine that crashed: the client sees
// an unexpected EOF, never a clean end of stream.
func (s *Server) abort() {
	s.end(outcomeFailed)
	panic(http.ErrAbortHandler)
}

// attempt counts requests with exactly this body; #flaky uses it so a
// retried request can fail N times and then succeed.
func (s *Server) attempt(body []byte) int {
	key := sha256.Sum256(body)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.attempts[key]++
	return s.attempts[key]
}
