package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// The typed forms of the input requests a server makes (MCP
// elicitation/create and sampling/createMessage), decoded from an
// InputRequest's params in one place, so that their answerer works with
// values, not with the protocol's JSON.

// Elicitation is an elicitation/create request.
type Elicitation struct {
	// Mode is "form" (the default) or "url": a URL elicitation needs a
	// person at a browser.
	Mode    string
	Message string
	// RequestedSchema is the JSON Schema of the answer's content; an
	// object schema admitting anything when the server gave none.
	RequestedSchema json.RawMessage
}

// Sampling is a sampling/createMessage request: a completion the server
// asks the model for.
type Sampling struct {
	Messages     []SamplingMessage
	SystemPrompt string
	MaxTokens    int
	Temperature  *float64
}

// SamplingMessage is one message of a Sampling, its content as text
// (blocks other than text are named in brackets, not sent).
type SamplingMessage struct {
	Role string // "user" or "assistant"
	Text string
}

// Elicitation decodes an elicitation/create request.
func (r InputRequest) Elicitation() (*Elicitation, error) {
	var p struct {
		Mode            string          `json:"mode"`
		Message         string          `json:"message"`
		RequestedSchema json.RawMessage `json:"requestedSchema"`
	}
	if err := json.Unmarshal(r.Params, &p); err != nil {
		return nil, fmt.Errorf("elicitation params: %w", err)
	}
	e := &Elicitation{Mode: p.Mode, Message: p.Message, RequestedSchema: p.RequestedSchema}
	if len(bytes.TrimSpace(e.RequestedSchema)) == 0 || string(e.RequestedSchema) == "null" {
		e.RequestedSchema = json.RawMessage(`{"type":"object"}`)
	}
	return e, nil
}

// RequestedSchema is the schema an elicitation's answer must match, or an
// object schema admitting anything.
func (r InputRequest) RequestedSchema() json.RawMessage {
	e, err := r.Elicitation()
	if err != nil {
		return json.RawMessage(`{"type":"object"}`)
	}
	return e.RequestedSchema
}

// Sampling decodes a sampling/createMessage request.
func (r InputRequest) Sampling() (*Sampling, error) {
	var p struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		SystemPrompt string   `json:"systemPrompt"`
		MaxTokens    int      `json:"maxTokens"`
		Temperature  *float64 `json:"temperature"`
	}
	if err := json.Unmarshal(r.Params, &p); err != nil {
		return nil, fmt.Errorf("sampling params: %w", err)
	}
	s := &Sampling{SystemPrompt: p.SystemPrompt, MaxTokens: max(p.MaxTokens, 0), Temperature: p.Temperature}
	for _, m := range p.Messages {
		s.Messages = append(s.Messages, SamplingMessage{Role: m.Role, Text: contentText(m.Content)})
	}
	if len(s.Messages) == 0 {
		return nil, errors.New("sampling request without messages")
	}
	return s, nil
}

// SamplingResult is the CreateMessageResult of a completion.
func SamplingResult(model, text string, cut bool) json.RawMessage {
	stop := "endTurn"
	if cut {
		stop = "maxTokens"
	}
	b, _ := json.Marshal(map[string]any{
		"role":       "assistant",
		"content":    map[string]string{"type": "text", "text": text},
		"model":      model,
		"stopReason": stop,
	})
	return b
}

// Accepted is the ElicitResult of an elicitation answered with content.
func Accepted(content json.RawMessage) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"action": "accept", "content": content})
	return b
}

// contentText is the text of a sampling message's content: one block or
// an array of blocks; blocks other than text are named, not sent.
func contentText(raw json.RawMessage) string {
	type block struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	var blocks []block
	var one block
	if json.Unmarshal(raw, &blocks) != nil {
		if json.Unmarshal(raw, &one) != nil {
			return ""
		}
		blocks = []block{one}
	}
	var b strings.Builder
	for _, bl := range blocks {
		if bl.Type == "text" {
			b.WriteString(bl.Text)
		} else if bl.Type != "" {
			fmt.Fprintf(&b, "[%s]", bl.Type)
		}
	}
	return b.String()
}
