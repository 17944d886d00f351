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

// idRandomBytes is how many random bytes an id has: 24 make ids
// unguessable, so knowing one response id tells nothing about another.
const idRandomBytes = 24

// NewID returns a random id with the given prefix, such as "resp_3f9a…":
// the prefix, an underscore and idRandomBytes random bytes in hex.
func NewID(prefix string) string {
	src := idSources.Get().(*rand.ChaCha8)
	var buf [64]byte
	out := appendID(buf[:0], src, prefix)
	idSources.Put(src)
	return string(out)
}

// appendID appends an id with the prefix, its random bytes from src.
func appendID(dst []byte, src *rand.ChaCha8, prefix string) []byte {
	var b [idRandomBytes]byte
	for i := 0; i < idRandomBytes; i += 8 {
		binary.LittleEndian.PutUint64(b[i:], src.Uint64())
	}
	var h [2 * idRandomBytes]byte
	for i, c := range b {
		h[2*i], h[2*i+1] = hexPairs[2*int(c)], hexPairs[2*int(c)+1]
	}
	dst = append(dst, prefix...)
	dst = append(dst, '_')
	return append(dst, h[:]...)
}

// hexPairs holds the two hex digits of every byte, in order: a byte's
// digits in one look-up, where encoding/hex takes two.
var hexPairs = func() (pairs [512]byte) {
	const digits = "0123456789abcdef"
	for c := range 256 {
		pairs[2*c], pairs[2*c+1] = digits[c>>4], digits[c&0xf]
	}
	return pairs
}()

// newItemIDs gives every item without an id the id NewID would give it
// (prefixed by its type), all from one generator and written into one
// string: a long input has an id per item, and one allocation and one
// borrowed generator for each was most of what loom spent on the items
// of a long input before they reach the model.
func newItemIDs(items []responses.Item) {
	n := 0
	for i := range items {
		if items[i].ID == "" {
			n += len(itemPrefix(items[i].Type)) + 1 + 2*idRandomBytes
		}
	}
	if n == 0 {
		return
	}
	var all strings.Builder
	all.Grow(n)
	src := idSources.Get().(*rand.ChaCha8)
	var buf [64]byte
	for i := range items {
		if items[i].ID == "" {
			all.Write(appendID(buf[:0], src, itemPrefix(items[i].Type)))
		}
	}
	idSources.Put(src)
	// Cut the ids out of the one string, in the same order.
	s := all.String()
	for i := range items {
		if items[i].ID == "" {
			size := len(itemPrefix(items[i].Type)) + 1 + 2*idRandomBytes
			items[i].ID, s = s[:size], s[size:]
		}
	}
}

// setItemIDs gives every item without an id one: with Options.NewID when
// the embedder set it, all at once otherwise.
func (e *Engine) setItemIDs(items []responses.Item) {
	if !e.ownIDs {
		for i := range items {
			if items[i].ID == "" {
				items[i].ID = e.opts.NewID(itemPrefix(items[i].Type))
			}
		}
		return
	}
	newItemIDs(items)
}
