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
		newItemIDs(items)
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
	newItemIDs(nil) // nothing to do
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
			newItemIDs(items)
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
