package engine

import (
	"crypto/rand"
	"encoding/hex"
)

// NewID returns a random id with the given prefix, such as "resp_3f9a…".
// 24 random bytes make ids unguessable, so knowing one response id tells
// nothing about another.
func NewID(prefix string) string {
	var b [24]byte
	rand.Read(b[:])
	buf := make([]byte, 0, len(prefix)+1+2*len(b))
	buf = append(buf, prefix...)
	buf = append(buf, '_')
	return string(hex.AppendEncode(buf, b[:]))
}
