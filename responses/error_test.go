package responses

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// The error body has every key, null when unset, and a capped message.
func TestAPIErrorJSON(t *testing.T) {
	tests := []struct {
		err  *APIError
		want string
	}{
		{BadRequest("temperature", "temperature must be between 0 and %d", 2),
			`{"error":{"message":"temperature must be between 0 and 2","type":"invalid_request_error","param":"temperature","code":null}}`},
		{BadRequest("", "not JSON"),
			`{"error":{"message":"not JSON","type":"invalid_request_error","param":null,"code":null}}`},
		{Unsupported("background", "no"),
			`{"error":{"message":"no","type":"invalid_request_error","param":"background","code":"unsupported_parameter"}}`},
		{NotFound("previous_response_id", "response %q not found", "resp_x"),
			`{"error":{"message":"response \"resp_x\" not found","type":"not_found_error","param":"previous_response_id","code":"not_found"}}`},
	}
	for _, tt := range tests {
		b, err := tt.err.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != tt.want {
			t.Errorf("%s\nwant %s", b, tt.want)
		}
	}
	kinds := map[*APIError]string{BadRequest("a", "x"): EInvalid, Unsupported("a", "x"): EUnsupported, NotFound("a", "x"): ENotFound}
	for e, want := range kinds {
		if e.Kind != want {
			t.Errorf("%s: kind %s, want %s", e, e.Kind, want)
		}
	}

	long := &APIError{Kind: EInternal, Type: ErrServer, Message: strings.Repeat("é", maxMessage)}
	b, _ := long.MarshalJSON()
	var body struct {
		Error struct{ Message string } `json:"error"`
	}
	if err := json.Unmarshal(b, &body); err != nil {
		t.Fatal(err)
	}
	msg := body.Error.Message
	if !strings.HasSuffix(msg, "…") || len(strings.TrimSuffix(msg, "…")) != maxMessage || !utf8.ValidString(msg) {
		t.Errorf("a long message is not capped at %d bytes: %d bytes", maxMessage, len(msg))
	}
	if long.Message != strings.Repeat("é", maxMessage) {
		t.Error("capping changed the error itself")
	}
}

// Error names the param when there is one; Payload is the body of an
// error event, with the same nulls.
func TestAPIErrorTextAndPayload(t *testing.T) {
	if got := BadRequest("input[0].role", "bad role").Error(); got != "invalid invalid_request_error: bad role (param input[0].role)" {
		t.Errorf("Error() = %q", got)
	}
	if got := (&APIError{Kind: EUpstream, Type: ErrUpstream, Message: "model down"}).Error(); got != "upstream upstream_error: model down" {
		t.Errorf("Error() = %q", got)
	}
	p := Unsupported("include[0]", "no").Payload()
	if p.Type != ErrInvalidRequest || p.Message != "no" || p.Param == nil || *p.Param != "include[0]" || p.Code == nil || *p.Code != "unsupported_parameter" {
		t.Errorf("payload %+v", p)
	}
	p = (&APIError{Type: ErrServer, Message: "x"}).Payload()
	if p.Param != nil || p.Code != nil {
		t.Errorf("payload of an error without param or code: %+v", p)
	}
}
