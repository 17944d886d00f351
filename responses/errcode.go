package responses

import (
	"errors"
	"fmt"
)

// Codes of domain errors: what kind of failure an error is, independent
// of HTTP. Packages below the server (tools, the engine) return an *Error
// with one of them; the server maps the code to an HTTP status and an
// OpenAI error shape in one place.
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

// Error is a domain error: a code, the request parameter it is about, and
// a message written for the client (it never carries internal details;
// Err, for logs, may).
type Error struct {
	Code    string
	Param   string
	Message string
	Err     error
}

// Errorf returns an *Error with a formatted message.
func Errorf(code, param, format string, args ...any) *Error {
	return &Error{Code: code, Param: param, Message: fmt.Sprintf(format, args...)}
}

func (e *Error) Error() string {
	if e.Param != "" {
		return fmt.Sprintf("%s: %s (param %s)", e.Code, e.Message, e.Param)
	}
	return e.Code + ": " + e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// ErrorCode returns the code of err: an *Error's, EInternal for any other
// error, "" for nil.
func ErrorCode(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return EInternal
}
