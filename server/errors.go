package server

import (
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

// errorStatus is the HTTP side of an error of one kind: its status and,
// for a refusal the client should retry, the Retry-After header
// (seconds). The body (type, code) is the error's own, or its kind's
// (responses.APIError.Filled).
type errorStatus struct {
	status     int
	retryAfter string
}

// errorStatuses is the one table from an error's kind to its HTTP status.
var errorStatuses = map[string]errorStatus{
	responses.EInvalid:        {http.StatusBadRequest, ""},
	responses.EUnsupported:    {http.StatusBadRequest, ""},
	responses.ENotFound:       {http.StatusNotFound, ""},
	responses.EConflict:       {http.StatusConflict, ""},
	responses.ERateLimited:    {http.StatusTooManyRequests, "1"},
	responses.ETimeout:        {http.StatusGatewayTimeout, ""},
	responses.EUpstream:       {http.StatusBadGateway, ""},
	responses.EUnavailable:    {http.StatusServiceUnavailable, "2"},
	responses.ENotImplemented: {http.StatusNotImplemented, ""},
	responses.EInternal:       {http.StatusInternalServerError, ""},
	kindUnauthenticated:       {http.StatusUnauthorized, ""},
	kindMethodNotAllowed:      {http.StatusMethodNotAllowed, ""},
	kindRequestTimeout:        {http.StatusRequestTimeout, ""},
	kindTooLarge:              {http.StatusRequestEntityTooLarge, ""},
	kindUnsupportedMedia:      {http.StatusUnsupportedMediaType, ""},
	kindUpgradeRequired:       {http.StatusUpgradeRequired, ""},
}

// errInternal is what a client sees of a failure whose detail stays in
// the log.
var errInternal = &responses.APIError{Kind: responses.EInternal, Type: responses.ErrServer, Message: "internal server error"}

// apiError is the one map from an error to what a client sees: the HTTP
// status and the body. An *responses.APIError keeps its body (a missing
// type or code is its kind's); anything else, an internal one, or a kind
// the table does not know, is an internal 500 whose detail stays in the
// log.
func apiError(err error) (int, *responses.APIError) {
	var apiErr *responses.APIError
	if !errors.As(err, &apiErr) || apiErr.Kind == responses.EInternal {
		return http.StatusInternalServerError, errInternal
	}
	st, ok := errorStatuses[apiErr.Kind]
	if !ok {
		return http.StatusInternalServerError, errInternal
	}
	return st.status, apiErr.Filled()
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
	if after := errorStatuses[apiErr.Kind].retryAfter; after != "" && w.Header().Get("Retry-After") == "" {
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
