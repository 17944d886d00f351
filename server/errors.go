package server

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/loomgate/loom/responses"
)

// writeError writes err as an API error body. Errors that are not
// *responses.APIError are internal: the client sees a generic 500 and the
// detail stays in the log.
func writeError(w http.ResponseWriter, err error) {
	var apiErr *responses.APIError
	if !errors.As(err, &apiErr) {
		apiErr = &responses.APIError{Status: http.StatusInternalServerError, Type: responses.ErrServer, Message: "internal server error"}
	}
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
