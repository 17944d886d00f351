package engine

import (
	"fmt"
	"strings"
	"testing"

	"github.com/loomgate/loom/responses"
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

// newItemIDs gives each item without an id one of NewID's form, prefixed
// by the item's type, never twice the same, and keeps the ids items have.
func TestNewItemIDs(t *testing.T) {
	types := []string{responses.ItemMessage, responses.ItemFunctionCall, responses.ItemFunctionCallOutput, responses.ItemReasoning, "mcp_call"}
	seen := map[string]bool{}
	for round := range 20 {
		items := make([]responses.Item, 257)
		for i := range items {
			items[i].Type = types[i%len(types)]
			if i%7 == round%7 {
				items[i].ID = fmt.Sprintf("kept_%d", i)
			}
		}
		newItemIDs(items, true)
		for i := range items {
			id := items[i].ID
			if i%7 == round%7 {
				if id != fmt.Sprintf("kept_%d", i) {
					t.Fatalf("item %d: its id %q was replaced", i, id)
				}
				continue
			}
			hex, ok := strings.CutPrefix(id, itemPrefix(items[i].Type)+"_")
			if !ok || len(hex) != 48 || strings.Trim(hex, "0123456789abcdef") != "" {
				t.Fatalf("item %d (%s): id %q", i, items[i].Type, id)
			}
			if seen[id] {
				t.Fatalf("id %q twice", id)
			}
			seen[id] = true
		}
	}
	newItemIDs(nil, true) // nothing to do
}

// BenchmarkItemIDs: the ids of a 1000-item input, all at once and one
// NewID per item.
func BenchmarkItemIDs(b *testing.B) {
	items := make([]responses.Item, 1000)
	for i := range items {
		items[i].Type = responses.ItemMessage
	}
	b.Run("together", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for i := range items {
				items[i].ID = ""
			}
			newItemIDs(items, true)
		}
	})
	b.Run("each", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for i := range items {
				items[i].ID = NewID(itemPrefix(items[i].Type))
			}
		}
	})
}

// hexDigits8 writes one hex digit per nibble of its word, each nibble's
// value to one byte of its own: 16 values of one nibble give 16
// different digits in one byte and leave the other bytes as they are.
func TestHexDigits8(t *testing.T) {
	bytesOf := func(w uint64) []byte {
		return []byte{byte(w), byte(w >> 8), byte(w >> 16), byte(w >> 24), byte(w >> 32), byte(w >> 40), byte(w >> 48), byte(w >> 56)}
	}
	for p := range 8 {
		base := uint32(0x9a3c5e71) &^ (0xf << (4 * p))
		w0 := bytesOf(hexDigits8(base))
		at := -1 // the byte nibble p is written to
		for k, c := range bytesOf(hexDigits8(base | 1<<(4*p))) {
			if c != w0[k] {
				at = k
			}
		}
		digits := map[byte]bool{}
		for n := range uint32(16) {
			w := bytesOf(hexDigits8(base | n<<(4*p)))
			if strings.Trim(string(w), "0123456789abcdef") != "" {
				t.Fatalf("%x: %q is not hex", base|n<<(4*p), w)
			}
			for k := range 8 {
				if k != at && w[k] != w0[k] {
					t.Fatalf("nibble %d changes byte %d, not only %d", p, k, at)
				}
			}
			digits[w[at]] = true
		}
		if len(digits) != 16 {
			t.Fatalf("nibble %d gives %d digits", p, len(digits))
		}
	}
}
