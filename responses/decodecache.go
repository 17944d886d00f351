package responses

import (
	"bytes"
	"container/list"
	"hash/maphash"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"unsafe"
)

// A DecodeCache keeps the tools and the input items of recent requests
// decoded, each list by the text it was sent as, for what an agent sends
// again with every turn of a conversation:
//
//   - its tools, the same list each time (Codex CLI, the Agents SDK: a few
//     dozen tools, tens of KB of schemas, whose walk that checks every
//     schema's JSON and depth is most of such a request's decode). A
//     request whose tools are, byte for byte, a list the cache holds gets
//     a copy of that list without the walk.
//   - its input, when it keeps the conversation itself (store false, as
//     Codex CLI runs): the whole history again, grown by the last turn's
//     items. A request whose input starts with the items of a list the
//     cache holds gets copies of those items, and only the ones after
//     them are decoded: a turn's decode grows with what the turn added,
//     not with the conversation. A request whose input is, byte for
//     byte, a list the cache holds (the same request sent again) reads
//     that list's items themselves, not a copy: Input.Shared says so, and
//     that they are to be copied before any is written.
//
// Any other request decodes as it would without the cache, and its lists
// are kept when they are long enough to be worth keeping, once the whole
// request has decoded; a request refused keeps nothing. A request gets
// the same values with the cache as without it.
//
// A list is found by its first bytes, and then compared: what the cache
// holds is text that was decoded (and so checked) as a whole, a complete
// JSON array; a body that holds the same text where its list starts
// holds the same list, or, for an input, the same items up to where the
// texts part, and the decoder goes on from there as if it had walked what
// came before.
//
// Lists are kept per scope (the tenant of the request): a request never
// finds, nor can time, another tenant's lists. The cache holds about its
// size in bytes (each list's text, and what was decoded from it), the
// least recently used lists going first.
//
// A DecodeCache is safe for concurrent use. The copies it hands out share
// the strings, bytes and pointed-to values of what it keeps, which, as
// every decoded value's, are never changed in place (a copy of an Item to
// be changed gets its own Call first, and so on: see Item).
type DecodeCache struct {
	max     int
	seed    maphash.Seed
	observe func(list, found string)

	mu      sync.Mutex
	buckets map[uint64][]*list.Element // the lists found by the same first bytes, the most recently used last
	order   list.List                  // of *cachedList, the most recently used first
	size    int
}

// cachedList is one list a DecodeCache holds.
type cachedList struct {
	key   uint64
	scope string
	text  []byte // the list as sent, from its '[' to its ']'
	// One of these, by what the list is.
	tools []Tool
	items []Item
	ends  []int // input: the offset in text just past each item
	// grown is set once a list that grew from this one took the room
	// past its items (ownItems).
	grown atomic.Bool
	size  int
}

const (
	// keyBytes is how many of a list's first bytes find it, and the
	// shortest list a DecodeCache keeps: a shorter one decodes in a few
	// microseconds.
	keyBytes = 256
	// bucketLists is the most lists kept by the same first bytes: the
	// conversations of one agent all start with its system prompt.
	bucketLists = 8
)

// DecodeCacheOptions configure a DecodeCache.
type DecodeCacheOptions struct {
	// MaxBytes is about how much memory the cache may hold. A single list
	// is kept only if it needs at most an eighth of it: one very long
	// list does not push all others out.
	MaxBytes int
	// Observe, when set, is told of what each request found of its lists
	// ("tools" or "input"), for metrics: "hit", the whole list; "partial",
	// an input's first items; "miss", none, the list decoded and kept.
	// Lists too short or too long to keep are not told of.
	Observe func(list, found string)
}

// NewDecodeCache returns an empty cache.
func NewDecodeCache(opts DecodeCacheOptions) *DecodeCache {
	return &DecodeCache{max: opts.MaxBytes, observe: opts.Observe, seed: maphash.MakeSeed(), buckets: make(map[uint64][]*list.Element)}
}

// What a request found of a list, as DecodeCacheOptions.Observe is told.
const (
	foundAll   = "hit"
	foundFirst = "partial" // an input's first items
	foundNone  = "miss"
)

// found tells Observe what a request found of a list.
func (c *DecodeCache) found(kind listKind, found string) {
	if c.observe != nil {
		c.observe(kind.String(), found)
	}
}

// mayKeep reports whether a list of at most n bytes of text may be kept
// (its size is at least twice its text): a longer body's input is decoded
// without noting where its items end, which a list too long to keep would
// only cost memory for (the offsets of 300k items are 2.4 MB).
func (c *DecodeCache) mayKeep(n int) bool { return c.fits(2 * n) }

// listKind tells a request's tools from its input in a cache's keys.
type listKind byte

const (
	toolsList listKind = 't'
	inputList listKind = 'i'
)

func (k listKind) String() string {
	if k == toolsList {
		return "tools"
	}
	return "input"
}

// key finds the lists of kind whose text starts as text does, sent by
// scope.
func (c *DecodeCache) key(kind listKind, scope string, text []byte) uint64 {
	var h maphash.Hash
	h.SetSeed(c.seed)
	h.WriteByte(byte(kind))
	h.WriteString(scope)
	h.WriteByte(0)
	h.Write(text[:min(len(text), keyBytes)])
	return h.Sum64()
}

// candidates returns the lists of kind found by b's first bytes, sent by
// scope. Lists never change once added: the caller reads them unlocked.
func (c *DecodeCache) candidates(kind listKind, scope string, b []byte) []*cachedList {
	if len(b) < keyBytes {
		return nil
	}
	k := c.key(kind, scope, b)
	c.mu.Lock()
	defer c.mu.Unlock()
	var found []*cachedList
	for _, el := range c.buckets[k] {
		if e := el.Value.(*cachedList); e.scope == scope {
			found = append(found, e)
		}
	}
	return found
}

// used marks e as just used, if the cache still holds it: first in the
// cache's order, last in its bucket's.
func (c *DecodeCache) used(e *cachedList) {
	c.mu.Lock()
	defer c.mu.Unlock()
	bucket := c.buckets[e.key]
	for i, el := range bucket {
		if el.Value == e {
			c.order.MoveToFront(el)
			copy(bucket[i:], bucket[i+1:])
			bucket[len(bucket)-1] = el
			return
		}
	}
}

// tools returns a copy of the tools of the list scope sent whose text b
// starts with, and the length of that text.
func (c *DecodeCache) tools(scope string, b []byte) ([]Tool, int, bool) {
	found := c.candidates(toolsList, scope, b)
	for _, e := range found {
		if bytes.HasPrefix(b, e.text) {
			c.used(e)
			c.found(toolsList, foundAll)
			return slices.Clone(e.tools), len(e.text), true
		}
	}
	return nil, 0, false
}

// input returns, of the input lists scope sent, the one whose first items
// b (an input's text, from its '[') starts with the most of, how many, and
// whether b starts with its whole text.
func (c *DecodeCache) input(scope string, b []byte) (list *cachedList, most int, whole bool) {
	found := c.candidates(inputList, scope, b)
	best := 0 // the bytes b shares with the best list so far
	// The most recently used first: most often the turn before.
	for _, e := range slices.Backward(found) {
		// The lists of one conversation share their first items: one
		// that ends before the best so far parts from b, or differs
		// from b just before or where it does, cannot find more items,
		// and is not compared from its start.
		if best > 0 && (best == len(b) || len(e.text) <= best || e.text[best] != b[best] || !bytes.Equal(e.text[best-min(best, 64):best], b[best-min(best, 64):best])) {
			continue
		}
		same := commonPrefix(b, e.text)
		// The items that end within the text both share are the same.
		if n := sort.SearchInts(e.ends, same+1); n > most {
			list, most, whole, best = e, n, same == len(e.text), same
		}
	}
	if list != nil {
		c.used(list)
	}
	return list, most, whole
}

// commonPrefix returns the length of the longest prefix a and b share,
// compared a block at a time (bytes.Equal is vector instructions), then
// byte by byte within the first block that differs.
func commonPrefix(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for _, block := range [...]int{4096, 64} {
		for i+block <= n && bytes.Equal(a[i:i+block], b[i:i+block]) {
			i += block
		}
	}
	for i < n && a[i] == b[i] {
		i++
	}
	return i
}

// addTools keeps tools, decoded from text (the whole list) and sent by
// scope.
func (c *DecodeCache) addTools(scope string, text []byte, tools []Tool) {
	e := &cachedList{scope: scope, text: text, size: 3*len(text) + len(tools)*int(unsafe.Sizeof(Tool{}))}
	if c.admits(e) {
		e.tools = slices.Clone(tools)
		c.add(e, toolsList, nil, foundNone)
	}
}

// addInput keeps items, decoded from text (the whole list; ends[i] is the
// offset just past item i) and sent by scope, in place of prefix, a list
// whose items are the first of these (the same conversation a turn
// before), when prefix is not nil; kept is how many of its first items
// the request found in the cache. It returns the list kept, nil when
// the list is not kept.
func (c *DecodeCache) addInput(scope string, text []byte, items []Item, ends []int, prefix *cachedList, kept int) *cachedList {
	// The items, and the room to grow past them (ownItems).
	size := 2*len(text) + (len(items)+len(items)/4)*int(unsafe.Sizeof(Item{})+unsafe.Sizeof(ContentPart{}))
	e := &cachedList{scope: scope, text: text, ends: ends, size: size}
	if !c.admits(e) {
		return nil
	}
	e.items = ownItems(prefix, kept, items)
	found := foundNone
	if kept > 0 {
		found = foundFirst
	}
	return c.add(e, inputList, prefix, found)
}

// ownItems returns the items a new list keeps, a request's. A list that
// grew from prefix (all of whose items the request's start with: the
// same conversation a turn before) keeps prefix's, followed by the
// request's others in the room past them, where the first list to grow
// from prefix may write (no list reads past its own items): a turn copies
// what it added, not the conversation. Any other list gets a copy, with
// room for its next turns.
func ownItems(prefix *cachedList, kept int, items []Item) []Item {
	if prefix != nil && kept == len(prefix.items) && cap(prefix.items)-kept >= len(items)-kept && prefix.grown.CompareAndSwap(false, true) {
		return append(prefix.items, items[kept:]...)
	}
	own := make([]Item, len(items), len(items)+len(items)/4)
	copy(own, items)
	return own
}

// admits reports whether a list of e's text and size may be kept: a
// shorter one decodes in a few microseconds.
func (c *DecodeCache) admits(e *cachedList) bool {
	return len(e.text) >= keyBytes && c.fits(e.size)
}

// fits reports whether one list may take size bytes: at most an eighth
// of the cache, so that one very long list does not push all others out.
func (c *DecodeCache) fits(size int) bool { return size <= c.max/8 }

// add keeps e, a list of kind that admits holds, whose fields but its key
// are set, in place of replaced if the cache still holds it; its text is
// copied here, from the request's. It returns e.
func (c *DecodeCache) add(e *cachedList, kind listKind, replaced *cachedList, found string) *cachedList {
	c.found(kind, found)
	e.key = c.key(kind, e.scope, e.text)
	e.text = bytes.Clone(e.text)
	c.mu.Lock()
	defer c.mu.Unlock()
	bucket := c.buckets[e.key]
	for _, el := range bucket {
		if old := el.Value.(*cachedList); old == replaced || bytes.Equal(old.text, e.text) {
			c.remove(el)
			break
		}
	}
	if bucket = c.buckets[e.key]; len(bucket) == bucketLists {
		c.remove(bucket[0]) // the bucket's least recently used
	}
	c.buckets[e.key] = append(c.buckets[e.key], c.order.PushFront(e))
	c.size += e.size
	c.shrink()
	return e
}

// shrink drops the least recently used lists until the cache holds no
// more than its size; c.mu is held.
func (c *DecodeCache) shrink() {
	for c.size > c.max {
		c.remove(c.order.Back())
	}
}

// remove drops the list at el; c.mu is held.
func (c *DecodeCache) remove(el *list.Element) {
	e := c.order.Remove(el).(*cachedList)
	bucket := c.buckets[e.key]
	i := slices.Index(bucket, el)
	bucket = slices.Delete(bucket, i, i+1)
	if len(bucket) == 0 {
		delete(c.buckets, e.key)
	} else {
		c.buckets[e.key] = bucket
	}
	c.size -= e.size
}
