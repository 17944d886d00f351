package responses

import (
	"strings"
	"testing"
)

// A Conversations API body is decoded as a create request's: the field at
// fault named, items checked as input items are, each by its place.
func TestConversationRequest(t *testing.T) {
	msg := `{"role":"user","content":"hi"}`
	tests := []struct {
		body, param string
		decodes     bool // the error is Validate's, not the decoder's
	}{
		{`{"items":"hi"}`, "items", false},
		{`{"items":[` + msg + `,5]}`, "items[1]", false},
		{`{"items":[{"type":"function_call_output","call_id":5,"output":"x"}]}`, "items[0].call_id", false},
		{`{"metadata":{"k":1}}`, "metadata", false},
		{`{"metadata":[]}`, "metadata", false},
		{"{\"items\":[{\"role\":\"user\",\"content\":\"\xff\"}]}", "items", false},
		{`{"items":[` + strings.TrimSuffix(strings.Repeat(msg+",", MaxConversationItems+1), ",") + `]}`, "items", false},
		{`null`, "", false},
		{`{"items":[` + msg + `,{"type":"teleport"}]}`, "items[1].type", true},
		{`{"items":[{"type":"message","role":"robot","content":"hi"}]}`, "items[0].role", true},
		{`{"items":[{"type":"function_call","name":"f"}]}`, "items[0].call_id", true},
	}
	for _, tt := range tests {
		req, err := DecodeConversationRequest([]byte(tt.body))
		if err == nil {
			if !tt.decodes {
				t.Errorf("%.80s: decoded, want a 400 naming %q", tt.body, tt.param)
				continue
			}
			err = ValidateConversationItems(req.Items.Items)
		}
		if err == nil {
			t.Errorf("%.80s: accepted, want a 400 naming %q", tt.body, tt.param)
			continue
		}
		if e := mustAPIError(t, err); e.Param != tt.param || e.Type != ErrInvalidRequest {
			t.Errorf("%.80s: %s param %q (%s), want %q", tt.body, e.Type, e.Param, e.Message, tt.param)
		}
	}
	for _, body := range []string{``, ` `, `{}`, `{"items":null}`, `{"items":[]}`, `{"items":[` + msg + `],"metadata":{"k":"v"},"other":1}`} {
		req, err := DecodeConversationRequest([]byte(body))
		if err == nil {
			err = ValidateConversationItems(req.Items.Items)
		}
		if err != nil {
			t.Errorf("%q: %v", body, err)
		}
	}
}
