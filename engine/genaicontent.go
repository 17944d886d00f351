package engine

import (
	"encoding/json"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"

	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/responses"
)

// The content of a model request, recorded on its chat span only with
// Options.CaptureContent (--otel-capture-content), in the shapes of the
// GenAI conventions' input and output messages, as JSON strings. It holds
// what the model read and wrote: never a header, a key or a token, and no
// encrypted reasoning.

// genaiMessage is a message of gen_ai.input.messages or
// gen_ai.output.messages.
type genaiMessage struct {
	Role         string      `json:"role"`
	Parts        []genaiPart `json:"parts"`
	FinishReason string      `json:"finish_reason,omitempty"`
}

// genaiPart is one part of a message: text, reasoning, a tool call or a
// tool call's response.
type genaiPart struct {
	Type      string          `json:"type"`
	Content   string          `json:"content,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Response  string          `json:"response,omitempty"`
}

// inputContent is gen_ai.system_instructions and gen_ai.input.messages of
// a model request.
func inputContent(mreq *model.Request) []attribute.KeyValue {
	var attrs []attribute.KeyValue
	if mreq.Instructions != "" {
		b, _ := json.Marshal([]genaiPart{{Type: "text", Content: mreq.Instructions}})
		attrs = append(attrs, semconv.GenAISystemInstructionsKey.String(string(b)))
	}
	b, _ := json.Marshal(genaiMessages(mreq.Items, ""))
	return append(attrs, semconv.GenAIInputMessagesKey.String(string(b)))
}

// outputContent is gen_ai.output.messages: what the model wrote.
func outputContent(items []responses.Item, finish string) attribute.KeyValue {
	msgs := genaiMessages(items, "assistant")
	if len(msgs) == 0 {
		msgs = []genaiMessage{{Role: "assistant", Parts: []genaiPart{}}}
	}
	msgs[len(msgs)-1].FinishReason = finish
	b, _ := json.Marshal(msgs)
	return semconv.GenAIOutputMessagesKey.String(string(b))
}

// genaiMessages turns items into messages: consecutive items of one role
// make one message. role, when set, is every message's (the model's
// output).
func genaiMessages(items []responses.Item, role string) []genaiMessage {
	var msgs []genaiMessage
	add := func(r string, p genaiPart) {
		if role != "" {
			r = role
		}
		if n := len(msgs); n > 0 && msgs[n-1].Role == r {
			msgs[n-1].Parts = append(msgs[n-1].Parts, p)
			return
		}
		msgs = append(msgs, genaiMessage{Role: r, Parts: []genaiPart{p}})
	}
	for i := range items {
		it := &items[i]
		switch it.Type {
		case responses.ItemMessage:
			r := it.Role
			if r == "developer" {
				r = "system"
			}
			add(r, genaiPart{Type: "text", Content: it.Text()})
		case responses.ItemReasoning:
			if t := it.Text(); t != "" {
				add("assistant", genaiPart{Type: "reasoning", Content: t})
			}
		case responses.ItemFunctionCallOutput:
			add("tool", genaiPart{Type: "tool_call_response", ID: it.CallFields().CallID, Response: it.OutputString()})
		default:
			if c := it.Call; c != nil && c.Name != "" {
				p := genaiPart{Type: "tool_call", ID: c.CallID, Name: c.Name}
				if json.Valid([]byte(c.Arguments)) {
					p.Arguments = json.RawMessage(c.Arguments)
				}
				add("assistant", p)
			}
		}
	}
	return msgs
}
