package server

import (
	"cmp"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/loomgate/loom/responses"
)

// Kinds of failure that only HTTP has, beside the domain codes of the
// responses package; all of them are in the one table below.
const (
	kindUnauthenticated  = "unauthenticated"    // no or a bad credential (401)
	kindMethodNotAllowed = "method_not_allowed" // the route has no such method (405)
	kindRequestTimeout   = "request_timeout"    // the body did not arrive in time (408)
	kindTooLarge         = "too_large"          // the body is over the limit (413)
	kindUnsupportedMedia = "unsupported_media"  // the body is not JSON (415)
	kindUpgradeRequired  = "upgrade_required"   // a WebSocket endpoint asked without the upgrade (426)
)

// errorShape is what a client sees of an error of one kind: its HTTP
// status, the type and code of the body where the error does not bring its
// own, and, for a refusal the client should retry, the Retry-After header
// (seconds).
type errorShape struct {
	status     int
	typ        string
	code       string
	retryAfter string
}

// errorShapes is the one table from an error's kind to its status and
// body. A domain error's code is a key; so is every *APIError's Kind.
var errorShapes = map[string]errorShape{
	responses.EInvalid:        {http.StatusBadRequest, responses.ErrInvalidRequest, "", ""},
	responses.EUnsupported:    {http.StatusBadRequest, responses.ErrInvalidRequest, "unsupported_parameter", ""},
	responses.ENotFound:       {http.StatusNotFound, responses.ErrNotFound, "not_found", ""},
	responses.EConflict:       {http.StatusConflict, responses.ErrInvalidRequest, "", ""},
	responses.ERateLimited:    {http.StatusTooManyRequests, responses.ErrRateLimit, "rate_limit_exceeded", "1"},
	responses.ETimeout:        {http.StatusGatewayTimeout, responses.ErrUpstream, "timeout", ""},
	responses.EUpstream:       {http.StatusBadGateway, responses.ErrUpstream, "upstream_error", ""},
	responses.EUnavailable:    {http.StatusServiceUnavailable, responses.ErrServer, "", "2"},
	responses.ENotImplemented: {http.StatusNotImplemented, responses.ErrInvalidRequest, "unsupported", ""},
	responses.EInternal:       {http.StatusInternalServerError, responses.ErrServer, "", ""},
	kindUnauthenticated:       {http.StatusUnauthorized, responses.ErrInvalidRequest, "invalid_api_key", ""},
	kindMethodNotAllowed:      {http.StatusMethodNotAllowed, responses.ErrInvalidRequest, "method_not_allowed", ""},
	kindRequestTimeout:        {http.StatusRequestTimeout, responses.ErrInvalidRequest, "request_timeout", ""},
	kindTooLarge:              {http.StatusRequestEntityTooLarge, responses.ErrInvalidRequest, "request_too_large", ""},
	kindUnsupportedMedia:      {http.StatusUnsupportedMediaType, responses.ErrInvalidRequest, "unsupported_media_type", ""},
	kindUpgradeRequired:       {http.StatusUpgradeRequired, responses.ErrInvalidRequest, "upgrade_required", ""},
}

// errInternal is what a client sees of a failure whose detail stays in
// the log.
var errInternal = &responses.APIError{Kind: responses.EInternal, Type: responses.ErrServer, Message: "internal server error"}

// apiError is the one map from an error to what a client sees: the HTTP
// status and the body. An *responses.APIError keeps its body (a missing
// type or code is the kind's); a domain error (*responses.Error) gets the
// body of its code; anything else, an internal code, or a kind the table
// does not know, is an internal 500 whose detail stays in the log.
func apiError(err error) (int, *responses.APIError) {
	var apiErr *responses.APIError
	if errors.As(err, &apiErr) {
		shape, ok := errorShapes[apiErr.Kind]
		if !ok {
			return http.StatusInternalServerError, errInternal
		}
		if apiErr.Type == "" || apiErr.Code == "" {
			filled := *apiErr
			filled.Type = cmp.Or(filled.Type, shape.typ)
			filled.Code = cmp.Or(filled.Code, shape.code)
			apiErr = &filled
		}
		return shape.status, apiErr
	}
	var e *responses.Error
	if !errors.As(err, &e) || e.Code == responses.EInternal {
		return http.StatusInternalServerError, errInternal
	}
	shape, ok := errorShapes[e.Code]
	if !ok {
		return http.StatusInternalServerError, errInternal
	}
	return shape.status, &responses.APIError{Kind: e.Code, Type: shape.typ, Code: shape.code, Param: e.Param, Message: e.Message}
}

// writeError writes err as an API error body (apiError), with Retry-After
// for a refusal worth retrying. The error itself, cause and all, is kept
// for the request's log line.
func writeError(w http.ResponseWriter, err error) {
	status, apiErr := apiError(err)
	if sw, ok := w.(*statusWriter); ok {
		sw.apiErr, sw.err = apiErr, err
	}
	body, _ := json.Marshal(apiErr)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if after := errorShapes[apiErr.Kind].retryAfter; after != "" && w.Header().Get("Retry-After") == "" {
		w.Header().Set("Retry-After", after)
	}
	w.WriteHeader(status)
	w.Write(body)
	w.Write([]byte("\n"))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(body)
	w.Write([]byte("\n"))
}
