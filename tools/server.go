package tools

import "context"

// Server is a source of tools executed in loom: an MCP server, the local
// Python interpreter, a shell.
//
// Implementations must be safe for concurrent use: one Server may serve
// many responses at once.
type Server interface {
	// Name is the server's label, unique within a request. It names the
	// server in logs, errors and (for MCP) output items.
	Name() string

	// Tools lists what the server offers, in a stable order. It may be
	// served from a cache. It is called only for requests that offer the
	// server's tools to the model.
	Tools(ctx context.Context) ([]Definition, error)

	// Open opens a session for one response. It is called lazily, the
	// first time the model calls one of the server's tools, so a stateless
	// server should make it cheap. If Open fails it must leave nothing to
	// close. ctx bounds opening only, not the session's life.
	Open(ctx context.Context) (Session, error)

	// Capabilities declares what the server can do beyond listing and
	// running tools, and the kind of its calls. It is read once per
	// request; the zero value declares nothing (an MCP-like server).
	Capabilities() Capabilities
}

// Session is one response's use of a Server.
//
// Calls may run concurrently. At the end of the response the owner calls
// Cleanup at most once, and only if a tool was called on the session, then
// Close exactly once. Close may come while a Cleanup or Call that overran
// its deadline is still running: closing is how such a call is stopped, so
// Close must not wait for them.
type Session interface {
	// Call runs one tool call. A tool-level failure is a Result with
	// IsError set; an error means the call could not be made (transport,
	// protocol), and its text is shown to the model, so it must not carry
	// secrets. A call of a tool the server does not list runs nothing: an
	// error wrapping ErrUnknownTool (or the IsError result of a remote
	// server that says so itself). Call must return promptly once ctx is
	// done.
	Call(ctx context.Context, call Call) (Result, error)

	// Cleanup asks the server to drop the per-session state the calls
	// built up (MCP cleanup_session; resetting an interpreter). It must
	// return promptly once ctx is done.
	Cleanup(ctx context.Context) error

	// Close releases the session. After Close, Call and Cleanup return
	// ErrClosed, and a second Close returns nil.
	Close() error
}
