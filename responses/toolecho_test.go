package responses

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
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

// toolListBody is a request whose tools (n of them, the first named
// first) are in the echo's form but for one pretty-printed, with a field
// after them.
func toolListBody(first string, n int) string {
	var b strings.Builder
	b.WriteString(`{"tools":[`)
	for i := range n {
		name := fmt.Sprintf("tool_%d", i)
		if i == 0 {
			name = first
		}
		fmt.Fprintf(&b, `{"type":"function","name":%q,"description":"Looks up thing %d.","parameters":{"type":"object","properties":{"city":{"type":"string"}}},"strict":%t},`, name, i, i%2 == 0)
	}
	b.WriteString("{\n  \"type\": \"function\",\n  \"name\": \"pretty\",\n  \"parameters\": {\"type\": \"object\"}\n}")
	b.WriteString(`],"model":"m","input":"hi"}`)
	return b.String()
}

// A list sent again is copied from the one decoded before (the second
// time it is seen, it is kept): the same request as decoding gives, each
// with values of its own, none of the body's bytes, and a list that only
// starts the same is decoded.
func TestToolListCache(t *testing.T) {
	body := toolListBody("cached_first", 30)
	listAt := strings.Index(body, "[")
	for round := range 3 {
		b := []byte(body)
		got, err := DecodeRequest(b)
		if err != nil {
			t.Fatal(err)
		}
		// A request's changes to its tools are its own.
		*got.Tools[0].Description = "changed"
		*got.Tools[0].Strict = !*got.Tools[0].Strict
		got.Tools[1].Parameters = json.RawMessage(`{}`)
		for i := range b {
			b[i] = 'X' // the body's buffer goes back to its pool
		}
		if kept := recentToolLists.find([]byte(body[listAt:])); (kept != nil) != (round > 0) {
			t.Fatalf("round %d: the list is kept: %v", round, kept != nil)
		}
		checkDecode(t, []byte(body), true)
	}
	// The same first kilobyte, another list: the last tool is another.
	other := strings.Replace(body, `"name":"tool_29"`, `"name":"other_29"`, 1)
	got, err := DecodeRequest([]byte(other))
	if err != nil {
		t.Fatal(err)
	}
	if name := got.Tools[29].Name; name != "other_29" {
		t.Errorf("tools[29] is %q, want other_29", name)
	}
	checkDecode(t, []byte(other), true)
}

// The cache keeps at most cachedToolLists lists and about
// cachedToolBytes.
func TestToolListCacheBounded(t *testing.T) {
	for i := range cachedToolLists + 50 {
		body := []byte(toolListBody(fmt.Sprintf("bounded_%d", i), 10))
		for range 2 {
			if _, err := DecodeRequest(body); err != nil {
				t.Fatal(err)
			}
		}
	}
	c := &recentToolLists
	c.mu.Lock()
	defer c.mu.Unlock()
	size := 0
	for _, kept := range c.lists {
		size += 3 * len(kept.text)
	}
	if len(c.lists) > cachedToolLists || c.bytes > cachedToolBytes || c.bytes != size || len(c.seen) > seenToolLists {
		t.Errorf("%d lists of %d bytes kept (counted %d), %d seen", len(c.lists), size, c.bytes, len(c.seen))
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

// Requests decoded at once share the kept lists safely (run with -race):
// each gets the list it sent.
func TestToolListCacheConcurrent(t *testing.T) {
	bodies := []string{toolListBody("concurrent_a", 20), toolListBody("concurrent_b", 20)}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 20 {
				body := bodies[(g+i)%2]
				req, err := DecodeRequest([]byte(body))
				if err != nil {
					t.Error(err)
					return
				}
				if want := "concurrent_" + string("ab"[(g+i)%2]); req.Tools[0].Name != want {
					t.Errorf("tools[0] is %q, want %q", req.Tools[0].Name, want)
				}
				*req.Tools[0].Description = "mine"
			}
		})
	}
	wg.Wait()
	for _, body := range bodies {
		checkDecode(t, []byte(body), true)
	}
}

// A kept list found valid is not checked again, but tool_choice is, and
// a request that changed its copy of the list is checked in full; a
// list found faulty is refused every time.
func TestKeptToolListValidation(t *testing.T) {
	body := toolListBody("validated_first", 20)
	choice := func(name string) string {
		return strings.Replace(body, `"model":"m"`, `"model":"m","tool_choice":{"type":"function","name":"`+name+`"}`, 1)
	}
	for round := range 3 {
		for _, tc := range []struct {
			body, param string
		}{
			{body, ""},
			{choice("tool_7"), ""},
			{choice("no_such_tool"), "tool_choice.name"},
		} {
			req, err := DecodeRequest([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if err := req.Validate(nil); param(err) != tc.param {
				t.Errorf("round %d: %v, want a 400 on %q", round, err, tc.param)
			}
		}
		req, err := DecodeRequest([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Tools[3].Name = "not a name"
		if err := req.Validate(nil); param(err) != "tools[3].name" {
			t.Errorf("round %d: a changed tool: %v", round, err)
		}
		req.Tools[3].Name = "tool_1"
		if err := req.Validate(nil); param(err) != "tools[3].name" {
			t.Errorf("round %d: a changed tool's duplicate name: %v", round, err)
		}
	}
	if kept := recentToolLists.find([]byte(body[strings.Index(body, "["):])); kept == nil || kept.names.Load() == nil {
		t.Error("the valid list is not kept with its names")
	}
	dup := strings.Replace(toolListBody("dup_first", 20), `"name":"tool_5"`, `"name":"tool_4"`, 1)
	for round := range 3 {
		req, err := DecodeRequest([]byte(dup))
		if err != nil {
			t.Fatal(err)
		}
		if err := req.Validate(nil); param(err) != "tools[5].name" {
			t.Errorf("round %d: duplicate names: %v", round, err)
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
// other, from a kept list too.
func TestEchoFormSchemaDepthRefused(t *testing.T) {
	deep := strings.Repeat(`{"a":`, MaxSchemaDepth+1) + `{}` + strings.Repeat(`}`, MaxSchemaDepth+1)
	tool := `{"type":"function","name":"deep","description":"` + strings.Repeat("x", 1024) + `","parameters":` + deep + `,"strict":false}`
	body := `{"model":"m","input":"hi","tools":[` + tool + `]}`
	for round := range 3 {
		req, err := DecodeRequest([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		if req.Tools[0].echoText() == nil {
			t.Fatal("the tool is not in the echo's form")
		}
		if err := req.Validate(nil); param(err) != "tools[0].parameters" {
			t.Errorf("round %d: %v, want a 400 on tools[0].parameters", round, err)
		}
	}
}
