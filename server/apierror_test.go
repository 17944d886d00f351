package server

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/loomgate/loom/responses"
)

// apiError is the one map from errors to what clients see: an API
// error's kind decides the status, wrapped or not, and its body is its own
// or its kind's; an internal one, or anything else, is a 500 that says
// nothing of its cause.
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
		{"internal kind", &responses.APIError{Kind: responses.EInternal, Message: "the disk is full", Cause: secret},
			http.StatusInternalServerError, responses.ErrServer, "", "", "internal server error"},
		{"plain error", secret,
			http.StatusInternalServerError, responses.ErrServer, "", "", "internal server error"},
		{"api error", responses.BadRequest("model", "model is required"),
			http.StatusBadRequest, responses.ErrInvalidRequest, "", "model", "model is required"},
		{"api error keeps its body", &responses.APIError{Kind: responses.EConflict, Type: responses.ErrInvalidRequest, Code: "conversation_locked", Param: "conversation", Message: "busy"},
			http.StatusConflict, responses.ErrInvalidRequest, "conversation_locked", "conversation", "busy"},
		{"api error without a type or code gets the kind's", &responses.APIError{Kind: responses.ERateLimited, Message: "slow down"},
			http.StatusTooManyRequests, responses.ErrRateLimit, "rate_limit_exceeded", "", "slow down"},
		{"api error of no known kind", &responses.APIError{Kind: "bogus", Type: responses.ErrInvalidRequest, Message: "the disk is full"},
			http.StatusInternalServerError, responses.ErrServer, "", "", "internal server error"},
		{"unauthenticated", errUnauthorized("no key"),
			http.StatusUnauthorized, responses.ErrInvalidRequest, "invalid_api_key", "", "no key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, got := apiError(tt.err)
			if status != tt.status || got.Type != tt.typ || got.Code != tt.code || got.Param != tt.param || got.Message != tt.msg {
				t.Errorf("apiError(%v) = %d %+v, want status %d type %q code %q param %q message %q",
					tt.err, status, got, tt.status, tt.typ, tt.code, tt.param, tt.msg)
			}
		})
	}
}

// Every kind of the table: the status and body type clients have always
// seen for it.
func TestErrorShapes(t *testing.T) {
	tests := []struct {
		kind   string
		status int
		typ    string
		code   string
	}{
		{responses.EInvalid, 400, responses.ErrInvalidRequest, ""},
		{responses.EUnsupported, 400, responses.ErrInvalidRequest, "unsupported_parameter"},
		{responses.ENotFound, 404, responses.ErrNotFound, "not_found"},
		{responses.EConflict, 409, responses.ErrInvalidRequest, ""},
		{responses.ERateLimited, 429, responses.ErrRateLimit, "rate_limit_exceeded"},
		{responses.ETimeout, 504, responses.ErrUpstream, "timeout"},
		{responses.EUpstream, 502, responses.ErrUpstream, "upstream_error"},
		{responses.EUnavailable, 503, responses.ErrServer, ""},
		{responses.ENotImplemented, 501, responses.ErrInvalidRequest, "unsupported"},
		// The kinds only HTTP has: their errors bring their type and code.
		{kindUnauthenticated, 401, responses.ErrInvalidRequest, "invalid_api_key"},
		{kindMethodNotAllowed, 405, responses.ErrInvalidRequest, "method_not_allowed"},
		{kindRequestTimeout, 408, responses.ErrInvalidRequest, "request_timeout"},
		{kindTooLarge, 413, responses.ErrInvalidRequest, "request_too_large"},
		{kindUnsupportedMedia, 415, responses.ErrInvalidRequest, "unsupported_media_type"},
		{kindUpgradeRequired, 426, responses.ErrInvalidRequest, "upgrade_required"},
	}
	httpOnly := map[string]bool{kindUnauthenticated: true, kindMethodNotAllowed: true, kindRequestTimeout: true,
		kindTooLarge: true, kindUnsupportedMedia: true, kindUpgradeRequired: true}
	seen := map[string]bool{responses.EInternal: true} // EInternal: TestAPIErrorMap
	for _, tt := range tests {
		seen[tt.kind] = true
		err := responses.Errorf(tt.kind, "p", "m")
		if httpOnly[tt.kind] {
			err.Type, err.Code = tt.typ, tt.code
		}
		status, got := apiError(err)
		if status != tt.status || got.Type != tt.typ || got.Code != tt.code || got.Param != "p" || got.Message != "m" || got.Kind != tt.kind {
			t.Errorf("%s: %d %+v, want %d type %q code %q", tt.kind, status, got, tt.status, tt.typ, tt.code)
		}
	}
	for kind := range errorStatuses {
		if !seen[kind] {
			t.Errorf("kind %s of the table is not tested", kind)
		}
	}
}
