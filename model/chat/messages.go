package chat

import (
	"fmt"
	"strings"

	"github.com/loomgate/loom/model/internal/upstream"
	"github.com/loomgate/loom/responses"
)

// Chat roles, as go-openai names them.
const (
	roleSystem    = "system"
	roleUser      = "user"
	roleAssistant = "assistant"
	roleTool      = "tool"
)

// appendMessages writes the Responses conversation as a JSON array of
// chat messages, straight from the items (no list of messages is built
// first: a long history would have one more copy of itself alive).
//
// Responses keeps what chat puts in one assistant message as separate
// items: reasoning, the assistant text, and each function call. They are
// folded back together here: reasoning goes on the next assistant message
// as reasoning_content (the chat templates of reasoning models read it
// there), and consecutive function calls, with the assistant text right
// before them, become one assistant message with several tool_calls.
// Reasoning followed by anything else (an interrupted turn) has nowhere
// to go in chat format and is dropped.
//
// Each message is written as go-openai's ChatCompletionMessage writes
// it, except that a user, system or tool message always has a
// "content", empty or not: llama.cpp rejects one without (an empty tool
// output is common), and go-openai leaves an empty one out.
func appendMessages(b []byte, instructions string, items []responses.Item) ([]byte, error) {
	b = append(b, '[')
	if instructions != "" {
		b = appendMessage(b, &message{role: roleSystem, text: instructions})
	}
	// items[reasoning:i] are the reasoning items waiting for the
	// assistant message they belong to.
	reasoning := 0
	for i := 0; i < len(items); i++ {
		it := &items[i]
		switch it.Type {
		case responses.ItemReasoning:
			continue

		case responses.ItemMessage:
			var m message
			if err := m.of(it); err != nil {
				return b, err
			}
			if m.role == roleAssistant {
				m.reasoning = items[reasoning:i]
				m.calls = items[i+1 : i+1+callsAt(items[i+1:])]
				i += len(m.calls)
			}
			b = appendMessage(b, &m)

		case responses.ItemFunctionCall:
			m := message{role: roleAssistant, reasoning: items[reasoning:i], calls: items[i : i+callsAt(items[i:])]}
			i += len(m.calls) - 1
			b = appendMessage(b, &m)

		case responses.ItemFunctionCallOutput:
			b = appendMessage(b, &message{role: roleTool, text: it.OutputString(), toolCallID: it.CallFields().CallID})

		default:
			// item_reference is resolved by the Engine before a turn;
			// anything else has no chat form.
			return b, upstream.BadRequest(fmt.Sprintf("input item type %q is not supported by the chat completions backend", it.Type))
		}
		reasoning = i + 1
	}
	return append(b, ']'), nil
}

// callsAt counts the function calls at the start of items.
func callsAt(items []responses.Item) int {
	n := 0
	for n < len(items) && items[n].Type == responses.ItemFunctionCall {
		n++
	}
	return n
}

// message is one chat message to write, pointing into the items it is
// made of.
type message struct {
	role string
	text string
	// parts is set instead of text for a message with images, which
	// needs the array form of content.
	parts      []responses.ContentPart
	reasoning  []responses.Item // reasoning items, for reasoning_content
	calls      []responses.Item // function_call items, for tool_calls
	toolCallID string
}

// of sets m to the chat message of a message item, which it checks.
// Developer messages become system messages: many engines' chat
// templates know no developer role.
func (m *message) of(it *responses.Item) error {
	switch it.Role {
	case "user":
		m.role = roleUser
	case "system", "developer":
		m.role = roleSystem
	case "assistant":
		m.role = roleAssistant
	default:
		return upstream.BadRequest(fmt.Sprintf("message role %q is not supported by the chat completions backend", it.Role))
	}
	hasImage := false
	for i := range it.Content {
		switch p := &it.Content[i]; p.Type {
		case responses.PartInputImage:
			if p.Media == nil || p.Media.ImageURL == "" {
				return upstream.BadRequest("input_image by file_id is not supported by the chat completions backend")
			}
			hasImage = true
		case responses.PartInputFile:
			return upstream.BadRequest("input_file is not supported by the chat completions backend")
		}
	}
	if hasImage {
		m.parts = it.Content
	} else {
		m.text = it.Text()
	}
	return nil
}

// appendMessage writes m, after a comma unless it is the first.
func appendMessage(b []byte, m *message) []byte {
	if b[len(b)-1] != '[' {
		b = append(b, ',')
	}
	// The roles are this package's constants: nothing to escape.
	b = append(b, `{"role":"`...)
	b = append(b, m.role...)
	b = append(b, '"')
	switch {
	case m.parts != nil:
		b = appendParts(append(b, `,"content":`...), m.parts)
	case m.text != "" || m.role != roleAssistant:
		b = append(b, `,"content":`...)
		b = responses.AppendJSONString(b, m.text)
	}
	if len(m.reasoning) > 0 {
		if r := reasoningContent(m.reasoning); r != "" {
			b = append(b, `,"reasoning_content":`...)
			b = responses.AppendJSONString(b, r)
		}
	}
	if len(m.calls) > 0 {
		b = append(b, `,"tool_calls":[`...)
		for i := range m.calls {
			b = appendToolCall(b, &m.calls[i], i)
		}
		b = append(b, ']')
	}
	if m.toolCallID != "" {
		b = append(b, `,"tool_call_id":`...)
		b = responses.AppendJSONString(b, m.toolCallID)
	}
	return append(b, '}')
}

// appendToolCall writes a function_call item as a chat tool call, with
// go-openai's omissions (an empty id, name or arguments is left out).
func appendToolCall(b []byte, it *responses.Item, i int) []byte {
	if i > 0 {
		b = append(b, ',')
	}
	b = append(b, '{')
	c := it.CallFields()
	if c.CallID != "" {
		b = append(b, `"id":`...)
		b = responses.AppendJSONString(b, c.CallID)
		b = append(b, ',')
	}
	b = append(b, `"type":"function","function":{`...)
	if c.Name != "" {
		b = append(b, `"name":`...)
		b = responses.AppendJSONString(b, c.Name)
	}
	if c.Arguments != "" {
		if c.Name != "" {
			b = append(b, ',')
		}
		b = append(b, `"arguments":`...)
		b = responses.AppendJSONString(b, c.Arguments)
	}
	return append(b, '}', '}')
}

// appendParts writes a message's content in the array form: text parts
// and images in their order.
func appendParts(b []byte, parts []responses.ContentPart) []byte {
	b = append(b, '[')
	for i := range parts {
		p := &parts[i]
		if i > 0 {
			b = append(b, ',')
		}
		if p.Type == responses.PartInputImage {
			b = append(b, `{"type":"image_url","image_url":{"url":`...)
			media := p.MediaFields()
			b = responses.AppendJSONString(b, media.ImageURL)
			if media.Detail != "" {
				b = append(b, `,"detail":`...)
				b = responses.AppendJSONString(b, media.Detail)
			}
			b = append(b, '}', '}')
			continue
		}
		text := p.Text
		if p.Type == responses.PartRefusal {
			text = p.Refusal
		}
		b = append(b, `{"type":"text"`...)
		if text != "" {
			b = append(b, `,"text":`...)
			b = responses.AppendJSONString(b, text)
		}
		b = append(b, '}')
	}
	return append(b, ']')
}

// reasoningContent joins the texts of reasoning items, one line each.
func reasoningContent(items []responses.Item) string {
	if len(items) == 1 {
		return reasoningText(&items[0])
	}
	var b strings.Builder
	for i := range items {
		text := reasoningText(&items[i])
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		b.WriteString(text)
	}
	return b.String()
}

// reasoningText is a reasoning item's raw text, or its summary when the
// content was not kept.
func reasoningText(it *responses.Item) string {
	if len(it.Content) > 0 {
		return it.Text()
	}
	summary := it.ReasoningFields().Summary
	if len(summary) == 1 {
		return summary[0].Text
	}
	var b strings.Builder
	for i, p := range summary {
		if i > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString(p.Text)
	}
	return b.String()
}
