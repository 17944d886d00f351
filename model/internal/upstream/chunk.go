package upstream

import (
	"fmt"
	"slices"

	"github.com/loomgate/loom/internal/jsonscan"
)

// IntField reads an object of which only the integer under key matters
// (usage details: {"cached_tokens": N}); a null leaves *v alone.
func IntField(s *jsonscan.Scanner, key string, v *int) error {
	return s.Object(func(k []byte) error {
		if string(k) != key {
			return s.Skip()
		}
		n, err := s.Int()
		*v = n
		return err
	})
}

// Chunk is a decoded chunk (or whole answer) of an OpenAI-style
// endpoint: its choices, of the backend's own type, and its usage. One
// Chunk serves every chunk of a stream, its choices reused.
type Chunk[C any] struct {
	Choices []C
	Usage   *Usage // nil when the chunk has none

	usage Usage
}

// Decode reads payload into c. reset clears a reused choice (keeping
// what it wants to reuse, a slice's array); choice reads one. Other keys
// are skipped. The error object an engine sends instead of a chunk is an
// upstream error; malformed JSON a malformed stream.
func (c *Chunk[C]) Decode(s *jsonscan.Scanner, payload []byte, reset func(*C), choice func(*jsonscan.Scanner, *C) error) error {
	choices := c.Choices[:cap(c.Choices)]
	for i := range choices {
		reset(&choices[i])
	}
	c.Choices, c.Usage = choices[:0], nil
	var errField, object []byte
	s.Reset(payload)
	err := s.Object(func(k []byte) error {
		switch string(k) {
		case "choices":
			return s.Array(func() error {
				c.Choices = slices.Grow(c.Choices, 1)[:len(c.Choices)+1] // reset above, or new
				return choice(s, &c.Choices[len(c.Choices)-1])
			})
		case "usage":
			if s.Null() {
				return nil
			}
			c.usage = Usage{}
			c.Usage = &c.usage
			return DecodeUsage(s, &c.usage)
		case "error":
			var err error
			errField, err = s.Raw()
			return err
		case "object":
			// Read only to be compared with "error".
			var err error
			object, err = s.StringBytes()
			return err
		default:
			return s.Skip()
		}
	})
	if err == nil {
		err = s.End()
	}
	if err != nil {
		return Malformed(fmt.Errorf("decoding chunk: %w", err))
	}
	if IsErrorObject(errField, object) {
		return StreamError(payload)
	}
	return nil
}

// Usage is a chunk's usage object, the same in every OpenAI-style
// endpoint: the fields loom reads.
type Usage struct {
	PromptTokens     int
	CompletionTokens int
	TotalTokens      int
	CachedTokens     int // prompt_tokens_details.cached_tokens
	ReasoningTokens  int // completion_tokens_details.reasoning_tokens
}

// DecodeUsage reads a usage object into u.
func DecodeUsage(s *jsonscan.Scanner, u *Usage) error {
	return s.Object(func(k []byte) error {
		var err error
		switch string(k) {
		case "prompt_tokens":
			u.PromptTokens, err = s.Int()
		case "completion_tokens":
			u.CompletionTokens, err = s.Int()
		case "total_tokens":
			u.TotalTokens, err = s.Int()
		case "prompt_tokens_details":
			err = IntField(s, "cached_tokens", &u.CachedTokens)
		case "completion_tokens_details":
			err = IntField(s, "reasoning_tokens", &u.ReasoningTokens)
		default:
			err = s.Skip()
		}
		return err
	})
}
