package server_test

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/loomgate/loom/responses"
)

// TestDecodeRequestKeepsNoBody: the server hands a request body's
// buffer back to its pool once it is decoded, so nothing decoded may
// alias the body. A request with every kind of value (strings, content
// parts, raw values: tool schemas and non-function tools, the text
// format, metadata, tool_choice, prompt, conversation; both input forms)
// is decoded, its body overwritten, and the result compared with a
// decode of a fresh copy; once through the one-pass decoder and once
// through the encoding/json fallback (a key given twice).
func TestDecodeRequestKeepsNoBody(t *testing.T) {
	items := `[` +
		`{"type":"message","role":"user","content":[{"type":"input_text","text":"héllo \"there\""},{"type":"input_image","image_url":"https://example.test/a.png","detail":"low"}]},` +
		`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"a reply","annotations":[]}]},` +
		`{"type":"function_call","call_id":"call_1","name":"get_weather","arguments":"{\"city\":\"Oslo\"}"},` +
		`{"type":"function_call_output","call_id":"call_1","output":"{\"temp\":3}"},` +
		`{"role":"user","content":"plain text"}]`
	tools := `[` +
		`{"type":"function","name":"get_weather","description":"Weather now","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]},"strict":true},` +
		`{"type":"mcp","server_label":"docs","server_url":"https://mcp.example.test/mcp","require_approval":"never","allowed_tools":["search"]},` +
		`{"type":"web_search"}]`
	rest := `"instructions":"Be brief.","tools":` + tools +
		`,"tool_choice":{"type":"function","name":"get_weather"},"parallel_tool_calls":false,"max_output_tokens":100,` +
		`"temperature":0.5,"text":{"format":{"type":"json_schema","name":"answer","schema":{"type":"object","properties":{"a":{"type":"string"}}},"strict":true}},` +
		`"reasoning":{"effort":"low"},"include":["reasoning.encrypted_content"],"store":false,"metadata":{"k":"v","k2":"v2"},` +
		`"prompt":{"id":"pmpt_1","variables":{"x":"y"}},"stream_options":{"include_obfuscation":false},"user":"u-1","prompt_cache_key":"pck"`
	for _, tt := range []struct{ name, body string }{
		{"items", `{"model":"m","input":` + items + `,` + rest + `}`},
		{"string input", `{"model":"m","input":"just text",` + rest + `}`},
		{"conversation", `{"model":"m","input":"hi","conversation":{"id":"conv_1"}}`},
		{"encoding/json fallback", `{"model":"x","model":"m","input":` + items + `,` + rest + `}`},
	} {
		body := []byte(tt.body)
		got, err := responses.DecodeRequest(body)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		for i := range body {
			body[i] = 'X'
		}
		want, err := responses.DecodeRequest([]byte(tt.body))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: the decoded request changed with its body:\n got %+v\nwant %+v", tt.name, got, want)
		}
		if !bytes.Equal(body, bytes.Repeat([]byte("X"), len(tt.body))) {
			t.Fatalf("%s: the body was not overwritten", tt.name)
		}
	}
}
