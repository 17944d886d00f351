package upstream

import (
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
