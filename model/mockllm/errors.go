package mockllm

import (
	"encoding/json"
	"net/http"
)

// errorBody is the OpenAI error envelope.
type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// writeError answers status with an OpenAI-style error body.
func writeError(w http.ResponseWriter, status int, message string, param string) {
	typ, code := errorKind(status)
	d := errorDetail{Message: message, Type: typ}
	if param != "" {
		d.Param = &param
	}
	if code != "" {
		d.Code = &code
	}
	writeJSON(w, status, errorBody{Error: d})
}

// errorKind gives the type and code OpenAI uses for a status.
func errorKind(status int) (typ, code string) {
	switch {
	case status == http.StatusUnauthorized:
		return "authentication_error", "invalid_api_key"
	case status == http.StatusForbidden:
		return "permission_error", ""
	case status == http.StatusNotFound:
		return "not_found_error", ""
	case status == http.StatusTooManyRequests:
		return "rate_limit_error", "rate_limit_exceeded"
	case status >= 500:
		return "server_error", ""
	default:
		return "invalid_request_error", ""
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		// Only the mock's own types are marshalled here.
		panic("mockllm: marshal: " + err.Error())
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
