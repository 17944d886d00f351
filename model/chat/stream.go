package chat

import (
	"crypto/rand"
	"io"

	"github.com/loomgate/loom/internal/jsonscan"
	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/model/internal/upstream"
	"github.com/loomgate/loom/responses"
)

// chunk is one chat.completion.chunk, or a whole chat.completion (whose
// choices carry a message where a chunk's carry a delta): only the fields
// loom reads, decoded in one pass (an engine's error object instead of a
// chunk is an error there).
type chunk = upstream.Chunk[chunkChoice]

type chunkChoice struct {
	Index        int
	Delta        chunkDelta // the delta of a chunk, the message of a whole answer
	FinishReason string
}

// chunkDelta is a choice's delta. Reasoning is what vLLM >= 0.17 sends;
// ReasoningContent the older spelling (older vLLM, SGLang, llama.cpp).
type chunkDelta struct {
	Content          string
	Reasoning        string
	ReasoningContent string
	Refusal          string
	ToolCalls        []chunkToolCall
}

type chunkToolCall struct {
	Index     int
	HasIndex  bool // false when the engine sent no index
	ID        string
	Name      string
	Arguments string
}

// decodeChunk decodes payload into c, reusing c's slices. Its choices'
// delta is read from "delta" or, in a whole answer, "message".
func decodeChunk(s *jsonscan.Scanner, payload []byte, c *chunk) error {
	return c.Decode(s, payload, func(ch *chunkChoice) {
		*ch = chunkChoice{Delta: chunkDelta{ToolCalls: ch.Delta.ToolCalls[:0]}}
	}, decodeChoice)
}

func decodeChoice(s *jsonscan.Scanner, ch *chunkChoice) error {
	return s.Object(func(k []byte) error {
		var err error
		switch string(k) {
		case "index":
			ch.Index, err = s.Int()
		case "delta", "message":
			err = decodeDelta(s, &ch.Delta)
		case "finish_reason":
			ch.FinishReason, err = s.String()
		default:
			err = s.Skip()
		}
		return err
	})
}

func decodeDelta(s *jsonscan.Scanner, d *chunkDelta) error {
	return s.Object(func(k []byte) error {
		var text *string // the delta's text fields
		switch string(k) {
		case "content":
			text = &d.Content
		case "reasoning":
			text = &d.Reasoning
		case "reasoning_content":
			text = &d.ReasoningContent
		case "refusal":
			text = &d.Refusal
		case "tool_calls":
			return s.Array(func() error {
				d.ToolCalls = append(d.ToolCalls, chunkToolCall{})
				return decodeToolCall(s, &d.ToolCalls[len(d.ToolCalls)-1])
			})
		default:
			return s.Skip()
		}
		var err error
		*text, err = s.String()
		return err
	})
}

func decodeToolCall(s *jsonscan.Scanner, tc *chunkToolCall) error {
	return s.Object(func(k []byte) error {
		var err error
		switch string(k) {
		case "index":
			if s.Null() {
				return nil
			}
			tc.Index, err = s.Int()
			tc.HasIndex = true
		case "id":
			tc.ID, err = s.String()
		case "function":
			err = s.Object(func(k []byte) error {
				var err error
				switch string(k) {
				case "name":
					tc.Name, err = s.String()
				case "arguments":
					tc.Arguments, err = s.String()
				default:
					err = s.Skip()
				}
				return err
			})
		default:
			err = s.Skip()
		}
		return err
	})
}

// decoder turns chunk payloads into deltas. It holds the per-turn state
// that spans chunks: which tool calls were seen, the finish reason and
// the latest usage.
type decoder struct {
	emit    func(model.Delta) error
	scanner jsonscan.Scanner
	chunk   chunk

	// calls maps the upstream tool-call index (position in the slice is
	// our dense ToolIndex) to what we know of the call.
	calls    []toolCall
	whole    bool // a non-streamed answer: one message, each call whole
	finish   string
	usage    upstream.Usage
	hasUsage bool
}

type toolCall struct {
	upstream int // the upstream index; -1 if the engine sent none
	id       string
}

// readStream reads an SSE body to [DONE], emitting deltas. It returns nil
// after the final DeltaFinish, emit's error when emit failed, a
// *responses.APIError for an upstream error or malformed stream, and the raw
// read error otherwise.
func readStream(r io.Reader, emit func(model.Delta) error) error {
	d := &decoder{emit: emit}
	return upstream.ReadSSE(r, d.data, d.done)
}

// readWhole reads a non-streamed chat.completion and emits the same
// deltas its stream would have: the message read as one delta.
func readWhole(r io.Reader, emit func(model.Delta) error) error {
	d := &decoder{emit: emit, whole: true}
	return upstream.ReadWhole(r, func(body []byte) error {
		if err := d.data(body); err != nil {
			return err
		}
		return d.done()
	})
}

// data decodes one chunk and emits its deltas.
func (d *decoder) data(payload []byte) error {
	if err := decodeChunk(&d.scanner, payload, &d.chunk); err != nil {
		return err
	}
	c := &d.chunk
	for i := range c.Choices {
		if err := d.choice(&c.Choices[i]); err != nil {
			return err
		}
	}
	if c.Usage != nil {
		// With include_usage the last chunk carries the totals; engines
		// with continuous usage stats send them on every chunk. Keep the
		// latest and report it once, at the end.
		d.usage, d.hasUsage = *c.Usage, true
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
	if ch.FinishReason != "" && ch.FinishReason != "null" {
		// vLLM ends a request it had to drop with "abort" or "error".
		reason := ch.FinishReason
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
func (d *decoder) toolCall(tc *chunkToolCall) error {
	pos := d.findCall(tc)
	if pos < 0 {
		id := tc.ID
		if id == "" {
			// Some engines omit ids; the Responses call_id must exist.
			id = "call_" + rand.Text()
		}
		upstreamIndex := -1
		if tc.HasIndex {
			upstreamIndex = tc.Index
		}
		d.calls = append(d.calls, toolCall{upstream: upstreamIndex, id: id})
		return d.send(model.Delta{
			Kind:          model.DeltaToolCall,
			ToolIndex:     len(d.calls) - 1,
			ToolCallID:    id,
			ToolName:      tc.Name,
			ToolArguments: tc.Arguments,
		})
	}
	if tc.Arguments == "" {
		return nil
	}
	return d.send(model.Delta{Kind: model.DeltaToolCall, ToolIndex: pos, ToolArguments: tc.Arguments})
}

// findCall returns our index of the call tc continues, or -1 for a new
// call. Without an upstream index (some engines send each call whole), a
// piece with a new id starts a call and one without continues the last.
func (d *decoder) findCall(tc *chunkToolCall) int {
	if d.whole {
		// A whole message holds each call once, whole.
		return -1
	}
	if tc.HasIndex {
		for i := range d.calls {
			if d.calls[i].upstream == tc.Index {
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
	if d.hasUsage {
		if err := d.send(model.Delta{Kind: model.DeltaUsage, Usage: convertUsage(&d.usage)}); err != nil {
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

func convertUsage(u *upstream.Usage) responses.Usage {
	out := responses.Usage{
		InputTokens:  u.PromptTokens,
		OutputTokens: u.CompletionTokens,
		TotalTokens:  u.TotalTokens,
	}
	if out.TotalTokens == 0 {
		out.TotalTokens = u.PromptTokens + u.CompletionTokens
	}
	out.InputTokensDetails.CachedTokens = u.CachedTokens
	out.OutputTokensDetails.ReasoningTokens = u.ReasoningTokens
	return out
}
