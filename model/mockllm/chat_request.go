package mockllm

import (
	"encoding/json"
	"strings"
)

// ChatRequest is a decoded chat-completions request body, as recorded. It
// holds the fields tests usually assert on; Request.Body has every byte.
type ChatRequest struct {
	RequestParams
	Messages            []Message       `json:"messages"`
	Tools               []Tool          `json:"tools,omitempty"`
	ToolChoice          json.RawMessage `json:"tool_choice,omitempty"`
	ParallelToolCalls   *bool           `json:"parallel_tool_calls,omitempty"`
	MaxCompletionTokens *int            `json:"max_completion_tokens,omitempty"`
	ReasoningEffort     string          `json:"reasoning_effort,omitempty"`
	ResponseFormat      json.RawMessage `json:"response_format,omitempty"`
}

// RequestParams are the request fields that the chat-completions and the
// completions endpoints take alike, under the same names; both requests
// embed them.
type RequestParams struct {
	Model         string         `json:"model"`
	Stream        bool           `json:"stream,omitempty"`
	StreamOptions *StreamOptions `json:"stream_options,omitempty"`
	MaxTokens     *int           `json:"max_tokens,omitempty"`
	Temperature   *float64       `json:"temperature,omitempty"`
	TopP          *float64       `json:"top_p,omitempty"`
	User          string         `json:"user,omitempty"`
}

// StreamOptions is the request's stream_options.
type StreamOptions struct {
	IncludeUsage bool `json:"include_usage,omitempty"`
}

// includeUsage reports whether a stream ends with a usage-only chunk
// (stream_options.include_usage).
func (p *RequestParams) includeUsage() bool {
	return p.StreamOptions != nil && p.StreamOptions.IncludeUsage
}

// Message is one chat message. Content is kept raw because it may be a
// string, an array of parts, or null.
type Message struct {
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content,omitempty"`
	Name             string          `json:"name,omitempty"`
	ToolCalls        []ToolCall      `json:"tool_calls,omitempty"`
	ToolCallID       string          `json:"tool_call_id,omitempty"`
	ReasoningContent string          `json:"reasoning_content,omitempty"`
	Reasoning        string          `json:"reasoning,omitempty"`
}

// ToolCall is a call in an assistant message.
type ToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function FunctionCall `json:"function"`
}

// FunctionCall is a tool call's function name and JSON arguments.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Tool is a tool offered to the model.
type Tool struct {
	Type     string       `json:"type"`
	Function ToolFunction `json:"function"`
}

// ToolFunction describes a function tool.
type ToolFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// Text returns the message's text: the content string, or its text parts
// joined by newlines (so a directive in each part stays on its own line).
// It is "" for null or unrecognised content.
func (m Message) Text() string {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(m.Content, &parts) != nil {
		return ""
	}
	var texts []string
	for _, p := range parts {
		if p.Type == "text" {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n")
}

// conversation extracts what the script needs from the messages.
func (req *ChatRequest) conversation() conversation {
	var c conversation
	lastUser := -1
	for i, m := range req.Messages {
		if m.Role == "user" {
			lastUser = i
		}
		c.callsSoFar += len(m.ToolCalls)
		c.promptTokens += countTokens(m.Text()) + countTokens(m.ReasoningContent) + countTokens(m.Reasoning)
		for _, tc := range m.ToolCalls {
			c.promptTokens += countTokens(tc.Function.Name) + countTokens(tc.Function.Arguments)
		}
	}
	if lastUser >= 0 {
		c.script = req.Messages[lastUser].Text()
	}
	// A model turn may reach us as several consecutive assistant messages
	// (text, then calls), so count runs of them, not messages.
	prevAssistant := false
	for _, m := range req.Messages[lastUser+1:] {
		isAssistant := m.Role == "assistant"
		if isAssistant && !prevAssistant {
			c.turn++
		}
		prevAssistant = isAssistant
	}
	for i := len(req.Messages) - 1; i > lastUser && req.Messages[i].Role == "tool"; i-- {
		c.toolOutputs = append([]string{req.Messages[i].Text()}, c.toolOutputs...)
	}
	switch {
	case req.MaxCompletionTokens != nil:
		c.maxTokens = *req.MaxCompletionTokens
	case req.MaxTokens != nil:
		c.maxTokens = *req.MaxTokens
	}
	return c
}
