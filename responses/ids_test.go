package responses

import (
	"strings"
	"testing"
)

func TestValidID(t *testing.T) {
	for _, id := range []string{"resp_0123abcd", "msg_1", "a", "näme-ü_1", "call:1/2", strings.Repeat("a", MaxIDBytes)} {
		if !ValidID(id) {
			t.Errorf("%q refused", id)
		}
	}
	for _, id := range []string{"", "resp_\x00", "resp_\xff", "\xc3\x28", "a\tb", "a\nb", "a\x7fb", "a\u0085b", strings.Repeat("a", MaxIDBytes+1)} {
		if ValidID(id) {
			t.Errorf("%q accepted", id)
		}
	}
}

// An input item's id, when given, must be one: a 400 naming it.
func TestValidateItemID(t *testing.T) {
	_, err := check(withItems(`{"type":"message","role":"user","content":"hi"},{"type":"function_call","id":"fc_\u0000","call_id":"c","name":"f","arguments":"{}"}`))
	if e := mustAPIError(t, err); e.Param != "input[1].id" {
		t.Errorf("param %q, want input[1].id", e.Param)
	}
	if _, err := check(withItems(`{"type":"message","id":"msg_ok","role":"user","content":"hi"}`)); err != nil {
		t.Errorf("a good id: %v", err)
	}
}
