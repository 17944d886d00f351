package chat

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	openai "github.com/sashabaranov/go-openai"

	"github.com/loomgate/loom/harmony"
	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/model/internal/upstream"
	"github.com/loomgate/loom/responses"
)

// Capabilities declares what the backend can do besides streaming: it
// passes images on (for vision models), and it counts input tokens, with
// the engine's tokenize endpoint when Options.TokenizeURL is set, else as
// an o200k estimate.
func (b *Backend) Capabilities() model.Capabilities {
	return model.Capabilities{CountInput: b.CountInput, Ready: b.client.Ready}
}

// CountInput counts the input tokens of req. With a tokenize endpoint the
// engine counts them with the model's own tokenizer and chat template
// (exact); without one the count is an estimate: o200k tokens of every
// message's text, tool call and tool definition, plus a few tokens per
// message for the chat template.
func (b *Backend) CountInput(ctx context.Context, req *model.Request) (model.InputCount, error) {
	messages, err := appendMessages(nil, req.Instructions, req.Items)
	if err != nil {
		return model.InputCount{}, err
	}
	var tools []byte
	if len(req.Tools) > 0 {
		if tools, err = appendTools(nil, req.Tools); err != nil {
			return model.InputCount{}, err
		}
	}
	if b.tokenizer != nil {
		return b.tokenize(ctx, req.Model, messages, tools)
	}
	n, err := estimateTokens(messages, tools)
	if err != nil {
		return model.InputCount{}, &responses.APIError{Kind: responses.EInvalid, Message: "cannot count the input tokens", Cause: err}
	}
	return model.InputCount{Tokens: n, Estimate: true}, nil
}

// tokenize asks the engine (vLLM's POST /tokenize, chat form) to count
// the messages and tools as the chat body carries them. Its failures are
// a turn's: retried before the answer starts, bounded by the whole-answer
// timeout, mapped to the same errors.
func (b *Backend) tokenize(ctx context.Context, modelName string, messages, tools []byte) (model.InputCount, error) {
	w := upstream.NewBody(len(messages)+len(tools)+128, nil, nil)
	w.String("model", modelName)
	w.Raw("messages", messages)
	if tools != nil {
		w.Raw("tools", tools)
	}
	w.Bool("add_generation_prompt", true)
	var count int
	read := func(body io.Reader, _ func(model.Delta) error) error {
		return upstream.ReadWhole(body, func(raw []byte) error {
			var out struct {
				Count *int `json:"count"`
			}
			if err := json.Unmarshal(raw, &out); err != nil || out.Count == nil {
				return upstream.Malformed(fmt.Errorf("the tokenize answer has no count: %.200s", raw))
			}
			count = *out.Count
			return nil
		})
	}
	ignore := func(model.Delta) error { return nil }
	if err := b.tokenizer.Send(ctx, nil, w, true, ignore, read); err != nil {
		return model.InputCount{}, err
	}
	return model.InputCount{Tokens: count}, nil
}

// perMessageTokens is what a chat template adds around each message (role
// markers, separators): OpenAI's own accounting uses 3, chat templates of
// open models about as much.
const perMessageTokens = 4

// estimateTokens counts o200k tokens of what the chat template renders:
// the texts of the messages, read back through go-openai's message type
// (counting is not on the path of a turn), and the tools' JSON.
func estimateTokens(messages, tools []byte) (int, error) {
	var msgs []openai.ChatCompletionMessage
	if err := json.Unmarshal(messages, &msgs); err != nil {
		return 0, err
	}
	n := 3 // the assistant turn the template opens at the end
	count := func(s string) error {
		if s == "" {
			return nil
		}
		ids, err := harmony.Encode(s)
		n += len(ids)
		return err
	}
	for _, m := range msgs {
		n += perMessageTokens
		texts := []string{m.Content, m.ReasoningContent, m.Name}
		for _, p := range m.MultiContent {
			texts = append(texts, p.Text)
		}
		for _, tc := range m.ToolCalls {
			texts = append(texts, tc.Function.Name, tc.Function.Arguments)
		}
		for _, s := range texts {
			if err := count(s); err != nil {
				return 0, err
			}
		}
	}
	if err := count(string(tools)); err != nil {
		return 0, err
	}
	return n, nil
}
