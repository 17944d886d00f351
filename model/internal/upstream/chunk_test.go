package upstream

import (
	"fmt"
	"strings"
	"testing"

	"github.com/loomgate/loom/internal/jsonscan"
)

// A chunk is an error object when its "object" is "error", however the
// string is written; any other chunk is one to decode.
func TestChunkErrorObject(t *testing.T) {
	type choice struct{}
	tests := []struct {
		payload string
		isError bool
	}{
		{`{"object":"chat.completion.chunk","choices":[]}`, false},
		{`{"object":null,"choices":[]}`, false},
		{`{"choices":[]}`, false},
		{`{"object":"error","message":"engine dead"}`, true},
		{`{"object":"\u0065rror","message":"engine dead"}`, true},
		{`{"object":"err\"or"}`, false},
		{`{"error":{"message":"CUDA out of memory"}}`, true},
		{`{"error":null,"choices":[]}`, false},
	}
	var c Chunk[choice]
	var s jsonscan.Scanner
	for _, tt := range tests {
		err := c.Decode(&s, []byte(tt.payload), func(*choice) {}, func(s *jsonscan.Scanner, _ *choice) error { return s.Skip() })
		if got := err != nil; got != tt.isError {
			t.Errorf("%s: error %v, want an error object: %v", tt.payload, err, tt.isError)
		}
	}
	// Not a string at all: a malformed chunk, not an error object.
	if err := c.Decode(&s, []byte(`{"object":7}`), func(*choice) {}, func(*jsonscan.Scanner, *choice) error { return nil }); err == nil || !strings.Contains(err.Error(), "decoding chunk") {
		t.Errorf(`{"object":7}: error %v, want a malformed chunk`, err)
	}
}

// A stream's chunks repeat their envelope (id, object, created, model),
// which Decode reads once and then skips in each chunk that begins with
// it (Chunk.head). Every chunk of these streams must decode as it does
// on its own, by a Chunk that has read nothing before: the same choices,
// usage and error, whatever its envelope shares with the one before.
func TestChunkHead(t *testing.T) {
	const env = `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m",`
	streams := map[string][]string{
		"same envelope": {
			env + `"choices":[{"n":1}]}`,
			env + `"choices":[{"n":2}],"usage":null}`,
			env + `"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}`,
		},
		// A number that goes on past the head's: the head ends with its
		// comma, so 12 is not read as 1 and a stray 2.
		"longer number": {
			`{"id":"c1","model":"m","created":1,"choices":[{"n":1}]}`,
			`{"id":"c1","model":"m","created":12,"choices":[{"n":2}]}`,
		},
		"faults after the head": {
			env + `"choices":[{"n":1}]}`,
			env + `,"choices":[]}`,
			env + `"choices":[}`,
			env + `"choices":[]`,
			env + `"choices":[]} x`,
			env + `"choices":[],}`,
		},
		"error object after the head": {
			env + `"choices":[{"n":1}]}`,
			env + `"error":{"message":"CUDA out of memory"}}`,
			env + `"choices":[],"object":"error"}`,
			`{"id":"c1","object":"error","created":1,"model":"m","choices":[]}`,
		},
		// Keys Decode reads are not part of a head: a chunk that repeats
		// them must have them read again.
		"usage before the choices": {
			`{"id":"c1","usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3},"choices":[]}`,
			`{"id":"c1","usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3},"choices":[]}`,
		},
		"error before the choices": {
			`{"id":"c1","error":{"message":"overloaded"},"choices":[]}`,
			`{"id":"c1","error":{"message":"overloaded"},"choices":[]}`,
		},
		"object error before the choices": {
			`{"id":"c1","object":"error","choices":[]}`,
			`{"id":"c1","object":"error","choices":[]}`,
		},
		"choices first": {
			`{"choices":[{"n":1}],"id":"c1"}`,
			`{"choices":[{"n":2}],"id":"c1"}`,
		},
		"spaced": {
			`{"id": "c1", "object": "chat.completion.chunk", "choices": [{"n": 1}]}`,
			`{"id": "c1", "object": "chat.completion.chunk", "choices": [{"n": 2}]}`,
			`{"id": "c1", "object": "chat.completion.chunk", "choices": [{"n": 2}`,
		},
	}
	type choice struct{ raw string }
	decode := func(c *Chunk[choice], s *jsonscan.Scanner, payload string) string {
		err := c.Decode(s, []byte(payload), func(ch *choice) { *ch = choice{} }, func(s *jsonscan.Scanner, ch *choice) error {
			raw, err := s.Raw()
			ch.raw = string(raw)
			return err
		})
		if err != nil {
			return "error: " + err.Error()
		}
		return fmt.Sprintf("choices %v, usage %+v", c.Choices, c.Usage)
	}
	for name, chunks := range streams {
		var stream Chunk[choice]
		var s jsonscan.Scanner
		for i, payload := range chunks {
			var alone Chunk[choice]
			want := decode(&alone, jsonscan.NewScanner(nil), payload)
			if got := decode(&stream, &s, payload); got != want {
				t.Errorf("%s, chunk %d %s:\n got %s\nwant %s", name, i, payload, got, want)
			}
		}
	}
}
