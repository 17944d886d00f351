package jsonscan

import (
	"encoding/binary"
	"math/bits"
)

// plainRun returns the index of the first byte of b at or after i that
// ends a plain run inside a JSON string: a quote, a backslash or a
// control character (< 0x20); len(b) if there is none. Bytes of 0x80 and
// above are plain: a string's UTF-8 is checked where it is decoded.
//
// It reads 8 bytes a step (SWAR): strings are most of a request's bytes,
// and one byte a step was the largest part of decoding a long input.
func plainRun(b []byte, i int) int {
	for ; i+8 <= len(b); i += 8 {
		if m := specialBytes(binary.LittleEndian.Uint64(b[i:])); m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	for ; i < len(b); i++ {
		if c := b[i]; c == '"' || c == '\\' || c < 0x20 {
			return i
		}
	}
	return i
}

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// specialBytes returns w, 8 bytes read little-endian, with the high bit
// set in the lowest byte that is a quote, a backslash or below 0x20, if
// any. (x - ones) &^ x has the high bit of each zero byte of x set, and
// of no byte below the lowest zero one: a borrow only runs upward, so
// the bits above the first hit may be wrong but the lowest one is right.
// A byte of 0x80 or more is never a hit: its high bit is clear in ^w.
func specialBytes(w uint64) uint64 {
	q := w ^ (ones * '"')
	bs := w ^ (ones * '\\')
	return ((q-ones)&^q | (bs-ones)&^bs | (w-ones*0x20)&^w) & highs
}

// PlainEnd returns the index of the first byte at or after i that ends a
// plain run inside a JSON string (a quote, a backslash or a control
// character; len(b) if none), as the Scanner's strings are read: the
// first 8 bytes without a call. A caller that matches a value's text in
// place (a string at b[i-1] is plain, and ends at the returned index,
// when the byte there is a quote) reads a string at the Scanner's cost.
func PlainEnd(b []byte, i int) int {
	if i+8 <= len(b) {
		if m := specialBytes(binary.LittleEndian.Uint64(b[i:])); m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
		i += 8
	}
	return plainRun(b, i)
}

// plainStringEnd returns the offset after the closing quote of the
// string whose body starts at i when the body holds no escape and no
// control byte, and 0 otherwise (the caller then reads it the checking
// way, which finds its escapes or its fault). A schema's strings are
// short keys and words: SkipDepth reads them here with b and i in
// registers, not through the Scanner. It is plainRun with the quote
// checked in the same loop: written as a call to plainRun and a check
// after it, BenchmarkSkip/schemas measured 2-3% slower (4 interleaved
// rounds).
func plainStringEnd(b []byte, i int) int {
	for ; i+8 <= len(b); i += 8 {
		if m := specialBytes(binary.LittleEndian.Uint64(b[i:])); m != 0 {
			i += bits.TrailingZeros64(m) / 8
			if b[i] == '"' {
				return i + 1
			}
			return 0
		}
	}
	for ; i < len(b); i++ {
		if c := b[i]; c == '"' {
			return i + 1
		} else if c == '\\' || c < 0x20 {
			return 0
		}
	}
	return 0
}
