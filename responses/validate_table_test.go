package responses

import (
	"errors"
	"strings"
	"testing"
)

// withInput is a request with input "x" and the given extra fields
// (",\"k\":v" pairs).
func withInput(extra string) string { return `{"model":"m","input":"x"` + extra + `}` }

// withItems is a request whose input is the given items.
func withItems(items string) string { return `{"model":"m","input":[` + items + `]}` }

// A request field out of range or unsupported is a 400 naming it; the
// unsupported ones carry the unsupported_parameter code.
func TestValidateRequestFields(t *testing.T) {
	const unsupported = "unsupported_parameter"
	tests := []struct {
		name, body, param, code string
	}{
		{"no model", `{"input":"x"}`, "model", ""},
		{"blank model", `{"model":"  ","input":"x"}`, "model", ""},
		{"no input", `{"model":"m"}`, "input", ""},
		{"null input", `{"model":"m","input":null}`, "input", ""},
		{"temperature below 0", withInput(`,"temperature":-0.1`), "temperature", ""},
		{"temperature above 2", withInput(`,"temperature":2.01`), "temperature", ""},
		{"top_p of 0", withInput(`,"top_p":0`), "top_p", ""},
		{"top_p above 1", withInput(`,"top_p":1.5`), "top_p", ""},
		{"presence_penalty below -2", withInput(`,"presence_penalty":-2.5`), "presence_penalty", ""},
		{"presence_penalty above 2", withInput(`,"presence_penalty":3`), "presence_penalty", ""},
		{"frequency_penalty below -2", withInput(`,"frequency_penalty":-3`), "frequency_penalty", ""},
		{"frequency_penalty above 2", withInput(`,"frequency_penalty":2.5`), "frequency_penalty", ""},
		{"max_output_tokens of 0", withInput(`,"max_output_tokens":0`), "max_output_tokens", ""},
		{"max_tool_calls of 0", withInput(`,"max_tool_calls":0`), "max_tool_calls", ""},
		{"top_logprobs", withInput(`,"top_logprobs":3`), "top_logprobs", unsupported},
		{"empty previous_response_id", withInput(`,"previous_response_id":""`), "previous_response_id", ""},
		{"background not stored", withInput(`,"background":true,"store":false`), "background", ""},
		{"conversation and previous_response_id", withInput(`,"conversation":"conv_1","previous_response_id":"resp_1"`), "conversation", ""},
		{"empty conversation", withInput(`,"conversation":""`), "conversation", ""},
		{"conversation object without an id", withInput(`,"conversation":{}`), "conversation", ""},
		{"conversation a number", withInput(`,"conversation":5`), "conversation", ""},
		{"context_management an object", withInput(`,"context_management":{"type":"compaction"}`), "context_management", ""},
		{"context_management of another type", withInput(`,"context_management":[{"type":"truncation"}]`), "context_management[0].type", ""},
		{"context_management without a type", withInput(`,"context_management":[{"compact_threshold":5}]`), "context_management[0].type", ""},
		{"compact_threshold of 0", withInput(`,"context_management":[{"type":"compaction","compact_threshold":0}]`), "context_management[0].compact_threshold", ""},
		{"compact_threshold a string", withInput(`,"context_management":[{"type":"compaction"},{"type":"compaction","compact_threshold":"9"}]`), "context_management[1].compact_threshold", ""},
		{"context_management unknown key", withInput(`,"context_management":[{"type":"compaction","keep":3}]`), "context_management[0].keep", "unknown_parameter"},
		{"prompt", withInput(`,"prompt":{"id":"pmpt_1"}`), "prompt", unsupported},
		{"truncation", withInput(`,"truncation":"sometimes"`), "truncation", ""},
		{"include", withInput(`,"include":["reasoning.encrypted_content","file_search_call.results"]`), "include[1]", unsupported},
		{"text.format.type", withInput(`,"text":{"format":{"type":"yaml"}}`), "text.format.type", ""},
		{"json_schema without a name", withInput(`,"text":{"format":{"type":"json_schema","schema":{}}}`), "text.format.name", ""},
		{"json_schema without a schema", withInput(`,"text":{"format":{"type":"json_schema","name":"s"}}`), "text.format.schema", ""},
		{"json_schema with an array schema", withInput(`,"text":{"format":{"type":"json_schema","name":"s","schema":[1]}}`), "text.format.schema", ""},
		{"text.verbosity", withInput(`,"text":{"format":{"type":"text"},"verbosity":"loud"}`), "text.verbosity", ""},
		{"reasoning.effort", withInput(`,"reasoning":{"effort":"maximal"}`), "reasoning.effort", ""},
		{"metadata not a string", withInput(`,"metadata":{"k":true}`), "metadata", ""},
		{"service_tier unknown", withInput(`,"service_tier":"bogus"`), "service_tier", ""},
		{"service_tier empty", withInput(`,"service_tier":""`), "service_tier", ""},
		{"stream_options a string", withInput(`,"stream":true,"stream_options":"x"`), "stream_options", ""},
		{"stream_options an array", withInput(`,"stream":true,"stream_options":[]`), "stream_options", ""},
		{"stream_options a number", withInput(`,"stream_options":1`), "stream_options", ""},
		{"include_obfuscation a string", withInput(`,"stream":true,"stream_options":{"include_obfuscation":"x"}`), "stream_options.include_obfuscation", ""},
		{"include_obfuscation an object", withInput(`,"stream":true,"stream_options":{"include_obfuscation":{}}`), "stream_options.include_obfuscation", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := check(tt.body)
			if err == nil {
				t.Fatalf("accepted, want a 400 naming %s", tt.param)
			}
			e := mustAPIError(t, err)
			wantKind := EInvalid
			if tt.code == "unsupported_parameter" {
				wantKind = EUnsupported
			}
			if e.Kind != wantKind || e.Type != ErrInvalidRequest || e.Param != tt.param || e.Code != tt.code {
				t.Errorf("got %s %s param %q code %q (%s), want %s param %q code %q", e.Kind, e.Type, e.Param, e.Code, e.Message, wantKind, tt.param, tt.code)
			}
			if e.Message == "" {
				t.Error("no message")
			}
		})
	}
}

// The edges of each range, and the values each enumerated field allows,
// are accepted.
func TestValidateAcceptsTheLimits(t *testing.T) {
	bodies := []string{
		withInput(``),
		`{"model":"m","previous_response_id":"resp_1"}`,
		`{"model":"m","input":"x","previous_response_id":"resp_1"}`,
		withInput(`,"temperature":0,"top_p":1,"presence_penalty":-2,"frequency_penalty":2`),
		withInput(`,"temperature":2,"top_p":0.01,"presence_penalty":2,"frequency_penalty":-2`),
		withInput(`,"max_output_tokens":1,"max_tool_calls":1,"top_logprobs":0`),
		withInput(`,"background":false,"conversation":null,"context_management":[],"prompt":null`),
		withInput(`,"background":true`),
		withInput(`,"conversation":"conv_1"`),
		withInput(`,"conversation":{"id":"conv_1"}`),
		withInput(`,"truncation":"auto"`),
		withInput(`,"truncation":"disabled"`),
		withInput(`,"include":["reasoning.encrypted_content"]`),
		withInput(`,"text":{"format":{"type":"text"},"verbosity":"low"}`),
		withInput(`,"text":{"format":{"type":"json_object"},"verbosity":"high"}`),
		withInput(`,"text":{"format":{"type":"json_schema","name":"s","schema":{"type":"object"},"strict":true}}`),
		withInput(`,"text":{"verbosity":"medium"}`),
		withInput(`,"reasoning":{"summary":"auto"}`),
		withInput(`,"metadata":{"k":"v"},"store":false,"stream":true,"user":"u","service_tier":"auto"`),
		withInput(`,"stream":true,"stream_options":{"include_obfuscation":false}`),
		withInput(`,"stream":true,"stream_options":{"include_obfuscation":true,"other":1}`),
		withInput(`,"stream":true,"stream_options":{}`),
		withInput(`,"stream_options":null`),
	}
	for _, tier := range []string{"auto", "default", "flex", "scale", "priority"} {
		bodies = append(bodies, withInput(`,"service_tier":"`+tier+`"`))
	}
	for _, effort := range []string{"none", "minimal", "low", "medium", "high", "xhigh"} {
		bodies = append(bodies, withInput(`,"reasoning":{"effort":"`+effort+`"}`))
	}
	for _, body := range bodies {
		if _, err := check(body); err != nil {
			t.Errorf("%s: %v", body, err)
		}
	}
}

// The first bad field is the one reported, in the order Validate checks:
// the request's own fields, then tools, then input items.
func TestValidateReportsTheFirstBadField(t *testing.T) {
	_, err := check(`{"model":"m","input":[{"type":"nope"}],"tools":[{"type":"function","name":""}],"temperature":9}`)
	if e := mustAPIError(t, err); e.Param != "temperature" {
		t.Errorf("param %q, want temperature first", e.Param)
	}
	_, err = check(`{"model":"m","input":[{"type":"nope"}],"tools":[{"type":"function","name":""}]}`)
	if e := mustAPIError(t, err); e.Param != "tools[0].name" {
		t.Errorf("param %q, want tools[0].name before the input", e.Param)
	}
}

// Each input item type is checked for the fields it needs; the error names
// the item and its field.
func TestValidateInputItems(t *testing.T) {
	const unsupported = "unsupported_parameter"
	tests := []struct {
		name, items, param, code string
	}{
		{"no type", `{"content":"x"}`, "input[0].type", ""},
		{"unknown type", `{"type":"file_search_call"}`, "input[0].type", ""},
		{"item_reference", `{"type":"item_reference","id":"msg_1"}`, "input[0].type", unsupported},
		{"message without a role", `{"type":"message","content":"x"}`, "input[0].role", ""},
		{"message with a bad role", `{"type":"message","role":"tool","content":"x"}`, "input[0].role", ""},
		{"message without content", `{"type":"message","role":"user"}`, "input[0].content", ""},
		{"message with null content", `{"role":"user","content":null}`, "input[0].content", ""},
		{"user message with output_text", `{"role":"user","content":[{"type":"output_text","text":"x"}]}`, "input[0].content[0].type", ""},
		{"system message with a refusal", `{"role":"system","content":[{"type":"input_text","text":"x"},{"type":"refusal","refusal":"no"}]}`, "input[0].content[1].type", ""},
		{"assistant message with an image", `{"role":"assistant","content":[{"type":"input_image","image_url":"https://a/b.png"}]}`, "input[0].content[0].type", ""},
		{"second item bad", `{"role":"user","content":"ok"},{"type":"function_call","name":"f"}`, "input[1].call_id", ""},
		{"function_call without a name", `{"type":"function_call","call_id":"c1","arguments":"{}"}`, "input[0].name", ""},
		{"function_call_output without a call_id", `{"type":"function_call_output","output":"x"}`, "input[0].call_id", ""},
		{"function_call_output without an output", `{"type":"function_call_output","call_id":"c1"}`, "input[0].output", ""},
		{"function_call_output with an object output", `{"type":"function_call_output","call_id":"c1","output":{"a":1}}`, "input[0].output", ""},
		{"function_call_output with a number output", `{"type":"function_call_output","call_id":"c1","output":5}`, "input[0].output", ""},
		{"reasoning with input_text", `{"type":"reasoning","summary":[],"content":[{"type":"input_text","text":"x"}]}`, "input[0].content[0].type", ""},
		{"local_shell_call without a call_id", `{"type":"local_shell_call","action":{"type":"exec","command":["ls"]}}`, "input[0].call_id", ""},
		{"local_shell_call_output without a call_id", `{"type":"local_shell_call_output","output":"x"}`, "input[0].call_id", ""},
		{"local_shell_call_output without an output", `{"type":"local_shell_call_output","call_id":"c1"}`, "input[0].output", ""},
		{"approval response without a request id", `{"type":"mcp_approval_response","approve":true}`, "input[0].approval_request_id", ""},
		{"approval response with an empty request id", `{"type":"mcp_approval_response","approval_request_id":"","approve":true}`, "input[0].approval_request_id", ""},
		{"approval response without approve", `{"type":"mcp_approval_response","approval_request_id":"mcpr_1"}`, "input[0].approve", ""},
		{"compaction without content", `{"type":"compaction"}`, "input[0].encrypted_content", ""},
		{"compaction with empty content", `{"type":"compaction","encrypted_content":""}`, "input[0].encrypted_content", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := check(withItems(tt.items))
			if err == nil {
				t.Fatalf("accepted, want a 400 naming %s", tt.param)
			}
			if e := mustAPIError(t, err); (e.Kind != EInvalid && e.Kind != EUnsupported) || e.Param != tt.param || e.Code != tt.code {
				t.Errorf("got %s param %q code %q (%s), want invalid param %q code %q", e.Kind, e.Param, e.Code, e.Message, tt.param, tt.code)
			}
		})
	}
}

// Every item type a client may send, in the forms clients send it, passes.
func TestValidateAcceptsEveryInputItemType(t *testing.T) {
	items := []string{
		`{"role":"user","content":"hi"}`,
		`{"role":"developer","content":[{"type":"input_text","text":"be brief"}]}`,
		`{"type":"message","role":"system","content":[]}`,
		`{"role":"assistant","content":"earlier answer"}`,
		`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"a","annotations":[]},{"type":"refusal","refusal":"no"},{"type":"input_text","text":"b"}]}`,
		`{"role":"user","content":[{"type":"input_image","image_url":"data:image/png;base64,iVBORw0KGgo=","detail":"low"}]}`,
		`{"role":"user","content":[{"type":"input_image","image_url":"https://example.com/cat.png","detail":"auto"}]}`,
		`{"role":"user","content":[{"type":"input_file","filename":"a.txt","file_data":"data:text/plain;base64,aGk="}]}`,
		`{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"}`,
		`{"type":"function_call_output","call_id":"c1","output":"done"}`,
		`{"type":"function_call_output","call_id":"c1","output":[{"type":"input_text","text":"done"}]}`,
		`{"type":"reasoning","id":"rs_1","summary":[],"content":[{"type":"reasoning_text","text":"think"}]}`,
		`{"type":"reasoning","id":"rs_2","summary":[{"type":"summary_text","text":"s"}],"encrypted_content":"abc"}`,
		`{"type":"local_shell_call","call_id":"c2","action":{"type":"exec","command":["ls"]},"status":"completed"}`,
		`{"type":"local_shell_call_output","call_id":"c2","output":"a.txt"}`,
		`{"type":"mcp_call","id":"mcp_1","server_label":"s","name":"t","arguments":"{}","output":"ok"}`,
		`{"type":"mcp_list_tools","id":"mcpl_1","server_label":"s","tools":[]}`,
		`{"type":"mcp_approval_request","id":"mcpr_1","server_label":"s","name":"t","arguments":"{}"}`,
		`{"type":"mcp_approval_response","approval_request_id":"mcpr_1","approve":false,"reason":"no"}`,
		`{"type":"mcp_input_request","id":"mcpi_1","server_label":"s","name":"t","arguments":"{}","input_requests":{}}`,
		`{"type":"mcp_input_response","request_id":"mcpi_1","input_responses":{"k":{"action":"decline"}}}`,
		`{"type":"code_interpreter_call","id":"ci_1","code":"print(1)","container_id":"cntr_1","outputs":[]}`,
		`{"type":"compaction","id":"cmp_1","encrypted_content":"sealed"}`,
		`{"type":"shell_call","id":"sh_1","call_id":"c3","action":{"commands":["ls"],"timeout_ms":1000},"status":"completed"}`,
		`{"type":"shell_call_output","id":"sho_1","call_id":"c3","output":[{"stdout":"a\n","stderr":"","outcome":{"type":"exit","exit_code":0}}],"max_output_length":4096}`,
		`{"type":"` + VendorPrefix + `mcp_call","id":"mcp_2","server_label":"s","name":"t","arguments":"{}"}`,
	}
	for _, it := range items {
		if _, err := check(withItems(it)); err != nil {
			t.Errorf("%s: %v", it, err)
		}
	}
	// All of them at once, as a resent history.
	if _, err := check(withItems(strings.Join(items, ","))); err != nil {
		t.Errorf("the whole history: %v", err)
	}
}

// Images and files are checked for a shape loom can use; references to a
// Files API loom does not have are unsupported, not ignored.
func TestValidateMedia(t *testing.T) {
	const unsupported = "unsupported_parameter"
	tests := []struct {
		name, part, param, code string
	}{
		{"image detail", `{"type":"input_image","image_url":"https://a/b.png","detail":"max"}`, "input[0].content[0].detail", ""},
		{"image by file_id", `{"type":"input_image","file_id":"file_1"}`, "input[0].content[0].file_id", unsupported},
		{"image without a url", `{"type":"input_image"}`, "input[0].content[0].image_url", ""},
		{"image data URL not an image", `{"type":"input_image","image_url":"data:text/plain;base64,aGk="}`, "input[0].content[0].image_url", ""},
		{"image data URL not base64", `{"type":"input_image","image_url":"data:image/png,raw"}`, "input[0].content[0].image_url", ""},
		{"image ftp URL", `{"type":"input_image","image_url":"ftp://a/b.png"}`, "input[0].content[0].image_url", ""},
		{"file by file_id", `{"type":"input_file","file_id":"file_1"}`, "input[0].content[0].file_id", unsupported},
		{"file by file_url", `{"type":"input_file","file_url":"https://a/b.pdf"}`, "input[0].content[0].file_url", unsupported},
		{"file without data", `{"type":"input_file","filename":"a.pdf"}`, "input[0].content[0].file_data", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := check(withItems(`{"role":"user","content":[` + tt.part + `]}`))
			if err == nil {
				t.Fatal("accepted")
			}
			if e := mustAPIError(t, err); e.Param != tt.param || e.Code != tt.code {
				t.Errorf("param %q code %q (%s), want %q %q", e.Param, e.Code, e.Message, tt.param, tt.code)
			}
		})
	}
}

// An mcp_input_response maps each key to {action, content}: content only
// with accept, and then an object.
func TestValidateInputResponse(t *testing.T) {
	item := func(fields string) string { return `{"type":"mcp_input_response"` + fields + `}` }
	bad := []struct {
		name, item, param string
	}{
		{"no request_id", item(`,"input_responses":{}`), "input[0].request_id"},
		{"no input_responses", item(`,"request_id":"r"`), "input[0].input_responses"},
		{"input_responses an array", item(`,"request_id":"r","input_responses":[]`), "input[0].input_responses"},
		{"input_responses null", item(`,"request_id":"r","input_responses":null`), "input[0].input_responses"},
		{"an answer not an object", item(`,"request_id":"r","input_responses":{"k":"yes"}`), "input[0].input_responses.k"},
		{"no action", item(`,"request_id":"r","input_responses":{"k":{"content":{}}}`), "input[0].input_responses.k.action"},
		{"unknown action", item(`,"request_id":"r","input_responses":{"k":{"action":"maybe"}}`), "input[0].input_responses.k.action"},
		{"accept with a string", item(`,"request_id":"r","input_responses":{"k":{"action":"accept","content":"x"}}`), "input[0].input_responses.k.content"},
		{"decline with content", item(`,"request_id":"r","input_responses":{"k":{"action":"decline","content":{"a":1}}}`), "input[0].input_responses.k.content"},
		{"cancel with content", item(`,"request_id":"r","input_responses":{"k":{"action":"cancel","content":{}}}`), "input[0].input_responses.k.content"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			_, err := check(withItems(tt.item))
			if err == nil {
				t.Fatal("accepted")
			}
			if e := mustAPIError(t, err); e.Param != tt.param {
				t.Errorf("param %q (%s), want %q", e.Param, e.Message, tt.param)
			}
		})
	}
	for _, answers := range []string{
		`{}`,
		`{"k":{"action":"accept","content":{"name":"x"}}}`,
		`{"k":{"action":"accept"}}`,
		`{"k":{"action":"accept","content":null}}`,
		`{"a":{"action":"decline","content":null},"b":{"action":"cancel"}}`,
	} {
		if _, err := check(withItems(item(`,"request_id":"r","input_responses":` + answers))); err != nil {
			t.Errorf("%s: %v", answers, err)
		}
	}
}

// Function tools need a valid, unique name and an object schema; other
// tool types pass only when the caller runs them; tool_choice must name
// what tools gives.
func TestValidateTools(t *testing.T) {
	fn := func(name string) string {
		return `{"type":"function","name":"` + name + `","parameters":{"type":"object"}}`
	}
	tests := []struct {
		name, tools, choice, param string
		serverTools                []string
	}{
		{name: "no type", tools: `{"name":"f"}`, param: "tools[0].type"},
		{name: "unknown type", tools: `{"type":"file_search"}`, param: "tools[0].type"},
		{name: "server type not run here", tools: `{"type":"mcp","server_label":"s"}`, param: "tools[0].type"},
		{name: "empty name", tools: fn(""), param: "tools[0].name"},
		{name: "name with a space", tools: fn("get weather"), param: "tools[0].name"},
		{name: "name of 65 characters", tools: fn(strings.Repeat("a", 65)), param: "tools[0].name"},
		{name: "duplicate name", tools: fn("f") + "," + fn("g") + "," + fn("f"), param: "tools[2].name"},
		{name: "parameters an array", tools: `{"type":"function","name":"f","parameters":[]}`, param: "tools[0].parameters"},
		{name: "parameters a string", tools: `{"type":"function","name":"f","parameters":"object"}`, param: "tools[0].parameters"},
		{name: "local_shell twice", tools: `{"type":"local_shell"},{"type":"local_shell"}`, param: "tools[1].type"},
		{name: "a type loom does not serve", tools: fn("f") + `,{"type":"file_search","vector_store_ids":["v"]}`, param: "tools[1].type"},
		{name: "apply_patch twice", tools: `{"type":"apply_patch"},{"type":"apply_patch"}`, param: "tools[1].type"},
		{name: "custom without a name", tools: `{"type":"custom"}`, param: "tools[0].name"},
		{name: "custom named like a function", tools: fn("f") + `,{"type":"custom","name":"f"}`, param: "tools[1].name"},
		{name: "custom with an unknown format", tools: `{"type":"custom","name":"c","format":{"type":"json"}}`, param: "tools[0].format.type"},
		{name: "custom grammar of an unknown syntax", tools: `{"type":"custom","name":"c","format":{"type":"grammar","syntax":"ebnf","definition":"x"}}`, param: "tools[0].format.syntax"},
		{name: "custom grammar without a definition", tools: `{"type":"custom","name":"c","format":{"type":"grammar","syntax":"lark"}}`, param: "tools[0].format.definition"},
		{name: "namespace without a name", tools: `{"type":"namespace","tools":[` + fn("f") + `]}`, param: "tools[0].name"},
		{name: "namespace without tools", tools: `{"type":"namespace","name":"crm","tools":[]}`, param: "tools[0].tools"},
		{name: "namespace holding an mcp tool", tools: `{"type":"namespace","name":"crm","tools":[{"type":"mcp","server_label":"s"}]}`, param: "tools[0].tools[0].type"},
		{name: "namespace function with a bad name", tools: `{"type":"namespace","name":"crm","tools":[` + fn("a b") + `]}`, param: "tools[0].tools[0].name"},
		{name: "namespace function with bad parameters", tools: `{"type":"namespace","name":"crm","tools":[{"type":"function","name":"f","parameters":[]}]}`, param: "tools[0].tools[0].parameters"},
		{name: "tool_choice names a missing custom tool", tools: `{"type":"custom","name":"c"}`, choice: `{"type":"custom","name":"d"}`, param: "tool_choice.name"},
		{name: "namespaced name too long", tools: `{"type":"namespace","name":"` + strings.Repeat("n", 40) + `","tools":[` + fn(strings.Repeat("f", 30)) + `]}`, param: "tools[0].tools[0].name"},
		{name: "namespaced name taken", tools: fn("crm__f") + `,{"type":"namespace","name":"crm","tools":[` + fn("f") + `]}`, param: "tools[1].tools[0].name"},
		{name: "tool_choice unknown type", tools: fn("f"), choice: `{"type":"web_search"}`, param: "tool_choice.type"},
		{name: "tool_choice object without a type", tools: fn("f"), choice: `{"name":"f"}`, param: "tool_choice.type"},
		{name: "tool_choice unknown mode", tools: fn("f"), choice: `"sometimes"`, param: "tool_choice"},
		{name: "tool_choice required without tools", choice: `"required"`, param: "tool_choice"},
		{name: "tool_choice names a missing function", tools: fn("f"), choice: `{"type":"function","name":"g"}`, param: "tool_choice.name"},
		{name: "allowed_tools empty", tools: fn("f"), choice: `{"type":"allowed_tools","mode":"auto","tools":[]}`, param: "tool_choice.tools"},
		{name: "allowed_tools missing a function", tools: fn("f"), choice: `{"type":"allowed_tools","tools":[{"type":"function","name":"f"},{"type":"function","name":"g"}]}`, param: "tool_choice.tools[1]"},
		{name: "allowed_tools of another type", tools: fn("f"), choice: `{"type":"allowed_tools","tools":[{"type":"mcp","name":"f"}]}`, param: "tool_choice.tools[0]"},
		{name: "function named tool_search beside a client tool search", tools: `{"type":"tool_search","execution":"client"},` + fn("tool_search"), param: "tools[1]", serverTools: []string{ToolToolSearch}},
		{name: "client tool search beside a function named tool_search", tools: fn("tool_search") + `,{"type":"tool_search","execution":"client"}`, param: "tools[1]", serverTools: []string{ToolToolSearch}},
		{name: "custom tool named tool_search beside a client tool search", tools: `{"type":"tool_search","execution":"client"},{"type":"custom","name":"tool_search"}`, param: "tools[1]", serverTools: []string{ToolToolSearch}},
		{name: "client tool search twice", tools: `{"type":"tool_search","execution":"client"},` + fn("f") + `,{"type":"tool_search","execution":"client"}`, param: "tools[2]", serverTools: []string{ToolToolSearch}},
		{name: "tool_choice names the client tool search's function", tools: `{"type":"tool_search","execution":"client"}`, choice: `{"type":"function","name":"tool_search"}`, param: "tool_choice.name", serverTools: []string{ToolToolSearch}},
		{name: "allowed_tools bad mode", tools: fn("f"), choice: `{"type":"allowed_tools","mode":"often","tools":[{"type":"function","name":"f"}]}`, param: "tool_choice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			extra := `,"tools":[` + tt.tools + `]`
			if tt.choice != "" {
				extra += `,"tool_choice":` + tt.choice
			}
			_, err := check(withInput(extra), tt.serverTools...)
			if err == nil {
				t.Fatal("accepted")
			}
			if e := mustAPIError(t, err); (e.Kind != EInvalid && e.Kind != EUnsupported) || e.Param != tt.param {
				t.Errorf("got %s param %q (%s), want invalid %q", e.Kind, e.Param, e.Message, tt.param)
			}
		})
	}

	good := []struct {
		tools, choice string
		serverTools   []string
	}{
		{tools: fn("get_weather") + "," + fn("a-b.c_9") + "," + fn(strings.Repeat("z", 64))},
		{tools: `{"type":"function","name":"f"}`, choice: `"required"`},
		{tools: `{"type":"function","name":"f","parameters":null}`, choice: `"none"`},
		{tools: fn("f"), choice: `"auto"`},
		{tools: fn("f"), choice: `{"type":"function","name":"f"}`},
		{tools: fn("f") + "," + fn("g"), choice: `{"type":"allowed_tools","mode":"required","tools":[{"type":"function","name":"g"}]}`},
		{tools: `{"type":"local_shell"},` + fn("local_shell_helper")},
		{tools: `{"type":"apply_patch"},{"type":"custom","name":"c"},{"type":"custom","name":"d","format":{"type":"text"}},` +
			`{"type":"custom","name":"e","format":{"type":"grammar","syntax":"regex","definition":"^[a-z]+$"}}`},
		{tools: fn("f") + `,{"type":"namespace","name":"crm","description":"The CRM.","tools":[` + fn("f") + `,{"type":"custom","name":"note"}]}`},
		{tools: `{"type":"custom","name":"c"}`, choice: `{"type":"custom","name":"c"}`},
		{tools: fn("f") + `,{"type":"custom","name":"c"}`, choice: `{"type":"allowed_tools","mode":"auto","tools":[{"type":"custom","name":"c"}]}`},
		{tools: `{"type":"mcp","server_label":"s"},{"type":"code_interpreter","container":{"type":"auto"}}`, serverTools: []string{ToolMCP, ToolCodeInterpreter}},
		{tools: `{"type":"tool_search","execution":"client"},` + fn("tool_search_helper") + `,{"type":"namespace","name":"crm","tools":[` + fn("tool_search") + `]}`, serverTools: []string{ToolToolSearch}},
	}
	for _, tt := range good {
		extra := `,"tools":[` + tt.tools + `]`
		if tt.choice != "" {
			extra += `,"tool_choice":` + tt.choice
		}
		if _, err := check(withInput(extra), tt.serverTools...); err != nil {
			t.Errorf("tools %s, tool_choice %s: %v", tt.tools, tt.choice, err)
		}
	}
}

// A valid request gives a nil error interface, not a nil *APIError in
// one (which would compare non-nil), from every exported check.
func TestSuccessIsANilError(t *testing.T) {
	var err error
	var req *Request
	req, err = DecodeRequest([]byte(withInput(`,"tools":[{"type":"mcp","server_label":"s"}]`)))
	if err != nil {
		t.Fatalf("DecodeRequest: %v", err)
	}
	if err = req.Validate(func(string) bool { return true }); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if _, err = ParseMCPTool(req.Tools[0], 0); err != nil {
		t.Fatalf("ParseMCPTool: %v", err)
	}
	if _, err = req.ConversationID(); err != nil {
		t.Fatalf("ConversationID without a conversation: %v", err)
	}
	req.Conversation = []byte(`{"id":"conv_1"}`)
	if id, err := req.ConversationID(); err != nil || id != "conv_1" {
		t.Fatalf("ConversationID = %q, %v", id, err)
	}
	// And a failure is an *APIError through the interface.
	_, err = DecodeRequest([]byte(`{`))
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.Kind != EInvalid {
		t.Errorf("DecodeRequest of a bad body: %v", err)
	}
}

// A tool type loom will not serve says so, by name.
func TestValidateUnservedToolSaysSo(t *testing.T) {
	for _, typ := range []string{"file_search", "computer_use_preview", "image_generation"} {
		_, err := check(withInput(`,"tools":[{"type":"` + typ + `"}]`))
		e := mustAPIError(t, err)
		if e.Param != "tools[0].type" || !strings.Contains(e.Message, "not served by this server") || !strings.Contains(e.Message, typ) {
			t.Errorf("%s: param %q message %q", typ, e.Param, e.Message)
		}
	}
}

// The calls and answers of namespace, custom and apply_patch tools, as a
// client resends them, are checked.
func TestValidateClientToolItems(t *testing.T) {
	bad := []struct{ item, param string }{
		{`{"type":"custom_tool_call","name":"c","input":"x"}`, "input[0].call_id"},
		{`{"type":"custom_tool_call","call_id":"k","input":"x"}`, "input[0].name"},
		{`{"type":"custom_tool_call_output","call_id":"k"}`, "input[0].output"},
		{`{"type":"custom_tool_call_output","call_id":"k","output":{"a":1}}`, "input[0].output"},
		{`{"type":"apply_patch_call","call_id":"k"}`, "input[0].operation"},
		{`{"type":"apply_patch_call","call_id":"k","operation":{"type":"rename_file","path":"a"}}`, "input[0].operation.type"},
		{`{"type":"apply_patch_call_output","call_id":"k","status":"maybe"}`, "input[0].status"},
		{`{"type":"apply_patch_call_output","status":"completed"}`, "input[0].call_id"},
	}
	for _, tt := range bad {
		_, err := check(withItems(tt.item))
		if e := mustAPIError(t, err); e.Param != tt.param {
			t.Errorf("%s: param %q (%s), want %q", tt.item, e.Param, e.Message, tt.param)
		}
	}
	good := `{"type":"function_call","call_id":"a","namespace":"crm","name":"f","arguments":"{}"},` +
		`{"type":"function_call_output","call_id":"a","output":"ok"},` +
		`{"type":"custom_tool_call","call_id":"b","name":"c","input":"raw text"},` +
		`{"type":"custom_tool_call_output","call_id":"b","output":"done"},` +
		`{"type":"apply_patch_call","call_id":"c","status":"completed","operation":{"type":"delete_file","path":"a.txt"}},` +
		`{"type":"apply_patch_call_output","call_id":"c","status":"failed","output":"no such file"}`
	if _, err := check(withItems(good)); err != nil {
		t.Errorf("the calls and outputs were refused: %v", err)
	}
}
