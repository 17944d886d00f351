package responses

import (
	"reflect"
	"strings"
	"testing"
)

// referenceDecode is how a request decoded before scanRequest: the body
// through encoding/json (decodeValidText), diagnose for the 400 of text
// that is not valid.
func referenceDecode(body []byte) (*Request, *APIError) {
	if !validText(body) {
		return nil, diagnose(body)
	}
	return decodeValidText(body)
}

// fullRequest sets every field of the request, in the forms clients send.
const fullRequest = `{
	"model": "gpt-oss-120b", "instructions": "Be brief.\n\"Really\" \u00e9 \ud83d\ude00",
	"input": [{"role":"user","content":"hi"},{"type":"function_call_output","call_id":"c1","output":"done"}],
	"tools": [{"type":"function","name":"get_weather","description":"d","parameters":{"type":"object"},"strict":true},
		{"type":"mcp","server_label":"docs","server_url":"https://x","headers":{"a":"b"}}],
	"tool_choice": {"type":"function","name":"get_weather"}, "parallel_tool_calls": false,
	"max_tool_calls": 3, "max_output_tokens": 1000, "temperature": 0.7, "top_p": 1, "top_logprobs": 0,
	"presence_penalty": -0.5, "frequency_penalty": 1e-3,
	"text": {"format": {"type": "json_schema", "name": "a", "schema": {"type": "object"}, "strict": true}, "verbosity": "low"},
	"reasoning": {"effort": "high", "summary": null}, "include": ["reasoning.encrypted_content", null],
	"store": false, "background": false, "previous_response_id": "resp_1", "conversation": {"id": "conv_1"},
	"stream": true, "stream_options": {"include_obfuscation": false}, "truncation": "auto",
	"metadata": {"a": "1", "b": "2"}, "prompt_cache_key": "k", "safety_identifier": "s", "service_tier": "auto",
	"user": "u", "prompt": {"id": "p"}, "context_management": null, "unknown": {"deep": [1, "x", null, {"y": []}]}
}`

// requestBodies are bodies of every kind: well-formed requests in the
// forms scanRequest takes and in those it leaves to encoding/json, and
// malformed ones, each with one fault.
var requestBodies = []struct {
	body    string
	scanned bool // scanRequest decodes it itself
}{
	{fullRequest, true},
	{`{"model":"m","input":"#say ok"}`, true},
	{`{"model":"m","input":""}`, true},
	{`{"model":"m","input":"a\"b\\c\n\u00e9\ud83d\ude00 \u2028"}`, true},
	{`{"model":"m","input":"lone \ud800 surrogate"}`, true},
	{"{\"model\":\"m\",\"input\":\"caf\u00e9 \u65e5\u672c\"}", true},
	{`{"model":"m","input":null}`, true},
	{`{"model":"m","input":"a","stream":true}`, true},
	{string(historyBody(20)), true},
	{string(toolsBody(5)), true},
	{`{}`, true},
	{` {"model":"m"} `, true},
	{`{"model":null,"input":null,"tools":null,"tool_choice":null,"include":null,"metadata":null,"text":null,"store":null,"stream":null,"max_output_tokens":null,"temperature":null,"conversation":null,"instructions":null}`, true},
	{`{"model":"m","tools":[],"include":[],"metadata":{},"input":[]}`, true},
	{`{"model":"m","tool_choice":"required","temperature":-0,"top_p":1E-2,"max_output_tokens":-5}`, true},
	{`{"model":"m","unknown":"x","unknown":[1]}`, true},
	// Braces in strings: more of them than items, and many for the
	// bytes, where the list is sized by counting the items first.
	{`{"model":"m","input":[{"role":"user","content":"{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{"},{"role":"user","content":"{}"}]}`, true},
	{`{"model":"m","input":[{"role":"user","content":"{"}],"tools":[{"type":"function","name":"f","parameters":{"type":"object","properties":{"a":{"type":"object"}}}}]}`, true},
	{`{"model":"m","input":[null,{"role":"user","content":"a"},null]}`, true},
	{`{"model":"m","input":[{"role":"user","content":"a"}],"input2":[{},{},{}]}`, true},
	// Taken by encoding/json: keys in another case or with escapes, a key
	// twice, values of kinds the scanner leaves to it.
	{`{"Model":"m"}`, false},
	{`{"MODEL":"m","model":"n"}`, false},
	{`{"mod\u0065l":"m"}`, false},
	{`{"model":"m","model":"n"}`, false},
	{`{"model":"m","ſtore":true}`, false},
	{`{"model":"m","tools":[{"type":"function","name":"f"}],"tools":null}`, false},
	{`{"model":"m","input":"a","input":[{"role":"user","content":"b"}]}`, false},
	{`{"model":"m","tools":[null]}`, false},
	{`{"model":"m","max_output_tokens":1e3}`, false},
	{`{"model":"m","max_output_tokens":99999999999999999999}`, false},
	{`{"model":"m","temperature":1e400}`, false},
	// Malformed: the same 400, naming the same field.
	{``, false},
	{`   `, false},
	{`null`, false},
	{`[]`, false},
	{`"text"`, false},
	{`{"model":"m"`, false},
	{`{"model":"m"} x`, false},
	{"{\"model\":\"m\"}\x00", false},
	{"{\"model\":\"m\"} \x00", false},
	{`{"model":"m",}`, false},
	{`{"model" "m"}`, false},
	{`{"model":5}`, false},
	{`{"model":"m","input":5}`, false},
	{`{"model":"m","input":[5]}`, false},
	{`{"model":"m","input":[{"role":5}]}`, false},
	{`{"model":"m","input":[{"role":"user","content":5}]}`, false},
	{`{"model":"m","tools":{}}`, false},
	{`{"model":"m","tools":[5]}`, false},
	{`{"model":"m","tools":[{"type":"function","name":5}]}`, false},
	{`{"model":"m","tool_choice":5}`, false},
	{`{"model":"m","stream":"yes"}`, false},
	{`{"model":"m","store":1}`, false},
	{`{"model":"m","max_output_tokens":1.5}`, false},
	{`{"model":"m","max_output_tokens":"5"}`, false},
	{`{"model":"m","temperature":"hot"}`, false},
	{`{"model":"m","include":"all"}`, false},
	{`{"model":"m","include":[5]}`, false},
	{`{"model":"m","metadata":[]}`, false},
	{`{"model":"m","text":"plain"}`, false},
	{`{"model":"m","reasoning":{"effort":5}}`, false},
	{`{"model":"m","instructions":{}}`, false},
	{`{"model":"m","unknown":tru}`, false},
	{`{"model":"m","unknown":01}`, false},
	{`{"model":"m","unknown":"\q"}`, false},
	{`{"model":"m","unknown":[1,]}`, false},
	{"{\"model\":\"m\",\"unknown\":\"ctl\x01\"}", false},
	{"{\"model\":\"bad \xff utf-8\"}", false},
	{`{"model":"lone \ud800 surrogate"}`, false},
	{`{"model":"m","unknown":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}`, false},
}

// checkDecode fails unless DecodeRequest makes of body what the
// reference makes of it: the same request, or the same 400 (param and
// message) when sameError.
func checkDecode(t *testing.T, body []byte, sameError bool) {
	t.Helper()
	want, wantErr := referenceDecode(body)
	got, err := DecodeRequest(body)
	var gotErr *APIError
	if err != nil {
		gotErr = err.(*APIError)
	}
	switch {
	case (wantErr == nil) != (gotErr == nil):
		t.Errorf("%.200s: error %v, encoding/json says %v", body, gotErr, wantErr)
	case wantErr != nil:
		if sameError && (gotErr.Param != wantErr.Param || gotErr.Message != wantErr.Message || gotErr.Kind != wantErr.Kind) {
			t.Errorf("%.200s: error %q (param %q), encoding/json says %q (param %q)", body, gotErr.Message, gotErr.Param, wantErr.Message, wantErr.Param)
		}
	case !reflect.DeepEqual(got, want):
		t.Errorf("%.200s:\n got %+v\nwant %+v", body, got, want)
	}
}

// A request decodes in one pass to what encoding/json makes of it, and a
// malformed one is the same 400 naming the same field; the usual forms
// are decoded by scanRequest itself, not left to encoding/json.
func TestScanRequestMatchesEncodingJSON(t *testing.T) {
	for _, tc := range requestBodies {
		checkDecode(t, []byte(tc.body), true)
		if !validText([]byte(tc.body)) {
			continue // DecodeRequest scans only valid text
		}
		var req Request
		err := scanRequest([]byte(tc.body), &req)
		if scanned := err == nil; scanned != tc.scanned {
			t.Errorf("%.200s: scanned %v (%v), want %v", tc.body, scanned, err, tc.scanned)
		}
	}
}

// Every truncation of a request, and every one-byte change of it to a
// character that matters to JSON, decodes as encoding/json decodes it, or
// fails as it fails. (Which field diagnose names for a body with several
// faults depends on map order, so only the failure is compared here.)
func TestScanRequestMutationsMatchEncodingJSON(t *testing.T) {
	for _, body := range [][]byte{
		[]byte(`{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"a\"b"}]}],` +
			`"tools":[{"type":"function","name":"f","parameters":{"type":"object","x":[1.5,-2e3,true,null]}}],` +
			`"max_output_tokens":10,"temperature":0.5,"store":false,"metadata":{"k":"v"},"extra":{"a":[0]}}`),
		// The shapes of a resent history, which scanner.message takes.
		[]byte(`{"model":"m","input":[{"role":"user","content":"q"},{"type":"message","role":"assistant",` +
			`"content":[{"type":"output_text","text":"a","annotations":[]},{"text":"b","type":"output_text"}],"id":"m1","status":"completed"}]}`),
	} {
		for i := range len(body) {
			checkDecode(t, body[:i], false)
			for _, c := range []byte(`{}[]",:0-.e\ntx`) {
				changed := append([]byte(nil), body...)
				changed[i] = c
				checkDecode(t, changed, false)
			}
		}
	}
}

// A limit is refused before the items are built, as before, but only for
// a body that is JSON throughout.
func TestScanRequestLimit(t *testing.T) {
	items := "[" + strings.Repeat(`{"role":"user","content":"a"},`, MaxInputItems) + `{"role":"user","content":"a"}]`
	// Items that are not objects are not in the count of braces that
	// sizes the list.
	nulls := "[" + strings.Repeat(`null,`, MaxInputItems) + `{"role":"user","content":"a"}]`
	for _, body := range []string{
		`{"model":"m","input":` + items + `}`,
		`{"model":"m","input":` + items + `,"x":tru}`,
		`{"model":"m","input":` + nulls + `}`,
		`{"model":"m","input":` + nulls + `,"x":tru}`,
	} {
		checkDecode(t, []byte(body), true)
	}
}

// FuzzScanRequest holds DecodeRequest, which decodes a request in the
// walk that checks it, to encoding/json on any body: the same request,
// or a failure where encoding/json fails.
func FuzzScanRequest(f *testing.F) {
	for _, tc := range requestBodies {
		if len(tc.body) < 2000 {
			f.Add([]byte(tc.body))
		}
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkDecode(t, body, false)
	})
}
