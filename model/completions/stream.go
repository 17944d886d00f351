package completions

import (
	"fmt"
	"io"

	"github.com/loomgate/loom/model/internal/upstream"
)

// chunk is one text_completion stream chunk, or a whole non-streamed
// text_completion, which has the same fields. It holds only what loom
// reads; decodeChunk fills it from the JSON in one pass.
type chunk struct {
	Choices []chunkChoice
	Usage   *wireUsage

	// An engine failing mid-stream sends {"error":{...}} or, in older
	// vLLM, {"object":"error","message":...} (upstream.IsErrorObject).
	Error  []byte
	Object string

	usage wireUsage // what Usage points to when the chunk has one
}

type chunkChoice struct {
	Index int
	Text  string
	// TokenIDs are the chunk's new token ids (vLLM with return_token_ids).
	TokenIDs     []uint32
	FinishReason *string
	finish       string // what FinishReason points to
}

type wireUsage struct {
	PromptTokens        int
	CompletionTokens    int
	PromptTokensDetails *promptTokensDetails
	details             promptTokensDetails // what PromptTokensDetails points to
}

type promptTokensDetails struct {
	CachedTokens int
}

// readStream reads an SSE body to [DONE], feeding each chunk to r. It
// returns nil after r has finished the turn, emit's error when emit
// failed, a *model.Error for an upstream error or malformed stream, and
// the raw read error otherwise.
func readStream(body io.Reader, r *router) error {
	var c chunk
	var s upstream.Scanner
	return upstream.ReadSSE(body, func(payload []byte) error {
		if err := decodeChunk(&s, payload, &c); err != nil {
			return err
		}
		return r.chunk(&c)
	}, r.finish)
}

// readWhole reads a non-streamed answer: one chunk holding the whole
// output, then the end of the turn, as its stream would have ended.
func readWhole(body io.Reader, r *router) error {
	return upstream.ReadWhole(body, func(b []byte) error {
		var c chunk
		if err := decodeChunk(upstream.NewScanner(nil), b, &c); err != nil {
			return err
		}
		if err := r.chunk(&c); err != nil {
			return err
		}
		return r.finish()
	})
}

// decodeChunk decodes payload into c, reusing c's slices, so that
// steady-state chunks allocate only their text.
func decodeChunk(s *upstream.Scanner, payload []byte, c *chunk) error {
	choices := c.Choices[:cap(c.Choices)]
	for i := range choices {
		choices[i] = chunkChoice{TokenIDs: choices[i].TokenIDs[:0]}
	}
	*c = chunk{Choices: choices[:0]}
	s.Reset(payload)
	err := s.Object(func(k []byte) error {
		var err error
		switch string(k) {
		case "choices":
			return s.Array(func() error {
				if len(c.Choices) < cap(c.Choices) {
					c.Choices = c.Choices[:len(c.Choices)+1]
				} else {
					c.Choices = append(c.Choices, chunkChoice{})
				}
				return decodeChoice(s, &c.Choices[len(c.Choices)-1])
			})
		case "usage":
			if s.Null() {
				return nil
			}
			c.Usage = &c.usage
			return decodeUsage(s, &c.usage)
		case "error":
			c.Error, err = s.Raw()
		case "object":
			c.Object, err = s.String()
		default:
			err = s.Skip()
		}
		return err
	})
	if err == nil {
		err = s.End()
	}
	if err != nil {
		return upstream.Malformed(fmt.Errorf("decoding chunk: %w", err))
	}
	if upstream.IsErrorObject(c.Error, c.Object) {
		return upstream.StreamError(payload)
	}
	return nil
}

func decodeChoice(s *upstream.Scanner, ch *chunkChoice) error {
	return s.Object(func(k []byte) error {
		var err error
		switch string(k) {
		case "index":
			ch.Index, err = s.Int()
		case "text":
			ch.Text, err = s.String()
		case "token_ids":
			err = s.Array(func() error {
				id, err := s.Int()
				if err != nil {
					return err
				}
				if id < 0 || id > 1<<32-1 {
					return fmt.Errorf("token id %d out of range", id)
				}
				ch.TokenIDs = append(ch.TokenIDs, uint32(id))
				return nil
			})
		case "finish_reason":
			if s.Null() {
				return nil
			}
			ch.finish, err = s.String()
			ch.FinishReason = &ch.finish
		default:
			err = s.Skip()
		}
		return err
	})
}

func decodeUsage(s *upstream.Scanner, u *wireUsage) error {
	return s.Object(func(k []byte) error {
		var err error
		switch string(k) {
		case "prompt_tokens":
			u.PromptTokens, err = s.Int()
		case "completion_tokens":
			u.CompletionTokens, err = s.Int()
		case "prompt_tokens_details":
			if s.Null() {
				return nil
			}
			u.PromptTokensDetails = &u.details
			err = upstream.IntField(s, "cached_tokens", &u.details.CachedTokens)
		default:
			err = s.Skip()
		}
		return err
	})
}
