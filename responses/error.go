package responses

import (
	"encoding/json"
	"fmt"
)

// Error types of the API error body.
const (
	ErrInvalidRequest = "invalid_request_error"
	ErrNotFound       = "not_found_error"
	ErrRateLimit      = "rate_limit_error"
	ErrUpstream       = "upstream_error"
	ErrServer         = "server_error"
)

// maxMessage caps an error message: error bodies never carry more, whatever
// produced them.
const maxMessage = 1024

// APIError is loom's one error type: what went wrong, as a client is to
// be told it. Its kind (one of the codes of errcode.go) says what sort of
// failure it is; the server maps the kind to an HTTP status, and every
// package below it -- the engine, the tools, the model backends -- returns
// an *APIError for a failure a client should hear about. Type and Code,
// when empty, are the kind's (Filled). Its JSON form is
// {"error":{"message","type","param","code"}}. Messages are written for
// clients: they never carry internal details; Cause, for logs, may.
type APIError struct {
	Kind    string
	Type    string
	Code    string
	Param   string
	Message string
	// Cause is what went wrong inside, for the server's log: it is never
	// sent to the client (Unwrap reaches it).
	Cause error
}

// Unwrap returns the cause, so that errors.Is and errors.As see through an
// API error to what produced it.
func (e *APIError) Unwrap() error { return e.Cause }

// Error is the error for logs: what the client is told, and the cause it
// is not.
func (e *APIError) Error() string {
	s := fmt.Sprintf("%s %s: %s", e.Kind, e.Type, e.Message)
	if e.Param != "" {
		s += " (param " + e.Param + ")"
	}
	if e.Cause != nil {
		s += ": " + e.Cause.Error()
	}
	return s
}

// Filled returns e with the type and code of its kind where it has none
// of its own (e itself when it has both).
func (e *APIError) Filled() *APIError {
	if e.Type != "" && e.Code != "" {
		return e
	}
	body := kindBodies[e.Kind]
	f := *e
	if f.Type == "" {
		f.Type = body.typ
	}
	if f.Code == "" {
		f.Code = body.code
	}
	return &f
}

// MarshalJSON writes the error body, with param and code null when unset
// and the message capped in size.
func (e *APIError) MarshalJSON() ([]byte, error) {
	e = e.Filled()
	msg := e.Message
	if len(msg) > maxMessage {
		msg = msg[:maxMessage] + "…"
	}
	type body struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	}
	return json.Marshal(struct {
		Error body `json:"error"`
	}{body{msg, e.Type, nullable(e.Param), nullable(e.Code)}})
}

// Payload returns the error as the body of an error event.
func (e *APIError) Payload() *ErrorPayload {
	e = e.Filled()
	return &ErrorPayload{Type: e.Type, Code: nullable(e.Code), Message: e.Message, Param: nullable(e.Param)}
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// BadRequest is an invalid request naming the offending parameter.
func BadRequest(param, format string, args ...any) *APIError {
	return &APIError{Kind: EInvalid, Type: ErrInvalidRequest, Param: param, Message: fmt.Sprintf(format, args...)}
}

// Unsupported is an invalid request for a parameter loom understands but cannot honour.
func Unsupported(param, format string, args ...any) *APIError {
	e := BadRequest(param, format, args...)
	e.Kind, e.Code = EUnsupported, "unsupported_parameter"
	return e
}

// NotFound names the parameter that pointed at nothing.
func NotFound(param, format string, args ...any) *APIError {
	return &APIError{Kind: ENotFound, Type: ErrNotFound, Code: "not_found", Param: param, Message: fmt.Sprintf(format, args...)}
}
