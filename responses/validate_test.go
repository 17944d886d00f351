package responses

import (
	"fmt"
	"strings"
	"testing"
)

// TestBadInputIsRefused covers input that encoding/json or a lax check
// would accept: each must be a 400 naming the field.
func TestBadInputIsRefused(t *testing.T) {
	manyKeys := map[string]string{}
	for i := range MaxMetadataKeys + 1 {
		manyKeys[fmt.Sprintf("k%d", i)] = "v"
	}
	var keys []string
	for k, v := range manyKeys {
		keys = append(keys, fmt.Sprintf("%q:%q", k, v))
	}
	tests := []struct {
		name, body, param string
	}{
		{"empty input array", `{"model":"m","input":[]}`, "input"},
		{"empty input array with previous_response_id", `{"model":"m","input":[],"previous_response_id":"resp_1"}`, "input"},
		{"invalid UTF-8", "{\"model\":\"m\",\"input\":\"a\xff\xfeb\"}", "input"},
		{"invalid UTF-8 in instructions", "{\"model\":\"m\",\"input\":\"ok\",\"instructions\":\"\xc3\"}", "instructions"},
		{"lone high surrogate", `{"model":"m","input":"a\ud800b"}`, "input"},
		{"lone high surrogate at the end", `{"model":"m","input":"a\ud83d"}`, "input"},
		{"lone low surrogate", `{"model":"m","input":[{"role":"user","content":"\udc00"}]}`, "input"},
		{"high surrogate then another high", `{"model":"m","input":"\ud83d\ud83d"}`, "input"},
		{"too many metadata keys", `{"model":"m","input":"x","metadata":{` + strings.Join(keys, ",") + `}}`, "metadata"},
		{"metadata key too long", `{"model":"m","input":"x","metadata":{"` + strings.Repeat("k", MaxMetadataKeyLen+1) + `":"v"}}`, "metadata"},
		{"metadata value too long", `{"model":"m","input":"x","metadata":{"k":"` + strings.Repeat("é", MaxMetadataValueLen+1) + `"}}`, "metadata"},
		{"metadata value not a string", `{"model":"m","input":"x","metadata":{"k":5}}`, "metadata"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := DecodeRequest([]byte(tt.body))
			if err == nil {
				err = req.Validate(nil)
			}
			if err == nil {
				t.Fatalf("accepted, want a 400 naming %s", tt.param)
			}
			if e := mustAPIError(t, err); (e.Kind != EInvalid && e.Kind != EUnsupported) || e.Param != tt.param {
				t.Errorf("kind %s param %q (%s), want invalid %q", e.Kind, e.Param, e.Message, tt.param)
			}
		})
	}
}

// TestValidTextIsAccepted checks the Unicode check lets through what is
// valid: escaped pairs, escaped backslashes before a u, multi-byte UTF-8,
// and metadata at its limits.
func TestValidTextIsAccepted(t *testing.T) {
	var keys []string
	for i := range MaxMetadataKeys {
		keys = append(keys, fmt.Sprintf("%q:%q", fmt.Sprintf("%0*d", MaxMetadataKeyLen, i), strings.Repeat("é", MaxMetadataValueLen)))
	}
	for _, body := range []string{
		`{"model":"m","input":"\ud83d\ude00 and 😀 and \\ud800 and \u00e9"}`,
		`{"model":"m","input":"x","metadata":{` + strings.Join(keys, ",") + `}}`,
		`{"model":"m","input":"","instructions":"\"\\u\""}`,
	} {
		req, err := DecodeRequest([]byte(body))
		if err == nil {
			err = req.Validate(nil)
		}
		if err != nil {
			t.Errorf("%.80s: %v", body, err)
		}
	}
	req, _ := DecodeRequest([]byte(`{"model":"m","input":"\ud83d\ude00"}`))
	if got := req.Input.Items[0].Text(); got != "😀" {
		t.Errorf("a surrogate pair decoded to %q", got)
	}
}
