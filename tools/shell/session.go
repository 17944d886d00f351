package shell

import (
	"context"
	"encoding/json"
	"errors"
	"sync"

	"github.com/loomgate/loom/tools"
	"github.com/loomgate/loom/tools/sandbox"
)

// Outcome types, as in shell_call_output.
const (
	OutcomeExit    = "exit"
	OutcomeTimeout = "timeout"
)

// Outcome is how a command ended: {"type":"exit","exit_code":N} or
// {"type":"timeout"}.
type Outcome struct {
	Type     string `json:"type"`
	ExitCode *int   `json:"exit_code,omitempty"`
}

// CommandOutput is one command's entry in a shell_call_output's output.
type CommandOutput struct {
	Stdout  string  `json:"stdout"`
	Stderr  string  `json:"stderr"`
	Outcome Outcome `json:"outcome"`
}

// CallOutput is a call's result: the output and max_output_length of a
// shell_call_output item. It is the result's Structured content and, as
// JSON, its text.
type CallOutput struct {
	Output []CommandOutput `json:"output"`
	// MaxOutputLength is the per-command cap that applied, in bytes.
	MaxOutputLength int `json:"max_output_length"`
}

// Session is one response's shell: a work directory its commands share.
type Session struct {
	srv *Server
	box *sandbox.Box

	mu     sync.Mutex
	closed bool
	done   bool // Cleanup or Close has begun

	once    sync.Once
	stopped chan struct{}
	stopErr error
}

var _ tools.Session = (*Session)(nil)

// Call implements tools.Session. It runs the action's commands in order,
// each in its own sandbox, and stops at the first that times out (the time
// limit covers the whole call). Exit codes, failing ones included, are in
// the outcome; IsError is set only for arguments that cannot run. The
// error return is for ctx ending and for a closed session.
func (s *Session) Call(ctx context.Context, call tools.Call) (tools.Result, error) {
	if s.isDone() {
		return tools.Result{}, tools.ErrClosed
	}
	action, err := ParseAction(call.Arguments)
	if err != nil {
		return tools.ErrorResult(call.CallID, err.Error(), err), nil
	}
	timeout, maxOut := s.srv.Limits(action)
	callCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	out := CallOutput{Output: []CommandOutput{}, MaxOutputLength: maxOut}
	for _, command := range action.Commands {
		co, err := s.run(callCtx, command, maxOut)
		switch {
		case s.isDone():
			return tools.Result{}, tools.ErrClosed
		case ctx.Err() != nil:
			return tools.Result{}, ctx.Err()
		case err != nil:
			return tools.Result{}, err
		}
		out.Output = append(out.Output, co)
		if co.Outcome.Type == OutcomeTimeout {
			break
		}
	}
	body, err := json.Marshal(out)
	if err != nil {
		return tools.Result{}, err
	}
	return tools.Result{CallID: call.CallID, Content: []tools.Content{tools.Text(string(body))}, Structured: body}, nil
}

// run runs one command. Its error is for a sandbox that failed, not for
// the command's own failure or timeout.
func (s *Session) run(ctx context.Context, command string, maxOut int) (CommandOutput, error) {
	budget := sandbox.NewOutputCap(maxOut)
	stdout, stderr := budget.Buffer(), budget.Buffer()
	exit, err := s.box.Run(ctx, sandbox.Command{
		Args:   []string{s.srv.opts.Shell, "-c", command},
		Stdout: stdout,
		Stderr: stderr,
	})
	co := CommandOutput{Stdout: stdout.String(), Stderr: stderr.String()}
	if stdout.Truncated() {
		co.Stdout += sandbox.TruncationNotice(maxOut)
	} else if stderr.Truncated() {
		co.Stderr += sandbox.TruncationNotice(maxOut)
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		co.Outcome = Outcome{Type: OutcomeTimeout}
		return co, nil
	case errors.Is(err, sandbox.ErrClosed):
		return co, tools.ErrClosed
	case err != nil:
		return co, err
	}
	code := exit.Code
	co.Outcome = Outcome{Type: OutcomeExit, ExitCode: &code}
	return co, nil
}

func (s *Session) isDone() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done
}

// Cleanup implements tools.Session: it kills whatever still runs and
// removes the work directory. It returns when that is done or ctx ends
// (the work then finishes in the background, and Close waits for it).
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

// Close implements tools.Session: what Cleanup does, if not done. It
// kills running commands rather than waiting for them.
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

func (s *Session) stop() <-chan struct{} {
	s.once.Do(func() {
		s.stopped = make(chan struct{})
		s.mu.Lock()
		s.done = true
		s.mu.Unlock()
		go func() {
			defer close(s.stopped)
			s.stopErr = s.box.Close()
			if s.stopErr != nil {
				s.srv.opts.Logger.Error("shell: cleaning up a session", "error", s.stopErr, "work_dir", s.box.Dir())
			}
		}()
	})
	return s.stopped
}

// Box is the session's sandbox box, for the engine's diagnostics and for
// tests.
func (s *Session) Box() *sandbox.Box { return s.box }
