package responses

import "fmt"

// Kinds of error: what kind of failure an APIError is, independent of
// HTTP. Packages below the server (tools, the engine, the model backends)
// return an *APIError of one of them; the server maps the kind to an
// HTTP status in one place (server/errors.go).
//
// The statuses in the comments are what the server answers with; this
// package decides none of them.
const (
	EInvalid        = "invalid"         // the request is wrong (400)
	EUnsupported    = "unsupported"     // the request asks for what this server does not do (400, unsupported_parameter)
	ENotFound       = "not_found"       // what the request names does not exist (404)
	EConflict       = "conflict"        // the request conflicts with the state of what it names (409)
	ERateLimited    = "rate_limited"    // a limit of this server or the upstream was reached (429)
	ETimeout        = "timeout"         // the work took longer than allowed (504)
	EUpstream       = "upstream"        // the upstream model server failed or answered garbage (502)
	EUnavailable    = "unavailable"     // a dependency (the store, a drain) is not there now; try again (503)
	ENotImplemented = "not_implemented" // the configured backend cannot do this (501)
	EInternal       = "internal"        // the server failed (500); the message is not shown
)

// Errorf returns the API error of kind with a formatted message, about
// param ("" for none).
func Errorf(kind, param, format string, args ...any) *APIError {
	return &APIError{Kind: kind, Param: param, Message: fmt.Sprintf(format, args...)}
}

// kindBodies are the type and code of an error of each kind, where the
// error brings none of its own: the body a client sees. Which HTTP status
// a kind is, is the server's to say (server/errors.go).
var kindBodies = map[string]struct{ typ, code string }{
	EInvalid:        {ErrInvalidRequest, ""},
	EUnsupported:    {ErrInvalidRequest, "unsupported_parameter"},
	ENotFound:       {ErrNotFound, "not_found"},
	EConflict:       {ErrInvalidRequest, ""},
	ERateLimited:    {ErrRateLimit, "rate_limit_exceeded"},
	ETimeout:        {ErrUpstream, "timeout"},
	EUpstream:       {ErrUpstream, "upstream_error"},
	EUnavailable:    {ErrServer, ""},
	ENotImplemented: {ErrInvalidRequest, "unsupported"},
	EInternal:       {ErrServer, ""},
}
