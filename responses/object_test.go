package responses

import (
	"bytes"
	"encoding/json"
	"testing"
)

// appendString writes every string as encoding/json does, byte for byte,
// once an encoder has HTML-escaped it (as one does to MarshalJSON's
// output).
func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	inputs := []string{"", "plain", "a\"b\\c", "<script>&amp;</script>", "line\nbreak\ttab\rcr\bbs\fff",
		"\u2028\u2029", "é ünïcödé 😀 ﷽", "\xff\xfe bad \xc3 utf-8 \xe2\x82", "\x7f del", "mixed \x00 nul"}
	for c := range 256 {
		inputs = append(inputs, string([]byte{byte(c)}), "x"+string([]byte{byte(c)})+"y")
	}
	for _, s := range inputs {
		want, _ := json.Marshal(s)
		var got bytes.Buffer
		json.HTMLEscape(&got, appendString(nil, s))
		if got.String() != string(want) {
			t.Errorf("%q: got %s, want %s", s, got.String(), want)
		}
	}
}

// BenchmarkEncodeItems measures writing a long history's items, as the
// store and the response do.
func BenchmarkEncodeItems(b *testing.B) {
	req, err := DecodeRequest(historyBody(1000))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := json.Marshal(req.Input.Items); err != nil {
			b.Fatal(err)
		}
	}
}
