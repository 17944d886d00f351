package chat

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	openai "github.com/sashabaranov/go-openai"

	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/responses"
)

// maxLineBytes caps one SSE line. Engines that do not stream tool
// arguments send a whole call in one chunk, so this is far above a normal
// token delta, but it bounds what a broken upstream can make us buffer.
const maxLineBytes = 16 << 20

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

// errEmit wraps an error returned by the caller's emit function, so that
// Stream can return it unchanged instead of mapping it as an upstream
// failure.
type errEmit struct{ err error }

func (e *errEmit) Error() string { return e.err.Error() }
func (e *errEmit) Unwrap() error { return e.err }

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
// after the final DeltaFinish, an *errEmit when emit failed, a
// *model.Error for an upstream error or malformed stream, and the raw
// read error otherwise.
func readStream(r io.Reader, emit func(model.Delta) error) error {
	d := &decoder{emit: emit}
	br := bufio.NewReaderSize(r, 4096)
	var long []byte
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A line longer than the buffer: gather it in a side buffer.
			long = append(long[:0], line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = br.ReadSlice('\n')
				long = append(long, line...)
				if len(long) > maxLineBytes {
					return malformed(fmt.Errorf("SSE line longer than %d bytes", maxLineBytes))
				}
			}
			line = long
		}
		if len(line) > 0 {
			done, perr := d.line(line)
			if perr != nil || done {
				return perr
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return &model.Error{Status: http.StatusBadGateway, Message: msgStreamCut, Err: io.ErrUnexpectedEOF}
			}
			return err
		}
	}
}

var (
	prefixData  = []byte("data:")
	prefixError = []byte("error:")
	doneMarker  = []byte("[DONE]")
)

// line handles one SSE line. It reports done after [DONE].
func (d *decoder) line(line []byte) (done bool, err error) {
	line = bytes.TrimRight(line, "\r\n")
	switch {
	case len(line) == 0, line[0] == ':':
		// Event separator or comment (keep-alive).
		return false, nil
	case bytes.HasPrefix(line, prefixData):
		payload := bytes.TrimLeft(line[len(prefixData):], " ")
		if bytes.Equal(payload, doneMarker) {
			return true, d.done()
		}
		return false, d.data(payload)
	case bytes.HasPrefix(line, prefixError):
		// llama.cpp reports a failure mid-stream as an "error:" line.
		return false, upstreamStreamError(bytes.TrimSpace(line[len(prefixError):]))
	case bytes.HasPrefix(line, []byte("event:")), bytes.HasPrefix(line, []byte("id:")), bytes.HasPrefix(line, []byte("retry:")):
		return false, nil
	default:
		// Not SSE at all: an HTML error page from a proxy, a plain JSON
		// body from an engine that ignored stream=true, noise.
		return false, malformed(fmt.Errorf("unexpected line in SSE stream: %q", truncate(line, 128)))
	}
}

// data decodes one chunk and emits its deltas.
func (d *decoder) data(payload []byte) error {
	// Reuse the choices slice but start from zero values: json.Unmarshal
	// does not clear fields a chunk leaves out.
	choices := d.chunk.Choices[:cap(d.chunk.Choices)]
	clear(choices)
	d.chunk = chunk{Choices: choices[:0]}
	if err := json.Unmarshal(payload, &d.chunk); err != nil {
		return malformed(fmt.Errorf("decoding chunk: %w", err))
	}
	c := &d.chunk
	if len(c.Error) > 0 && !bytes.Equal(c.Error, []byte("null")) {
		return upstreamStreamError(payload)
	}
	if c.Object == "error" {
		return upstreamStreamError(payload)
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
		switch reason := string(ch.FinishReason); reason {
		case "abort", "error":
			// vLLM ends a request it had to drop this way; the output is
			// incomplete, so it is an upstream failure, not a finish.
			return &model.Error{Status: http.StatusBadGateway, Message: msgUpstreamError,
				Err: fmt.Errorf("upstream finished with reason %q", reason)}
		default:
			d.finish = reason
		}
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
		upstream := -1
		if tc.Index != nil {
			upstream = *tc.Index
		}
		d.calls = append(d.calls, toolCall{upstream: upstream, id: id})
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
	if err := d.emit(delta); err != nil {
		return &errEmit{err: err}
	}
	return nil
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

func truncate(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}
