package responses

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Validate checks what can be checked from the request alone and returns a
// 400 naming the first bad parameter. Checks that need state (the model
// list, the stored chain, whether a call_id exists) belong to the Engine.
//
// Fields loom cannot honour yet are rejected here rather than ignored,
// where ignoring them would change the result.
//
// serverTool, when not nil, reports which non-function tool types the
// caller runs itself (MCP, local tools); other types are rejected.
//
// The error is nil or an *APIError. It is returned as an error so that a
// valid request gives a nil interface, not a nil *APIError in one.
func (r *Request) Validate(serverTool func(toolType string) bool) error {
	if err := r.validate(serverTool); err != nil {
		return err
	}
	return nil
}

// validate runs the checks in order; the first failure is the answer.
func (r *Request) validate(serverTool func(toolType string) bool) *APIError {
	checks := []func() *APIError{
		r.checkCounts,
		r.validateInputSet,
		func() *APIError { return validateMetadata(r.Metadata) },
		r.validateSampling,
		r.validateUnsupported,
		r.validateText,
		r.validateReasoning,
		func() *APIError { return r.validateTools(serverTool) },
		r.validateInputItems,
	}
	for _, check := range checks {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// validateInputSet checks the model and that there is input.
func (r *Request) validateInputSet() *APIError {
	if strings.TrimSpace(r.Model) == "" {
		return BadRequest("model", "model is required")
	}
	if !r.Input.Set && r.PreviousResponseID == nil {
		return BadRequest("input", "input is required")
	}
	if r.Input.Set && !r.Input.IsString && len(r.Input.Items) == 0 {
		return BadRequest("input", "input must not be an empty array")
	}
	return nil
}

// validateSampling checks the sampling knobs and the limits.
func (r *Request) validateSampling() *APIError {
	if r.Temperature != nil && (*r.Temperature < 0 || *r.Temperature > 2) {
		return BadRequest("temperature", "temperature must be between 0 and 2, got %g", *r.Temperature)
	}
	if r.TopP != nil && (*r.TopP <= 0 || *r.TopP > 1) {
		return BadRequest("top_p", "top_p must be greater than 0 and at most 1, got %g", *r.TopP)
	}
	if r.PresencePenalty != nil && (*r.PresencePenalty < -2 || *r.PresencePenalty > 2) {
		return BadRequest("presence_penalty", "presence_penalty must be between -2 and 2")
	}
	if r.FrequencyPenalty != nil && (*r.FrequencyPenalty < -2 || *r.FrequencyPenalty > 2) {
		return BadRequest("frequency_penalty", "frequency_penalty must be between -2 and 2")
	}
	if r.MaxOutputTokens != nil && *r.MaxOutputTokens < 1 {
		return BadRequest("max_output_tokens", "max_output_tokens must be at least 1, got %d", *r.MaxOutputTokens)
	}
	if r.MaxToolCalls != nil && *r.MaxToolCalls < 1 {
		return BadRequest("max_tool_calls", "max_tool_calls must be at least 1, got %d", *r.MaxToolCalls)
	}
	return nil
}

// validateUnsupported rejects fields loom cannot honour (yet), and checks
// the simple enumerations.
func (r *Request) validateUnsupported() *APIError {
	if r.TopLogprobs != nil && *r.TopLogprobs != 0 {
		return Unsupported("top_logprobs", "top_logprobs is not supported by this server")
	}
	if r.PreviousResponseID != nil && *r.PreviousResponseID == "" {
		return BadRequest("previous_response_id", "previous_response_id must not be empty")
	}
	if r.Background != nil && *r.Background && !r.StoreEnabled() {
		// As OpenAI: a background response lives in the store.
		return BadRequest("background", "background responses must be stored: store cannot be false")
	}
	if id, err := r.conversationID(); err != nil {
		return err
	} else if id != "" && r.PreviousResponseID != nil {
		return BadRequest("conversation", "conversation and previous_response_id cannot both be set: a conversation holds its own history")
	}
	if _, err := r.contextManagement(); err != nil {
		return err
	}
	if len(r.Prompt) > 0 && string(r.Prompt) != "null" {
		return Unsupported("prompt", "prompt templates are not supported")
	}
	if r.Truncation != nil && *r.Truncation != "disabled" && *r.Truncation != "auto" {
		return BadRequest("truncation", "truncation must be \"auto\" or \"disabled\"")
	}
	if r.ServiceTier != nil && !serviceTiers[*r.ServiceTier] {
		return BadRequest("service_tier", "service_tier must be auto, default, flex, scale or priority")
	}
	if err := checkStreamOptions(r.StreamOptions); err != nil {
		return err
	}
	for i, inc := range r.Include {
		if !supportedInclude[inc] {
			return Unsupported(fmt.Sprintf("include[%d]", i), "include value %q is not supported", inc)
		}
	}
	return nil
}

// serviceTiers are the service_tier values of the API. loom serves each
// request alike and echoes the one asked for.
var serviceTiers = map[string]bool{"auto": true, "default": true, "flex": true, "scale": true, "priority": true}

// checkStreamOptions checks stream_options: null or an object whose
// include_obfuscation, when given, is a boolean. Other keys are tolerated,
// as unknown fields are. loom adds no obfuscation field either way.
func checkStreamOptions(raw json.RawMessage) *APIError {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var opts map[string]json.RawMessage
	if raw[0] != '{' || json.Unmarshal(raw, &opts) != nil {
		return BadRequest("stream_options", "stream_options must be an object, got %s", jsonKind(raw))
	}
	if v, ok := opts["include_obfuscation"]; ok {
		if v = bytes.TrimSpace(v); string(v) != "true" && string(v) != "false" && string(v) != "null" {
			return BadRequest("stream_options.include_obfuscation", "stream_options.include_obfuscation must be a boolean, got %s", jsonKind(v))
		}
	}
	return nil
}

// validateInputItems checks each input item. The param naming an item
// ("input[7]") is built only for the item at fault, by checking it again:
// a long input would otherwise format one for every item.
func (r *Request) validateInputItems() *APIError {
	if err := r.checkCompactionTrigger(); err != nil {
		return err
	}
	for i := range r.Input.Items {
		if r.Input.Items[i].validateInput("") != nil {
			return r.Input.Items[i].validateInput(fmt.Sprintf("input[%d]", i))
		}
	}
	return nil
}

// Metadata limits, as OpenAI's API sets them.
const (
	MaxMetadataKeys     = 16
	MaxMetadataKeyLen   = 64
	MaxMetadataValueLen = 512
)

// validateMetadata checks metadata against OpenAI's limits: at most 16
// keys, keys of at most 64 characters, string values of at most 512.
func validateMetadata(m map[string]any) *APIError {
	if len(m) > MaxMetadataKeys {
		return BadRequest("metadata", "metadata may have at most %d keys, got %d", MaxMetadataKeys, len(m))
	}
	for k, v := range m {
		if utf8.RuneCountInString(k) > MaxMetadataKeyLen {
			return BadRequest("metadata", "metadata keys may be at most %d characters long", MaxMetadataKeyLen)
		}
		s, ok := v.(string)
		if !ok {
			return BadRequest("metadata", "metadata value of key %q must be a string", k)
		}
		if utf8.RuneCountInString(s) > MaxMetadataValueLen {
			return BadRequest("metadata", "metadata value of key %q may be at most %d characters long", k, MaxMetadataValueLen)
		}
	}
	return nil
}

// supportedInclude lists the include[] values loom honours.
var supportedInclude = map[string]bool{
	"reasoning.encrypted_content": true,
	IncludeWebSearchSources:       true,
}

func (r *Request) validateText() *APIError {
	if r.Text == nil || r.Text.Format == nil {
		return nil
	}
	f := r.Text.Format
	switch f.Type {
	case FormatText, FormatJSONObject:
	case FormatJSONSchema:
		if f.Name == "" {
			return BadRequest("text.format.name", "text.format.name is required for json_schema")
		}
		if len(f.Schema) == 0 {
			return BadRequest("text.format.schema", "text.format.schema must be a JSON Schema object")
		}
		if string(f.Schema) != "null" {
			if err := checkSchema(f.Schema, func() string { return "text.format.schema" }, "text.format.schema must be a JSON Schema object"); err != nil {
				return err
			}
		}
	default:
		return BadRequest("text.format.type", "text.format.type must be text, json_object or json_schema")
	}
	if v := r.Text.Verbosity; v != nil && *v != "low" && *v != "medium" && *v != "high" {
		return BadRequest("text.verbosity", "text.verbosity must be low, medium or high")
	}
	return nil
}

func (r *Request) validateReasoning() *APIError {
	if r.Reasoning == nil || r.Reasoning.Effort == nil {
		return nil
	}
	switch *r.Reasoning.Effort {
	case "none", "minimal", "low", "medium", "high", "xhigh":
		return nil
	}
	return BadRequest("reasoning.effort", "reasoning.effort must be one of none, minimal, low, medium, high, xhigh")
}

func (r *Request) validateTools(serverTool func(string) bool) *APIError {
	names := make(map[string]bool, len(r.Tools))
	// clientSearch is the index of a tool_search the client runs, -1 for
	// none: the model is offered a function named tool_search for it,
	// which no tool of the request may take (names has only the names
	// tool_choice may pick, and that function is not one of them).
	clientSearch := -1
	for i := range r.Tools {
		t := &r.Tools[i]
		if t.Type == ToolFunction {
			// The common kind, its param formatted only for a fault.
			param := func() string { return fmt.Sprintf("tools[%d]", i) }
			if err := validateFunctionTool(param, t, t.Name, names); err != nil {
				return err
			}
			continue
		}
		param := fmt.Sprintf("tools[%d]", i)
		if err := checkAsync(param, t); err != nil {
			return err
		}
		if handled, err := validateClientTool(param, &r.Tools[i], names); handled {
			if err != nil {
				return err
			}
			continue
		}
		switch {
		case t.Type == ToolLocalShell:
			if names["local_shell"] {
				return BadRequest(param+".type", "local_shell is given twice")
			}
			names["local_shell"] = true
			continue
		case t.Type == "":
			return BadRequest(param+".type", "tool type is required")
		case serverTool != nil && serverTool(t.Type):
			// Checked by whoever runs it.
			if t.Type == ToolToolSearch && DecodeToolSearchTool(t.Raw).ClientRun() {
				if clientSearch >= 0 {
					return BadRequest(param, "duplicate tool name %q", ToolToolSearch)
				}
				clientSearch = i
			}
			continue
		default:
			return unknownTool(param, t.Type)
		}
	}
	if clientSearch >= 0 && names[ToolToolSearch] {
		return toolSearchTaken(r.Tools, clientSearch)
	}
	return r.validateToolChoice(names)
}

// validateToolChoice checks tool_choice against the names of the tools
// it may pick.
func (r *Request) validateToolChoice(names map[string]bool) *APIError {
	tc := r.ToolChoice
	if tc == nil {
		return nil
	}
	if tc.Unknown != "" {
		return BadRequest("tool_choice.type", "unknown tool_choice type %q", tc.Unknown)
	}
	switch tc.Mode {
	case ToolChoiceNone, ToolChoiceAuto, ToolChoiceRequired:
	default:
		return BadRequest("tool_choice", "tool_choice must be none, auto, required, a function or allowed_tools")
	}
	if tc.Mode == ToolChoiceRequired && len(r.Tools) == 0 {
		return BadRequest("tool_choice", "tool_choice requires a tool, but no tools were given")
	}
	if tc.Function != "" && !names[tc.Function] {
		return BadRequest("tool_choice.name", "tool_choice names function %q, which is not in tools", tc.Function)
	}
	if tc.Allowed != nil {
		if len(tc.Allowed) == 0 {
			return BadRequest("tool_choice.tools", "allowed_tools needs at least one tool")
		}
		for i, ref := range tc.Allowed {
			if (ref.Type != ToolFunction && ref.Type != ToolCustom) || !names[ref.Name] {
				return BadRequest(fmt.Sprintf("tool_choice.tools[%d]", i), "allowed tool %q is not in tools", ref.Name)
			}
		}
	}
	return nil
}

// toolSearchTaken is the 400 for a function or custom tool named
// tool_search beside a tool_search the client runs, named at the later
// of the two, where the offered names collide.
func toolSearchTaken(tools []Tool, search int) *APIError {
	at := search
	for i := range tools {
		if tools[i].Name == ToolToolSearch && (tools[i].Type == ToolFunction || tools[i].Type == ToolCustom) {
			at = max(at, i)
			break
		}
	}
	return BadRequest(fmt.Sprintf("tools[%d]", at), "duplicate tool name %q: a tool_search the client runs is offered to the model as a function of that name", ToolToolSearch)
}

func validFunctionName(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	// By byte: every byte of a character beyond ASCII fails the test, as
	// the character would.
	for i := range len(s) {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// validateInput checks one input item.
func (it *Item) validateInput(param string) *APIError {
	if err := it.checkItemID(param); err != nil {
		return err
	}
	switch it.Type {
	case "":
		return BadRequest(param+".type", "input item type is required")
	case ItemReference:
		return Unsupported(param+".type", "item_reference inputs are not supported yet; resend the item or use previous_response_id")
	case ItemMessage:
		// Most of a long input: its check without the look-up.
		return it.validateMessage(param)
	}
	check, ok := inputChecks[it.Type]
	if !ok {
		return BadRequest(param+".type", "unknown or unsupported input item type %q", it.Type)
	}
	if check == nil {
		// Output items a client resends with the history.
		return nil
	}
	return check(it, param)
}

// inputChecks are the checks of each input item type loom takes; a nil
// check takes the item as it is.
var inputChecks = map[string]func(it *Item, param string) *APIError{
	ItemMessage:              (*Item).validateMessage,
	ItemFunctionCall:         (*Item).validateFunctionCall,
	ItemFunctionCallOutput:   (*Item).validateCallOutput,
	ItemReasoning:            (*Item).validateReasoning,
	ItemLocalShellCall:       (*Item).validateCallOutput,
	ItemLocalShellCallOutput: (*Item).validateCallOutput,
	ItemMCPApprovalResponse:  (*Item).validateApprovalResponse,
	ItemMCPInputResponse:     (*Item).validateInputResponse,
	ItemCompaction:           (*Item).validateCompaction,
	ItemCustomToolCall:       (*Item).validateCustomToolCall,
	ItemCustomToolCallOutput: (*Item).validateCallOutput,
	ItemApplyPatchCall:       (*Item).validateApplyPatchCall,
	ItemApplyPatchCallOutput: (*Item).validateApplyPatchOutput,
	ItemMCPCall:              nil,
	ItemMCPListTools:         nil,
	ItemMCPApprovalRequest:   nil,
	ItemMCPInputRequest:      nil,
	ItemCodeInterpreterCall:  nil,
	ItemWebSearchCall:        nil, // resent by Codex with its history
	ItemShellCall:            nil, // the sandboxed shell's, as loom reported them
	ItemShellCallOutput:      nil,
	ItemToolSearchCall:       nil,
	ItemToolSearchOutput:     (*Item).validateToolSearchOutput,
	// Last in a request's input (Request.checkCompactionTrigger); kept
	// in the stored input it was part of.
	ItemCompactionTrigger: nil,
}

// validateMessage checks a message's role and its content parts.
func (it *Item) validateMessage(param string) *APIError {
	switch it.Role {
	case "user", "system", "developer":
		for j := range it.Content {
			switch p := &it.Content[j]; p.Type {
			case PartInputText:
			case PartInputImage, PartInputFile:
				if err := p.validateMedia(fmt.Sprintf("%s.content[%d]", param, j)); err != nil {
					return err
				}
			default:
				return BadRequest(fmt.Sprintf("%s.content[%d].type", param, j), "content part type %q is not valid in a %s message", p.Type, it.Role)
			}
		}
	case "assistant":
		for j := range it.Content {
			if p := &it.Content[j]; p.Type != PartOutputText && p.Type != PartRefusal && p.Type != PartInputText {
				return BadRequest(fmt.Sprintf("%s.content[%d].type", param, j), "content part type %q is not valid in an assistant message", p.Type)
			}
		}
	case "":
		return BadRequest(param+".role", "message role is required")
	default:
		return BadRequest(param+".role", "message role must be user, system, developer or assistant")
	}
	if it.Content == nil {
		return BadRequest(param+".content", "message content is required")
	}
	return nil
}

func (it *Item) validateFunctionCall(param string) *APIError {
	if it.CallFields().CallID == "" {
		return BadRequest(param+".call_id", "function_call needs a call_id")
	}
	if it.CallFields().Name == "" {
		return BadRequest(param+".name", "function_call needs a name")
	}
	return nil
}

// validateCallOutput checks a client's call (local_shell_call) or its
// answer to one: a call_id, and an output for an output item.
func (it *Item) validateCallOutput(param string) *APIError {
	if it.CallFields().CallID == "" {
		return BadRequest(param+".call_id", "%s needs a call_id", it.Type)
	}
	if it.Type == ItemLocalShellCall {
		return nil
	}
	if len(it.CallFields().Output) == 0 {
		return BadRequest(param+".output", "%s needs an output", it.Type)
	}
	if it.Type != ItemFunctionCallOutput && it.Type != ItemCustomToolCallOutput {
		return nil
	}
	out := bytes.TrimSpace(it.CallFields().Output)
	if len(out) == 0 || out[0] != '"' && out[0] != '[' {
		return BadRequest(param+".output", "output must be a string or an array of content parts")
	}
	return nil
}

func (it *Item) validateReasoning(param string) *APIError {
	for j, p := range it.Content {
		if p.Type != PartReasoningText {
			return BadRequest(fmt.Sprintf("%s.content[%d].type", param, j), "reasoning content must be reasoning_text")
		}
	}
	return nil
}

func (it *Item) validateApprovalResponse(param string) *APIError {
	if it.ToolFields().ApprovalRequestID == nil || *it.ToolFields().ApprovalRequestID == "" {
		return BadRequest(param+".approval_request_id", "mcp_approval_response needs an approval_request_id")
	}
	if it.ToolFields().Approve == nil {
		return BadRequest(param+".approve", "mcp_approval_response needs approve (true or false)")
	}
	return nil
}

func (it *Item) validateCompaction(param string) *APIError {
	if it.ReasoningFields().EncryptedContent == nil || *it.ReasoningFields().EncryptedContent == "" {
		return BadRequest(param+".encrypted_content", "a compaction item needs the encrypted_content that /v1/responses/compact returned")
	}
	return nil
}

// validateInputResponse checks the shape of an mcp_input_response: a
// request_id, and input_responses mapping each key to {action, content}
// with action accept, decline or cancel, and content an object (given
// only with accept). Whether the request and its keys exist is the
// Engine's check.
func (it *Item) validateInputResponse(param string) *APIError {
	if it.ToolFields().RequestID == "" {
		return BadRequest(param+".request_id", "mcp_input_response needs a request_id")
	}
	var answers map[string]json.RawMessage
	if len(it.ToolFields().InputResponses) == 0 || json.Unmarshal(it.ToolFields().InputResponses, &answers) != nil || answers == nil {
		return BadRequest(param+".input_responses", "input_responses must be an object mapping each key of the input request to {action, content}")
	}
	for key, raw := range answers {
		p := param + ".input_responses." + key
		var a struct {
			Action  *string         `json:"action"`
			Content json.RawMessage `json:"content"`
		}
		if json.Unmarshal(raw, &a) != nil {
			return BadRequest(p, "an input response must be an object {action, content}")
		}
		if a.Action == nil {
			return BadRequest(p+".action", "action is required: accept, decline or cancel")
		}
		switch *a.Action {
		case "accept":
			var obj map[string]json.RawMessage
			if c := strings.TrimSpace(string(a.Content)); c != "" && c != "null" && (json.Unmarshal(a.Content, &obj) != nil || obj == nil) {
				return BadRequest(p+".content", "content must be an object")
			}
		case "decline", "cancel":
			if c := strings.TrimSpace(string(a.Content)); c != "" && c != "null" {
				return BadRequest(p+".content", "content is only given with action accept")
			}
		default:
			return BadRequest(p+".action", "action must be accept, decline or cancel")
		}
	}
	return nil
}
