package responses

import (
	"errors"
	"testing"
)

// mustAPIError returns err as the *APIError it must be.
func mustAPIError(t *testing.T, err error) *APIError {
	t.Helper()
	var e *APIError
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not an *APIError", err, err)
	}
	return e
}

// check decodes and validates body as the engine does, with the tool
// types in serverTools run by the caller.
func check(body string, serverTools ...string) (*Request, error) {
	req, err := DecodeRequest([]byte(body))
	if err != nil {
		return nil, err
	}
	return req, req.Validate(func(typ string) bool {
		for _, s := range serverTools {
			if s == typ {
				return true
			}
		}
		return false
	})
}
