package responses

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func ptr[T any](v T) *T { return &v }

// keysOf returns the sorted top-level keys of a JSON object.
func keysOf(t *testing.T, data []byte) []string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("%s: %v", data, err)
	}
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Every item type marshals with exactly the keys the Responses API gives
// it (required ones even when empty) and unmarshals back to the same
// item: the round trip a client makes when it resends its history.
func TestItemMarshalRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		item Item
		keys string // the object's keys, sorted, comma-separated
		// back is the item after the round trip, when marshalling fills
		// in defaults; nil means the item itself.
		back *Item
	}{
		{
			name: "message",
			item: Item{Type: ItemMessage, ID: "msg_1", Status: StatusCompleted, Role: "assistant", Content: []ContentPart{OutputText("hi")}, Tool: &ItemTool{Phase: "final_answer"}},
			keys: "content,id,phase,role,status,type",
		},
		{
			name: "message with defaults",
			item: Item{Type: ItemMessage, Role: "user"},
			keys: "content,id,role,status,type",
			back: &Item{Type: ItemMessage, Role: "user", Status: StatusCompleted, Content: []ContentPart{}},
		},
		{
			name: "function_call",
			item: Item{Type: ItemFunctionCall, ID: "fc_1", Call: &ItemCall{CallID: "call_1", Name: "get_weather", Arguments: `{"city":"Paris"}`}, Status: StatusInProgress},
			keys: "arguments,call_id,id,name,status,type",
		},
		{
			name: "function_call with empty arguments",
			item: Item{Type: ItemFunctionCall, Call: &ItemCall{CallID: "call_1", Name: "now"}},
			keys: "arguments,call_id,id,name,status,type",
			back: &Item{Type: ItemFunctionCall, Call: &ItemCall{CallID: "call_1", Name: "now"}, Status: StatusCompleted},
		},
		{
			name: "function_call_output as a string",
			item: Item{Type: ItemFunctionCallOutput, ID: "fco_1", Call: &ItemCall{CallID: "call_1", Output: json.RawMessage(`"sunny"`)}, Status: StatusCompleted},
			keys: "call_id,id,output,status,type",
		},
		{
			name: "function_call_output as parts",
			item: Item{Type: ItemFunctionCallOutput, Call: &ItemCall{CallID: "call_1", Output: json.RawMessage(`[{"type":"input_text","text":"sunny"}]`)}, Status: StatusCompleted},
			keys: "call_id,id,output,status,type",
		},
		{
			name: "function_call_output without output",
			item: Item{Type: ItemFunctionCallOutput, Call: &ItemCall{CallID: "call_1"}},
			keys: "call_id,id,output,status,type",
			back: &Item{Type: ItemFunctionCallOutput, Call: &ItemCall{CallID: "call_1", Output: json.RawMessage(`""`)}, Status: StatusCompleted},
		},
		{
			name: "reasoning",
			item: Item{Type: ItemReasoning, ID: "rs_1", Reasoning: &ItemReasoningFields{Summary: []ContentPart{{Type: PartSummaryText, Text: "s"}}, EncryptedContent: ptr("sealed")}, Content: []ContentPart{{Type: PartReasoningText, Text: "think"}}},
			keys: "content,encrypted_content,id,summary,type",
		},
		{
			name: "reasoning, empty",
			item: Item{Type: ItemReasoning, ID: "rs_2", Status: StatusInProgress},
			keys: "id,status,summary,type",
			back: &Item{Type: ItemReasoning, ID: "rs_2", Status: StatusInProgress, Reasoning: &ItemReasoningFields{Summary: []ContentPart{}}},
		},
		{
			name: "mcp_call",
			item: Item{Type: ItemMCPCall, ID: "mcp_1", Tool: &ItemTool{ServerLabel: "docs", ApprovalRequestID: ptr("mcpr_1")}, Call: &ItemCall{Name: "search", Arguments: `{"q":"x"}`, Output: json.RawMessage(`"found"`)}, Status: StatusCompleted},
			keys: "approval_request_id,arguments,error,id,name,output,server_label,status,type",
		},
		{
			name: "mcp_call failed",
			item: Item{Type: ItemMCPCall, ID: "mcp_2", Tool: &ItemTool{ServerLabel: "docs", Error: ptr("server unreachable")}, Call: &ItemCall{Name: "search", Arguments: `{}`}, Status: StatusIncomplete},
			keys: "approval_request_id,arguments,error,id,name,output,server_label,status,type",
			// The null output comes back as raw null, and marshals again
			// as null.
			back: &Item{Type: ItemMCPCall, ID: "mcp_2", Tool: &ItemTool{ServerLabel: "docs", Error: ptr("server unreachable")}, Call: &ItemCall{Name: "search", Arguments: `{}`, Output: json.RawMessage(`null`)}, Status: StatusIncomplete},
		},
		{
			name: "mcp_list_tools",
			item: Item{Type: ItemMCPListTools, ID: "mcpl_1", Tool: &ItemTool{ServerLabel: "docs", Tools: json.RawMessage(`[{"name":"search","input_schema":{"type":"object"}}]`)}},
			keys: "error,id,server_label,tools,type",
		},
		{
			name: "mcp_list_tools, none",
			item: Item{Type: ItemMCPListTools, ID: "mcpl_2", Tool: &ItemTool{ServerLabel: "docs", Error: ptr("unauthorized")}},
			keys: "error,id,server_label,tools,type",
			back: &Item{Type: ItemMCPListTools, ID: "mcpl_2", Tool: &ItemTool{ServerLabel: "docs", Tools: json.RawMessage(`[]`), Error: ptr("unauthorized")}},
		},
		{
			name: "mcp_approval_request",
			item: Item{Type: ItemMCPApprovalRequest, ID: "mcpr_1", Tool: &ItemTool{ServerLabel: "docs"}, Call: &ItemCall{Name: "delete", Arguments: `{"id":1}`}},
			keys: "arguments,id,name,server_label,type",
		},
		{
			name: "mcp_approval_response",
			item: Item{Type: ItemMCPApprovalResponse, ID: "mcpa_1", Tool: &ItemTool{ApprovalRequestID: ptr("mcpr_1"), Approve: ptr(false), Reason: ptr("not now")}},
			keys: "approval_request_id,approve,id,reason,type",
		},
		{
			name: "mcp_input_request",
			item: Item{Type: ItemMCPInputRequest, ID: "mcpi_1", Tool: &ItemTool{ServerLabel: "docs", InputRequests: json.RawMessage(`{"k":{"method":"elicitation/create","params":{"message":"which day?"}}}`)}, Call: &ItemCall{Name: "book", Arguments: `{}`}},
			keys: "arguments,id,input_requests,name,server_label,type",
		},
		{
			name: "mcp_input_request, none",
			item: Item{Type: ItemMCPInputRequest, ID: "mcpi_2", Tool: &ItemTool{ServerLabel: "docs"}, Call: &ItemCall{Name: "book"}},
			keys: "arguments,id,input_requests,name,server_label,type",
			back: &Item{Type: ItemMCPInputRequest, ID: "mcpi_2", Tool: &ItemTool{ServerLabel: "docs", InputRequests: json.RawMessage(`{}`)}, Call: &ItemCall{Name: "book"}},
		},
		{
			name: "mcp_input_response",
			item: Item{Type: ItemMCPInputResponse, Tool: &ItemTool{RequestID: "mcpi_1", InputResponses: json.RawMessage(`{"k":{"action":"accept","content":{"day":"monday"}}}`)}},
			keys: "input_responses,request_id,type",
		},
		{
			name: "code_interpreter_call",
			item: Item{Type: ItemCodeInterpreterCall, ID: "ci_1", Tool: &ItemTool{Code: ptr("print(1)"), ContainerID: "cntr_1", Outputs: json.RawMessage(`[{"type":"logs","logs":"1\n"}]`)}, Status: StatusCompleted},
			keys: "code,container_id,id,outputs,status,type",
		},
		{
			name: "code_interpreter_call in progress",
			item: Item{Type: ItemCodeInterpreterCall, ID: "ci_2", Tool: &ItemTool{ContainerID: "cntr_1"}, Status: StatusInProgress},
			keys: "code,container_id,id,outputs,status,type",
			back: &Item{Type: ItemCodeInterpreterCall, ID: "ci_2", Tool: &ItemTool{ContainerID: "cntr_1", Outputs: json.RawMessage(`[]`)}, Status: StatusInProgress},
		},
		{
			name: "compaction",
			item: Item{Type: ItemCompaction, ID: "cmp_1", Reasoning: &ItemReasoningFields{EncryptedContent: ptr("sealed")}},
			keys: "encrypted_content,id,type",
		},
		{
			name: "shell_call",
			item: Item{Type: "shell_call", ID: "sh_1", Call: &ItemCall{CallID: "call_2"}, Tool: &ItemTool{Action: json.RawMessage(`{"commands":["ls"],"timeout_ms":1000}`)}, Status: StatusCompleted},
			keys: "action,call_id,id,status,type",
		},
		{
			name: "shell_call_output",
			item: Item{Type: "shell_call_output", ID: "sho_1", Call: &ItemCall{CallID: "call_2", Output: json.RawMessage(`[{"stdout":"a\n","stderr":"","outcome":{"type":"exit","exit_code":0}}]`)}, Tool: &ItemTool{MaxOutputLength: ptr(4096)}},
			keys: "call_id,id,max_output_length,output,type",
		},
		{
			name: "local_shell_call",
			item: Item{Type: "local_shell_call", ID: "ls_1", Call: &ItemCall{CallID: "call_3"}, Tool: &ItemTool{Action: json.RawMessage(`{"type":"exec","command":["ls"]}`)}, Status: StatusCompleted},
			keys: "action,call_id,id,status,type",
		},
		{
			name: "local_shell_call_output",
			item: Item{Type: "local_shell_call_output", ID: "lso_1", Call: &ItemCall{CallID: "call_3", Output: json.RawMessage(`"a.txt"`)}},
			keys: "call_id,id,output,type",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data, err := json.Marshal(tt.item)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(keysOf(t, data), ","); got != tt.keys {
				t.Errorf("keys %s, want %s\n%s", got, tt.keys, data)
			}
			var back Item
			if err := json.Unmarshal(data, &back); err != nil {
				t.Fatal(err)
			}
			want := tt.item
			if tt.back != nil {
				want = *tt.back
			}
			if !reflect.DeepEqual(back, want) {
				t.Errorf("round trip\n got %+v\nwant %+v\nvia %s", back, want, data)
			}
			// And a second trip changes nothing.
			again, _ := json.Marshal(back)
			if string(again) != string(data) {
				t.Errorf("second marshal differs:\n%s\n%s", again, data)
			}
		})
	}
}

// The values of the keys that are required but may be empty: null where
// the schema allows null, an empty list or object, or the default status.
func TestItemMarshalEmptyRequiredValues(t *testing.T) {
	tests := []struct {
		item Item
		want map[string]string // key → its JSON value
	}{
		{Item{Type: ItemMessage, Role: "user"}, map[string]string{"content": `[]`, "status": `"completed"`, "id": `""`}},
		{Item{Type: ItemFunctionCall}, map[string]string{"arguments": `""`, "status": `"completed"`}},
		{Item{Type: ItemFunctionCallOutput}, map[string]string{"output": `""`}},
		{Item{Type: ItemReasoning}, map[string]string{"summary": `[]`}},
		{Item{Type: ItemMCPCall}, map[string]string{"output": `null`, "error": `null`, "approval_request_id": `null`, "status": `"completed"`}},
		{Item{Type: ItemMCPListTools}, map[string]string{"tools": `[]`, "error": `null`}},
		{Item{Type: ItemMCPInputRequest}, map[string]string{"input_requests": `{}`}},
		{Item{Type: ItemCodeInterpreterCall}, map[string]string{"code": `null`, "outputs": `[]`, "container_id": `""`}},
	}
	for _, tt := range tests {
		data, err := json.Marshal(tt.item)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]json.RawMessage
		json.Unmarshal(data, &m)
		for k, v := range tt.want {
			if string(m[k]) != v {
				t.Errorf("%s: %s = %s, want %s", tt.item.Type, k, m[k], v)
			}
		}
	}
}

// Content parts carry the keys their type requires: text even when
// empty, annotations and logprobs on output_text, refusal on a refusal.
func TestContentPartMarshal(t *testing.T) {
	tests := []struct {
		part ContentPart
		want string
	}{
		{ContentPart{Type: PartInputText}, `{"type":"input_text","text":""}`},
		{ContentPart{Type: PartReasoningText, Text: "t"}, `{"type":"reasoning_text","text":"t"}`},
		{ContentPart{Type: PartSummaryText, Text: "s"}, `{"type":"summary_text","text":"s"}`},
		{ContentPart{Type: PartOutputText, Text: "o"}, `{"type":"output_text","text":"o","annotations":[],"logprobs":[]}`},
		{ContentPart{Type: PartOutputText, Text: "o", Annotations: []json.RawMessage{json.RawMessage(`{"type":"url_citation"}`)}}, `{"type":"output_text","text":"o","annotations":[{"type":"url_citation"}],"logprobs":[]}`},
		{ContentPart{Type: PartRefusal, Refusal: "no"}, `{"type":"refusal","refusal":"no"}`},
		{ContentPart{Type: PartInputImage, Media: &PartMedia{ImageURL: "https://a/b.png", Detail: "low"}}, `{"type":"input_image","image_url":"https://a/b.png","detail":"low"}`},
		{ContentPart{Type: PartInputFile, Media: &PartMedia{FileData: "aGk=", Filename: "a.txt"}}, `{"type":"input_file","file_data":"aGk=","filename":"a.txt"}`},
	}
	for _, tt := range tests {
		data, err := json.Marshal(tt.part)
		if err != nil {
			t.Fatal(err)
		}
		if string(data) != tt.want {
			t.Errorf("%s: %s, want %s", tt.part.Type, data, tt.want)
		}
	}
}

// The shorthand forms clients send decode to full items.
func TestItemUnmarshalShorthand(t *testing.T) {
	tests := []struct {
		name, in string
		want     Item
	}{
		{"message without a type", `{"role":"user","content":"hi"}`,
			Item{Type: ItemMessage, Role: "user", Content: []ContentPart{{Type: PartInputText, Text: "hi"}}}},
		{"assistant string content is output_text", `{"role":"assistant","content":"hello"}`,
			Item{Type: ItemMessage, Role: "assistant", Content: []ContentPart{{Type: PartOutputText, Text: "hello"}}}},
		{"null content", `{"type":"message","role":"user","content":null}`,
			Item{Type: ItemMessage, Role: "user"}},
		{"content parts", `{"type":"message","role":"developer","content":[{"type":"input_text","text":"a"},{"type":"input_text","text":"b"}]}`,
			Item{Type: ItemMessage, Role: "developer", Content: []ContentPart{{Type: PartInputText, Text: "a"}, {Type: PartInputText, Text: "b"}}}},
		{"vendor-prefixed type", `{"type":"loom:mcp_input_request","id":"mcpi_1","server_label":"s"}`,
			Item{Type: ItemMCPInputRequest, ID: "mcpi_1", Tool: &ItemTool{ServerLabel: "s"}}},
		{"no role, no type", `{"id":"x"}`, Item{ID: "x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var it Item
			if err := json.Unmarshal([]byte(tt.in), &it); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(it, tt.want) {
				t.Errorf("got %+v, want %+v", it, tt.want)
			}
		})
	}
	for _, bad := range []string{`{"role":"user","content":5}`, `{"role":"user","content":{"text":"x"}}`, `{"role":"user","content":"\x"}`, `[1]`} {
		var it Item
		if err := json.Unmarshal([]byte(bad), &it); err == nil {
			t.Errorf("%s: decoded to %+v, want an error", bad, it)
		}
	}
}

// Text joins the text-bearing parts; OutputString reads either form of a
// call output.
func TestItemText(t *testing.T) {
	it := Item{Content: []ContentPart{{Type: PartOutputText, Text: "a"}, {Type: PartRefusal, Refusal: "b"}, {Type: PartInputImage, Media: &PartMedia{ImageURL: "https://x"}}, {Type: PartInputText, Text: "c"}}}
	if got := it.Text(); got != "abc" {
		t.Errorf("Text = %q", got)
	}
	if got := (&Item{Content: []ContentPart{{Type: PartRefusal, Refusal: "only"}}}).Text(); got != "only" {
		t.Errorf("Text of one refusal = %q", got)
	}
	if got := (&Item{}).Text(); got != "" {
		t.Errorf("Text of nothing = %q", got)
	}
	for _, tt := range []struct{ output, want string }{
		{``, ""},
		{`"plain"`, "plain"},
		{`[{"type":"input_text","text":"x"},{"type":"input_text","text":"y"}]`, "xy"},
		{`{"not":"a string"}`, `{"not":"a string"}`},
	} {
		it := Item{Type: ItemFunctionCallOutput, Call: &ItemCall{Output: json.RawMessage(tt.output)}}
		if got := it.OutputString(); got != tt.want {
			t.Errorf("OutputString of %s = %q, want %q", tt.output, got, tt.want)
		}
	}
}
