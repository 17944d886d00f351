package responses

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Item types loom understands. An input item of another type is rejected
// by validation; output items are always one of these.
const (
	ItemMessage            = "message"
	ItemFunctionCall       = "function_call"
	ItemFunctionCallOutput = "function_call_output"
	ItemReasoning          = "reasoning"
	ItemReference          = "item_reference"
	// Server-executed tool calls: loom runs the tool and reports the call
	// and its result in one item.
	ItemMCPCall             = "mcp_call"
	ItemCodeInterpreterCall = "code_interpreter_call"
	// ItemCompaction is a compacted conversation (POST
	// /v1/responses/compact): a sealed summary in EncryptedContent that
	// stands in for the turns it summarises when sent back as input.
	ItemCompaction = "compaction"
	// ItemCompactionTrigger, the last item of a request's input, asks
	// for the conversation so far to be compacted: the response's output
	// is one compaction item, and the model is not asked anything else.
	ItemCompactionTrigger = "compaction_trigger"
)

// Item statuses.
const (
	StatusInProgress = "in_progress"
	StatusCompleted  = "completed"
	StatusIncomplete = "incomplete"
)

// Item is one element of a conversation: a message, a reasoning step, a tool
// call or a tool result. It is a flat union keyed by Type; which fields are
// meaningful depends on Type. Its JSON form follows the Responses API, with
// every key the Open Responses schema requires for that type.
//
// The fields every item and every message uses are Item's own; those of
// calls and their results are in Call, those of reasoning items in
// Reasoning, and those of the other tools' items and the rarely set ones
// (a preamble's phase, a call's namespace) in Tool, each behind one
// pointer: an Item is then 112 bytes rather than 496, and a message of a
// long conversation needs nothing more than its content.
type Item struct {
	Type   string `json:"type"`
	ID     string `json:"id,omitempty"`
	Status string `json:"status,omitempty"`

	// message
	Role    string        `json:"role,omitempty"`
	Content []ContentPart `json:"content,omitempty"`

	// Call holds the fields of calls and their results (function_call,
	// function_call_output, and the call and output items of the other
	// tools); nil when there are none. Read them with CallFields, safe on
	// any item, and set them through EditCall (or a literal
	// &ItemCall{...}). A copy of an Item shares its Call: a copy to be
	// changed gets its own first.
	Call *ItemCall `json:"-"`

	// Reasoning holds the fields of reasoning (and compaction) items; nil
	// when there are none. Read them with ReasoningFields, safe on any
	// item, and set them through EditReasoning (or a literal
	// &ItemReasoningFields{...}). A copy of an Item shares its Reasoning.
	Reasoning *ItemReasoningFields `json:"-"`

	// Tool holds the fields of the other item types; nil when there are
	// none. Read them with ToolFields, which is safe on any item, and set
	// them through EditTool (or a literal &ItemTool{...}). A copy of an
	// Item shares its Tool: a copy to be changed gets its own first.
	Tool *ItemTool `json:"-"`
}

// ItemCall is the part of an Item that calls and their results use.
type ItemCall struct {
	CallID    string `json:"call_id,omitempty"`
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments,omitempty"`
	// Output of a function_call_output: a JSON string or an array of
	// content parts, kept as sent.
	Output json.RawMessage `json:"output,omitempty"`
	// Async marks a call of a tool offered with async: true: the
	// response went on without its output, which a later request brings.
	Async bool `json:"async,omitempty"`
}

// CallFields returns the item's ItemCall fields: a copy, zero for an
// item that has none.
func (it *Item) CallFields() ItemCall {
	if it.Call == nil {
		return ItemCall{}
	}
	return *it.Call
}

// EditCall returns the item's ItemCall fields to set, allocated on first
// use.
func (it *Item) EditCall() *ItemCall {
	if it.Call == nil {
		it.Call = new(ItemCall)
	}
	return it.Call
}

// ItemReasoningFields is the part of an Item that reasoning items use (and
// compaction items, for their sealed summary).
type ItemReasoningFields struct {
	Summary          []ContentPart `json:"summary,omitempty"`
	EncryptedContent *string       `json:"encrypted_content,omitempty"`
}

// ReasoningFields returns the item's ItemReasoningFields: a copy, zero
// for an item that has none.
func (it *Item) ReasoningFields() ItemReasoningFields {
	if it.Reasoning == nil {
		return ItemReasoningFields{}
	}
	return *it.Reasoning
}

// EditReasoning returns the item's ItemReasoningFields to set, allocated
// on first use.
func (it *Item) EditReasoning() *ItemReasoningFields {
	if it.Reasoning == nil {
		it.Reasoning = new(ItemReasoningFields)
	}
	return it.Reasoning
}

// ItemTool is the part of an Item that only the item types of tools other
// than functions (server-run calls, client-run kinds, MCP listings,
// approvals and input requests, tool search) use, and the fields other
// items rarely set.
type ItemTool struct {
	// Phase labels an assistant message as "commentary" (a preamble) or
	// "final_answer".
	Phase string `json:"phase,omitempty"`
	// Namespace is the namespace tool a function_call's or a
	// custom_tool_call's tool belongs to; Name is then its name there.
	Namespace string `json:"namespace,omitempty"`

	// Input is a custom_tool_call's free-text input.
	Input string `json:"input,omitempty"`
	// Operation is an apply_patch_call's edit: {type, path, diff}.
	Operation json.RawMessage `json:"operation,omitempty"`
	// Server-executed calls (mcp_call, code_interpreter_call). An mcp_call
	// uses Name, Arguments, Output (a JSON string) and Error; a
	// code_interpreter_call uses Code and Outputs.
	ServerLabel       string          `json:"server_label,omitempty"`
	Error             *string         `json:"error,omitempty"`
	ApprovalRequestID *string         `json:"approval_request_id,omitempty"`
	Code              *string         `json:"code,omitempty"`
	ContainerID       string          `json:"container_id,omitempty"`
	Outputs           json.RawMessage `json:"outputs,omitempty"`

	// shell_call and shell_call_output: the action the model asked for,
	// and the cap its output ran under.
	Action          json.RawMessage `json:"action,omitempty"`
	MaxOutputLength *int            `json:"max_output_length,omitempty"`

	// Execution of a tool_search_call or tool_search_output: "server"
	// (loom searched) or "client".
	Execution string `json:"execution,omitempty"`

	// mcp_list_tools: the tools a server offers (tool_search_output: the
	// tools a search found, as request tools). mcp_approval_response:
	// the client's answer (ApprovalRequestID, Approve, Reason).
	Tools   json.RawMessage `json:"tools,omitempty"`
	Approve *bool           `json:"approve,omitempty"`
	Reason  *string         `json:"reason,omitempty"`

	// mcp_input_request (loom's extension): the input an MCP server asked
	// for, {KEY: {method, params}}, with ServerLabel, Name and Arguments
	// naming the call. mcp_input_response: the client's answers,
	// {KEY: {action, content}}, to the request RequestID.
	InputRequests  json.RawMessage `json:"input_requests,omitempty"`
	RequestID      string          `json:"request_id,omitempty"`
	InputResponses json.RawMessage `json:"input_responses,omitempty"`
}

// ToolFields returns the item's ItemTool fields: a copy, zero for an item
// that has none.
func (it *Item) ToolFields() ItemTool {
	if it.Tool == nil {
		return ItemTool{}
	}
	return *it.Tool
}

// phase is the item's Phase, read without the copy of all its ItemTool
// fields that ToolFields makes (304 bytes of the caller's frame).
func (it *Item) phase() string {
	if it.Tool == nil {
		return ""
	}
	return it.Tool.Phase
}

// EditTool returns the item's ItemTool fields to set, allocated on first use.
func (it *Item) EditTool() *ItemTool {
	if it.Tool == nil {
		it.Tool = new(ItemTool)
	}
	return it.Tool
}

// ContentPart is one part of a message or reasoning item. The fields of
// image and file parts are behind one pointer, Media: most parts are text,
// and a ContentPart is then 80 bytes rather than 168.
type ContentPart struct {
	Type string `json:"type"`
	Text string `json:"text,omitempty"`
	// Annotations of output_text; always present (possibly empty) on output.
	Annotations []json.RawMessage `json:"annotations,omitempty"`
	Refusal     string            `json:"refusal,omitempty"`
	// Media holds the fields of input_image and input_file parts; nil for
	// the others. Read them with MediaFields, safe on any part, and set
	// them through EditMedia (or a literal &PartMedia{...}). A copy of a
	// part shares its Media.
	Media *PartMedia `json:"-"`
}

// PartMedia is the part of a ContentPart that input_image and input_file
// parts use.
type PartMedia struct {
	ImageURL string `json:"image_url,omitempty"`
	FileID   string `json:"file_id,omitempty"`
	FileData string `json:"file_data,omitempty"`
	FileURL  string `json:"file_url,omitempty"`
	Filename string `json:"filename,omitempty"`
	Detail   string `json:"detail,omitempty"`
}

// MediaFields returns the part's PartMedia fields: a copy, zero for a part
// that has none.
func (p *ContentPart) MediaFields() PartMedia {
	if p.Media == nil {
		return PartMedia{}
	}
	return *p.Media
}

// EditMedia returns the part's PartMedia fields to set, allocated on first
// use.
func (p *ContentPart) EditMedia() *PartMedia {
	if p.Media == nil {
		p.Media = new(PartMedia)
	}
	return p.Media
}

// Content part types.
const (
	PartInputText     = "input_text"
	PartOutputText    = "output_text"
	PartReasoningText = "reasoning_text"
	PartSummaryText   = "summary_text"
	PartRefusal       = "refusal"
	PartInputImage    = "input_image"
	PartInputFile     = "input_file"
)

// OutputText is an output_text part holding text.
func OutputText(text string) ContentPart {
	return ContentPart{Type: PartOutputText, Text: text, Annotations: []json.RawMessage{}}
}

// Text returns the concatenated text of the item's text-bearing content
// parts (input_text, output_text, reasoning_text, summary_text, refusal).
func (it *Item) Text() string {
	if len(it.Content) == 1 {
		return it.Content[0].text()
	}
	var b bytes.Buffer
	for _, p := range it.Content {
		b.WriteString(p.text())
	}
	return b.String()
}

// MarshalJSON writes the part as appendJSON does.
func (p ContentPart) MarshalJSON() ([]byte, error) { return p.appendJSON(nil), nil }

// appendJSON writes "text" on every text-bearing part even when empty, as
// the schema requires (a part announced by content_part.added starts
// empty); other parts with the keys they have.
func (p *ContentPart) appendJSON(dst []byte) []byte {
	o := openObject(dst)
	o.str("type", p.Type)
	switch p.Type {
	case PartInputText, PartReasoningText, PartSummaryText:
		o.str("text", p.Text)
	case PartOutputText:
		o.str("text", p.Text)
		o.rawList("annotations", p.Annotations)
		o.key("logprobs")
		o.b = append(o.b, "[]"...)
	case PartRefusal:
		o.str("refusal", p.Refusal)
	default:
		o.strOmitEmpty("text", p.Text)
		if len(p.Annotations) > 0 {
			o.rawList("annotations", p.Annotations)
		}
		m := p.MediaFields()
		o.strsOmitEmpty("refusal", p.Refusal, "image_url", m.ImageURL, "file_id", m.FileID, "file_data", m.FileData,
			"file_url", m.FileURL, "filename", m.Filename, "detail", m.Detail)
	}
	return o.close()
}

// UnmarshalJSON decodes the Media fields at the part's level, as sent.
func (p *ContentPart) UnmarshalJSON(data []byte) error {
	type plain ContentPart
	var raw struct {
		plain
		*PartMedia // allocated only when one of its keys is present
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	*p = ContentPart(raw.plain)
	p.Media = raw.PartMedia
	return nil
}

func (p ContentPart) text() string {
	if p.Type == PartRefusal {
		return p.Refusal
	}
	return p.Text
}

// OutputString returns a function_call_output's output as text: the string
// itself, or the concatenated text of its content parts.
func (it *Item) OutputString() string {
	output := it.CallFields().Output
	if len(output) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(output, &s) == nil {
		return s
	}
	var parts []ContentPart
	if json.Unmarshal(output, &parts) == nil {
		var b bytes.Buffer
		for _, p := range parts {
			b.WriteString(p.text())
		}
		return b.String()
	}
	return string(output)
}

// UnmarshalJSON accepts the shorthand forms clients send: a message with no
// "type" (EasyInputMessage) and message content given as a plain string.
//
// Items of the common shapes are decoded by the scanner (a stored history
// is decoded on every request that continues it); the others here.
func (it *Item) UnmarshalJSON(data []byte) error {
	var fast Item
	if utf8.Valid(data) && newScanner(data).item(&fast) {
		*it = fast
		return nil
	}
	return it.decodeFields(data)
}

// decodeFields decodes an item field by field with encoding/json.
func (it *Item) decodeFields(data []byte) (err error) {
	type plain Item
	var raw struct {
		plain
		// Embedded, so that their keys are decoded at the item's level;
		// each is allocated only when one of its keys is present.
		*ItemCall
		*ItemReasoningFields
		*ItemTool
		Content   json.RawMessage `json:"content"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	*it = Item(raw.plain)
	it.Call = raw.ItemCall
	it.Reasoning = raw.ItemReasoningFields
	it.Tool = raw.ItemTool
	// Arguments are text; a tool search's may come as a JSON value.
	args, err := argumentsText(raw.Arguments)
	if err != nil {
		return err
	}
	if args != "" {
		it.EditCall().Arguments = args
	}
	var text *string
	c := bytes.TrimSpace(raw.Content)
	switch {
	case len(c) == 0 || bytes.Equal(c, []byte("null")):
		it.Content = nil
	case c[0] == '"':
		text = new(string)
		if err := json.Unmarshal(c, text); err != nil {
			return err
		}
	case c[0] == '[':
		if err := json.Unmarshal(c, &it.Content); err != nil {
			return err
		}
	default:
		return fmt.Errorf("content must be a string or an array of content parts")
	}
	it.normalise(text)
	return nil
}

// normalise turns the shorthand forms into the full one: the type of a
// message sent without one, content sent as a string (text, when not
// nil) as one part, and a vendor-prefixed type as loom's own.
func (it *Item) normalise(text *string) {
	// A client of the Open Responses dialect sends loom's own item types
	// back as it received them, vendor-prefixed.
	it.Type = strings.TrimPrefix(it.Type, VendorPrefix)
	if it.Type == "" && it.Role != "" {
		it.Type = ItemMessage
	}
	if text != nil {
		it.Content = []ContentPart{textPart(it.Role, *text)}
	}
}

// textPart is the part that content sent as a string becomes: input
// text, or output text in an assistant's message.
func textPart(role, text string) ContentPart {
	return ContentPart{Type: textPartType(role), Text: text}
}

// textPartType is the type of the part that content sent as a string
// becomes in a message of the role.
func textPartType(role string) string {
	if role == "assistant" {
		return PartOutputText
	}
	return PartInputText
}

// MarshalJSON writes the item in the OpenAI dialect, as appendJSON does.
func (it Item) MarshalJSON() ([]byte, error) { return it.appendJSON(nil, DialectOpenAI), nil }

// noCall and noTool stand, read only, for the fields of an item that has
// none, in appendJSON. Zero values of its own would be 376 bytes of its
// frame, which is on the stack of every event that carries an item.
var (
	noCall ItemCall
	noTool ItemTool
)

// appendJSON appends the keys the Responses API defines for the item's
// type, in its order, including required ones whose value is empty; the
// type is named as dialect d names it.
func (it *Item) appendJSON(dst []byte, d Dialect) []byte {
	o := openObject(dst)
	o.str("type", d.ItemType(it.Type))
	status := orDefault(it.Status, StatusCompleted)
	c := it.Call
	if c == nil {
		c = &noCall
	}
	t := it.Tool
	if t == nil {
		t = &noTool
	}
	// One str per member rather than strs: each strs call would keep an
	// array of its arguments in this frame.
	switch it.Type {
	case ItemMessage:
		o.str("id", it.ID)
		o.str("status", status)
		o.str("role", it.Role)
		o.parts("content", it.Content)
		o.strOmitEmpty("phase", t.Phase)
	case ItemFunctionCall:
		o.str("id", it.ID)
		o.str("call_id", c.CallID)
		o.strOmitEmpty("namespace", t.Namespace)
		o.str("name", c.Name)
		o.str("arguments", c.Arguments)
		o.str("status", status)
		if c.Async {
			o.boolean("async", true)
		}
	case ItemFunctionCallOutput:
		o.str("id", it.ID)
		o.str("call_id", c.CallID)
		o.raw("output", c.Output, `""`)
		o.str("status", status)
	default:
		// The other types in a function of their own: this frame is on
		// the stack of the first delta of every response.
		it.appendOther(&o, c, t, status)
	}
	return o.close()
}

// appendOther is appendJSON for the item types other than messages and
// function calls and their outputs.
func (it *Item) appendOther(o *jsonObject, c *ItemCall, t *ItemTool, status string) {
	switch it.Type {
	case ItemReasoning:
		o.str("id", it.ID)
		o.strOmitEmpty("status", it.Status)
		var summary []ContentPart
		var encrypted *string
		if r := it.Reasoning; r != nil {
			summary, encrypted = r.Summary, r.EncryptedContent
		}
		o.parts("summary", summary)
		if len(it.Content) > 0 {
			o.parts("content", it.Content)
		}
		o.strOmitNil("encrypted_content", encrypted)
	case ItemMCPCall:
		o.strs("id", it.ID, "server_label", t.ServerLabel, "name", c.Name, "arguments", c.Arguments)
		o.raw("output", c.Output, "null")
		o.strOrNull("error", t.Error)
		o.str("status", status)
		o.strOrNull("approval_request_id", t.ApprovalRequestID)
	case ItemMCPListTools:
		o.strs("id", it.ID, "server_label", t.ServerLabel)
		o.raw("tools", t.Tools, "[]")
		o.strOrNull("error", t.Error)
	case ItemMCPApprovalRequest:
		o.strs("id", it.ID, "server_label", t.ServerLabel, "name", c.Name, "arguments", c.Arguments)
	case ItemMCPInputRequest:
		o.strs("id", it.ID, "server_label", t.ServerLabel, "name", c.Name, "arguments", c.Arguments)
		o.raw("input_requests", t.InputRequests, "{}")
	case ItemMCPInputResponse:
		o.strOmitEmpty("id", it.ID)
		o.str("request_id", t.RequestID)
		o.raw("input_responses", t.InputResponses, "null")
	case ItemCodeInterpreterCall:
		o.str("id", it.ID)
		o.strOrNull("code", t.Code)
		o.str("container_id", t.ContainerID)
		o.raw("outputs", t.Outputs, "[]")
		o.str("status", status)
	case ItemToolSearchCall, ItemToolSearchOutput:
		it.appendToolSearch(o)
	case ItemWebSearchCall:
		it.appendWebSearch(o)
	default:
		if !it.appendClientCall(o) {
			it.appendFields(o)
		}
	}
}

// appendFields writes the item's fields that are set, in the order of
// the struct, as the omitempty tags say: the form of the item types that
// have no shape of their own here (shell calls, compaction, approval
// responses).
func (it *Item) appendFields(o *jsonObject) {
	c := it.CallFields()
	t := it.ToolFields()
	r := it.ReasoningFields()
	for _, m := range [...]optionalMember{
		{key: "id", text: it.ID}, {key: "status", text: it.Status}, {key: "role", text: it.Role},
		{key: "content", parts: it.Content},
		// The fields of Item.Call, Item.Reasoning and Item.Tool, after
		// the item's own, as a struct embedding them would be written.
		{key: "call_id", text: c.CallID}, {key: "name", text: c.Name}, {key: "arguments", text: c.Arguments},
		{key: "output", raw: c.Output},
		{key: "summary", parts: r.Summary}, {key: "encrypted_content", ptr: r.EncryptedContent},
		{key: "phase", text: t.Phase}, {key: "namespace", text: t.Namespace},
		{key: "input", text: t.Input}, {key: "operation", raw: t.Operation},
		{key: "server_label", text: t.ServerLabel}, {key: "error", ptr: t.Error},
		{key: "approval_request_id", ptr: t.ApprovalRequestID}, {key: "code", ptr: t.Code},
		{key: "container_id", text: t.ContainerID}, {key: "outputs", raw: t.Outputs}, {key: "action", raw: t.Action},
		{key: "max_output_length", number: t.MaxOutputLength}, {key: "execution", text: t.Execution},
		{key: "tools", raw: t.Tools}, {key: "approve", flag: t.Approve}, {key: "reason", ptr: t.Reason},
		{key: "input_requests", raw: t.InputRequests}, {key: "request_id", text: t.RequestID},
		{key: "input_responses", raw: t.InputResponses},
	} {
		m.append(o)
	}
}

// optionalMember is a member of an object that is left out when empty,
// as the omitempty tag leaves it out; one of its values is set.
type optionalMember struct {
	key    string
	text   string
	ptr    *string
	raw    json.RawMessage
	parts  []ContentPart
	number *int
	flag   *bool
}

func (m *optionalMember) append(o *jsonObject) {
	switch {
	case m.text != "":
		o.str(m.key, m.text)
	case m.ptr != nil:
		o.strOrNull(m.key, m.ptr)
	case len(m.raw) > 0:
		o.raw(m.key, m.raw, "")
	case len(m.parts) > 0:
		o.parts(m.key, m.parts)
	case m.number != nil:
		o.intOrNull(m.key, m.number)
	case m.flag != nil:
		o.boolOrNull(m.key, m.flag)
	}
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
