package completions

import (
	"fmt"
	"io"

	"github.com/loomgate/loom/internal/jsonscan"
	"github.com/loomgate/loom/model/internal/upstream"
)

// chunk is one text_completion stream chunk, or a whole non-streamed
// text_completion, which has the same fields: only what loom reads,
// decoded in one pass (an engine's error object instead of a chunk is an
// error there).
type chunk = upstream.Chunk[chunkChoice]

type chunkChoice struct {
	Index int
	Text  string
	// TokenIDs are the chunk's new token ids (vLLM with return_token_ids).
	TokenIDs     []uint32
	FinishReason *string
	finish       string // what FinishReason points to
}

// readStream reads an SSE body to [DONE], feeding each chunk to r. It
// returns nil after r has finished the turn, emit's error when emit
// failed, a *responses.APIError for an upstream error or malformed stream, and
// the raw read error otherwise.
func readStream(body io.Reader, r *router) error {
	var c chunk
	var s jsonscan.Scanner
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
		if err := decodeChunk(jsonscan.NewScanner(nil), b, &c); err != nil {
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
func decodeChunk(s *jsonscan.Scanner, payload []byte, c *chunk) error {
	return c.Decode(s, payload, func(ch *chunkChoice) {
		*ch = chunkChoice{TokenIDs: ch.TokenIDs[:0]}
	}, decodeChoice)
}

func decodeChoice(s *jsonscan.Scanner, ch *chunkChoice) error {
	return s.Object(func(k []byte) (err error) {
		switch string(k) {
		case "text":
			ch.Text, err = s.String()
		case "token_ids":
			err = s.Array(func() error {
				id, err := s.Int()
				if err == nil && (id < 0 || id > 1<<32-1) {
					err = fmt.Errorf("token id %d out of range", id)
				}
				ch.TokenIDs = append(ch.TokenIDs, uint32(id))
				return err
			})
		case "index":
			ch.Index, err = s.Int()
		case "finish_reason":
			if !s.Null() {
				ch.finish, err = s.String()
				ch.FinishReason = &ch.finish
			}
		default:
			err = s.Skip()
		}
		return err
	})
}
