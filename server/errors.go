package server

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/loomgate/loom/responses"
)

// apiError is the one map from an error to what a client sees: an
// *responses.APIError as it is, a domain error (*responses.Error) by its
// code, and anything else as an internal 500 whose detail stays in the
// log.
func apiError(err error) *responses.APIError {
	var apiErr *responses.APIError
	if errors.As(err, &apiErr) {
		return apiErr
	}
	var e *responses.Error
	if !errors.As(err, &e) || e.Code == responses.EInternal {
		return &responses.APIError{Status: http.StatusInternalServerError, Type: responses.ErrServer, Message: "internal server error"}
	}
	out := &responses.APIError{Type: responses.ErrInvalidRequest, Param: e.Param, Message: e.Message}
	switch e.Code {
	case responses.EUnsupported:
		out.Status, out.Code = http.StatusBadRequest, "unsupported_parameter"
	case responses.ENotFound:
		out.Status, out.Type, out.Code = http.StatusNotFound, responses.ErrNotFound, "not_found"
	case responses.EConflict:
		out.Status = http.StatusConflict
	default: // EInvalid, and codes this map does not know
		out.Status = http.StatusBadRequest
	}
	return out
}

// writeError writes err as an API error body (apiError).
func writeError(w http.ResponseWriter, err error) {
	apiErr := apiError(err)
	if sw, ok := w.(*statusWriter); ok {
		sw.apiErr = apiErr
	}
	body, _ := json.Marshal(apiErr)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(apiErr.Status)
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
