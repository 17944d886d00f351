package responses

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// referenceItems decodes an array of items as encoding/json did before
// the scanner: each item field by field.
func referenceItems(data []byte) ([]Item, error) {
	var raws []json.RawMessage
	if err := json.Unmarshal(data, &raws); err != nil {
		return nil, err
	}
	items := make([]Item, len(raws))
	for i, raw := range raws {
		if err := items[i].decodeFields(raw); err != nil {
			return nil, err
		}
	}
	return items, nil
}

// decodeItems decodes the common shapes by hand and leaves the rest to
// Item.UnmarshalJSON: for every shape, what it makes of an input array
// (items, or an error) is what encoding/json makes of it.
func TestDecodeItemsMatchesEncodingJSON(t *testing.T) {
	inputs := []string{
		`[]`,
		` [ ] `,
		`[{"role":"user","content":"hi"}]`,
		`[{"role":"assistant","content":"hi"}]`,
		`[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"a","annotations":[]}]}]`,
		`[{"type":"message","role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_text","text":"b"}]}]`,
		`[{"role":"user","content":[]}]`,
		`[{"role":"user","content":null}]`,
		`[{"role":"user"}]`,
		`[{"content":"no role"}]`,
		`[{"role":"user","content":"a\nb \"q\" \u00e9 \ud83d\ude00 \\"}]`,
		`[{"role":"us\u0065r","content":"escaped key value"}]`,
		`[{"ro\u006ce":"user","content":"escaped key"}]`,
		`[{"Role":"user","Content":"keys in another case"}]`,
		`[{"role":"user","content":"twice","content":[{"type":"input_text","text":"last"}]}]`,
		`[{"role":"user","content":[{"type":"input_text","text":"first"}],"content":"last"}]`,
		`[{"type":"loom:mcp_call","id":"mcp_1","server_label":"s","name":"f","arguments":"{}","output":"\"r\""}]`,
		`[{"type":"function_call","call_id":"c1","name":"f","arguments":"{\"x\":1}","id":"fc_1","status":"completed"}]`,
		`[{"type":"function_call_output","call_id":"c1","output":"done"}]`,
		`[{"type":"function_call_output","call_id":"c1","output":[{"type":"input_text","text":"done"}]}]`,
		`[{"type":"function_call_output","call_id":"c1","output":null}]`,
		`[{"type":"function_call_output","call_id":"c1","output": 5 }]`,
		`[{"type":"reasoning","id":"rs_1","summary":[],"content":[{"type":"reasoning_text","text":"think"}]}]`,
		`[{"type":"message","role":"assistant","phase":"final_answer","content":[{"type":"output_text","text":"a","annotations":[{"type":"url_citation"}]}]}]`,
		`[{"type":"message","role":"user","content":[{"type":"input_image","image_url":"https://x/y.png","detail":"auto"}]}]`,
		`[{"type":"message","role":"user","content":[null]}]`,
		`[{"type":"message","role":"user","content":[{"type":null,"text":null}]}]`,
		`[{"type":null,"role":"user","id":null,"status":null,"content":"nulls"}]`,
		`[{"role":"user","content":"a","unknown":{"deep":[1,2,{"x":"]"}]}}]`,
		`[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"a","annotations":[],"logprobs":[]}]}]`,
		`[{"role":"user","content":"a","extra":[{"x":1}],"more":null}]`,
		`[{"role":"user","content":"a","Server_Label":"known in another case"}]`,
		`[{"role":"user","content":"a","server_label":"known, not taken by the scanner"}]`,
		`[{"role":"user","content":"a","ſtatus":"a non-ASCII key encoding/json folds"}]`,
		`[{"role":"user","content":[{"type":"input_text","text":"a","Detail":"x"}]}]`,
		"[\n\t{ \"role\" : \"user\" ,\n \"content\" : \"spaces\" } ,\n{\"role\":\"user\",\"content\":\"b\"}\n]",
		`[null]`,
		`[{}]`,
		// The shapes scanner.message takes, and their edges.
		`[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"output_text","text":"b","annotations":[ ]},{"text":"c","type":"output_text"}],"status":"completed","id":"msg_1"}]`,
		`[{"id":"m1","status":"in_progress","type":"message","role":"developer","content":"x"}]`,
		`[{"type":"message","content":"no role"}]`,
		`[{"type":"message","role":"","content":"empty role"}]`,
		`[{"type":"loom:message","role":"user","content":"a vendor-prefixed type"}]`,
		`[{"type":"function_call","role":"user","content":"another type"}]`,
		`[{"role":"user","content":[{"type":"input_text","text":"a","annotations":[1]}]}]`,
		`[{"role":"user","content":[{"type":"input_text","text":"a\n\u00e9"}]}]`,
		`[{"role":"user","content":[{}]}]`,
		`[{"role":"user","content":[{"type":"input_text"},{"text":"no type"}]}]`,
		`[{"role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_text","text":"b"},{"type":"input_text","text":"c"},{"type":"input_text","text":"d"},{"type":"input_text","text":"e"}]}]`,
		`[{"role":"user", "content" : "a" },{ "role":"user","content":[ { "type" : "input_text" , "text" : "b" , "annotations" : [ ] } ] }]`,
		`[{"role":"user","content":"a","id":"x","id":"y","role":"assistant"}]`,
		`[{"role":"user","content":"a","status":null}]`,
		`[{"role":"user","content":"\u0061"},{"role":"\u0075ser","content":"b"}]`,
		// Errors: encoding/json's, from the item at fault.
		`[{"role":5,"content":"a"}]`,
		`[{"role":"user","content":5}]`,
		`[{"role":"user","content":[{"type":"input_text","text":5}]}]`,
		`[{"role":"user","content":"a"}, 7]`,
		`[{"role":"user","content":"a"}, "x"]`,
		`[{"type":"function_call","call_id":1}]`,
		`[{"role":"user","content":[{"type":"input_text","annotations":{}}]}]`,
		"[{\"role\":\"user\",\"content\":\"invalid \xff utf-8\"}]",
	}
	for _, in := range inputs {
		want, wantErr := referenceItems([]byte(in))
		got, gotErr := decodeItems([]byte(in))
		if (wantErr == nil) != (gotErr == nil) {
			t.Errorf("%s: error %v, encoding/json says %v", in, gotErr, wantErr)
			continue
		}
		if wantErr != nil {
			if gotErr.Error() != wantErr.Error() {
				t.Errorf("%s: error %q, encoding/json says %q", in, gotErr, wantErr)
			}
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %#v\nwant %#v", in, got, want)
		}
	}
}

// itemsBound, which sizes a decoded list, is never less than the number
// of objects in it: braces in strings, in nested arrays, after the
// array, with and without white space.
func TestItemsBound(t *testing.T) {
	for _, tc := range []struct {
		in      string
		objects int
	}{
		{`[]`, 0}, {`[{}]`, 1}, {` [ {} , {} ]`, 2}, {`[{},{},{}]`, 3}, {`[null,{}]`, 1},
		{`[{"a":"[{"}]`, 1}, {`[{"a":"[{[{[{"},{"b":"{{"}]`, 2},
		{`[{"content":[{"x":1},{"y":2}]},{"content":[ {"z":[{}]}]}]`, 2},
		{`[{"a":1}],"tools":[{"type":"function","parameters":{"properties":{"p":{}}}}]}`, 1},
		{string(historyBody(20))[strings.Index(string(historyBody(20)), "["):], 21},
	} {
		if n := itemsBound([]byte(tc.in)); n < tc.objects {
			t.Errorf("%s: bound %d, %d objects", tc.in, n, tc.objects)
		}
	}
	// The history of the benchmark: one message part per assistant item,
	// a bound with no room to spare.
	body := historyBody(1000)
	if n := itemsBound(body[bytes.IndexByte(body, '['):]); n != 1001 {
		t.Errorf("history of 1001 items: bound %d", n)
	}
}

// A request decodes in one pass to the items that decoding field by field
// makes of its input, one by one.
func TestDecodeRequestOnePass(t *testing.T) {
	body := historyBody(50)
	got, err := DecodeRequest(body)
	if err != nil {
		t.Fatal(err)
	}
	var fields struct {
		Input []json.RawMessage `json:"input"`
	}
	if err := json.Unmarshal(body, &fields); err != nil {
		t.Fatal(err)
	}
	want := make([]Item, len(fields.Input))
	for i, raw := range fields.Input {
		if err := want[i].decodeFields(raw); err != nil {
			t.Fatal(err)
		}
	}
	if len(got.Input.Items) != 51 || !reflect.DeepEqual(got.Input.Items, want) {
		t.Errorf("got %d items %+v\nwant %d %+v", len(got.Input.Items), got.Input.Items, len(want), want)
	}
}

// referenceTool is how a tool decoded before the scanner: every field by
// encoding/json, the raw form kept for types other than function.
func referenceTool(data []byte) (Tool, error) {
	type plain Tool
	var p plain
	if err := json.Unmarshal(data, &p); err != nil {
		return Tool{}, err
	}
	t := Tool(p)
	if t.Type != ToolFunction {
		t.Raw = append(json.RawMessage(nil), data...)
	}
	return t, nil
}

// referenceEcho is how a function tool was echoed before it was written
// by hand.
func referenceEcho(t Tool) ([]byte, error) {
	params := t.Parameters
	if len(params) == 0 {
		params = json.RawMessage("null")
	}
	// In the order the API writes them, each as encoding/json writes it.
	var b []byte
	for i, v := range []any{t.Type, t.Name, t.Description, params, t.Strict} {
		key := []string{"type", "name", "description", "parameters", "strict"}[i]
		enc, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		b = append(fmt.Appendf(b, `%s%q:`, map[bool]string{true: "{", false: ","}[i == 0], key), enc...)
	}
	return append(b, '}'), nil
}

// Tools decode and echo as they did through encoding/json alone.
func TestToolDecodeAndEchoMatchEncodingJSON(t *testing.T) {
	inputs := []string{
		`{"type":"function","name":"f"}`,
		`{"type":"function","name":"f","description":"d <b> & \u00e9 \b\f \u2028","parameters":{"type":"object","properties":{"x":{"type":"string"}}},"strict":true}`,
		`{"type":"function","name":"f","description":null,"parameters":null,"strict":null}`,
		`{"type":"function","name":"f","parameters": { "type" : "object" } ,"strict":false}`,
		"{\"type\":\"function\",\"name\":\"f\",\"parameters\":{\n  \"type\": \"object\",\n  \"properties\": {\n    \"q\": {\"type\": \"string\", \"enum\": [\"a\",\t\"b c\"]}\r\n  }\n}}",
		`{"type":"function","name":"f","parameters":{"type":"object","description":"spaces in a string: a , b : c","properties":{"q":{"enum":[" x ","\" y"]}}}}`,
		`{"type":"function","name":"f","parameters":{"a":[[[{}]]],"b":{}}}`,
		`{"type":"function","name":"f","parameters":{"a":[1 ,2]}}`,
		`{"type":"function","name":"f","parameters":[]}`,
		`{"type":"function","name":"f","parameters":"not a schema"}`,
		`{"name":"f","type":"function"}`,
		`{"type":"function","name":"f","extra":1}`,
		`{"type":"function","name":"f","extra":{"a":[1,"}"]},"parameters":{}}`,
		`{"type":"function","name":"f","RAW":"not a key: Raw is json:\"-\""}`,
		`{"type":"function","name":"f","Strict":true}`,
		`{"Type":"function","Name":"f"}`,
		`{"type":"mcp","server_label":"s","server_url":"https://mcp.example","authorization":"secret"}`,
		`{"type":"local_shell"}`,
		`{}`,
		`{"type":"function","name":5}`,
		`{"type":"function","name":"f","strict":"yes"}`,
		`{"type":"function","name":"f","description":7}`,
	}
	for _, in := range inputs {
		want, wantErr := referenceTool([]byte(in))
		var got Tool
		gotErr := json.Unmarshal([]byte(in), &got)
		if (wantErr == nil) != (gotErr == nil) || wantErr != nil && wantErr.Error() != gotErr.Error() {
			t.Errorf("%s: error %v, encoding/json says %v", in, gotErr, wantErr)
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %#v\nwant %#v", in, got, want)
		}
		if wantErr != nil || got.Type != ToolFunction {
			continue
		}
		echo, err := json.Marshal(got)
		ref, refErr := referenceEcho(want)
		if err != nil || refErr != nil || string(echo) != string(ref) {
			t.Errorf("%s: echo %s (%v), want %s (%v)", in, echo, err, ref, refErr)
		}
	}
}

// FuzzDecodeItems holds the scanner to encoding/json's result on any
// array of items: the same items, or an error where it errs.
func FuzzDecodeItems(f *testing.F) {
	for _, seed := range []string{
		`[{"role":"user","content":"hi"}]`,
		`[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"a","annotations":[],"logprobs":[]}]}]`,
		`[{"type":"function_call_output","call_id":"c","output":[{"type":"input_text","text":"x"}]},{"role":"user","content":null}]`,
		`[{"type":"loom:mcp_call","extra":{"a":[1,"]"]},"Role":"x","status":null}]`,
		`[{"role":"user","content":"\u0061"},{"role":"\u0075ser","content":"b"}]`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) || len(data) == 0 || data[0] != '[' {
			return // UnmarshalJSON is only handed valid JSON; Input only arrays
		}
		want, wantErr := referenceItems(data)
		if n := itemsBound(bytes.TrimSpace(data)); wantErr == nil && n < len(want) {
			t.Fatalf("%s: bound %d, %d items", data, n, len(want))
		}
		got, gotErr := decodeItems(data)
		if (wantErr == nil) != (gotErr == nil) {
			t.Fatalf("%s: error %v, encoding/json says %v", data, gotErr, wantErr)
		}
		if wantErr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%s:\n got %#v\nwant %#v", data, got, want)
		}
	})
}

// FuzzToolDecode holds Tool.UnmarshalJSON to encoding/json's field by
// field result on any object.
func FuzzToolDecode(f *testing.F) {
	f.Add([]byte(`{"type":"function","name":"f","description":"d","parameters":{"type":"object"},"strict":true}`))
	f.Add([]byte(`{"type":"mcp","server_label":"s","Name":"x","extra":[1]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		data = bytes.TrimSpace(data) // as encoding/json hands a value over
		if !json.Valid(data) {
			return
		}
		want, wantErr := referenceTool(data)
		var got Tool
		gotErr := json.Unmarshal(data, &got)
		if (wantErr == nil) != (gotErr == nil) || wantErr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: got %#v (%v), want %#v (%v)", data, got, gotErr, want, wantErr)
		}
	})
}

// The scanner finds a string's end by its quotes: a quote after an odd
// run of backslashes is part of the string, after an even one it ends
// it, at every position of texts that cross the 8-byte words, in texts
// and in keys and values the items' decoder skips.
func TestDecodeItemsStringEnds(t *testing.T) {
	for _, special := range []string{`\"`, `\\`, `\\\"`, `\\\\`, `\\\\\"`, `\"\"`, `\\"\\`, `]`, `}`, `,`, `\u0022`, `\\u0022`, `é`} {
		for n := range 18 {
			for pos := range n + 1 {
				text := bytes.Repeat([]byte("x"), n)
				text = append(text[:pos:pos], append([]byte(special), text[pos:]...)...)
				for _, in := range []string{
					fmt.Sprintf(`[{"role":"user","content":"%s"}]`, text),
					fmt.Sprintf(`[{"role":"user","content":[{"type":"input_text","text":"%s"}],"extra":"%s"}]`, text, text),
					fmt.Sprintf(`[{"role":"user","x%s":{"%s":["%s"]},"content":"a"}]`, text, text, text),
				} {
					if !json.Valid([]byte(in)) {
						continue // an unescaped quote in the text
					}
					want, wantErr := referenceItems([]byte(in))
					got, gotErr := decodeItems([]byte(in))
					if (wantErr == nil) != (gotErr == nil) || wantErr == nil && !reflect.DeepEqual(got, want) {
						t.Fatalf("%s:\n got %#v (%v)\nwant %#v (%v)", in, got, gotErr, want, wantErr)
					}
				}
			}
		}
	}
}

// scanner.message takes the messages of a resent history, compact or
// not, and leaves every other shape to item, where it stops at once.
func TestMessageTakesHistoryShapes(t *testing.T) {
	for _, tc := range []struct {
		item  string
		takes bool
	}{
		{`{"role":"user","content":"question 1: what is the weather?"}`, true},
		{`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"answer 1","annotations":[]}]}`, true},
		{`{"type":"message","role":"assistant","status":"completed","id":"msg_1","content":[{"type":"output_text","text":"a\nb","annotations":[]}]}`, true},
		{"{\"role\": \"user\", \"content\": [{\"type\": \"input_text\", \"text\": \"b\"}]}", true}, // Python's json.dumps
		{"{ \"role\":\"user\" ,\n\t\"content\":[ { \"type\":\"input_text\" } ] }", true},
		{`{"role":"user","content":[]}`, true},
		{`{"type":"message","role":"assistant","phase":"final_answer","content":"a"}`, false},
		{`{"role":"user","content":[{"type":"input_image","image_url":"https://x/y.png"}]}`, false},
		{`{"type":"function_call","call_id":"c","name":"f","arguments":"{}"}`, false},
		{`{"role":"user","content":null}`, false},
		{`{"role":"user","content":"a",}`, false},
		{`{"role":"user","content":[{"type":"input_text","text":"a"},]}`, false},
		{"{\"role\":\"user\",\"content\":\"ctl\x01\"}", false},
	} {
		s := newScanner([]byte(tc.item))
		var it Item
		if got := s.message(&it); got != tc.takes {
			t.Errorf("%s: taken %v, want %v", tc.item, got, tc.takes)
		} else if got && s.js.End() != nil {
			t.Errorf("%s: taken, but not to its end (offset %d)", tc.item, s.js.Offset())
		}
	}
}
