package conversation

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// SessionError reports a failed session operation: which server, which of
// its tools were involved, and how it failed. Close joins one per failure,
// so a caller can tell exactly which tool or server failed or hung.
type SessionError struct {
	Op      Op
	Server  string
	Tools   []string // the tools called on the session (or the one called)
	Outcome Outcome
	// Timeout is the limit that was exceeded, for TimedOut.
	Timeout time.Duration
	Err     error
}

func (e *SessionError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "conversation: %s of server %q", e.Op, e.Server)
	if len(e.Tools) > 0 {
		fmt.Fprintf(&b, " (tools %s)", strings.Join(e.Tools, ", "))
	}
	switch e.Outcome {
	case TimedOut:
		if e.Timeout > 0 {
			fmt.Fprintf(&b, " hung past %v", e.Timeout)
		} else {
			b.WriteString(" timed out")
		}
	case Canceled:
		b.WriteString(" canceled")
	case Panicked:
		b.WriteString(" panicked")
	default:
		b.WriteString(" failed")
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

func (e *SessionError) Unwrap() error { return e.Err }

// PanicError is a panic recovered from a tool, turned into an error so that
// one broken tool cannot take the server down.
type PanicError struct {
	Value any
	Stack []byte // logged, never shown to the model
}

func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

// Unwrap returns the panic value if it was an error.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// outcomeOf classifies an operation's error.
func outcomeOf(err error) Outcome {
	var pe *PanicError
	switch {
	case err == nil:
		return OK
	case errors.As(err, &pe):
		return Panicked
	case errors.Is(err, context.DeadlineExceeded):
		return TimedOut
	case errors.Is(err, context.Canceled):
		return Canceled
	}
	return Failed
}
