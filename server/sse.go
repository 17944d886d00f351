package server

import (
	"net/http"
	"sync"
	"time"

	"github.com/loomgate/loom/responses"
)

// Coalescing of a live response's events. Events are gathered in the
// writer's buffer and written and flushed together when the engine says
// nothing more is coming for now (Flush: the upstream has nothing more
// buffered), at the latest flushDelay after the first unsent one, or
// when maxPending bytes wait. One write and one flush per burst instead
// of per event: the flush (a syscall) was a fifth of loom's CPU on long
// streams.
const (
	flushDelay = time.Millisecond
	maxPending = 16 << 10
)

// frameBuffers lends the writers their buffers for the length of a burst
// (and writeResponse its buffer for a body): an idle stream holds none,
// and a burst does not allocate one.
var frameBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// sseWriter writes events as server-sent events. The headers go out with
// the first event, so that a request rejected before it starts still gets
// a plain JSON error. While the stream is silent for longer than the
// keep-alive interval, a comment line keeps proxies from closing it.
type sseWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	dialect responses.Dialect

	mu      sync.Mutex
	buf     []byte // frames not written yet
	started bool
	last    time.Time
	err     error
	closed  bool
	// coalesce: Event leaves its frame in buf for Flush or the timer;
	// otherwise every frame is written and flushed at once.
	coalesce bool
	armed    bool // the timer is set to flush buf

	// The keep-alive (and the coalescing's deadline) is a timer, not a
	// goroutine: an idle stream costs no goroutine stack for it.
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
	// tick reads s.timer under mu; it may fire before AfterFunc has
	// returned when the interval is short.
	s.mu.Lock()
	s.timer = time.AfterFunc(keepAlive, s.tick)
	s.mu.Unlock()
	return s
}

// tick sends what waits in the buffer; when nothing was written for an
// interval it writes a keep-alive comment. Then it arms itself again for
// the rest of the interval.
func (s *sseWriter) tick() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armed = false
	if s.closed || s.err != nil {
		return
	}
	if len(s.buf) > 0 {
		s.send()
	}
	idle := time.Duration(0)
	if s.started {
		idle = time.Since(s.last)
	}
	if s.started && idle >= s.every {
		s.buf = append(s.buf, ": keep-alive\n\n"...)
		s.send()
		idle = 0
	}
	// Fire again when the stream will have been silent for a whole
	// interval; before the stream starts, an interval from now.
	s.timer.Reset(s.every - min(idle, s.every))
}

// Event writes one event: at once, or, when the writer coalesces, with
// the next Flush (at the latest flushDelay from now).
func (s *sseWriter) Event(ev *responses.Event) error {
	// A stored event was encoded once already, for the store; in the
	// same dialect that encoding is reused.
	return s.frame(ev.Type, func(b []byte) ([]byte, error) { return ev.AppendEncodedJSON(b, s.dialect) })
}

// Raw writes a stored event (canonical JSON) in the writer's dialect.
func (s *sseWriter) Raw(typ string, data []byte) error {
	return s.frame(typ, func(b []byte) ([]byte, error) { return append(b, data...), nil })
}

// Flush sends the events waiting in the buffer.
func (s *sseWriter) Flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil && len(s.buf) > 0 {
		s.send()
	}
}

// frame adds one SSE frame, "event: TYPE\ndata: JSON\n\n", the data
// appended by data, and sends it (or leaves it for Flush).
func (s *sseWriter) frame(typ string, data func([]byte) ([]byte, error)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	s.start()
	if s.buf == nil {
		s.buf = (*frameBuffers.Get().(*[]byte))[:0]
	}
	mark := len(s.buf)
	b := append(s.buf, "event: "...)
	b = append(b, s.dialect.EventType(typ)...)
	b = append(b, "\ndata: "...)
	b, err := data(b)
	if err != nil {
		s.buf = b[:mark]
		return err
	}
	s.buf = append(b, "\n\n"...)
	switch {
	case !s.coalesce, len(s.buf) >= maxPending:
		return s.send()
	case !s.armed:
		s.armed = true
		s.timer.Reset(flushDelay)
	}
	return nil
}

// Done writes the end-of-stream marker, after anything still buffered,
// and ends the stream: nothing is written after it. It hands the bytes to
// the ResponseWriter without a flush of its own: the handler returns
// right after, and net/http's last write sends them with the end of the
// chunked body, one write (a system call, and a wake-up of the client)
// per stream instead of two.
func (s *sseWriter) Done() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	s.start()
	s.buf = append(s.buf, "data: [DONE]\n\n"...)
	s.closed = true
	return s.write()
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
	// Canonical keys set directly, to values shared by every stream: Set
	// would canonicalise each key again and allocate each value.
	h["Content-Type"] = headerEventStream
	h["Cache-Control"] = headerNoCache
	h["Connection"] = headerKeepAlive
	h["X-Accel-Buffering"] = headerNo
	s.w.WriteHeader(http.StatusOK)
}

// The headers of a stream; net/http only reads them.
var (
	headerEventStream = []string{"text/event-stream"}
	headerNoCache     = []string{"no-cache"}
	headerKeepAlive   = []string{"keep-alive"}
	headerNo          = []string{"no"}
)

// send writes the buffer and flushes; the caller holds mu.
func (s *sseWriter) send() error {
	if err := s.write(); err != nil {
		return err
	}
	if err := s.rc.Flush(); err != nil {
		s.err = err
		return err
	}
	s.last = time.Now()
	return nil
}

// write hands the buffer to the ResponseWriter, which copies it; the
// caller holds mu.
func (s *sseWriter) write() error {
	_, err := s.w.Write(s.buf)
	// The buffer goes back to the pool (unless a huge event made it too
	// big to keep).
	if cap(s.buf) <= 4*maxPending {
		b := s.buf[:0]
		frameBuffers.Put(&b)
	}
	s.buf = nil
	if err != nil {
		s.err = err
	}
	return err
}
