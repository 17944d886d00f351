package sandbox

import (
	"context"
	"errors"
	"github.com/loomgate/loom/telemetry"
	"log/slog"
	"sync"
	"time"

	"github.com/loomgate/loom/tools"
)

// Defaults of the limits every sandboxed tool has, for a zero option.
const (
	DefaultCallTimeout    = 30 * time.Second
	DefaultMaxOutputBytes = 64 << 10
)

// Session is the lifecycle of a tool session that owns a Box: it
// implements the Cleanup and Close of tools.Session, the tool adds Call.
// Shutdown happens once: it marks the session stopping, runs the tool's
// stop function (if any) and closes the Box, which kills whatever the
// session started and removes its work directory.
type Session struct {
	box  *Box
	name string // the tool, for log messages
	log  *slog.Logger
	// logCtx carries the trace of the request that opened the session,
	// for what Close logs after that request's context is gone.
	logCtx context.Context
	halt   func() error

	mu       sync.Mutex
	closed   bool // Close was called
	stopping bool // Cleanup or Close has begun

	once    sync.Once
	stopped chan struct{}
	stopErr error
}

// NewSession creates a Session with a new Box. name is the tool's, log
// receives failures to clean up. stop, if not nil, is called once at
// shutdown, after Stopping turns true and before the Box closes; it ends
// what the tool keeps running in the Box. ctx is the opening request's:
// the session's log lines carry its trace.
func (s *Sandbox) NewSession(ctx context.Context, name string, log *slog.Logger, stop func() error) (*Session, error) {
	box, err := s.NewBox()
	if err != nil {
		return nil, err
	}
	if !s.sandboxed {
		// Logged with the opening request's trace.
		s.log.WarnContext(ctx, "sandbox: starting an UNSANDBOXED session", "work_dir", box.dir, "uid", box.uid)
	}
	return &Session{box: box, name: name, log: log, logCtx: telemetry.Detach(ctx), halt: stop}, nil
}

// LogContext carries the trace of the request that opened the session:
// log with it what happens outside a call.
func (s *Session) LogContext() context.Context { return s.logCtx }

// Box is the session's sandbox box, for the engine's diagnostics and for
// tests.
func (s *Session) Box() *Box { return s.box }

// Stopping reports whether Cleanup or Close has begun.
func (s *Session) Stopping() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopping
}

// Cleanup implements tools.Session: it kills whatever the session still
// runs and removes the work directory. It returns when that is done or ctx
// ends (the work then finishes in the background, and Close waits for
// it). After Close it returns tools.ErrClosed.
func (s *Session) Cleanup(ctx context.Context) error {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return tools.ErrClosed
	}
	select {
	case <-s.stop():
		return s.stopErr
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close implements tools.Session: what Cleanup does, if it has not been
// done. It does not wait for a running call, which the kill ends; it does
// wait (a few seconds at most) until no process of the session is left.
func (s *Session) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	<-s.stop()
	return s.stopErr
}

// stop starts the one shutdown of the session and returns a channel
// closed when it is over.
func (s *Session) stop() <-chan struct{} {
	s.once.Do(func() {
		s.stopped = make(chan struct{})
		s.mu.Lock()
		s.stopping = true
		s.mu.Unlock()
		go func() {
			defer close(s.stopped)
			// Box.Close also finds what escaped the tool's namespace or
			// process group.
			if s.halt == nil {
				s.stopErr = s.box.Close()
			} else {
				herr := s.halt()
				s.stopErr = errors.Join(herr, s.box.Close())
			}
			if s.stopErr != nil {
				s.log.ErrorContext(s.logCtx, s.name+": cleaning up a session", "error", s.stopErr, "work_dir", s.box.Dir())
			}
		}()
	})
	return s.stopped
}
