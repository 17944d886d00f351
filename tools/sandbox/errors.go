package sandbox

import (
	"errors"
	"fmt"
	"strings"
)

// ErrUnavailable is wrapped by New's error when bubblewrap is missing or
// does not work here and the operator did not allow running unsandboxed.
var ErrUnavailable = errors.New("sandbox: bubblewrap is not available")

// UnavailableError says why the sandbox cannot be used. It matches
// ErrUnavailable with errors.Is.
type UnavailableError struct {
	// Reason is what was tried, in words for the operator.
	Reason string
	Err    error
}

func (e *UnavailableError) Error() string {
	msg := "sandbox: bubblewrap is not available (" + e.Reason + ")"
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg + "; install bubblewrap, or allow running unsandboxed explicitly"
}

func (e *UnavailableError) Unwrap() []error { return []error{ErrUnavailable, e.Err} }

// SetupError reports a sandbox that failed before the program started:
// bwrap could not build the namespaces or mounts.
type SetupError struct {
	// Code is bwrap's exit code.
	Code int
	// Stderr is the start of what bwrap wrote.
	Stderr string
}

func (e *SetupError) Error() string {
	return fmt.Sprintf("sandbox: bwrap failed to set up (exit %d): %s", e.Code, strings.TrimSpace(e.Stderr))
}

// KillError reports processes that were still alive when the time to kill
// them ran out.
type KillError struct {
	PIDs []int
}

func (e *KillError) Error() string {
	return fmt.Sprintf("sandbox: %d process(es) still running after kill: %v", len(e.PIDs), e.PIDs)
}
