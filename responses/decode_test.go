package responses

import (
	"strings"
	"testing"
)

func TestDecodeRequestNamesTheField(t *testing.T) {
	tests := []struct {
		body, param string
	}{
		{`{"model":"m","input":"x","temperature":"hot"}`, "temperature"},
		{`{"model":"m","input":7}`, "input"},
		{`{"model":"m","input":[{"role":"user","content":5}]}`, "input[0].content"},
		{`{"model":"m","input":[{"type":"message","role":"user","content":"ok"},{"type":"function_call_output","call_id":5,"output":"x"}]}`, "input[1].call_id"},
		{`{"model":"m","input":"x","tools":{"type":"function"}}`, "tools"},
		{`{"model":"m","input":"x","tool_choice":5}`, "tool_choice"},
		{`[1,2]`, ""},
		{`{"model":`, ""},
		{``, ""},
	}
	for _, tt := range tests {
		req, err := DecodeRequest([]byte(tt.body))
		if err == nil {
			t.Errorf("%s: decoded to %+v, want an error", tt.body, req)
			continue
		}
		e := mustAPIError(t, err)
		if e.Kind != EInvalid || e.Param != tt.param {
			t.Errorf("%s: kind %s param %q, want invalid %q", tt.body, e.Kind, e.Param, tt.param)
		}
		for _, leak := range []string{"Go value", "responses.", "json:", "plain"} {
			if strings.Contains(e.Message, leak) {
				t.Errorf("%s: message leaks %q: %s", tt.body, leak, e.Message)
			}
		}
	}
	req, err := DecodeRequest([]byte(`{"model":"m","input":"hi","client_metadata":{"x":1}}`))
	if err != nil || req.Model != "m" || req.Input.Items[0].Text() != "hi" {
		t.Errorf("a valid request with an unknown field: %+v %v", req, err)
	}
}
