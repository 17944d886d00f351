package chat

import (
	"bytes"
	"fmt"

	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/model/internal/upstream"
	"github.com/loomgate/loom/responses"
)

// The chat-completions body is written by hand, in one pass over the
// model turn (upstream.Body): go-openai's types describe it (messages,
// tools, tool_choice, response_format: the keys and the omissions below
// are theirs, and a test holds the two to the same JSON), but encoding
// through them cost a reflection walk of every message and tool and a
// compaction of every schema, most of what loom spent on a long history
// or many tools. The keys are in go-openai's order, so that an engine's
// chat template that prints the tools renders the same prompt.
//
// The top level was never go-openai's: its ChatCompletionRequest holds
// sampling values as float32 with omitempty, which drops temperature 0
// (greedy decoding) and rounds the others, and cannot carry
// engine-specific fields.

// emptyParameters is sent for a function tool without a schema: engines
// differ on a missing or null "parameters", all accept an empty object.
var emptyParameters = []byte(`{"type":"object","properties":{}}`)

// protectedKeys are body keys Extra may not replace: the stream parser
// and the tool rules below depend on them.
var protectedKeys = map[string]bool{
	"model": true, "messages": true, "stream": true, "stream_options": true,
	"tools": true, "tool_choice": true,
	// The tenant's, with a cache salt configured (upstream.Client.Send).
	"cache_salt": true,
}

// writeRequest writes the chat-completions body for a model turn into w
// (made with upstream.NewBody(bodySize(req), req.Extra, protectedKeys)),
// not yet finished: Client.Send finishes and sends it, and hands a large
// one's buffer back to its pool; w is made by its caller, where it stays
// on the stack. req.Extra is merged in: extra adds keys (top_k,
// chat_template_kwargs, ...) and may override the sampling ones, but
// never a protected key. Errors, from Finish, are *responses.APIError values.
func writeRequest(w *upstream.Body, req *model.Request) {
	w.String("model", req.Model)
	w.Append("messages", func(b []byte) ([]byte, error) { return appendMessages(b, req.Instructions, req.Items) })
	w.Bool("stream", !req.Whole)
	if !req.Whole {
		// Without include_usage the stream carries no token counts; a
		// whole answer always has them.
		w.Raw("stream_options", []byte(`{"include_usage":true}`))
	}
	// No tools means no tools key and no tool_choice: an empty list with
	// a tool_choice once made vLLM default to auto and models invented
	// calls to tools that did not exist.
	if len(req.Tools) > 0 {
		w.Append("tools", func(b []byte) ([]byte, error) { return appendTools(b, req.Tools) })
		switch {
		case req.ToolChoiceFunction != "":
			w.Append("tool_choice", func(b []byte) ([]byte, error) {
				b = append(b, `{"type":"function","function":{"name":`...)
				return append(responses.AppendJSONString(b, req.ToolChoiceFunction), '}', '}'), nil
			})
		case req.ToolChoice != "":
			w.String("tool_choice", req.ToolChoice)
		}
		// true is every engine's default; only a refusal is worth sending.
		if !req.ParallelToolCalls {
			w.Bool("parallel_tool_calls", false)
		}
	}
	if req.MaxOutputTokens != 0 {
		w.Int("max_tokens", req.MaxOutputTokens)
	}
	w.Sampling(&req.Sampling)
	if req.ReasoningEffort != "" {
		w.String("reasoning_effort", req.ReasoningEffort)
	}
	if tf := req.TextFormat; tf != nil && (tf.Type == responses.FormatJSONSchema || tf.Type == responses.FormatJSONObject) {
		w.Append("response_format", func(b []byte) ([]byte, error) { return appendResponseFormat(b, tf), nil })
	}
	if req.User != "" {
		w.String("user", req.User)
	}
}

// bodySize guesses the body's length, so that it is written into one
// buffer most of the time without holding much more than it needs (for a
// long input the body is, after the decoded items, the largest thing a
// request holds): the text of every item and the schema of every tool,
// plus what the keys around them take, and an eighth for escapes.
func bodySize(req *model.Request) int {
	n := 256 + len(req.Instructions)
	for i := range req.Items {
		it := &req.Items[i]
		// {"role":"user","content":""}, is 25 bytes and the role.
		n += 28 + len(it.Role)
		if c := it.Call; c != nil {
			n += len(c.CallID) + len(c.Name) + len(c.Arguments) + len(c.Output)
		}
		switch it.Type {
		case responses.ItemFunctionCall:
			// {"role":"assistant","tool_calls":[{"id":,"type":"function","function":{"name":,"arguments":}}]}
			n += 96
		case responses.ItemFunctionCallOutput:
			// ,"tool_call_id":
			n += 24
		}
		for j := range it.Content {
			p := &it.Content[j]
			n += len(p.Text) + len(p.Refusal)
			if p.Media != nil {
				// {"type":"image_url","image_url":{"url":,"detail":}}
				n += 64 + len(p.Media.ImageURL) + len(p.Media.Detail)
			}
		}
	}
	for i := range req.Tools {
		t := &req.Tools[i]
		n += 96 + len(t.Name) + len(t.Parameters)
		if t.Description != nil {
			n += len(*t.Description)
		}
	}
	if tf := req.TextFormat; tf != nil {
		// {"type":"json_schema","json_schema":{"name":,"description":,"schema":,"strict":true}}
		n += 96 + len(tf.Name) + len(tf.Schema)
		if tf.Description != nil {
			n += len(*tf.Description)
		}
	}
	return n + n/8
}

// appendTools writes the function tools as a JSON array, each as
// go-openai's Tool writes it ({"function":{...},"type":"function"}),
// with its schema as the bytes the Responses decoding checked.
func appendTools(b []byte, tools []responses.Tool) ([]byte, error) {
	b = append(b, '[')
	for i := range tools {
		t := &tools[i]
		if t.Type != responses.ToolFunction {
			return b, upstream.BadRequest(fmt.Sprintf("tool type %q is not supported by the chat completions backend", t.Type))
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"function":{"name":`...)
		b = responses.AppendJSONString(b, t.Name)
		if t.Description != nil && *t.Description != "" {
			b = append(b, `,"description":`...)
			b = responses.AppendJSONString(b, *t.Description)
		}
		if t.Strict != nil && *t.Strict {
			b = append(b, `,"strict":true`...)
		}
		b = append(b, `,"parameters":`...)
		params := bytes.TrimSpace(t.Parameters)
		if len(params) == 0 || bytes.Equal(params, []byte("null")) {
			params = emptyParameters
		}
		b = append(b, params...)
		b = append(b, `},"type":"function"}`...)
	}
	return append(b, ']'), nil
}

// appendResponseFormat writes a json_schema or json_object text format
// as go-openai's ChatCompletionResponseFormat writes it.
func appendResponseFormat(b []byte, tf *responses.TextFormat) []byte {
	if tf.Type == responses.FormatJSONObject {
		return append(b, `{"type":"json_object"}`...)
	}
	name := tf.Name
	if name == "" {
		name = "response" // OpenAI requires a name; engines ignore it
	}
	b = append(b, `{"type":"json_schema","json_schema":{"name":`...)
	b = responses.AppendJSONString(b, name)
	if tf.Description != nil && *tf.Description != "" {
		b = append(b, `,"description":`...)
		b = responses.AppendJSONString(b, *tf.Description)
	}
	b = append(b, `,"schema":`...)
	if len(tf.Schema) == 0 {
		b = append(b, "null"...)
	} else {
		b = append(b, tf.Schema...)
	}
	b = append(b, `,"strict":`...)
	if tf.Strict != nil && *tf.Strict {
		b = append(b, "true"...)
	} else {
		b = append(b, "false"...)
	}
	return append(b, '}', '}')
}
