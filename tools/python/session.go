package python

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/loomgate/loom/tools"
	"github.com/loomgate/loom/tools/sandbox"
)

// TimeoutError is the Err of a call's result when the call overran
// Options.CallTimeout and the interpreter was killed.
type TimeoutError struct{ Timeout time.Duration }

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("python: execution timed out after %s; the interpreter was killed", e.Timeout)
}

// Session is one response's interpreter: a work directory from the start,
// and a Python process from the first call until Cleanup, Close or a
// timeout. Cleanup, Close and Box are the sandbox.Session's.
type Session struct {
	*sandbox.Session
	srv *Server
	// turn lets one cell run at a time: the interpreter is one process
	// with one state, as a notebook kernel is.
	turn chan struct{}

	mu     sync.Mutex
	interp *interpreter
}

var _ tools.Session = (*Session)(nil)

// Call implements tools.Session. It runs the code of call.Arguments (see
// Code) and returns its output. An exception in the code is a result with
// IsError set and the traceback in the output. A timeout or the
// interpreter's death is a result with IsError and Err set, telling the
// model that the state was reset. The error return is for ctx ending
// (the interpreter is then killed, as the cell's fate is unknown), for
// a closed session, and for a tool other than python (ErrUnknownTool).
func (s *Session) Call(ctx context.Context, call tools.Call) (tools.Result, error) {
	if call.Name != Name {
		return tools.Result{}, fmt.Errorf("%w: %q is not the python tool", tools.ErrUnknownTool, call.Name)
	}
	code := Code(call.Arguments)
	select {
	case s.turn <- struct{}{}:
	case <-ctx.Done():
		return tools.Result{}, ctx.Err()
	}
	defer func() { <-s.turn }()

	it, err := s.interpreter()
	if err != nil {
		return tools.Result{}, err
	}
	timeout := s.srv.Limits().CallTimeout
	callCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := it.run(callCtx, request{Code: code, MaxOutput: s.srv.Limits().MaxOutputBytes})
	if err == nil {
		return s.result(call.CallID, resp), nil
	}

	// The interpreter is dead or in an unknown state: it goes, and the
	// next call starts a fresh one.
	s.reset(it)
	switch {
	case s.Stopping():
		return tools.Result{}, tools.ErrClosed
	case ctx.Err() != nil:
		return tools.Result{}, ctx.Err()
	case callCtx.Err() != nil:
		return tools.ErrorResult(call.CallID,
			fmt.Sprintf("execution timed out after %s; the interpreter state was reset", timeout),
			&TimeoutError{Timeout: timeout}), nil
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		msg := fmt.Sprintf("the Python interpreter exited unexpectedly (status %d", ee.Exit.Code)
		if ee.Exit.Code == 128+24 { // SIGXCPU
			msg += ", CPU time limit reached"
		}
		return tools.ErrorResult(call.CallID, msg+"); the interpreter state was reset", err), nil
	}
	return tools.ErrorResult(call.CallID, "the Python interpreter stopped responding and was restarted; the interpreter state was reset", err), nil
}

// result turns the driver's response into the model's result.
func (s *Session) result(callID string, r response) tools.Result {
	limit := s.srv.Limits().MaxOutputBytes
	out := r.Output
	truncated := r.OutputBytes > int64(limit)
	if len(out) > limit {
		// The driver is inside the sandbox and not trusted to respect it.
		out, truncated = sandbox.ValidUTF8([]byte(out[:limit]), true), true
	}
	if truncated {
		out += sandbox.TruncationNotice(limit)
	}
	if r.Note != "" {
		note := r.Note
		if len(note) > 4096 {
			note = sandbox.ValidUTF8([]byte(note[:4096]), true)
		}
		out += "\n" + note
	}
	if s.Box().DiskFull() {
		out += sandbox.DiskFullNotice(s.Box())
	}
	return tools.Result{CallID: callID, Content: []tools.Content{tools.Text(out)}, IsError: r.Error}
}

// interpreter returns the running interpreter, starting one if needed.
func (s *Session) interpreter() (*interpreter, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// Stopping turns true before stopInterpreter takes this lock, so an
	// interpreter started here is either stopped there or never started.
	if s.Stopping() {
		return nil, tools.ErrClosed
	}
	if s.interp != nil {
		return s.interp, nil
	}
	it, err := startInterpreter(s.Box(), s.srv.python, s.srv.Limits().MaxOutputBytes)
	if errors.Is(err, tools.ErrClosed) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("python: starting the interpreter: %w", err)
	}
	s.interp = it
	return it, nil
}

// reset kills it and forgets it, if it is still the current interpreter.
func (s *Session) reset(it *interpreter) {
	if err := it.stop(); err != nil {
		s.srv.Limits().Logger.WarnContext(s.LogContext(), "python: killing the interpreter", "error", err)
	}
	s.mu.Lock()
	if s.interp == it {
		s.interp = nil
	}
	s.mu.Unlock()
}

// stopInterpreter is the session's stop function: it kills the
// interpreter, if one runs, at Cleanup or Close.
func (s *Session) stopInterpreter() error {
	s.mu.Lock()
	it := s.interp
	s.interp = nil
	s.mu.Unlock()
	if it == nil {
		return nil
	}
	return it.stop()
}
