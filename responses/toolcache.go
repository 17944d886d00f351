package responses

import (
	"bytes"
	"container/list"
	"hash/maphash"
	"slices"
	"sync"
	"unsafe"
)

// A ToolCache keeps the tools of recent requests decoded, each list by the
// text it was sent as. An agent sends the same tools with every turn of a
// conversation (Codex CLI, the Agents SDK: a few dozen tools, tens of KB
// of schemas), and their decode is most of such a request's: the walk
// that checks every schema's JSON and depth. A request whose tools are,
// byte for byte, a list the cache holds gets a copy of that list without
// the walk; any other request decodes as it would without the cache, and
// its list is kept when it is long enough to be worth keeping.
//
// A list is found by its first bytes and then compared whole. What the
// cache holds is a complete JSON array, checked when it was decoded, so a
// body that holds that text where its tools start holds that list, and
// the decoder goes on after it as if it had walked it.
//
// Lists are kept per scope (the tenant of the request): a request never
// finds, nor can time, another tenant's tools. The cache holds about its
// size in bytes (each list's text, and what was decoded from it), the
// least recently used lists going first.
//
// A ToolCache is safe for concurrent use. The copies it hands out share
// the strings, bytes and pointed-to values of the tools it keeps, which,
// as every decoded value's, are never changed in place.
type ToolCache struct {
	max  int
	seed maphash.Seed

	mu    sync.Mutex
	byKey map[uint64]*list.Element
	order list.List // of *cachedTools, the most recently used first
	size  int
}

// cachedTools is one list a ToolCache holds.
type cachedTools struct {
	key   uint64
	scope string
	text  []byte // the list as sent, from its '[' to its ']'
	tools []Tool
	size  int
}

// toolKeyBytes is how many of a list's first bytes find it, and the
// shortest list a ToolCache keeps: a shorter one decodes in a few
// microseconds.
const toolKeyBytes = 256

// NewToolCache returns a cache that holds about maxBytes of tool lists.
// A single list is kept only if it needs at most an eighth of them: one
// very long list does not push all others out.
func NewToolCache(maxBytes int) *ToolCache {
	return &ToolCache{max: maxBytes, seed: maphash.MakeSeed(), byKey: make(map[uint64]*list.Element)}
}

// key finds the list whose text starts as text does, sent by scope.
func (c *ToolCache) key(scope string, text []byte) uint64 {
	var h maphash.Hash
	h.SetSeed(c.seed)
	h.WriteString(scope)
	h.WriteByte(0)
	h.Write(text[:min(len(text), toolKeyBytes)])
	return h.Sum64()
}

// lookup returns a copy of the tools of the list scope sent whose text b
// starts with, and the length of that text.
func (c *ToolCache) lookup(scope string, b []byte) ([]Tool, int, bool) {
	if len(b) < toolKeyBytes {
		return nil, 0, false
	}
	k := c.key(scope, b)
	c.mu.Lock()
	el, ok := c.byKey[k]
	var e *cachedTools
	if ok {
		e = el.Value.(*cachedTools)
		ok = e.scope == scope && bytes.HasPrefix(b, e.text)
	}
	if ok {
		c.order.MoveToFront(el)
	}
	c.mu.Unlock()
	if !ok {
		return nil, 0, false
	}
	// An entry never changes once added: its tools are copied unlocked.
	return slices.Clone(e.tools), len(e.text), true
}

// add keeps tools, decoded from text (the whole list) and sent by scope,
// in place of any list found by the same first bytes.
func (c *ToolCache) add(scope string, text []byte, tools []Tool) {
	// The text is copied; the decoded strings, schemas and echo are
	// about two copies more.
	size := 3*len(text) + len(tools)*int(unsafe.Sizeof(Tool{}))
	if len(text) < toolKeyBytes || size > c.max/8 {
		return
	}
	e := &cachedTools{key: c.key(scope, text), scope: scope, text: bytes.Clone(text), tools: slices.Clone(tools), size: size}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[e.key]; ok {
		c.remove(el)
	}
	c.byKey[e.key] = c.order.PushFront(e)
	c.size += size
	for c.size > c.max {
		c.remove(c.order.Back())
	}
}

// remove drops the list at el; c.mu is held.
func (c *ToolCache) remove(el *list.Element) {
	e := c.order.Remove(el).(*cachedTools)
	delete(c.byKey, e.key)
	c.size -= e.size
}
