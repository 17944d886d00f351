package responses

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// Function tools written as the echo writes them are decoded by their
// fixed text and keep it for the echo; every other form is decoded the
// general way and encoded field by field. Either way the request is what
// encoding/json makes of it (checkDecode), and a kept text is what the
// tool's fields encode to (checkEcho).
func TestToolsInEchoForm(t *testing.T) {
	const schema = `{"type":"object","properties":{"city":{"type":"string","description":"the city"}},"required":["city"]}`
	for _, tc := range []struct {
		tool     string
		echoForm bool
	}{
		{`{"type":"function","name":"f","description":"Looks up a city.","parameters":` + schema + `,"strict":false}`, true},
		{`{"type":"function","name":"f","description":null,"parameters":{},"strict":null}`, true},
		{`{"type":"function","name":"f","description":"","parameters":{"a":[[[{}]]]},"strict":true}`, true},
		{`{"type":"function","name":"f","description":"<b> & é 日本 😀","parameters":{},"strict":true}`, true},
		// Not in the echo's form: escapes (\u00e9 is written é), a
		// character the echo escapes, white space, another order, a
		// missing or extra key, parameters that are not an object.
		{`{"type":"function","name":"f","description":"caf\u00e9","parameters":{},"strict":true}`, false},
		{`{"type":"function","name":"f","description":"a \"quote\"","parameters":{},"strict":true}`, false},
		{`{"type":"function","name":"f","description":"line` + "\u2028" + `sep","parameters":{},"strict":true}`, false},
		{`{"type":"function","name":"f","description":"x","parameters":{"type": "object"},"strict":true}`, false},
		{"{\"type\":\"function\",\"name\":\"f\",\"description\":\"x\",\"parameters\":{\n  \"type\": \"object\"\n},\"strict\":true}", false},
		{`{"type":"function","name":"f","description":"x","parameters":{},"strict":true }`, false},
		{`{"type":"function","name": "f","description":"x","parameters":{},"strict":true}`, false},
		{`{"type":"function","name":"f","parameters":{},"description":"x","strict":true}`, false},
		{`{"type":"function","name":"f","description":"x","parameters":{}}`, false},
		{`{"type":"function","name":"f","description":"x","parameters":{},"strict":true,"defer_loading":true}`, false},
		{`{"type":"function","name":"f","description":"x","parameters":null,"strict":true}`, false},
		{`{"type":"function","name":"f","description":"x","parameters":[],"strict":true}`, false},
		{`{"type":"function","name":"f","description":7,"parameters":{},"strict":true}`, false},
		{`{"type":"function","name":"f","description":"x","parameters":{},"strict":"yes"}`, false},
	} {
		body := `{"model":"m","tools":[` + tc.tool + `,` + tc.tool + `]}`
		got, err := DecodeRequest([]byte(body))
		if err != nil {
			if !strings.Contains(tc.tool, `"yes"`) && !strings.Contains(tc.tool, `:7`) {
				t.Errorf("%s: %v", tc.tool, err)
			}
			checkDecode(t, []byte(body), true)
			continue
		}
		for i := range got.Tools {
			tool := &got.Tools[i]
			if kept := tool.echoText() != nil; kept != tc.echoForm {
				t.Errorf("%s: tools[%d] kept its text: %v, want %v", tc.tool, i, kept, tc.echoForm)
			}
			if tc.echoForm && string(tool.echoText()) != tc.tool {
				t.Errorf("%s: tools[%d] kept %s", tc.tool, i, tool.echoText())
			}
		}
		checkDecode(t, []byte(body), true)
	}
}

// A tool changed after it was decoded is echoed as it is now, not as
// the text it was decoded from.
func TestToolEchoFollowsChangedFields(t *testing.T) {
	const in = `{"model":"m","tools":[{"type":"function","name":"lookup","description":"Looks up a city.","parameters":{"type":"object"},"strict":false}]}`
	yes := true
	other := "Looks up a town."
	for _, tc := range []struct {
		name   string
		change func(*Tool)
	}{
		{"none", func(*Tool) {}},
		{"name", func(t *Tool) { t.Name = "lookup2" }},
		{"shorter name", func(t *Tool) { t.Name = "look" }},
		{"name with a quote", func(t *Tool) { t.Name = `lookup","description":"x` }},
		{"description", func(t *Tool) { t.Description = &other }},
		{"description in place", func(t *Tool) { *t.Description = "Looks up a town." }},
		{"no description", func(t *Tool) { t.Description = nil }},
		{"strict", func(t *Tool) { t.Strict = &yes }},
		{"strict in place", func(t *Tool) { *t.Strict = true }},
		{"no strict", func(t *Tool) { t.Strict = nil }},
		{"parameters, same bytes", func(t *Tool) { t.Parameters = json.RawMessage(`{"type":"object"}`) }},
		{"parameters", func(t *Tool) { t.Parameters = json.RawMessage(`{"type":"object","properties":{}}`) }},
		{"deferred", func(t *Tool) { t.DeferLoading = true }},
	} {
		req, err := DecodeRequest([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		tool := &req.Tools[0]
		if tool.echoText() == nil {
			t.Fatalf("%s: the tool kept no text", tc.name)
		}
		tc.change(tool)
		got, err := json.Marshal(tool)
		plain := *tool
		plain.echo = nil
		want, wantErr := plain.appendJSON(nil)
		if err != nil || wantErr != nil || string(got) != string(want) {
			t.Errorf("%s: echo %s (%v), its fields encode to %s (%v)", tc.name, got, err, want, wantErr)
		}
		if tc.name != "none" && tool.echoText() != nil {
			t.Errorf("%s: the kept text still echoed", tc.name)
		}
	}
}

// A short input before many tools is decoded into a list of its own
// size: the braces of the tools' schemas are no bound on its items.
func TestShortInputBeforeTools(t *testing.T) {
	for _, n := range []int{1, shortInput, shortInput + 1} {
		input := strings.Repeat(`{"role":"user","content":"hi"},`, n)
		body := `{"model":"m","input":[` + strings.TrimSuffix(input, ",") + `],"tools":[` +
			strings.TrimSuffix(strings.Repeat(`{"type":"function","name":"f","description":"Looks up a thing.","parameters":{"type":"object","properties":{"city":{"type":"string","description":"the city"},"days":{"type":"integer","minimum":1}},"required":["city"]},"strict":false},`, 200), ",") + `]}`
		req, err := DecodeRequest([]byte(body))
		if err != nil {
			t.Fatalf("%d items: %v", n, err)
		}
		items := req.Input.Items
		if len(items) != n {
			t.Fatalf("%d items decoded, want %d", len(items), n)
		}
		if n <= shortInput && cap(items) > n+outputRoom {
			t.Errorf("%d items: a list of %d", n, cap(items))
		}
	}
}

// param is the param of an *APIError, "" for nil.
func param(err error) string {
	if err == nil {
		return ""
	}
	if apiErr, ok := err.(*APIError); ok {
		return apiErr.Param
	}
	return "not an APIError: " + err.Error()
}

// A schema nested past the limit is refused in the echo's form as in any
// other.
func TestEchoFormSchemaDepthRefused(t *testing.T) {
	deep := strings.Repeat(`{"a":`, MaxSchemaDepth+1) + `{}` + strings.Repeat(`}`, MaxSchemaDepth+1)
	tool := `{"type":"function","name":"deep","description":"` + strings.Repeat("x", 1024) + `","parameters":` + deep + `,"strict":false}`
	body := `{"model":"m","input":"hi","tools":[` + tool + `]}`
	req, err := DecodeRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if req.Tools[0].echoText() == nil {
		t.Fatal("the tool is not in the echo's form")
	}
	if err := req.Validate(nil); param(err) != "tools[0].parameters" {
		t.Errorf("%v, want a 400 on tools[0].parameters", err)
	}
}

// A list that mixes tools in the echo's form with others, decoded one
// after another (the lists they are decoded into are kept between
// requests), gives each tool its own values: the echo's tools are
// written from their text, the others moved from the kept list, which
// goes back zero (a tool with a description and strict before one with
// null ones must not lend them).
func TestToolListMixedForms(t *testing.T) {
	const (
		full     = `{"type":"function","name":"a","description":"Looks up a city.","parameters":{"type":"object","properties":{"city":{"type":"string"}}},"strict":true}`
		nulls    = `{"type":"function","name":"b","description":null,"parameters":{},"strict":null}`
		spaced   = `{"type":"function", "name":"c","description":"With a space.","parameters":{"type":"object"},"strict":false}`
		reorder  = `{"name":"d","type":"function","strict":true,"parameters":{"a":[1,{"b":null}]},"description":"Keys in another order."}`
		escaped  = `{"type":"function","name":"e","description":"caf\u00e9","parameters":{},"strict":false}`
		noStrict = `{"type":"function","name":"f","description":"No strict.","parameters":{"type":"object"}}`
	)
	lists := [][]string{
		{full, spaced, nulls, reorder, escaped},
		{nulls, nulls[:len(nulls)-1] + `,"defer_loading":true}`, full},
		{spaced, reorder, noStrict, nulls},
		{escaped, full, full, noStrict, nulls, spaced},
	}
	for round := range 2 {
		for _, list := range lists {
			// Names made unique per position, so that validation passes.
			var tools []string
			for i, tool := range list {
				tools = append(tools, strings.Replace(tool, `"name":"`, fmt.Sprintf(`"name":"t%d_`, i), 1))
			}
			body := []byte(`{"model":"m","tools":[` + strings.Join(tools, ",") + `]}`)
			checkDecode(t, body, true)
			got, err := DecodeRequest(body)
			if err != nil {
				t.Fatalf("round %d: %s: %v", round, body, err)
			}
			for i := range got.Tools {
				tool := &got.Tools[i]
				inEchoForm := !strings.Contains(tools[i], `", "`) && strings.HasPrefix(tools[i], `{"type":"function","name":`) &&
					!strings.Contains(tools[i], `\u`) && strings.Contains(tools[i], `"strict":`) && !strings.Contains(tools[i], "defer_loading")
				if e := tool.echoText(); (e != nil) != inEchoForm || e != nil && string(e) != tools[i] {
					t.Errorf("round %d: tools[%d] %s: kept text %q", round, i, tools[i], e)
				}
			}
		}
	}
}
