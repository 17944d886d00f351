package responses

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
)

// The hand-written encoder (jsonObject, appendJSON) is held to what
// encoding/json writes from struct tags, the encoding loom used before:
// the reference* functions below are that encoding, a struct per shape
// with the keys in the API's order, marshalled by encoding/json.

func mustMarshal(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func referencePart(t *testing.T, p ContentPart) json.RawMessage {
	switch p.Type {
	case PartInputText, PartReasoningText, PartSummaryText:
		return mustMarshal(t, struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}{p.Type, p.Text})
	case PartOutputText:
		ann := p.Annotations
		if ann == nil {
			ann = []json.RawMessage{}
		}
		return mustMarshal(t, struct {
			Type        string            `json:"type"`
			Text        string            `json:"text"`
			Annotations []json.RawMessage `json:"annotations"`
			Logprobs    []json.RawMessage `json:"logprobs"`
		}{p.Type, p.Text, ann, []json.RawMessage{}})
	case PartRefusal:
		return mustMarshal(t, struct {
			Type    string `json:"type"`
			Refusal string `json:"refusal"`
		}{p.Type, p.Refusal})
	}
	type plain ContentPart
	return mustMarshal(t, struct {
		plain
		*PartMedia
	}{plain(p), p.Media})
}

func referenceParts(t *testing.T, parts []ContentPart) []json.RawMessage {
	out := []json.RawMessage{}
	for _, p := range parts {
		out = append(out, referencePart(t, p))
	}
	return out
}

func rawOr(raw json.RawMessage, def string) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage(def)
	}
	return raw
}

// referenceItem is an item as encoding/json writes it from a struct of
// the item type's keys, in the OpenAI dialect.
func referenceItem(t *testing.T, it Item) json.RawMessage {
	status := orDefault(it.Status, StatusCompleted)
	var v any
	switch it.Type {
	case ItemMessage:
		v = struct {
			Type    string            `json:"type"`
			ID      string            `json:"id"`
			Status  string            `json:"status"`
			Role    string            `json:"role"`
			Content []json.RawMessage `json:"content"`
			Phase   string            `json:"phase,omitempty"`
		}{it.Type, it.ID, status, it.Role, referenceParts(t, it.Content), it.ToolFields().Phase}
	case ItemFunctionCall:
		v = struct {
			Type      string `json:"type"`
			ID        string `json:"id"`
			CallID    string `json:"call_id"`
			Namespace string `json:"namespace,omitempty"`
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
			Status    string `json:"status"`
		}{it.Type, it.ID, it.CallFields().CallID, it.ToolFields().Namespace, it.CallFields().Name, it.CallFields().Arguments, status}
	case ItemFunctionCallOutput, ItemCustomToolCallOutput:
		w := struct {
			Type   string          `json:"type"`
			ID     string          `json:"id"`
			CallID string          `json:"call_id"`
			Output json.RawMessage `json:"output"`
			Status string          `json:"status,omitempty"`
		}{it.Type, it.ID, it.CallFields().CallID, rawOr(it.CallFields().Output, `""`), status}
		if it.Type == ItemCustomToolCallOutput {
			w.Status = ""
			if it.ID == "" {
				// id is omitted when empty: drop it by re-encoding.
				return mustMarshal(t, struct {
					Type   string          `json:"type"`
					CallID string          `json:"call_id"`
					Output json.RawMessage `json:"output"`
				}{w.Type, w.CallID, w.Output})
			}
		}
		v = w
	case ItemReasoning:
		var content []json.RawMessage
		if len(it.Content) > 0 {
			content = referenceParts(t, it.Content)
		}
		v = struct {
			Type             string            `json:"type"`
			ID               string            `json:"id"`
			Status           string            `json:"status,omitempty"`
			Summary          []json.RawMessage `json:"summary"`
			Content          []json.RawMessage `json:"content,omitempty"`
			EncryptedContent *string           `json:"encrypted_content,omitempty"`
		}{it.Type, it.ID, it.Status, referenceParts(t, it.ReasoningFields().Summary), content, it.ReasoningFields().EncryptedContent}
	case ItemMCPCall:
		v = struct {
			Type              string          `json:"type"`
			ID                string          `json:"id"`
			ServerLabel       string          `json:"server_label"`
			Name              string          `json:"name"`
			Arguments         string          `json:"arguments"`
			Output            json.RawMessage `json:"output"`
			Error             *string         `json:"error"`
			Status            string          `json:"status"`
			ApprovalRequestID *string         `json:"approval_request_id"`
		}{it.Type, it.ID, it.ToolFields().ServerLabel, it.CallFields().Name, it.CallFields().Arguments, rawOr(it.CallFields().Output, "null"), it.ToolFields().Error, status, it.ToolFields().ApprovalRequestID}
	case ItemMCPListTools:
		v = struct {
			Type        string          `json:"type"`
			ID          string          `json:"id"`
			ServerLabel string          `json:"server_label"`
			Tools       json.RawMessage `json:"tools"`
			Error       *string         `json:"error"`
		}{it.Type, it.ID, it.ToolFields().ServerLabel, rawOr(it.ToolFields().Tools, "[]"), it.ToolFields().Error}
	case ItemMCPApprovalRequest:
		v = struct {
			Type        string `json:"type"`
			ID          string `json:"id"`
			ServerLabel string `json:"server_label"`
			Name        string `json:"name"`
			Arguments   string `json:"arguments"`
		}{it.Type, it.ID, it.ToolFields().ServerLabel, it.CallFields().Name, it.CallFields().Arguments}
	case ItemMCPInputRequest:
		v = struct {
			Type          string          `json:"type"`
			ID            string          `json:"id"`
			ServerLabel   string          `json:"server_label"`
			Name          string          `json:"name"`
			Arguments     string          `json:"arguments"`
			InputRequests json.RawMessage `json:"input_requests"`
		}{it.Type, it.ID, it.ToolFields().ServerLabel, it.CallFields().Name, it.CallFields().Arguments, rawOr(it.ToolFields().InputRequests, "{}")}
	case ItemMCPInputResponse:
		v = struct {
			Type           string          `json:"type"`
			ID             string          `json:"id,omitempty"`
			RequestID      string          `json:"request_id"`
			InputResponses json.RawMessage `json:"input_responses"`
		}{it.Type, it.ID, it.ToolFields().RequestID, rawOr(it.ToolFields().InputResponses, "null")}
	case ItemCodeInterpreterCall:
		v = struct {
			Type        string          `json:"type"`
			ID          string          `json:"id"`
			Code        *string         `json:"code"`
			ContainerID string          `json:"container_id"`
			Outputs     json.RawMessage `json:"outputs"`
			Status      string          `json:"status"`
		}{it.Type, it.ID, it.ToolFields().Code, it.ToolFields().ContainerID, rawOr(it.ToolFields().Outputs, "[]"), status}
	case ItemToolSearchCall, ItemToolSearchOutput:
		w := struct {
			Type      string          `json:"type"`
			ID        string          `json:"id,omitempty"`
			CallID    string          `json:"call_id"`
			Arguments json.RawMessage `json:"arguments,omitempty"`
			Execution string          `json:"execution"`
			Status    string          `json:"status"`
			Tools     json.RawMessage `json:"tools,omitempty"`
		}{Type: it.Type, ID: it.ID, CallID: it.CallFields().CallID, Execution: orDefault(it.ToolFields().Execution, ExecutionServer), Status: status}
		if it.Type == ItemToolSearchCall {
			w.Arguments = json.RawMessage(it.CallFields().Arguments)
			if !json.Valid(w.Arguments) {
				w.Arguments = mustMarshal(t, it.CallFields().Arguments)
			}
		} else {
			w.Tools = rawOr(it.ToolFields().Tools, "[]")
		}
		v = w
	case ItemWebSearchCall:
		v = struct {
			Type   string          `json:"type"`
			ID     string          `json:"id"`
			Status string          `json:"status"`
			Action json.RawMessage `json:"action"`
		}{it.Type, it.ID, status, rawOr(it.ToolFields().Action, `{"type":"search"}`)}
	case ItemCustomToolCall:
		v = struct {
			Type      string `json:"type"`
			ID        string `json:"id"`
			CallID    string `json:"call_id"`
			Namespace string `json:"namespace,omitempty"`
			Name      string `json:"name"`
			Input     string `json:"input"`
			Status    string `json:"status,omitempty"`
		}{it.Type, it.ID, it.CallFields().CallID, it.ToolFields().Namespace, it.CallFields().Name, it.ToolFields().Input, it.Status}
	case ItemApplyPatchCall:
		v = struct {
			Type      string          `json:"type"`
			ID        string          `json:"id"`
			CallID    string          `json:"call_id"`
			Operation json.RawMessage `json:"operation"`
			Status    string          `json:"status"`
		}{it.Type, it.ID, it.CallFields().CallID, rawOr(it.ToolFields().Operation, "null"), status}
	case ItemApplyPatchCallOutput:
		v = struct {
			Type   string          `json:"type"`
			ID     string          `json:"id,omitempty"`
			CallID string          `json:"call_id"`
			Status string          `json:"status"`
			Output json.RawMessage `json:"output"`
		}{it.Type, it.ID, it.CallFields().CallID, status, rawOr(it.CallFields().Output, "null")}
	default:
		if len(it.Content) > 0 || len(it.ReasoningFields().Summary) > 0 {
			t.Fatalf("the reference of %s has no content parts", it.Type)
		}
		type plain Item
		v = struct {
			plain
			*ItemCall
			*ItemReasoningFields
			*ItemTool
		}{plain(it), it.Call, it.Reasoning, it.Tool}
	}
	return mustMarshal(t, v)
}

// referenceToolEcho is a tool as encoding/json writes it: a function tool
// from its struct, another its raw form without the credentials.
func referenceToolEcho(t *testing.T, tool Tool) json.RawMessage {
	if tool.Type != ToolFunction && len(tool.Raw) > 0 {
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(tool.Raw, &fields); err != nil {
			t.Fatal(err)
		}
		delete(fields, "authorization")
		delete(fields, "headers")
		return mustMarshal(t, fields)
	}
	return mustMarshal(t, struct {
		Type         string          `json:"type"`
		Name         string          `json:"name"`
		Description  *string         `json:"description"`
		Parameters   json.RawMessage `json:"parameters"`
		Strict       *bool           `json:"strict"`
		DeferLoading bool            `json:"defer_loading,omitempty"`
	}{tool.Type, tool.Name, tool.Description, tool.Parameters, tool.Strict, tool.DeferLoading})
}

func referenceToolChoice(t *testing.T, tc ToolChoice) json.RawMessage {
	switch {
	case tc.Function != "":
		return mustMarshal(t, struct {
			Type string `json:"type"`
			Name string `json:"name"`
		}{"function", tc.Function})
	case tc.Allowed != nil:
		return mustMarshal(t, struct {
			Type  string    `json:"type"`
			Mode  string    `json:"mode"`
			Tools []ToolRef `json:"tools"`
		}{"allowed_tools", tc.Mode, tc.Allowed})
	case tc.Mode == "":
		return json.RawMessage(`"auto"`)
	}
	return mustMarshal(t, tc.Mode)
}

func referenceText(t *testing.T, c TextConfig) json.RawMessage {
	var format json.RawMessage = json.RawMessage("null")
	if f := c.Format; f != nil && f.Type == FormatJSONSchema {
		format = mustMarshal(t, struct {
			Type        string          `json:"type"`
			Name        string          `json:"name"`
			Description *string         `json:"description"`
			Schema      json.RawMessage `json:"schema"`
			Strict      bool            `json:"strict"`
		}{f.Type, f.Name, f.Description, rawOr(f.Schema, "null"), f.Strict != nil && *f.Strict})
	} else if f != nil {
		format = mustMarshal(t, struct {
			Type string `json:"type"`
		}{f.Type})
	}
	return mustMarshal(t, struct {
		Format    json.RawMessage `json:"format"`
		Verbosity *string         `json:"verbosity,omitempty"`
	}{format, c.Verbosity})
}

// referenceResponse is the response as encoding/json writes it from the
// struct's tags, its nested values in their reference encodings; in the
// Open Responses dialect item types are renamed and only function tools
// echoed.
func referenceResponse(t *testing.T, r *Response, d Dialect) json.RawMessage {
	type fields Response // the tags, without the MarshalJSON method
	f := struct {
		fields
		Output     []json.RawMessage `json:"output"`
		Tools      []json.RawMessage `json:"tools"`
		ToolChoice json.RawMessage   `json:"tool_choice"`
		Text       json.RawMessage   `json:"text"`
	}{fields: fields(*r)}
	if r.Output != nil {
		f.Output = []json.RawMessage{}
		for _, it := range r.Output {
			f.Output = append(f.Output, renamed(t, referenceItem(t, it), d))
		}
	}
	if r.Tools != nil {
		f.Tools = []json.RawMessage{}
		for _, tool := range r.Tools {
			if d == DialectOpenResponses && tool.Type != ToolFunction {
				continue
			}
			f.Tools = append(f.Tools, referenceToolEcho(t, tool))
		}
	}
	f.ToolChoice = referenceToolChoice(t, r.ToolChoice)
	f.Text = referenceText(t, r.Text)
	// The outer fields shadow the struct's, and encoding/json writes them
	// after the embedded ones: put every key back in the struct's order.
	var m map[string]json.RawMessage
	if err := json.Unmarshal(mustMarshal(t, f), &m); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	b.WriteByte('{')
	rt := reflect.TypeFor[Response]()
	for i := range rt.NumField() {
		name, opts, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
		v, ok := m[name]
		if !ok || name == "" || name == "-" {
			continue
		}
		if opts == "omitempty" && (string(v) == "null" || len(v) == 0) {
			continue
		}
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		b.Write(mustMarshal(t, name))
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// renamed renames an item's type as dialect d does.
func renamed(t *testing.T, item json.RawMessage, d Dialect) json.RawMessage {
	var head struct {
		Type string `json:"type"`
	}
	json.Unmarshal(item, &head)
	if d.ItemType(head.Type) == head.Type {
		return item
	}
	from := append(append([]byte(`{"type":`), mustMarshal(t, head.Type)...), ',')
	to := append(append([]byte(`{"type":`), mustMarshal(t, d.ItemType(head.Type))...), ',')
	if !bytes.HasPrefix(item, from) {
		t.Fatalf("type is not the first key of %s", item)
	}
	return append(to, item[len(from):]...)
}

// tokens is the token stream of a JSON text: its keys in order and its
// values as decoded, so that two texts compare equal when a client sees
// the same object and the same field order, whatever the escaping.
func tokens(t *testing.T, data []byte) []any {
	t.Helper()
	if !json.Valid(data) {
		t.Fatalf("not valid JSON: %s", data)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var out []any
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, tok)
	}
}

// sameEncoding fails the test unless got is one line of valid JSON with
// the tokens of want.
func sameEncoding(t *testing.T, name string, got, want []byte) {
	t.Helper()
	if bytes.ContainsAny(got, "\n\r") {
		t.Errorf("%s: a line break in %s", name, got)
	}
	if !reflect.DeepEqual(tokens(t, got), tokens(t, want)) {
		t.Errorf("%s:\n got %s\nwant %s", name, got, want)
	}
}

// encodingCases are items of every type, with the values that are hard
// to write: escapes, invalid UTF-8, HTML characters, raw JSON sent
// pretty-printed.
func encodingCases() []Item {
	odd := "a \"q\" \\ <b>&amp; \n\t\u2028 é 😀 \xff end"
	pretty := json.RawMessage("[ {\"type\" : \"input_text\",\n\t\"text\": \"a b\\n\\\" c\"} ]")
	return []Item{
		{Type: ItemMessage, ID: "msg_1", Status: StatusCompleted, Role: "assistant", Content: []ContentPart{OutputText(odd)}, Tool: &ItemTool{Phase: "final_answer"}},
		{Type: ItemMessage, Role: "user"},
		{Type: ItemMessage, Role: "user", Content: []ContentPart{
			{Type: PartInputText, Text: odd},
			{Type: PartInputImage, Media: &PartMedia{ImageURL: "https://x/y.png?a=1&b=2", Detail: "auto"}},
			{Type: PartInputFile, Media: &PartMedia{FileID: "file_1", Filename: "a.pdf", FileData: "data:...", FileURL: "https://x/a.pdf"}},
			{Type: PartOutputText, Text: "cited", Annotations: []json.RawMessage{json.RawMessage(`{"type":"url_citation", "url":"https://x"}`)}},
			{Type: PartRefusal, Refusal: "no <way>"},
			{Type: "other", Text: "t", Annotations: []json.RawMessage{json.RawMessage(`{}`)}},
		}},
		{Type: ItemFunctionCall, ID: "fc_1", Call: &ItemCall{CallID: "call_1", Name: "get_weather", Arguments: `{"city":"Paris <&>"}`}, Status: StatusInProgress},
		{Type: ItemFunctionCall, Call: &ItemCall{CallID: "call_1", Name: "now"}, Tool: &ItemTool{Namespace: "ns"}},
		{Type: ItemFunctionCallOutput, ID: "fco_1", Call: &ItemCall{CallID: "call_1", Output: json.RawMessage(`"sunny <&>"`)}, Status: StatusCompleted},
		{Type: ItemFunctionCallOutput, Call: &ItemCall{CallID: "call_1", Output: pretty}},
		{Type: ItemFunctionCallOutput, Call: &ItemCall{CallID: "call_1"}},
		{Type: ItemReasoning, ID: "rs_1", Reasoning: &ItemReasoningFields{Summary: []ContentPart{{Type: PartSummaryText, Text: "s"}}, EncryptedContent: ptr("sealed")}, Content: []ContentPart{{Type: PartReasoningText, Text: odd}}},
		{Type: ItemReasoning, ID: "rs_2", Status: StatusInProgress},
		{Type: ItemMCPCall, ID: "mcp_1", Tool: &ItemTool{ServerLabel: "docs", ApprovalRequestID: ptr("mcpr_1")}, Call: &ItemCall{Name: "search", Arguments: `{"q":"x"}`, Output: json.RawMessage(`"found"`)}, Status: StatusCompleted},
		{Type: ItemMCPCall, ID: "mcp_2", Tool: &ItemTool{ServerLabel: "docs", Error: ptr("server unreachable")}, Call: &ItemCall{Name: "search", Arguments: `{}`}, Status: StatusIncomplete},
		{Type: ItemMCPListTools, ID: "mcpl_1", Tool: &ItemTool{ServerLabel: "docs", Tools: json.RawMessage("[{\"name\": \"search\",\n \"input_schema\":{\"type\":\"object\"}}]")}},
		{Type: ItemMCPListTools, ID: "mcpl_2", Tool: &ItemTool{ServerLabel: "docs", Error: ptr("unauthorized")}},
		{Type: ItemMCPApprovalRequest, ID: "mcpr_1", Tool: &ItemTool{ServerLabel: "docs"}, Call: &ItemCall{Name: "delete", Arguments: `{"id":1}`}},
		{Type: ItemMCPApprovalResponse, ID: "mcpa_1", Tool: &ItemTool{ApprovalRequestID: ptr("mcpr_1"), Approve: ptr(false), Reason: ptr("not now")}},
		{Type: ItemMCPInputRequest, ID: "mcpi_1", Tool: &ItemTool{ServerLabel: "docs", InputRequests: json.RawMessage(`{"k":{"method":"elicitation/create","params":{"message":"which day?"}}}`)}, Call: &ItemCall{Name: "book", Arguments: `{}`}},
		{Type: ItemMCPInputRequest, ID: "mcpi_2", Tool: &ItemTool{ServerLabel: "docs"}, Call: &ItemCall{Name: "book"}},
		{Type: ItemMCPInputResponse, Tool: &ItemTool{RequestID: "mcpi_1", InputResponses: json.RawMessage(`{"k":{"action":"accept","content":{"day":"monday"}}}`)}},
		{Type: ItemMCPInputResponse, ID: "mcpo_1", Tool: &ItemTool{RequestID: "mcpi_1"}},
		{Type: ItemCodeInterpreterCall, ID: "ci_1", Tool: &ItemTool{Code: ptr("print(1)"), ContainerID: "cntr_1", Outputs: json.RawMessage(`[{"type":"logs","logs":"1\n"}]`)}, Status: StatusCompleted},
		{Type: ItemCodeInterpreterCall, ID: "ci_2", Tool: &ItemTool{ContainerID: "cntr_1"}, Status: StatusInProgress},
		{Type: ItemCompaction, ID: "cmp_1", Reasoning: &ItemReasoningFields{EncryptedContent: ptr("sealed")}},
		{Type: ItemToolSearchCall, ID: "ts_1", Call: &ItemCall{CallID: "call_4", Arguments: `{"query":"weather"}`}, Tool: &ItemTool{Execution: ExecutionClient}},
		{Type: ItemToolSearchCall, Call: &ItemCall{CallID: "call_4", Arguments: `not json`}},
		{Type: ItemToolSearchOutput, ID: "tso_1", Call: &ItemCall{CallID: "call_4"}, Tool: &ItemTool{Tools: json.RawMessage(`[{"type":"function","name":"f"}]`)}, Status: StatusCompleted},
		{Type: ItemToolSearchOutput, Call: &ItemCall{CallID: "call_4"}},
		{Type: ItemWebSearchCall, ID: "ws_1", Status: StatusCompleted, Tool: &ItemTool{Action: json.RawMessage(`{"type":"search","query":"q","sources":[{"type":"url","url":"https://x"}]}`)}},
		{Type: ItemWebSearchCall, ID: "ws_2"},
		{Type: ItemCustomToolCall, ID: "ctc_1", Call: &ItemCall{CallID: "call_5", Name: "patch"}, Tool: &ItemTool{Namespace: "ns", Input: odd}, Status: StatusCompleted},
		{Type: ItemCustomToolCall, ID: "ctc_2", Call: &ItemCall{CallID: "call_5", Name: "patch"}},
		{Type: ItemCustomToolCallOutput, ID: "ctco_1", Call: &ItemCall{CallID: "call_5", Output: json.RawMessage(`"ok"`)}},
		{Type: ItemCustomToolCallOutput, Call: &ItemCall{CallID: "call_5"}},
		{Type: ItemApplyPatchCall, ID: "apc_1", Call: &ItemCall{CallID: "call_6"}, Tool: &ItemTool{Operation: json.RawMessage(`{"type":"update_file","path":"a.go","diff":"@@"}`)}},
		{Type: ItemApplyPatchCall, ID: "apc_2", Call: &ItemCall{CallID: "call_6"}},
		{Type: ItemApplyPatchCallOutput, ID: "apco_1", Call: &ItemCall{CallID: "call_6", Output: json.RawMessage(`"conflict"`)}, Status: "failed"},
		{Type: ItemApplyPatchCallOutput, Call: &ItemCall{CallID: "call_6"}},
		{Type: "shell_call", ID: "sh_1", Call: &ItemCall{CallID: "call_2"}, Tool: &ItemTool{Action: json.RawMessage(`{"commands":["ls"],"timeout_ms":1000}`)}, Status: StatusCompleted},
		{Type: "shell_call_output", ID: "sho_1", Call: &ItemCall{CallID: "call_2", Output: json.RawMessage(`[{"stdout":"a\n","stderr":"","outcome":{"type":"exit","exit_code":0}}]`)}, Tool: &ItemTool{MaxOutputLength: ptr(4096)}},
		{Type: "local_shell_call", ID: "ls_1", Call: &ItemCall{CallID: "call_3"}, Tool: &ItemTool{Action: json.RawMessage(`{"type":"exec","command":["ls"]}`)}, Status: StatusCompleted},
		{Type: "local_shell_call_output", ID: "lso_1", Call: &ItemCall{CallID: "call_3", Output: json.RawMessage(`"a.txt"`)}},
		{Type: "every_field", ID: "x", Status: "s", Role: "r", Call: &ItemCall{CallID: "c", Name: "n", Arguments: "a", Output: json.RawMessage(`1`)},
			Tool:      &ItemTool{Phase: "p", Namespace: "ns", Input: "i", Operation: json.RawMessage(`{}`), ServerLabel: "l", Error: ptr("err"), ApprovalRequestID: ptr("ar"), Code: ptr("c"), ContainerID: "ct", Outputs: json.RawMessage(`[]`), Action: json.RawMessage(`{}`), MaxOutputLength: ptr(1), Execution: "server", Tools: json.RawMessage(`[]`), Approve: ptr(true), Reason: ptr("r"), InputRequests: json.RawMessage(`{}`), RequestID: "rq", InputResponses: json.RawMessage(`{}`)},
			Reasoning: &ItemReasoningFields{EncryptedContent: ptr("e")},
		},
	}
}

// Every item type is written by the hand encoder as encoding/json writes
// it, in both dialects, alone, in output_item events and through
// MarshalJSON.
func TestItemEncodingMatchesEncodingJSON(t *testing.T) {
	for _, it := range encodingCases() {
		want := referenceItem(t, it)
		sameEncoding(t, it.Type, it.appendJSON(nil, DialectOpenAI), want)
		sameEncoding(t, it.Type+" (Open Responses)", it.appendJSON(nil, DialectOpenResponses), renamed(t, want, DialectOpenResponses))
		got, err := json.Marshal(it)
		if err != nil {
			t.Fatal(err)
		}
		sameEncoding(t, it.Type+" (json.Marshal)", got, want)
		ev := Event{Type: EventOutputItemDone, SequenceNumber: 3, OutputIndex: 1, Item: &it}
		evJSON, _ := ev.AppendJSON(nil, DialectOpenAI)
		sameEncoding(t, it.Type+" (event)", evJSON,
			[]byte(`{"type":"response.output_item.done","sequence_number":3,"output_index":1,"item":`+string(want)+`}`))
		for _, p := range it.Content {
			ev := Event{Type: EventContentPartDone, SequenceNumber: 4, ItemID: it.ID, OutputIndex: 1, ContentIndex: 2, Part: &p}
			got, _ := ev.AppendJSON(nil, DialectOpenAI)
			sameEncoding(t, p.Type+" (part event)", got, []byte(`{"type":"response.content_part.done","sequence_number":4,"item_id":`+
				string(mustMarshal(t, it.ID))+`,"output_index":1,"content_index":2,"part":`+string(referencePart(t, p))+`}`))
		}
	}
}

// encodingResponses are responses with every part of the object set in
// some: tools of several kinds, usage, an error, incomplete details,
// metadata, a json_schema format, numbers of every magnitude.
func encodingResponses() []*Response {
	mcp := Tool{Type: "mcp", Raw: json.RawMessage(`{"type":"mcp","server_label":"docs","server_url":"https://x","headers":{"Authorization":"Bearer secret"},"authorization":"secret","require_approval":"never"}`)}
	tools := []Tool{
		{Type: ToolFunction, Name: "get_weather", Description: ptr("Weather <now> & then"), Parameters: json.RawMessage("{\n  \"type\": \"object\",\n  \"properties\": {\"city\": {\"type\": \"string\"}}\n}"), Strict: ptr(true)},
		{Type: ToolFunction, Name: "bare"},
		{Type: ToolFunction, Name: "deferred", Parameters: json.RawMessage(`{}`), Strict: ptr(false), DeferLoading: true},
		mcp,
		{Type: ToolNamespace, Name: "ns", Raw: json.RawMessage(`{"type":"namespace","name":"ns","tools":[{"type":"function","name":"f"}]}`)},
	}
	done := int64(1796040100)
	full := &Response{
		ID: "resp_1", Object: "response", CreatedAt: 1796040000, CompletedAt: &done, Status: ResponseCompleted,
		Model: "gpt-oss <120b>", PreviousResponseID: ptr("resp_0"), Instructions: ptr("Be brief.\nReally \"brief\"."),
		Output: encodingCases(), Tools: tools,
		ToolChoice: ToolChoice{Mode: ToolChoiceRequired, Function: "get_weather"}, Truncation: "auto", ParallelToolCalls: true,
		Text: TextConfig{Format: &TextFormat{Type: FormatJSONSchema, Name: "answer", Schema: json.RawMessage(`{"type": "object"}`), Strict: ptr(true)}, Verbosity: ptr("low")},
		TopP: 0.95, PresencePenalty: -0.5, FrequencyPenalty: 1e-7, TopLogprobs: 5, Temperature: 1e21,
		Reasoning:       &ReasoningParam{Effort: ptr("high"), Summary: ptr("auto")},
		Usage:           &Usage{InputTokens: 10, InputTokensDetails: InputTokensDetails{CachedTokens: 2}, OutputTokens: 20, OutputTokensDetails: OutputTokensDetails{ReasoningTokens: 7}, TotalTokens: 30},
		MaxOutputTokens: ptr(1000), MaxToolCalls: ptr(3), Store: true, Background: true, ServiceTier: "default",
		Metadata:         map[string]any{"b": "2", "a": "1 <&>", "é": "x"},
		SafetyIdentifier: ptr("user-hash"), PromptCacheKey: ptr("k"), User: ptr("u"), Conversation: json.RawMessage(`{"id": "conv_1"}`),
	}
	return []*Response{
		{ID: "resp_2", Object: "response", Status: ResponseInProgress, Output: []Item{}, Tools: []Tool{},
			ToolChoice: ToolChoice{Mode: ToolChoiceAuto}, Truncation: "disabled", Text: TextConfig{Format: &TextFormat{Type: FormatText}},
			TopP: 1, Temperature: 1, Reasoning: &ReasoningParam{}, ServiceTier: "default", Metadata: map[string]any{}},
		full,
		{ID: "resp_3", Object: "response", Status: ResponseIncomplete, IncompleteDetails: &IncompleteDetails{Reason: ReasonMaxOutputTokens},
			Tools: []Tool{mcp}, ToolChoice: ToolChoice{Mode: ToolChoiceAuto, Allowed: []ToolRef{{Type: "function", Name: "f"}, {Type: "mcp"}}},
			Metadata: map[string]any{"n": 1.5}},
		{ID: "resp_4", Object: "response", Status: ResponseFailed, Error: &ResponseError{Code: "server_error", Message: "the upstream <failed>"},
			ToolChoice: ToolChoice{Mode: ToolChoiceNone}, Text: TextConfig{Format: &TextFormat{Type: FormatJSONSchema, Name: "n"}}},
		{},
	}
}

// The response object, as a body and in every lifecycle event, is written
// by the hand encoder as encoding/json writes it, in both dialects.
func TestResponseEncodingMatchesEncodingJSON(t *testing.T) {
	for _, r := range encodingResponses() {
		for _, d := range []Dialect{DialectOpenAI, DialectOpenResponses} {
			want := referenceResponse(t, r, d)
			name := r.ID + " " + d.String()
			sameEncoding(t, name, r.AppendJSON(nil, d), want)
			ev := Event{Type: EventCompleted, SequenceNumber: 9, Response: r}
			got, _ := ev.AppendJSON(nil, d)
			sameEncoding(t, name+" (event)", got, []byte(`{"type":"response.completed","sequence_number":9,"response":`+string(want)+`}`))
		}
		got, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		sameEncoding(t, r.ID+" (json.Marshal)", got, referenceResponse(t, r, DialectOpenAI))
		// And what a client decodes is the response: a round trip keeps
		// every field.
		var back Response
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatal(err)
		}
		again, _ := json.Marshal(&back)
		sameEncoding(t, r.ID+" (round trip)", again, got)
	}
}

// The error event is written as encoding/json writes its payload.
func TestErrorEventMatchesEncodingJSON(t *testing.T) {
	for _, p := range []*ErrorPayload{
		{Type: "server_error", Message: "the upstream <failed>"},
		{Type: "invalid_request_error", Code: ptr("bad"), Message: "m", Param: ptr("input[0]")},
	} {
		ev := Event{Type: EventError, SequenceNumber: 2, Error: p}
		got, _ := ev.AppendJSON(nil, DialectOpenAI)
		sameEncoding(t, p.Type, got, []byte(`{"type":"error","sequence_number":2,"error":`+string(mustMarshal(t, p))+`}`))
	}
}

// A builder's events echo the response's tools (and instructions) in
// each dialect; the echo follows them when they are replaced.
func TestResponseEchoFollowsTools(t *testing.T) {
	resp := encodingResponses()[1]
	resp.Output = nil
	var events [][]byte
	b := NewBuilder(resp, func(p string) string { return p + "_1" }, func(ev *Event) error {
		if ev.Response != nil {
			enc, _ := ev.AppendJSON(nil, DialectOpenAI)
			other, _ := ev.AppendJSON(nil, DialectOpenResponses)
			events = append(events, enc, other)
		}
		return nil
	})
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	for i, enc := range events {
		d := Dialect(i % 2)
		var got struct{ Response json.RawMessage }
		json.Unmarshal(enc, &got)
		sameEncoding(t, "event "+d.String(), got.Response, referenceResponse(t, resp, d))
	}
	resp.Tools = resp.Tools[:1]
	sameEncoding(t, "fewer tools", resp.AppendJSON(nil, DialectOpenAI), referenceResponse(t, resp, DialectOpenAI))
	resp.Tools = []Tool{{Type: ToolFunction, Name: "other"}}
	sameEncoding(t, "other tools", resp.AppendJSON(nil, DialectOpenAI), referenceResponse(t, resp, DialectOpenAI))
	resp.Tools = nil
	sameEncoding(t, "no tools", resp.AppendJSON(nil, DialectOpenAI), referenceResponse(t, resp, DialectOpenAI))

	// Long instructions, followed when replaced.
	long := strings.Repeat("Be <brief>.\n", 1<<10)
	resp.Instructions = &long
	sameEncoding(t, "long instructions", resp.AppendJSON(nil, DialectOpenAI), referenceResponse(t, resp, DialectOpenAI))
	other := long + "more"
	resp.Instructions = &other
	sameEncoding(t, "other instructions", resp.AppendJSON(nil, DialectOpenAI), referenceResponse(t, resp, DialectOpenAI))
	resp.Instructions = nil
	sameEncoding(t, "no instructions", resp.AppendJSON(nil, DialectOpenAI), referenceResponse(t, resp, DialectOpenAI))
}

// appendFloat writes every number as encoding/json does.
func TestAppendFloatMatchesEncodingJSON(t *testing.T) {
	for _, f := range []float64{0, 1, -1, 0.1, 0.7, 1.5, 2.0 / 3, 1e-6, 9.99e-7, 1e-7, 1.5e-10, 1e20, 1e21, 1.2345e22, -1e-7, 123456789, 5e-324, 1.7976931348623157e308} {
		want, _ := json.Marshal(f)
		if got := appendFloat(nil, f); string(got) != string(want) {
			t.Errorf("%v: got %s, want %s", f, got, want)
		}
	}
}

// Raw JSON goes into the output without the white space between its
// tokens, and with the white space inside its strings.
func TestAppendRawJSONCompacts(t *testing.T) {
	for _, in := range []string{`{}`, " { \"a\" : [ 1 , 2 ] ,\n\t\"b c\" : \"x \\\" y\\\\\" } ", `"a b"`, "[\r\n]", `"\\"`} {
		var want bytes.Buffer
		if err := json.Compact(&want, []byte(in)); err != nil {
			t.Fatal(err)
		}
		if got := appendRawJSON(nil, []byte(in)); string(got) != want.String() {
			t.Errorf("%q: got %s, want %s", in, got, want.String())
		}
	}
}

// ResponseOf reads back from a lifecycle event's encoding exactly the
// object Response.AppendJSON writes, whatever the response holds (its
// tools and texts may hold the bytes of the key it looks for); any other
// event carries none.
func TestResponseOf(t *testing.T) {
	for _, r := range encodingResponses() {
		r.Instructions = ptr(`say ,"response": and }`)
		for _, typ := range []string{EventCreated, EventInProgress, EventCompleted, EventFailed, EventIncomplete} {
			ev := Event{Type: typ, SequenceNumber: 12, Response: r}
			encoded, err := ev.EncodeJSON(DialectOpenAI)
			if err != nil {
				t.Fatal(err)
			}
			obj, ok := ResponseOf(encoded)
			if want := r.AppendJSON(nil, DialectOpenAI); !ok || string(obj) != string(want) {
				t.Errorf("%s %s: ResponseOf = %q, %v; want %q", r.ID, typ, obj, ok, want)
			}
		}
	}
	delta := Event{Type: EventOutputTextDelta, SequenceNumber: 3, ItemID: "msg_1", Delta: `,"response":{}`}
	encoded, _ := delta.EncodeJSON(DialectOpenAI)
	if obj, ok := ResponseOf(encoded); ok {
		t.Errorf("ResponseOf of a delta = %q, want none", obj)
	}
}
