package chat

import (
	"encoding/json"
	"fmt"
	"strings"

	openai "github.com/sashabaranov/go-openai"

	"github.com/loomgate/loom/model/internal/upstream"
	"github.com/loomgate/loom/responses"
)

// wireMessage is a go-openai chat message with one fix to its JSON:
// go-openai drops an empty "content", and llama.cpp rejects a user,
// system or tool message without one (an empty tool output is common).
type wireMessage openai.ChatCompletionMessage

func (m wireMessage) MarshalJSON() ([]byte, error) {
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
func (m *wireMessage) textOnly() bool {
	return m.Content != "" && m.Refusal == "" && m.MultiContent == nil && m.Name == "" && m.ReasoningContent == "" &&
		m.FunctionCall == nil && m.ToolCalls == nil && m.ToolCallID == ""
}

// convertItems turns the Responses conversation into chat messages.
//
// Responses keeps what chat puts in one assistant message as separate
// items: reasoning, the assistant text, and each function call. They are
// folded back together here: reasoning goes on the next assistant message
// as reasoning_content (the chat templates of reasoning models read it
// there), and consecutive function calls, with the assistant text right
// before them, become one assistant message with several tool_calls.
func convertItems(instructions string, items []responses.Item) ([]wireMessage, error) {
	msgs := make([]wireMessage, 0, len(items)+1)
	if instructions != "" {
		msgs = append(msgs, wireMessage{Role: openai.ChatMessageRoleSystem, Content: instructions})
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
			m, err := convertMessage(it)
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
				ID:       it.CallID,
				Type:     openai.ToolTypeFunction,
				Function: openai.FunctionCall{Name: it.Name, Arguments: it.Arguments},
			}
			if open && reasoning.Len() == 0 {
				last := &msgs[len(msgs)-1]
				last.ToolCalls = append(last.ToolCalls, call)
				continue
			}
			msgs = append(msgs, wireMessage{
				Role:             openai.ChatMessageRoleAssistant,
				ReasoningContent: reasoning.String(),
				ToolCalls:        []openai.ToolCall{call},
			})
			reasoning.Reset()
			open = true

		case responses.ItemFunctionCallOutput:
			msgs = append(msgs, wireMessage{
				Role:       openai.ChatMessageRoleTool,
				ToolCallID: it.CallID,
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

// convertMessage converts a message item. Developer messages become
// system messages: many engines' chat templates know no developer role.
func convertMessage(it *responses.Item) (wireMessage, error) {
	var role string
	switch it.Role {
	case "user":
		role = openai.ChatMessageRoleUser
	case "system", "developer":
		role = openai.ChatMessageRoleSystem
	case "assistant":
		role = openai.ChatMessageRoleAssistant
	default:
		return wireMessage{}, upstream.BadRequest(fmt.Sprintf("message role %q is not supported by the chat completions backend", it.Role))
	}

	hasImage := false
	for _, p := range it.Content {
		switch p.Type {
		case responses.PartInputImage:
			if p.MediaFields().ImageURL == "" {
				return wireMessage{}, upstream.BadRequest("input_image by file_id is not supported by the chat completions backend")
			}
			hasImage = true
		case responses.PartInputFile:
			return wireMessage{}, upstream.BadRequest("input_file is not supported by the chat completions backend")
		}
	}
	if !hasImage {
		return wireMessage{Role: role, Content: it.Text()}, nil
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
	return wireMessage{Role: role, MultiContent: parts}, nil
}

// reasoningText is a reasoning item's raw text, or its summary when the
// content was not kept.
func reasoningText(it *responses.Item) string {
	if len(it.Content) > 0 {
		return it.Text()
	}
	var b strings.Builder
	for i, p := range it.Summary {
		if i > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString(p.Text)
	}
	return b.String()
}
