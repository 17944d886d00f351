package mockllm

import (
	"context"
	"net/http"
	"slices"
)

// Request is one recorded request to a completion endpoint, in arrival
// order. Recorded values are shared: read them, do not modify them.
type Request struct {
	Seq    int // 1-based arrival order; also in the response id
	Method string
	Path   string
	Header http.Header
	Body   []byte       // the raw body, byte for byte
	Chat   *ChatRequest // the decoded chat body; nil if not valid JSON or not chat
	// Completion is the decoded /v1/completions body with its prompt
	// decoded from harmony; nil if not valid JSON or not completions.
	Completion *CompletionRequest
}

// Stats counts requests to the completion endpoints. Every started request
// ends up in exactly one of the other counters once it has finished.
type Stats struct {
	Started int
	// Completed requests sent their whole answer (including an answer
	// with #say or the default text, but not an injected failure).
	Completed int
	// Cancelled requests lost their client (the request context ended)
	// before the answer was complete.
	Cancelled int
	// Failed requests were rejected or got an injected failure: an HTTP
	// error, a cut connection, garbage, or Close during a stall.
	Failed int
}

type outcome int

const (
	outcomeCompleted outcome = iota
	outcomeCancelled
	outcomeFailed
)

// begin records a new request and returns its sequence number. rec holds
// the body and its decoded form; begin fills in the rest.
func (s *Server) begin(r *http.Request, rec Request) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.Started++
	seq := s.stats.Started
	if !s.opts.Unrecorded {
		rec.Seq = seq
		rec.Method = r.Method
		rec.Path = r.URL.Path
		rec.Header = r.Header.Clone()
		s.requests = append(s.requests, rec)
	}
	s.notifyLocked()
	return seq
}

// end counts how a request finished.
func (s *Server) end(o outcome) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch o {
	case outcomeCompleted:
		s.stats.Completed++
	case outcomeCancelled:
		s.stats.Cancelled++
	case outcomeFailed:
		s.stats.Failed++
	}
	s.notifyLocked()
}

// notifyLocked wakes every waiter; they re-check their condition.
func (s *Server) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// Requests returns the recorded requests in arrival order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Stats returns the current counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// Reset forgets recorded requests, counters and #flaky attempts. Call it
// between requests, not during one.
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = nil
	s.stats = Stats{}
	clear(s.attempts)
	s.notifyLocked()
}

// WaitStarted waits until at least n requests have started, or ctx ends.
func (s *Server) WaitStarted(ctx context.Context, n int) error {
	return s.waitFor(ctx, func(st Stats) bool { return st.Started >= n })
}

// WaitCancelled waits until at least n requests have seen their client go
// away, or ctx ends. It is how a test proves that cancelling a response in
// loom really cancels the upstream call.
func (s *Server) WaitCancelled(ctx context.Context, n int) error {
	return s.waitFor(ctx, func(st Stats) bool { return st.Cancelled >= n })
}

// WaitDone waits until at least n requests have finished in any way.
func (s *Server) WaitDone(ctx context.Context, n int) error {
	return s.waitFor(ctx, func(st Stats) bool { return st.Completed+st.Cancelled+st.Failed >= n })
}

// WaitRequest waits until a recorded request satisfies match, or ctx
// ends: a test waits for one request by what it holds, which a count of
// requests cannot tell from a retried one.
func (s *Server) WaitRequest(ctx context.Context, match func(Request) bool) error {
	for {
		s.mu.Lock()
		found := slices.ContainsFunc(s.requests, match)
		changed := s.changed
		s.mu.Unlock()
		if found {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (s *Server) waitFor(ctx context.Context, cond func(Stats) bool) error {
	for {
		s.mu.Lock()
		ok, changed := cond(s.stats), s.changed
		s.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
