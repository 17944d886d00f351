package responses

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/loomgate/loom/internal/jsonscan"
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

// A body that nests deeper than the limit is a 400 that names the field
// it does so in (the item, in an array) and says the limit, on whichever
// decoder reads it; a body just within the limit is read.
func TestDecodeRequestTooDeep(t *testing.T) {
	nest := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	deep := nest(100_000)
	tests := []struct {
		body, param string
	}{
		{`{"model":"m","input":"x","metadata":` + deep + `}`, "metadata[0]"},
		{`{"model":"m","input":"x","metadata":{"k":` + deep + `}}`, "metadata"},
		{`{"model":"m","input":"x","stream_options":{"a":` + deep + `}}`, "stream_options"},
		{`{"model":"m","input":[{"role":"user","content":"hi"},` + deep + `]}`, "input[1]"},
		{`{"model":"m","input":"x","tools":[{"type":"function","name":"f","parameters":{"a":` + deep + `}}]}`, "tools[0]"},
		{`{"model":"m","input":"x","text":{"format":` + deep + `}}`, "text"},
		{`{"model":"m","input":"x","metadata":{"k":` + nest(jsonscan.MaxDepth-1) + `}}`, "metadata"},
		{deep, ""},
	}
	for _, tt := range tests {
		_, err := DecodeRequest([]byte(tt.body))
		if err == nil {
			t.Errorf("%.60s...: decoded, want a 400", tt.body)
			continue
		}
		e := mustAPIError(t, err)
		if e.Kind != EInvalid || e.Param != tt.param || !strings.Contains(e.Message, "10000") {
			t.Errorf("%.60s...: kind %s param %q %q, want invalid %q saying the limit", tt.body, e.Kind, e.Param, e.Message, tt.param)
		}
	}
	// At the limit: read.
	_, err := DecodeRequest([]byte(`{"model":"m","input":"x","stream_options":{"a":` + nest(jsonscan.MaxDepth-2) + `}}`))
	if err != nil {
		t.Errorf("a body %d levels deep: %v", jsonscan.MaxDepth, err)
	}
}

// Both decoders refuse a body for its depth by one rule: deeper than
// MaxNesting, counted from the body as encoding/json counts. The fast one
// gives up on a value that may be too deep, and encoding/json decides.
func TestNestingIsOneRule(t *testing.T) {
	nest := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	for _, at := range []struct{ before, after string }{
		{`{"model":"m","input":"x","stream_options":{"a":`, `}}`},
		{`{"model":"m","input":"x","unknown":`, `}`},
		{`{"model":"m","input":[{"type":"function_call_output","call_id":"c","output":[`, `]}]}`},
		{`{"model":"m","input":"x","metadata":{"k":`, `}}`},
	} {
		for n := MaxNesting - 12; n <= MaxNesting; n++ {
			body := []byte(at.before + nest(n) + at.after)
			_, err := DecodeRequest(body)
			var e *APIError
			refused := err != nil && errors.As(err, &e) && strings.Contains(e.Message, "levels deep")
			if want := !json.Valid(body); refused != want {
				t.Errorf("%s%d levels%s: refused for its depth %v (%v), encoding/json refuses it %v", at.before, n, at.after, refused, err, want)
			}
		}
	}
}
