package chat

// The chat body as it was built before it was written by hand: through
// go-openai's types and encoding/json. It is kept here, unchanged but for
// its names, as the reference the hand-written body is held to
// (TestBodyMatchesGoOpenAI).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	openai "github.com/sashabaranov/go-openai"

	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/model/internal/upstream"
	"github.com/loomgate/loom/responses"
)

// refRequest is the chat-completions body loom sends. The nested objects
// are go-openai's types; the top level is ours because go-openai's
// ChatCompletionRequest holds sampling parameters as float32 with
// omitempty, which silently drops temperature 0 (greedy decoding) and
// rounds the others, and it cannot carry engine-specific extra fields.
type refRequest struct {
	Model             string                `json:"model"`
	Messages          []refMessage          `json:"messages"`
	Stream            bool                  `json:"stream"`
	StreamOptions     *openai.StreamOptions `json:"stream_options,omitempty"`
	Tools             []openai.Tool         `json:"tools,omitempty"`
	ToolChoice        any                   `json:"tool_choice,omitempty"`
	ParallelToolCalls *bool                 `json:"parallel_tool_calls,omitempty"`
	MaxTokens         int                   `json:"max_tokens,omitempty"`
	model.Sampling
	ReasoningEffort string                               `json:"reasoning_effort,omitempty"`
	ResponseFormat  *openai.ChatCompletionResponseFormat `json:"response_format,omitempty"`
	User            string                               `json:"user,omitempty"`
}

// refEmptyParameters is sent for a function tool without a schema: engines
// differ on a missing or null "parameters", all accept an empty object.
var refEmptyParameters = json.RawMessage(`{"type":"object","properties":{}}`)

// refBuildRequest translates a model turn to the chat-completions body.
func refBuildRequest(req *model.Request) (*refRequest, error) {
	msgs, err := refConvertItems(req.Instructions, req.Items)
	if err != nil {
		return nil, err
	}
	w := &refRequest{
		Model:           req.Model,
		Messages:        msgs,
		Stream:          !req.Whole,
		MaxTokens:       req.MaxOutputTokens,
		Sampling:        req.Sampling,
		ReasoningEffort: req.ReasoningEffort,
		User:            req.User,
	}

	// No tools means no tools key and no tool_choice: an empty list with
	// a tool_choice once made vLLM default to auto and models invented
	// calls to tools that did not exist.
	if w.Stream {
		// Without include_usage the stream carries no token counts; a
		// whole answer always has them.
		w.StreamOptions = &openai.StreamOptions{IncludeUsage: true}
	}
	if len(req.Tools) > 0 {
		w.Tools = make([]openai.Tool, 0, len(req.Tools))
		for _, t := range req.Tools {
			if t.Type != responses.ToolFunction {
				return nil, upstream.BadRequest(fmt.Sprintf("tool type %q is not supported by the chat completions backend", t.Type))
			}
			params := t.Parameters
			if len(bytes.TrimSpace(params)) == 0 || bytes.Equal(bytes.TrimSpace(params), []byte("null")) {
				params = refEmptyParameters
			}
			fn := &openai.FunctionDefinition{Name: t.Name, Parameters: params}
			if t.Description != nil {
				fn.Description = *t.Description
			}
			if t.Strict != nil {
				fn.Strict = *t.Strict
			}
			w.Tools = append(w.Tools, openai.Tool{Type: openai.ToolTypeFunction, Function: fn})
		}
		switch {
		case req.ToolChoiceFunction != "":
			w.ToolChoice = openai.ToolChoice{Type: openai.ToolTypeFunction, Function: openai.ToolFunction{Name: req.ToolChoiceFunction}}
		case req.ToolChoice != "":
			w.ToolChoice = req.ToolChoice
		}
		// true is every engine's default; only a refusal is worth sending.
		if !req.ParallelToolCalls {
			w.ParallelToolCalls = new(false)
		}
	}

	if tf := req.TextFormat; tf != nil {
		switch tf.Type {
		case responses.FormatJSONSchema:
			name := tf.Name
			if name == "" {
				name = "response" // OpenAI requires a name; engines ignore it
			}
			js := &openai.ChatCompletionResponseFormatJSONSchema{Name: name, Schema: tf.Schema}
			if tf.Description != nil {
				js.Description = *tf.Description
			}
			if tf.Strict != nil {
				js.Strict = *tf.Strict
			}
			w.ResponseFormat = &openai.ChatCompletionResponseFormat{Type: openai.ChatCompletionResponseFormatTypeJSONSchema, JSONSchema: js}
		case responses.FormatJSONObject:
			w.ResponseFormat = &openai.ChatCompletionResponseFormat{Type: openai.ChatCompletionResponseFormatTypeJSONObject}
		}
	}
	return w, nil
}

// refProtectedKeys are body keys Extra may not replace: the stream parser
// and the tool rules above depend on them.
var refProtectedKeys = map[string]bool{
	"model": true, "messages": true, "stream": true, "stream_options": true,
	"tools": true, "tool_choice": true,
}

// refMarshal writes w's JSON with extra merged in: extra adds keys
// (top_k, chat_template_kwargs, ...) and may override the sampling ones,
// but never a protected key.
func refMarshal(buf *bytes.Buffer, w *refRequest, extra map[string]json.RawMessage) error {
	enc := json.NewEncoder(buf)
	if len(extra) == 0 {
		return enc.Encode(w)
	}
	b, err := json.Marshal(w)
	if err != nil {
		return err
	}
	var body map[string]json.RawMessage
	if err := json.Unmarshal(b, &body); err != nil {
		return err
	}
	for k, v := range extra {
		if refProtectedKeys[k] {
			continue
		}
		body[k] = v
	}
	return enc.Encode(body)
}

// refMessage is a go-openai chat message with one fix to its JSON:
// go-openai drops an empty "content", and llama.cpp rejects a user,
// system or tool message without one (an empty tool output is common).
type refMessage openai.ChatCompletionMessage

func (m refMessage) MarshalJSON() ([]byte, error) {
	if m.textOnly() {
		// The common message, a role and its text, without go-openai's
		// reflection: a long history has thousands of them.
		role, _ := json.Marshal(m.Role)
		content, _ := json.Marshal(m.Content)
		b := make([]byte, 0, len(role)+len(content)+22)
		b = append(b, `{"role":`...)
		b = append(b, role...)
		b = append(b, `,"content":`...)
		b = append(b, content...)
		return append(b, '}'), nil
	}
	b, err := openai.ChatCompletionMessage(m).MarshalJSON()
	if err != nil || m.Content != "" || len(m.MultiContent) > 0 || m.Role == openai.ChatMessageRoleAssistant {
		return b, err
	}
	// b is {"role":...}; put an empty content in front of its keys.
	return append([]byte(`{"content":"",`), b[1:]...), nil
}

// textOnly reports whether m is a role and a text, nothing else.
func (m *refMessage) textOnly() bool {
	return m.Content != "" && m.Refusal == "" && m.MultiContent == nil && m.Name == "" && m.ReasoningContent == "" &&
		m.FunctionCall == nil && m.ToolCalls == nil && m.ToolCallID == ""
}

// refConvertItems turns the Responses conversation into chat messages.
//
// Responses keeps what chat puts in one assistant message as separate
// items: reasoning, the assistant text, and each function call. They are
// folded back together here: reasoning goes on the next assistant message
// as reasoning_content (the chat templates of reasoning models read it
// there), and consecutive function calls, with the assistant text right
// before them, become one assistant message with several tool_calls.
func refConvertItems(instructions string, items []responses.Item) ([]refMessage, error) {
	msgs := make([]refMessage, 0, len(items)+1)
	if instructions != "" {
		msgs = append(msgs, refMessage{Role: openai.ChatMessageRoleSystem, Content: instructions})
	}

	// reasoning waits for the assistant message it belongs to.
	var reasoning strings.Builder
	// open says the last message is an assistant message that a following
	// function call may join.
	open := false

	for i := range items {
		it := &items[i]
		switch it.Type {
		case responses.ItemReasoning:
			if reasoning.Len() > 0 {
				reasoning.WriteString("\n")
			}
			reasoning.WriteString(reasoningText(it))
			open = false

		case responses.ItemMessage:
			m, err := refConvertMessage(it)
			if err != nil {
				return nil, err
			}
			if m.Role == openai.ChatMessageRoleAssistant {
				m.ReasoningContent = reasoning.String()
				open = true
			} else {
				// Reasoning not followed by an assistant message (an
				// interrupted turn) has nowhere to go in chat format.
				open = false
			}
			reasoning.Reset()
			msgs = append(msgs, m)

		case responses.ItemFunctionCall:
			call := openai.ToolCall{
				ID:       it.CallFields().CallID,
				Type:     openai.ToolTypeFunction,
				Function: openai.FunctionCall{Name: it.CallFields().Name, Arguments: it.CallFields().Arguments},
			}
			if open && reasoning.Len() == 0 {
				last := &msgs[len(msgs)-1]
				last.ToolCalls = append(last.ToolCalls, call)
				continue
			}
			msgs = append(msgs, refMessage{
				Role:             openai.ChatMessageRoleAssistant,
				ReasoningContent: reasoning.String(),
				ToolCalls:        []openai.ToolCall{call},
			})
			reasoning.Reset()
			open = true

		case responses.ItemFunctionCallOutput:
			msgs = append(msgs, refMessage{
				Role:       openai.ChatMessageRoleTool,
				ToolCallID: it.CallFields().CallID,
				Content:    it.OutputString(),
			})
			reasoning.Reset()
			open = false

		default:
			// item_reference is resolved by the Engine before a turn;
			// anything else has no chat form.
			return nil, upstream.BadRequest(fmt.Sprintf("input item type %q is not supported by the chat completions backend", it.Type))
		}
	}
	return msgs, nil
}

// refConvertMessage converts a message item. Developer messages become
// system messages: many engines' chat templates know no developer role.
func refConvertMessage(it *responses.Item) (refMessage, error) {
	var role string
	switch it.Role {
	case "user":
		role = openai.ChatMessageRoleUser
	case "system", "developer":
		role = openai.ChatMessageRoleSystem
	case "assistant":
		role = openai.ChatMessageRoleAssistant
	default:
		return refMessage{}, upstream.BadRequest(fmt.Sprintf("message role %q is not supported by the chat completions backend", it.Role))
	}

	hasImage := false
	for _, p := range it.Content {
		switch p.Type {
		case responses.PartInputImage:
			if p.MediaFields().ImageURL == "" {
				return refMessage{}, upstream.BadRequest("input_image by file_id is not supported by the chat completions backend")
			}
			hasImage = true
		case responses.PartInputFile:
			return refMessage{}, upstream.BadRequest("input_file is not supported by the chat completions backend")
		}
	}
	if !hasImage {
		return refMessage{Role: role, Content: it.Text()}, nil
	}

	// Images need the array form of content; text parts keep their order.
	parts := make([]openai.ChatMessagePart, 0, len(it.Content))
	for _, p := range it.Content {
		if p.Type == responses.PartInputImage {
			parts = append(parts, openai.ChatMessagePart{
				Type:     openai.ChatMessagePartTypeImageURL,
				ImageURL: &openai.ChatMessageImageURL{URL: p.MediaFields().ImageURL, Detail: openai.ImageURLDetail(p.MediaFields().Detail)},
			})
			continue
		}
		text := p.Text
		if p.Type == responses.PartRefusal {
			text = p.Refusal
		}
		parts = append(parts, openai.ChatMessagePart{Type: openai.ChatMessagePartTypeText, Text: text})
	}
	return refMessage{Role: role, MultiContent: parts}, nil
}
