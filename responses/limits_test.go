package responses

import (
	"strings"
	"testing"
)

// repeat joins n copies of s with commas.
func repeat(s string, n int) string { return strings.TrimSuffix(strings.Repeat(s+",", n), ",") }

// nested is a schema n objects deep.
func nested(n int) string {
	return strings.Repeat(`{"type":"object","properties":{"a":`, n-1) + `{"type":"string"}` + strings.Repeat(`}}`, n-1)
}

// Past a documented limit a request is a 400 naming the field; at the
// limit it is taken.
func TestRequestLimits(t *testing.T) {
	tool := func(params string) string {
		return withInput(`,"tools":[{"type":"function","name":"f","parameters":` + params + `}]`)
	}
	schema := func(s string) string {
		return withInput(`,"text":{"format":{"type":"json_schema","name":"s","schema":` + s + `}}`)
	}
	tests := []struct {
		name, body, param string // param "" : accepted
	}{
		{"items at the limit", withItems(repeat(`{"role":"user","content":"x"}`, MaxInputItems)), ""},
		{"items past the limit", withItems(repeat(`{}`, MaxInputItems+1)), "input"},
		{"tools past the limit", withInput(`,"tools":[` + repeat(`{}`, MaxTools+1) + `]`), "tools"},
		{"parameters at the depth limit", tool(nested(MaxSchemaDepth / 2)), ""},
		{"parameters past the depth limit", tool(nested(MaxSchemaDepth/2 + 1)), "tools[0].parameters"},
		{"parameters deep in arrays", tool(`{"enum":` + strings.Repeat("[", MaxSchemaDepth) + strings.Repeat("]", MaxSchemaDepth) + `}`), "tools[0].parameters"},
		{"many brackets, shallow", tool(`{"enum":[` + repeat(`[{}]`, MaxSchemaDepth) + `]}`), ""},
		{"brackets in strings do not count", tool(`{"description":"` + strings.Repeat("{[", 100) + `"}`), ""},
		{"pretty-printed parameters past the depth limit", tool(strings.ReplaceAll(nested(MaxSchemaDepth/2+1), ":", " :\n\t")), "tools[0].parameters"},
		{"parameters past the depth limit, a tool left to encoding/json", tool(nested(MaxSchemaDepth/2+1) + `,"Strict":null`), "tools[0].parameters"},
		{"parameters not an object", tool(`[{}]`), "tools[0].parameters"},
		{"text schema past the depth limit", schema(nested(MaxSchemaDepth/2 + 1)), "text.format.schema"},
		{"text schema null, as before", schema(`null`), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := check(tt.body)
			if tt.param == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			e := mustAPIError(t, err)
			if e.Param != tt.param || e.Kind != EInvalid {
				t.Errorf("got %s param %q (%s), want %s param %q", e.Kind, e.Param, e.Message, EInvalid, tt.param)
			}
		})
	}
}

// A tool's schema too deep is refused the same way whichever decoder
// read it (the scanner, or encoding/json for a key in another case): the
// same 400, the same message.
func TestSchemaDepthRefusedByEitherDecoder(t *testing.T) {
	deep := nested(MaxSchemaDepth/2 + 1)
	scanned, unmarshalled := withInput(`,"tools":[{"type":"function","name":"f","parameters":`+deep+`}]`),
		withInput(`,"tools":[{"type":"function","name":"f","Strict":null,"parameters":`+deep+`}]`)
	_, errScanned := check(scanned)
	_, errUnmarshalled := check(unmarshalled)
	a, b := mustAPIError(t, errScanned), mustAPIError(t, errUnmarshalled)
	if a.Message != b.Message || a.Param != b.Param || !strings.Contains(a.Message, "levels deep") {
		t.Errorf("scanned: %q (%s), unmarshalled: %q (%s)", a.Message, a.Param, b.Message, b.Param)
	}
}
