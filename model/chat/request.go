package chat

import (
	"bytes"
	"encoding/json"
	"fmt"

	openai "github.com/sashabaranov/go-openai"

	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/model/internal/upstream"
	"github.com/loomgate/loom/responses"
)

// wireRequest is the chat-completions body loom sends. The nested objects
// are go-openai's types; the top level is ours because go-openai's
// ChatCompletionRequest holds sampling parameters as float32 with
// omitempty, which silently drops temperature 0 (greedy decoding) and
// rounds the others, and it cannot carry engine-specific extra fields.
type wireRequest struct {
	Model             string                `json:"model"`
	Messages          []wireMessage         `json:"messages"`
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

// emptyParameters is sent for a function tool without a schema: engines
// differ on a missing or null "parameters", all accept an empty object.
var emptyParameters = json.RawMessage(`{"type":"object","properties":{}}`)

// buildRequest translates a model turn to the chat-completions body.
func buildRequest(req *model.Request) (*wireRequest, error) {
	msgs, err := convertItems(req.Instructions, req.Items)
	if err != nil {
		return nil, err
	}
	w := &wireRequest{
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
				params = emptyParameters
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

// protectedKeys are body keys Extra may not replace: the stream parser
// and the tool rules above depend on them.
var protectedKeys = map[string]bool{
	"model": true, "messages": true, "stream": true, "stream_options": true,
	"tools": true, "tool_choice": true,
}

// marshalRequest writes w's JSON with extra merged in: extra adds keys
// (top_k, chat_template_kwargs, ...) and may override the sampling ones,
// but never a protected key.
func marshalRequest(buf *bytes.Buffer, w *wireRequest, extra map[string]json.RawMessage) error {
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
		if protectedKeys[k] {
			continue
		}
		body[k] = v
	}
	return enc.Encode(body)
}
