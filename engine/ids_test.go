package engine

import (
	"strings"
	"testing"
)

// Ids are the prefix, an underscore and 48 hex digits, never twice the
// same.
func TestNewID(t *testing.T) {
	seen := map[string]bool{}
	for range 10000 {
		id := NewID("msg")
		hex := strings.TrimPrefix(id, "msg_")
		if len(hex) != 48 || strings.Trim(hex, "0123456789abcdef") != "" {
			t.Fatalf("id %q", id)
		}
		if seen[id] {
			t.Fatalf("id %q twice", id)
		}
		seen[id] = true
	}
}

// BenchmarkNewID: an id per input item, so a long input makes thousands.
func BenchmarkNewID(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		NewID("msg")
	}
}
