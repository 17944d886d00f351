package shell

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

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
// Cleanup, Close and Box are the sandbox.Session's.
type Session struct {
	*sandbox.Session
	srv *Server
}

var _ tools.Session = (*Session)(nil)

// Call implements tools.Session. It runs the action's commands in order,
// each in its own sandbox, and stops at the first that times out (the time
// limit covers the whole call). Exit codes, failing ones included, are in
// the outcome; IsError is set only for arguments that cannot run. The
// error return is for ctx ending, for a closed session, and for a tool
// other than shell (ErrUnknownTool).
func (s *Session) Call(ctx context.Context, call tools.Call) (tools.Result, error) {
	switch {
	case s.Stopping():
		return tools.Result{}, tools.ErrClosed
	case call.Name != Name:
		return tools.Result{}, fmt.Errorf("%w: %q is not the shell tool", tools.ErrUnknownTool, call.Name)
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
		case s.Stopping():
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
	if n := len(out.Output); n > 0 && s.Box().DiskFull() {
		out.Output[n-1].Stderr += sandbox.DiskFullNotice(s.Box())
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
	exit, err := s.Box().Run(ctx, sandbox.Command{
		Args:   []string{s.srv.shell, "-c", command},
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
	case err != nil:
		return co, err
	}
	code := exit.Code
	co.Outcome = Outcome{Type: OutcomeExit, ExitCode: &code}
	return co, nil
}
