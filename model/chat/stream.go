package chat

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"

	openai "github.com/sashabaranov/go-openai"

	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/model/internal/upstream"
	"github.com/loomgate/loom/responses"
)

// chunk is one chat.completion.chunk. It reuses go-openai's types except
// for the delta, which needs one field go-openai lacks.
type chunk struct {
	Choices []chunkChoice `json:"choices"`
	Usage   *openai.Usage `json:"usage"`

	// An engine that fails mid-stream sends an error object in a data
	// line: {"error":{...}} (vLLM, SGLang) or, in older vLLM,
	// {"object":"error","message":...}.
	Error   json.RawMessage `json:"error"`
	Object  string          `json:"object"`
	Message string          `json:"message"`
}

type chunkChoice struct {
	Index        int                 `json:"index"`
	Delta        chunkDelta          `json:"delta"`
	FinishReason openai.FinishReason `json:"finish_reason"`
}

// chunkDelta is go-openai's delta plus the field vLLM >= 0.17 uses for
// reasoning text. go-openai knows only reasoning_content (older vLLM,
// SGLang, llama.cpp); the embedded struct decodes that one and this
// struct adds "reasoning", so one decode reads both spellings.
type chunkDelta struct {
	openai.ChatCompletionStreamChoiceDelta
	Reasoning string `json:"reasoning"`
}

// decoder turns chunk payloads into deltas. It holds the per-turn state
// that spans chunks: which tool calls were seen, the finish reason and
// the latest usage.
type decoder struct {
	emit  func(model.Delta) error
	chunk chunk

	// calls maps the upstream tool-call index (position in the slice is
	// our dense ToolIndex) to what we know of the call.
	calls  []toolCall
	finish string
	usage  *openai.Usage
}

type toolCall struct {
	upstream int // the upstream index; -1 if the engine sent none
	id       string
}

// readStream reads an SSE body to [DONE], emitting deltas. It returns nil
// after the final DeltaFinish, emit's error when emit failed, a
// *model.Error for an upstream error or malformed stream, and the raw
// read error otherwise.
func readStream(r io.Reader, emit func(model.Delta) error) error {
	d := &decoder{emit: emit}
	return upstream.ReadSSE(r, d.data, d.done)
}

// data decodes one chunk and emits its deltas.
func (d *decoder) data(payload []byte) error {
	// Reuse the choices slice but start from zero values: json.Unmarshal
	// does not clear fields a chunk leaves out.
	choices := d.chunk.Choices[:cap(d.chunk.Choices)]
	clear(choices)
	d.chunk = chunk{Choices: choices[:0]}
	if err := json.Unmarshal(payload, &d.chunk); err != nil {
		return upstream.Malformed(fmt.Errorf("decoding chunk: %w", err))
	}
	c := &d.chunk
	if upstream.IsErrorObject(c.Error, c.Object) {
		return upstream.StreamError(payload)
	}
	for i := range c.Choices {
		if err := d.choice(&c.Choices[i]); err != nil {
			return err
		}
	}
	if c.Usage != nil {
		// With include_usage the last chunk carries the totals; engines
		// with continuous usage stats send them on every chunk. Keep the
		// latest and report it once, at the end.
		d.usage = c.Usage
	}
	return nil
}

func (d *decoder) choice(ch *chunkChoice) error {
	delta := &ch.Delta
	// Some vLLM versions send both spellings with the same text; take one.
	reasoning := delta.Reasoning
	if reasoning == "" {
		reasoning = delta.ReasoningContent
	}
	if reasoning != "" {
		if err := d.send(model.Delta{Kind: model.DeltaReasoning, Text: reasoning}); err != nil {
			return err
		}
	}
	if delta.Content != "" {
		if err := d.send(model.Delta{Kind: model.DeltaText, Text: delta.Content}); err != nil {
			return err
		}
	}
	if delta.Refusal != "" {
		// The Responses side has no refusal delta from this backend; the
		// refusal is what the user gets to read.
		if err := d.send(model.Delta{Kind: model.DeltaText, Text: delta.Refusal}); err != nil {
			return err
		}
	}
	for i := range delta.ToolCalls {
		if err := d.toolCall(&delta.ToolCalls[i]); err != nil {
			return err
		}
	}
	if ch.FinishReason != "" && ch.FinishReason != openai.FinishReasonNull {
		// vLLM ends a request it had to drop with "abort" or "error".
		reason := string(ch.FinishReason)
		if err := upstream.FinishReasonError(reason); err != nil {
			return err
		}
		d.finish = reason
	}
	return nil
}

// toolCall emits one tool-call piece. Calls are keyed by the upstream
// index (parallel calls interleave); the first piece of a call carries its
// id and name.
func (d *decoder) toolCall(tc *openai.ToolCall) error {
	pos := d.findCall(tc)
	if pos < 0 {
		id := tc.ID
		if id == "" {
			// Some engines omit ids; the Responses call_id must exist.
			id = "call_" + rand.Text()
		}
		upstreamIndex := -1
		if tc.Index != nil {
			upstreamIndex = *tc.Index
		}
		d.calls = append(d.calls, toolCall{upstream: upstreamIndex, id: id})
		return d.send(model.Delta{
			Kind:          model.DeltaToolCall,
			ToolIndex:     len(d.calls) - 1,
			ToolCallID:    id,
			ToolName:      tc.Function.Name,
			ToolArguments: tc.Function.Arguments,
		})
	}
	if tc.Function.Arguments == "" {
		return nil
	}
	return d.send(model.Delta{Kind: model.DeltaToolCall, ToolIndex: pos, ToolArguments: tc.Function.Arguments})
}

// findCall returns our index of the call tc continues, or -1 for a new
// call. Without an upstream index (some engines send each call whole), a
// piece with a new id starts a call and one without continues the last.
func (d *decoder) findCall(tc *openai.ToolCall) int {
	if tc.Index != nil {
		for i := range d.calls {
			if d.calls[i].upstream == *tc.Index {
				return i
			}
		}
		return -1
	}
	last := len(d.calls) - 1
	if last < 0 || (tc.ID != "" && tc.ID != d.calls[last].id) {
		return -1
	}
	return last
}

// done ends the turn at [DONE]: usage first, then the finish reason.
func (d *decoder) done() error {
	if d.usage != nil {
		if err := d.send(model.Delta{Kind: model.DeltaUsage, Usage: convertUsage(d.usage)}); err != nil {
			return err
		}
	}
	return d.send(model.Delta{Kind: model.DeltaFinish, FinishReason: d.finishReason()})
}

// finishReason maps the upstream reason to the model's. Engines differ on
// a turn that ends in tool calls (some say stop, some say nothing), so a
// turn with calls that did not run out of tokens finishes as tool_calls.
func (d *decoder) finishReason() string {
	switch d.finish {
	case "length":
		return model.FinishLength
	case "content_filter":
		return model.FinishFilter
	case "tool_calls", "function_call":
		return model.FinishToolCalls
	}
	if len(d.calls) > 0 {
		return model.FinishToolCalls
	}
	return model.FinishStop
}

func (d *decoder) send(delta model.Delta) error {
	return d.emit(delta)
}

func convertUsage(u *openai.Usage) responses.Usage {
	out := responses.Usage{
		InputTokens:  u.PromptTokens,
		OutputTokens: u.CompletionTokens,
		TotalTokens:  u.TotalTokens,
	}
	if out.TotalTokens == 0 {
		out.TotalTokens = u.PromptTokens + u.CompletionTokens
	}
	if u.PromptTokensDetails != nil {
		out.InputTokensDetails.CachedTokens = u.PromptTokensDetails.CachedTokens
	}
	if u.CompletionTokensDetails != nil {
		out.OutputTokensDetails.ReasoningTokens = u.CompletionTokensDetails.ReasoningTokens
	}
	return out
}
