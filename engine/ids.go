package engine

import (
	crand "crypto/rand"
	"encoding/hex"
	"math/rand/v2"
	"sync"
)

// idSources are ChaCha8 generators, each seeded from the system's
// cryptographic randomness: a CSPRNG that costs no system call per id (a
// long input gets an id for each of its items).
var idSources = sync.Pool{New: func() any {
	var seed [32]byte
	crand.Read(seed[:])
	return rand.NewChaCha8(seed)
}}

// NewID returns a random id with the given prefix, such as "resp_3f9a…".
// 24 random bytes make ids unguessable, so knowing one response id tells
// nothing about another.
func NewID(prefix string) string {
	var b [24]byte
	src := idSources.Get().(*rand.ChaCha8)
	src.Read(b[:])
	idSources.Put(src)
	var buf [64]byte
	out := append(buf[:0], prefix...)
	out = append(out, '_')
	return string(hex.AppendEncode(out, b[:]))
}
