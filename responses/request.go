package responses

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Request is the body of POST /v1/responses. Every field of the OpenAI
// reference is decoded; unknown fields are tolerated. Validate checks it.
type Request struct {
	Model              string          `json:"model"`
	Input              Input           `json:"input"`
	Instructions       *string         `json:"instructions"`
	Tools              []Tool          `json:"tools"`
	ToolChoice         *ToolChoice     `json:"tool_choice"`
	ParallelToolCalls  *bool           `json:"parallel_tool_calls"`
	MaxToolCalls       *int            `json:"max_tool_calls"`
	MaxOutputTokens    *int            `json:"max_output_tokens"`
	Temperature        *float64        `json:"temperature"`
	TopP               *float64        `json:"top_p"`
	TopLogprobs        *int            `json:"top_logprobs"`
	PresencePenalty    *float64        `json:"presence_penalty"`
	FrequencyPenalty   *float64        `json:"frequency_penalty"`
	Text               *TextConfig     `json:"text"`
	Reasoning          *ReasoningParam `json:"reasoning"`
	Include            []string        `json:"include"`
	Store              *bool           `json:"store"`
	Background         *bool           `json:"background"`
	PreviousResponseID *string         `json:"previous_response_id"`
	Conversation       json.RawMessage `json:"conversation"`
	Stream             bool            `json:"stream"`
	StreamOptions      json.RawMessage `json:"stream_options"`
	Truncation         *string         `json:"truncation"`
	Metadata           map[string]any  `json:"metadata"`
	PromptCacheKey     *string         `json:"prompt_cache_key"`
	SafetyIdentifier   *string         `json:"safety_identifier"`
	ServiceTier        *string         `json:"service_tier"`
	User               *string         `json:"user"`
	Prompt             json.RawMessage `json:"prompt"`
	// ContextManagement asks for server-side compaction past a token
	// threshold (CompactThreshold), as sent; Validate checks it.
	ContextManagement json.RawMessage `json:"context_management"`
	// Generate false, a field of WebSocket mode's response.create only,
	// prepares the response without calling the model (a client's
	// warm-up); only the WebSocket handler reads it.
	Generate *bool `json:"generate"`
}

// StoreEnabled reports whether the response is to be stored (default true).
func (r *Request) StoreEnabled() bool { return r.Store == nil || *r.Store }

// ParallelCalls reports whether the model may make several tool calls in a
// turn (default true).
func (r *Request) ParallelCalls() bool { return r.ParallelToolCalls == nil || *r.ParallelToolCalls }

// Includes reports whether include[] names what.
func (r *Request) Includes(what string) bool {
	for _, s := range r.Include {
		if s == what {
			return true
		}
	}
	return false
}

// ConversationID returns the id the conversation field names ("" for
// none): a string, or an object {"id": ...}. Anything else is a 400 on
// conversation. The error is a nil interface when the field is good.
func (r *Request) ConversationID() (string, error) {
	id, err := r.conversationID()
	if err != nil {
		return "", err
	}
	return id, nil
}

// conversationID is ConversationID for the checks of Validate, which
// return the concrete *APIError.
func (r *Request) conversationID() (string, *APIError) {
	raw := bytes.TrimSpace(r.Conversation)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return "", nil
	}
	var id string
	if raw[0] == '{' {
		var obj struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(raw, &obj) != nil {
			return "", BadRequest("conversation", "conversation must be a conversation id or an object with its id")
		}
		id = obj.ID
	} else if json.Unmarshal(raw, &id) != nil {
		return "", BadRequest("conversation", "conversation must be a conversation id or an object with its id")
	}
	if id == "" {
		return "", BadRequest("conversation", "conversation must not be empty")
	}
	return id, nil
}

// Input is a request's input: a plain string (one user message) or a list
// of items. After decoding, Items always holds the list form.
type Input struct {
	Items []Item
	// IsString records that the client sent a string.
	IsString bool
	// Set records that the field was present and not null.
	Set bool
}

// UnmarshalJSON accepts a string or an array of items.
func (in *Input) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	*in = Input{}
	switch {
	case bytes.Equal(data, []byte("null")):
		return nil
	case len(data) > 0 && data[0] == '"':
		var s string
		if err := json.Unmarshal(data, &s); err != nil {
			return err
		}
		*in = stringInput(s)
		return nil
	case len(data) > 0 && data[0] == '[':
		items, err := decodeItems(data)
		if err != nil {
			return err
		}
		in.Set, in.Items = true, items
		return nil
	}
	return fmt.Errorf("input must be a string or an array of items")
}

// stringInput is the input a request gives as a string: one user
// message holding it as its input_text.
func stringInput(text string) Input {
	return Input{Set: true, IsString: true,
		Items: []Item{{Type: ItemMessage, Role: "user", Content: []ContentPart{{Type: PartInputText, Text: text}}}}}
}

// MarshalJSON writes the list form.
func (in Input) MarshalJSON() ([]byte, error) {
	if in.Items == nil {
		return []byte("[]"), nil
	}
	return json.Marshal(in.Items)
}

// Tool types.
const (
	ToolFunction = "function"
)

// Tool is a tool offered to the model. Only function tools exist so far;
// other types are rejected by validation until they are implemented.
type Tool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name,omitempty"`
	Description *string         `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      *bool           `json:"strict"`
	// DeferLoading keeps the tool out of the prompt until a tool search
	// finds it (tool_search).
	DeferLoading bool `json:"defer_loading,omitempty"`
	// Async, true on a function or custom tool, lets the response go on
	// past a call of the tool without its output (see IsAsync); nil when
	// the request does not say. Other tool types refuse the field.
	Async *bool `json:"async,omitempty"`
	// Raw is the tool as sent, for types other than function: whoever
	// runs them (MCP, local tools) decodes their own fields from it.
	Raw json.RawMessage `json:"-"`
}

// UnmarshalJSON decodes a tool and keeps the raw form of every type but
// function.
func (t *Tool) UnmarshalJSON(data []byte) error {
	var fast Tool
	if newScanner(data).function(&fast) {
		*t = fast
		return nil
	}
	type plain Tool
	var p plain
	if err := json.Unmarshal(data, &p); err != nil {
		return err
	}
	*t = Tool(p)
	if t.Type != ToolFunction {
		t.Raw = append(json.RawMessage(nil), data...)
	}
	return nil
}

// secretToolFields are fields of a tool that carry credentials: they are
// never echoed back in a response.
var secretToolFields = []string{"authorization", "headers"}

// MarshalJSON writes the tool as appendJSON does.
func (t Tool) MarshalJSON() ([]byte, error) { return t.appendJSON(nil) }

// appendJSON writes a function tool with description, parameters and
// strict always present (null when unset), as the schema requires, its
// schema as it was sent; other tools are echoed as sent, without their
// credentials.
func (t *Tool) appendJSON(dst []byte) ([]byte, error) {
	if t.Type != ToolFunction && len(t.Raw) > 0 {
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(t.Raw, &fields); err != nil {
			return dst, err
		}
		for _, k := range secretToolFields {
			delete(fields, k)
		}
		b, err := json.Marshal(fields)
		return append(dst, b...), err
	}
	o := openObject(dst)
	o.str("type", t.Type)
	o.str("name", t.Name)
	o.strOrNull("description", t.Description)
	o.raw("parameters", t.Parameters, "null")
	o.boolOrNull("strict", t.Strict)
	if t.DeferLoading {
		o.boolean("defer_loading", true)
	}
	if t.IsAsync() {
		o.boolean("async", true)
	}
	return o.close(), nil
}

// IsAsync reports whether the tool was offered with async: true.
func (t *Tool) IsAsync() bool { return t.Async != nil && *t.Async }

// Tool choice modes.
const (
	ToolChoiceNone     = "none"
	ToolChoiceAuto     = "auto"
	ToolChoiceRequired = "required"
)

// ToolChoice is "none", "auto", "required", a named function
// ({"type":"function","name":...}) or an allowed-tools list
// ({"type":"allowed_tools","mode":...,"tools":[...]}).
type ToolChoice struct {
	// Mode is none, auto or required. For a named function it is required.
	Mode string
	// Function is the name of the function the model must call.
	Function string
	// Allowed lists the tools the model may use (allowed_tools); nil
	// when tool_choice is not an allowed_tools object.
	Allowed []ToolRef
	// Unknown holds the type of an object form loom does not know, for
	// validation to reject.
	Unknown string
}

// ToolRef names a tool in tool_choice.
type ToolRef struct {
	Type string `json:"type"`
	Name string `json:"name,omitempty"`
}

// UnmarshalJSON decodes every tool_choice form.
func (tc *ToolChoice) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	*tc = ToolChoice{}
	if len(data) > 0 && data[0] == '"' {
		return json.Unmarshal(data, &tc.Mode)
	}
	var obj struct {
		Type  string    `json:"type"`
		Name  string    `json:"name"`
		Mode  string    `json:"mode"`
		Tools []ToolRef `json:"tools"`
	}
	if err := json.Unmarshal(data, &obj); err != nil {
		return fmt.Errorf("tool_choice must be a string or an object")
	}
	switch obj.Type {
	case "function", ToolCustom:
		// A custom tool is offered to the model as a function.
		tc.Mode, tc.Function = ToolChoiceRequired, obj.Name
	case "allowed_tools":
		tc.Mode, tc.Allowed = obj.Mode, obj.Tools
		if tc.Mode == "" {
			tc.Mode = ToolChoiceAuto
		}
		if tc.Allowed == nil {
			tc.Allowed = []ToolRef{}
		}
	default:
		tc.Unknown = obj.Type
		if tc.Unknown == "" {
			tc.Unknown = "(missing)"
		}
	}
	return nil
}

// MarshalJSON writes the normalised form, as appendJSON does.
func (tc ToolChoice) MarshalJSON() ([]byte, error) { return tc.appendJSON(nil), nil }

// appendJSON writes the normalised form: a mode string, a function
// choice, or an allowed_tools object with its mode.
func (tc *ToolChoice) appendJSON(dst []byte) []byte {
	switch {
	case tc.Function != "":
		o := openObject(dst)
		o.str("type", "function")
		o.str("name", tc.Function)
		return o.close()
	case tc.Allowed != nil:
		o := openObject(dst)
		o.str("type", "allowed_tools")
		o.str("mode", tc.Mode)
		o.key("tools")
		o.b = append(o.b, '[')
		for i, ref := range tc.Allowed {
			if i > 0 {
				o.b = append(o.b, ',')
			}
			r := openObject(o.b)
			r.str("type", ref.Type)
			r.strOmitEmpty("name", ref.Name)
			o.b = r.close()
		}
		o.b = append(o.b, ']')
		return o.close()
	case tc.Mode == "":
		return append(dst, `"auto"`...)
	}
	return appendString(dst, tc.Mode)
}

// TextConfig is the request's and response's "text" object.
type TextConfig struct {
	Format    *TextFormat `json:"format"`
	Verbosity *string     `json:"verbosity,omitempty"`
}

// Text format types.
const (
	FormatText       = "text"
	FormatJSONObject = "json_object"
	FormatJSONSchema = "json_schema"
)

// TextFormat is text.format.
type TextFormat struct {
	Type        string          `json:"type"`
	Name        string          `json:"name,omitempty"`
	Description *string         `json:"description,omitempty"`
	Schema      json.RawMessage `json:"schema,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// appendJSON writes the text object, its format null when unset.
func (c *TextConfig) appendJSON(dst []byte) []byte {
	o := openObject(dst)
	o.key("format")
	if c.Format == nil {
		o.b = append(o.b, "null"...)
	} else {
		o.b = c.Format.appendJSON(o.b)
	}
	o.strOmitNil("verbosity", c.Verbosity)
	return o.close()
}

// MarshalJSON writes the format as appendJSON does.
func (f TextFormat) MarshalJSON() ([]byte, error) { return f.appendJSON(nil), nil }

// appendJSON writes a json_schema format with every key the schema
// requires (description and strict null or false when unset), any other
// format as its type.
func (f *TextFormat) appendJSON(dst []byte) []byte {
	o := openObject(dst)
	o.str("type", f.Type)
	if f.Type == FormatJSONSchema {
		o.str("name", f.Name)
		o.strOrNull("description", f.Description)
		o.raw("schema", f.Schema, "null")
		o.boolean("strict", f.Strict != nil && *f.Strict)
	}
	return o.close()
}

// ReasoningParam is the request's and response's "reasoning" object.
type ReasoningParam struct {
	Effort  *string `json:"effort"`
	Summary *string `json:"summary"`
}
