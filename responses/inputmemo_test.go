package responses

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// memoKey is a maker's key, as a backend names what it keeps.
type memoKey struct{}

// decodeMemo decodes body through cache as scope and returns what the
// cache knows of its input.
func decodeMemo(t *testing.T, cache *DecodeCache, scope, body string) *InputMemo {
	t.Helper()
	memo := new(InputMemo)
	if _, err := DecodeRequestWith([]byte(body), DecodeOptions{Cache: cache, Scope: scope, Memo: memo}); err != nil {
		t.Fatalf("decode: %v", err)
	}
	return memo
}

// TestInputMemoFollowsTheConversation: what was kept of one turn's input
// is found by the next turn (with how many items the two share), by a
// request that sends the same input again, and by a conversation that
// parts from it; not by another tenant, nor by a request whose input
// shares nothing.
func TestInputMemoFollowsTheConversation(t *testing.T) {
	items := conversation(30)
	cache := NewDecodeCache(DecodeCacheOptions{MaxBytes: 8 << 20})
	first := decodeMemo(t, cache, "a", inputBody(items[:20]))
	if v, kept := first.Earlier(memoKey{}); v != nil || kept != 0 {
		t.Fatalf("a first input finds %v, %d kept", v, kept)
	}
	if !first.Wants(memoKey{}) {
		t.Fatal("a new input's memo does not want a value")
	}
	first.Keep(memoKey{}, "turn 1", 100)
	if first.Wants(memoKey{}) {
		t.Error("the memo still wants a value once one is kept")
	}
	first.Keep(memoKey{}, "again", 100) // the first value stays

	for _, tt := range []struct {
		name, scope string
		items       []string
		want        any
		kept        int
	}{
		{"the same input", "a", items[:20], "turn 1", 20},
		{"another tenant", "b", items[:20], nil, 0},
		{"a conversation that parts from it", "a", append(items[:12:12], `{"role":"user","content":"something else"}`), "turn 1", 12},
		{"the next turn", "a", items[:30], "turn 1", 20},
	} {
		memo := decodeMemo(t, cache, tt.scope, inputBody(tt.items))
		if v, kept := memo.Earlier(memoKey{}); v != tt.want || kept != tt.kept {
			t.Errorf("%s: found %v, %d kept; want %v, %d", tt.name, v, kept, tt.want, tt.kept)
		}
		if v, _ := memo.Earlier(struct{}{}); v != nil {
			t.Errorf("%s: found %v under another maker's key", tt.name, v)
		}
	}
	// The next turn took the first turn's place: its own list wants a
	// value, which the turn after finds.
	next := decodeMemo(t, cache, "a", inputBody(items[:30]))
	if v, kept := next.Earlier(memoKey{}); v != nil || kept != 0 {
		t.Errorf("the next turn again finds %v, %d kept: its own list should be found, with nothing kept", v, kept)
	}
	var none *InputMemo
	none.Keep(memoKey{}, "x", 1)
	if v, kept := none.Earlier(memoKey{}); v != nil || kept != 0 || none.Wants(memoKey{}) {
		t.Error("a nil memo knows of something")
	}
}

// TestInputMemoCountsInTheCache: a value kept counts in the cache's size;
// one that would make its list larger than a list may be is not kept; an
// input too short to keep has no place for one.
func TestInputMemoCountsInTheCache(t *testing.T) {
	items := conversation(20)
	cache := NewDecodeCache(DecodeCacheOptions{MaxBytes: 1 << 20})
	memo := decodeMemo(t, cache, "", inputBody(items))
	before := cache.size
	memo.Keep(memoKey{}, "small", 1000)
	if cache.size != before+1000 {
		t.Errorf("cache size %d after a value of 1000 bytes, want %d", cache.size, before+1000)
	}
	other := decodeMemo(t, cache, "", inputBody(append([]string{`{"role":"user","content":"` + strings.Repeat("x", 300) + `"}`}, items...)))
	other.Keep(memoKey{}, "huge", 1<<20/8)
	if n := cachedLists(cache); n != 2 || !other.Wants(memoKey{}) {
		t.Errorf("a value too large to keep: the cache holds %d lists, want both; the list still wants a value: %t", n, other.Wants(memoKey{}))
	}
	if v, _ := decodeMemo(t, cache, "", inputBody(items)).Earlier(memoKey{}); v != "small" {
		t.Errorf("the first list lost its value: %v", v)
	}
	short := decodeMemo(t, cache, "", inputBody(items[:1]))
	if short.Wants(memoKey{}) {
		t.Error("an input too short to keep wants a value")
	}
}

// TestInputMemoFindsTheLongestBranch: of the lists of one conversation's
// branches (a client that edited one of its messages, then another), an
// input finds the one it shares the most items with, whichever of them
// was used last, and the items it shares.
func TestInputMemoFindsTheLongestBranch(t *testing.T) {
	items := conversation(40)
	branch := func(at int) []string {
		b := slices.Clone(items)
		b[at] = fmt.Sprintf(`{"role":"user","content":"edited at %d"}`, at)
		return b
	}
	for _, order := range [][]int{{10, 30, 20}, {30, 10, 20}, {20, 10, 30}} {
		cache := NewDecodeCache(DecodeCacheOptions{MaxBytes: 8 << 20})
		for _, at := range order {
			decodeMemo(t, cache, "", inputBody(branch(at))).Keep(memoKey{}, at, 10)
		}
		// The whole conversation shares the most with the branch edited
		// last in it (at 30): its first 30 items.
		memo := decodeMemo(t, cache, "", inputBody(items))
		if v, kept := memo.Earlier(memoKey{}); v != 30 || kept != 30 {
			t.Errorf("branches kept in the order %v: found the branch edited at %v, %d items; want 30, 30", order, v, kept)
		}
		memo.Keep(memoKey{}, "whole", 10)
		// An input edited at 25 shares 25 items with the whole
		// conversation and the branch edited at 30; none with more.
		memo = decodeMemo(t, cache, "", inputBody(branch(25)))
		if v, kept := memo.Earlier(memoKey{}); kept != 25 || v == 10 || v == 20 {
			t.Errorf("branches kept in the order %v: an input edited at 25 found the branch edited at %v, %d items; want 25", order, v, kept)
		}
	}
}
