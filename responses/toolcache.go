package responses

import (
	"bytes"
	"hash/maphash"
	"sync"
	"sync/atomic"
)

// An agent sends the same tools with every request of a conversation
// (Codex, the Agents SDK: tens of tools with their schemas, byte for byte
// the same each turn), and checking and decoding them was most of what a
// request with many tools cost. So the tool lists of recent requests are
// kept by their text: a list whose text is byte for byte one decoded
// before is copied from that one, not checked and decoded again.
//
// That gives exactly what decoding gives: a list's decode depends on
// its text alone, and the text of a JSON value is self-delimiting, so
// a body that holds a kept list's bytes at the list's offset holds
// that very list (and that much of it is valid JSON and valid UTF-8).
// What the requests get are copies that share only what is never changed
// in place (the strings and the bytes of the schemas and echoes): each
// gets its own list and its own description and strict values.
//
// The cache is bounded (cachedToolBytes, cachedToolLists) and keyed by
// the text only; it holds nothing of a request but the tools it sent. A
// list is kept the second time its key is seen: one sent once (a list
// each request makes anew) costs a hash and a key remembered, not a copy
// kept alive for the collector to walk (keeping every list made a fresh
// one's decode a third slower: BenchmarkDecodeRequest/tools=100,fresh).

// Lists are kept from minCachedList bytes of text (shorter ones are
// cheap to decode, and the key is the first minCachedList bytes) up to
// maxCachedList; all of them together count up to cachedToolBytes (their
// text three times over: the text, the decoded strings and schemas, the
// list), and at most cachedToolLists of them are kept.
const (
	minCachedList   = 1 << 10
	maxCachedList   = 1 << 20
	cachedToolBytes = 32 << 20
	cachedToolLists = 256
	seenToolLists   = 4096
)

// toolListCache is the kept lists, by a hash of their first
// minCachedList bytes; a list with the same first bytes as a kept one
// takes its place.
type toolListCache struct {
	seed  maphash.Seed
	mu    sync.Mutex
	lists map[uint64]*cachedTools
	bytes int
	// seen are the keys of lists decoded once and not kept (yet).
	seen map[uint64]struct{}
}

// cachedTools is a decoded list and its text, neither of which changes.
type cachedTools struct {
	text  []byte // from '[' to ']'
	tools []Tool // its own description and strict values
	// names are the names tool_choice may pick that validation found in
	// the list, once it found no fault with it (set once, then only
	// read): a request that holds the list as it was copied needs no
	// check of its tools but of its tool_choice.
	names atomic.Pointer[map[string]bool]
}

// heldBy reports whether tools are a copy of the kept list as copyTools
// made it, unchanged in what validation checks: every tool a function
// tool with the same type, name, parameters (the very bytes) and
// deferral. (The strings compare by their bytes, which start at the
// same address: no byte is read.)
func (c *cachedTools) heldBy(tools []Tool) bool {
	if c == nil || len(tools) != len(c.tools) {
		return false
	}
	for i := range tools {
		t, k := &tools[i], &c.tools[i]
		if t.Type != ToolFunction || t.Type != k.Type || t.Name != k.Name || t.DeferLoading != k.DeferLoading ||
			t.Raw != nil || len(t.Parameters) != len(k.Parameters) || len(t.Parameters) > 0 && &t.Parameters[0] != &k.Parameters[0] {
			return false
		}
	}
	return true
}

var recentToolLists = toolListCache{seed: maphash.MakeSeed(), lists: map[uint64]*cachedTools{}, seen: map[uint64]struct{}{}}

// key returns the cache key of the text that starts a list, and false
// when the text is too short to hold a kept list.
func (c *toolListCache) key(rest []byte) (uint64, bool) {
	if len(rest) < minCachedList {
		return 0, false
	}
	return maphash.Bytes(c.seed, rest[:minCachedList]), true
}

// find returns the kept list whose text starts rest; nil when there is
// none.
func (c *toolListCache) find(rest []byte) *cachedTools {
	k, ok := c.key(rest)
	if !ok {
		return nil
	}
	c.mu.Lock()
	kept := c.lists[k]
	c.mu.Unlock()
	if kept == nil || !bytes.HasPrefix(rest, kept.text) {
		return nil
	}
	return kept
}

// add keeps tools, decoded from text, a whole list, the second time a
// list with its key is decoded, and returns the kept list (nil when it
// keeps none); copied is a copy of text the tools point into (or nil),
// which the cache keeps as the list's text.
func (c *toolListCache) add(text, copied []byte, tools []Tool) *cachedTools {
	k, ok := c.key(text)
	if !ok || len(text) > maxCachedList {
		return nil
	}
	c.mu.Lock()
	_, again := c.seen[k]
	if !again {
		if len(c.seen) == seenToolLists {
			clear(c.seen)
		}
		c.seen[k] = struct{}{}
	}
	c.mu.Unlock()
	if !again {
		return nil
	}
	if copied == nil {
		copied = bytes.Clone(text)
	}
	kept := &cachedTools{text: copied, tools: copyTools(tools)}
	size := 3 * len(text)
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.seen, k)
	if old := c.lists[k]; old != nil {
		c.bytes -= 3 * len(old.text)
		delete(c.lists, k)
	}
	for k, old := range c.lists {
		if c.bytes+size <= cachedToolBytes && len(c.lists) < cachedToolLists {
			break
		}
		// Any one goes: map order is as good as any here.
		c.bytes -= 3 * len(old.text)
		delete(c.lists, k)
	}
	c.lists[k] = kept
	c.bytes += size
	return kept
}

// copyTools returns a copy of tools with description and strict values
// of its own (one block for all of them), so that neither the kept list
// nor another request's sees a change one request makes to its own.
func copyTools(tools []Tool) []Tool {
	out := make([]Tool, len(tools))
	copy(out, tools)
	values := make([]functionValues, len(out))
	for i := range out {
		t := &out[i]
		if t.Description != nil {
			values[i].description = *t.Description
			t.Description = &values[i].description
		}
		if t.Strict != nil {
			values[i].strict = *t.Strict
			t.Strict = &values[i].strict
		}
	}
	return out
}
