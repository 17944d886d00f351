package server

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/loomgate/loom/responses"
)

// apiError is the one map from errors to what clients see: a domain
// error's code decides the status and the error's shape, wrapped or not;
// an API error passes as it is; anything else is a 500 that says nothing
// of its cause.
func TestAPIErrorMap(t *testing.T) {
	secret := errors.New("dial tcp 10.0.0.7:5432: connection refused")
	tests := []struct {
		name       string
		err        error
		status     int
		typ, code  string
		param, msg string
	}{
		{"invalid", responses.Errorf(responses.EInvalid, "tools[0].type", "code_interpreter is not enabled"),
			http.StatusBadRequest, responses.ErrInvalidRequest, "", "tools[0].type", "code_interpreter is not enabled"},
		{"unsupported", responses.Errorf(responses.EUnsupported, "tools[1].environment", "local shells run on the client"),
			http.StatusBadRequest, responses.ErrInvalidRequest, "unsupported_parameter", "tools[1].environment", "local shells run on the client"},
		{"not found, wrapped", fmt.Errorf("lookup: %w", responses.Errorf(responses.ENotFound, "response_id", "no such response")),
			http.StatusNotFound, responses.ErrNotFound, "not_found", "response_id", "no such response"},
		{"conflict", responses.Errorf(responses.EConflict, "", "the response is in progress"),
			http.StatusConflict, responses.ErrInvalidRequest, "", "", "the response is in progress"},
		{"internal code", &responses.Error{Code: responses.EInternal, Message: "the disk is full", Err: secret},
			http.StatusInternalServerError, responses.ErrServer, "", "", "internal server error"},
		{"plain error", secret,
			http.StatusInternalServerError, responses.ErrServer, "", "", "internal server error"},
		{"api error", responses.BadRequest("model", "model is required"),
			http.StatusBadRequest, responses.ErrInvalidRequest, "", "model", "model is required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := apiError(tt.err)
			if got.Status != tt.status || got.Type != tt.typ || got.Code != tt.code || got.Param != tt.param || got.Message != tt.msg {
				t.Errorf("apiError(%v) = %+v, want status %d type %q code %q param %q message %q",
					tt.err, got, tt.status, tt.typ, tt.code, tt.param, tt.msg)
			}
		})
	}
}
