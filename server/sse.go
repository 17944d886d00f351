package server

import (
	"net/http"
	"sync"
	"time"

	"github.com/loomgate/loom/responses"
)

// sseWriter writes events as server-sent events. The headers go out with
// the first event, so that a request rejected before it starts still gets
// a plain JSON error. While the stream is silent for longer than the
// keep-alive interval, a comment line keeps proxies from closing it.
type sseWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	dialect responses.Dialect

	mu      sync.Mutex
	buf     []byte
	started bool
	last    time.Time
	err     error
	closed  bool

	// The keep-alive is a timer, not a goroutine: an idle stream costs no
	// goroutine stack for it.
	every time.Duration
	timer *time.Timer
}

func newSSEWriter(w http.ResponseWriter, d responses.Dialect, keepAlive time.Duration) *sseWriter {
	s := &sseWriter{
		w:       w,
		rc:      http.NewResponseController(w),
		dialect: d,
		every:   keepAlive,
	}
	s.timer = time.AfterFunc(keepAlive, s.keepAlive)
	return s
}

// keepAlive writes a comment when nothing was written for an interval,
// then arms itself again for the rest of the interval.
func (s *sseWriter) keepAlive() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.err != nil {
		return
	}
	idle := time.Duration(0)
	if s.started {
		idle = time.Since(s.last)
	}
	if s.started && idle >= s.every {
		s.write([]byte(": keep-alive\n\n"))
		idle = 0
	}
	// Fire again when the stream will have been silent for a whole
	// interval; before the stream starts, an interval from now.
	s.timer.Reset(s.every - min(idle, s.every))
}

// Event writes one event and flushes it.
func (s *sseWriter) Event(ev *responses.Event) error {
	// A stored event was encoded once already, for the store; in the
	// same dialect that encoding is reused.
	return s.frame(ev.Type, func(b []byte) ([]byte, error) { return ev.AppendEncodedJSON(b, s.dialect) })
}

// Raw writes a stored event (canonical JSON) in the writer's dialect.
func (s *sseWriter) Raw(typ string, data []byte) error {
	return s.frame(typ, func(b []byte) ([]byte, error) { return append(b, data...), nil })
}

// frame writes one SSE frame, "event: TYPE\ndata: JSON\n\n", the data
// appended by data, and flushes it.
func (s *sseWriter) frame(typ string, data func([]byte) ([]byte, error)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	s.start()
	b := append(s.buf[:0], "event: "...)
	b = append(b, s.dialect.EventType(typ)...)
	b = append(b, "\ndata: "...)
	b, err := data(b)
	if err != nil {
		return err
	}
	b = append(b, "\n\n"...)
	s.buf = b
	return s.write(b)
}

// Done writes the end-of-stream marker.
func (s *sseWriter) Done() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	s.start()
	return s.write([]byte("data: [DONE]\n\n"))
}

// Close stops the keep-alive. A keep-alive already running sees closed
// under the lock and writes nothing, so nothing is written after Close.
func (s *sseWriter) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.timer.Stop()
}

// Open sends the headers now, before any event, so that keep-alive
// comments flow while a followed response has nothing to send yet.
func (s *sseWriter) Open() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil || s.started {
		return s.err
	}
	s.start()
	if err := s.rc.Flush(); err != nil {
		s.err = err
		return err
	}
	s.last = time.Now()
	return nil
}

// Started reports whether the stream's headers were sent.
func (s *sseWriter) Started() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.started
}

func (s *sseWriter) start() {
	if s.started {
		return
	}
	s.started = true
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	s.w.WriteHeader(http.StatusOK)
}

// write sends b and flushes; the caller holds mu.
func (s *sseWriter) write(b []byte) error {
	if _, err := s.w.Write(b); err != nil {
		s.err = err
		return err
	}
	if err := s.rc.Flush(); err != nil {
		s.err = err
		return err
	}
	s.last = time.Now()
	return nil
}
