package tools

import (
	"errors"
	"fmt"
)

var (
	// ErrUnknownTool is returned for a call to a tool that no server in
	// the response offers (or that the client, not loom, executes).
	ErrUnknownTool = errors.New("tools: unknown tool")

	// ErrClosed is returned when a session, or the context owning it, is
	// used after it was closed. A sandbox's Box returns it too: a box is a
	// local tool session's, so its error goes back as the session's.
	ErrClosed = errors.New("tools: session closed")
)

// DuplicateError reports a name registered twice: a server label, or a
// tool name offered by two sources in the same request.
type DuplicateError struct {
	// Kind is "server" (a label registered twice), "function" (a function
	// tool registered twice) or "tool" (a name offered by two sources).
	Kind string
	Name string
	// Sources name the two claimants (server labels; "" is the client's
	// function tools). Only set for Kind "tool".
	Sources [2]string
}

func (e *DuplicateError) Error() string {
	if e.Kind == "tool" {
		return fmt.Sprintf("tools: tool %q offered by both %s and %s", e.Name, source(e.Sources[0]), source(e.Sources[1]))
	}
	return fmt.Sprintf("tools: duplicate %s %q", e.Kind, e.Name)
}

func source(server string) string {
	if server == "" {
		return "the request's function tools"
	}
	return fmt.Sprintf("server %q", server)
}

// Reason returns the client-fit reason an error carries, if one in its
// chain has one: an error whose text names no credential and no internal
// detail (an MCP server's OAuth challenge, say) implements
// ClientReason. Most errors do not, and the client is told only that the
// operation failed.
func Reason(err error) (string, bool) {
	var r interface{ ClientReason() string }
	if errors.As(err, &r) {
		return r.ClientReason(), true
	}
	return "", false
}
