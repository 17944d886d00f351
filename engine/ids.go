package engine

import (
	crand "crypto/rand"
	"encoding/binary"
	"math/rand/v2"
	"strings"
	"sync"

	"github.com/loomgate/loom/responses"
)

// idSources are ChaCha8 generators, each seeded from the system's
// cryptographic randomness: a CSPRNG that costs no system call per id (a
// long input gets an id for each of its items).
var idSources = sync.Pool{New: func() any {
	var seed [32]byte
	crand.Read(seed[:])
	return rand.NewChaCha8(seed)
}}

// idDigits is how many random hex digits an id has: 48, 24 random bytes,
// make ids unguessable, so knowing one response id tells nothing about
// another.
const idDigits = 48

// NewID returns a random id with the given prefix, such as "resp_3f9a…":
// the prefix, an underscore and idDigits random hex digits.
func NewID(prefix string) string {
	src := idSources.Get().(*rand.ChaCha8)
	var buf [64]byte
	out := appendID(buf[:0], src, prefix)
	idSources.Put(src)
	return string(out)
}

// appendID appends an id with the prefix, its digits from src: each
// 64-bit random word gives 16 digits, 4 bits each, made 8 at a time.
func appendID(dst []byte, src *rand.ChaCha8, prefix string) []byte {
	var h [idDigits]byte
	for i := 0; i < idDigits; i += 16 {
		w := src.Uint64()
		binary.LittleEndian.PutUint64(h[i:], hexDigits8(uint32(w)))
		binary.LittleEndian.PutUint64(h[i+8:], hexDigits8(uint32(w>>32)))
	}
	dst = append(dst, prefix...)
	dst = append(dst, '_')
	return append(dst, h[:]...)
}

// hexDigits8 spreads the 8 nibbles of v over the bytes of a word, one
// each, and makes each the hex digit of its value. The digits' order is
// not v's (the id's digits are random: any one-to-one spread will do).
func hexDigits8(v uint32) uint64 {
	t := uint64(v)
	t = (t | t<<16) & 0x0000ffff0000ffff
	t = (t | t<<8) & 0x00ff00ff00ff00ff
	t = (t | t<<4) & 0x0f0f0f0f0f0f0f0f
	// Per byte, n+6 carries into bit 4 for n >= 10: those get 'a'-10,
	// the others '0' (no byte overflows into the next).
	letters := (t + 0x0606060606060606) >> 4 & 0x0101010101010101
	return t + 0x3030303030303030 + letters*('a'-'0'-10)
}

// idChunk is how many ids newItemIDs writes into one string: enough that
// a long input costs few allocations, few enough that each is a small
// one (a large allocation is fresh memory to fault in and zero).
const idChunk = 32

// newItemIDs gives every item without an id the id NewID would give it
// (prefixed by its type), all from one generator and written idChunk to
// a string: a long input has an id per item, and one allocation and one
// borrowed generator for each was most of what loom spent on the items
// of a long input before they reach the model. With messages false,
// messages are left as they are (see inputIDsSeen).
func newItemIDs(items []responses.Item, messages bool) {
	var src *rand.ChaCha8
	var buf [64]byte
	for start := 0; start < len(items); {
		n, end, size := 0, start, 0
		for ; end < len(items) && n < idChunk; end++ {
			if needsID(&items[end], messages) {
				n++
				size += len(itemPrefix(items[end].Type)) + 1 + idDigits
			}
		}
		if n > 0 {
			if src == nil {
				src = idSources.Get().(*rand.ChaCha8)
			}
			var all strings.Builder
			all.Grow(size)
			for i := start; i < end; i++ {
				if needsID(&items[i], messages) {
					all.Write(appendID(buf[:0], src, itemPrefix(items[i].Type)))
				}
			}
			// Cut the ids out of the string, in the same order.
			s := all.String()
			for i := start; i < end; i++ {
				if needsID(&items[i], messages) {
					size := len(itemPrefix(items[i].Type)) + 1 + idDigits
					items[i].ID, s = s[:size], s[size:]
				}
			}
		}
		start = end
	}
	if src != nil {
		idSources.Put(src)
	}
}

// needsID reports whether an input item gets an id: it has none, and it
// is not a message whose id nobody sees (messages false).
func needsID(it *responses.Item, messages bool) bool {
	return it.ID == "" && (messages || it.Type != responses.ItemMessage)
}

// inputIDsSeen reports whether anyone can see the ids given to a run's
// input messages: the store's input_items of the response (store, which
// a background response needs), its conversation's items, or a caller
// that keeps the conversation to continue it (WebSocket mode). Otherwise
// (store false, the common case of a client that resends its history)
// a message's id is read by nothing: the model is sent no message ids
// and no event carries an input item. Items of other types still get
// theirs, since some kinds read them (an MCP or code interpreter call's
// id stands for its call_id in the model's conversation), and so do the
// messages of every run whose input can be seen again.
func inputIDsSeen(req *responses.Request, opts *RunOptions, conversationID string, background bool) bool {
	return req.StoreEnabled() || background || conversationID != "" || (opts != nil && opts.Keep != nil)
}

// setItemIDs gives every item without an id one (messages too when
// messages is set: inputIDsSeen): with Options.NewID when the embedder
// set it, all at once otherwise.
func (cr *core) setItemIDs(items []responses.Item, messages bool) {
	if !cr.ownIDs {
		for i := range items {
			if needsID(&items[i], messages) {
				items[i].ID = cr.opts.NewID(itemPrefix(items[i].Type))
			}
		}
		return
	}
	newItemIDs(items, messages)
}
