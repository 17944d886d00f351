package responses

import (
	"math/bits"
	"unicode/utf8"
)

// AppendJSONString appends s to dst as a JSON string, the way this
// package's encoders write strings (no HTML escaping; invalid UTF-8 as
// U+FFFD; U+2028 and U+2029 escaped). It is for the packages that write
// JSON by hand around these types, such as the model backends' upstream
// request bodies, so that there is one string encoder.
func AppendJSONString(dst []byte, s string) []byte { return appendString(dst, s) }

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string, as encoding/json writes it
// except that <, > and & are not HTML-escaped. Invalid UTF-8 becomes
// U+FFFD, as encoding/json does; U+2028 and U+2029 are escaped so the
// output is safe in JavaScript too.
//
// Every hand encoder's strings go through here (a long history's texts,
// the upstream body, every event), so it looks at 8 bytes per step:
// runs that need nothing are found a word at a time and copied at once,
// and only the bytes that may need something (a control byte, '"', '\\',
// or the start of a multi-byte sequence) are looked at one by one.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0 // s[start:i] is checked and waits to be copied
	i := 0
	for {
		for len(s)-i >= 8 {
			w := s[i : i+8]
			m := specialBytes(uint64(w[0]) | uint64(w[1])<<8 | uint64(w[2])<<16 | uint64(w[3])<<24 |
				uint64(w[4])<<32 | uint64(w[5])<<40 | uint64(w[6])<<48 | uint64(w[7])<<56)
			if m != 0 {
				// The lowest flagged byte is always a real one.
				i += bits.TrailingZeros64(m) / 8
				break
			}
			i += 8
		}
		if i >= len(s) {
			break
		}
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = appendEscape(append(dst, s[start:i]...), c)
			i++
			start = i
			continue
		}
		// A run of multi-byte sequences (text in most scripts but Latin)
		// is walked rune by rune here, without a word check per rune.
		for i < len(s) && s[i] >= utf8.RuneSelf {
			// The common sequences need no rune: three bytes of U+1000
			// to U+FFFF but the surrogates (ed) and the block of
			// U+2028/2029 (e2), where every continuation byte makes a
			// valid code point (CJK, most scripts of Asia), and two
			// bytes (Latin accents, Greek, Cyrillic, Arabic, Hebrew).
			if t := s[i:]; len(t) >= 3 && t[0] >= 0xe1 && t[0] <= 0xef && t[0] != 0xe2 && t[0] != 0xed && t[1]&0xc0 == 0x80 && t[2]&0xc0 == 0x80 {
				i += 3
				continue
			} else if len(t) >= 2 && t[0] >= 0xc2 && t[0] <= 0xdf && t[1]&0xc0 == 0x80 {
				i += 2
				continue
			}
			r, size := utf8.DecodeRuneInString(s[i:])
			switch {
			case size == 1:
				// Invalid: the one rune that decodes to one byte here.
				dst = append(dst, s[start:i]...)
				dst = append(dst, `\ufffd`...)
				i++
				start = i
			case r == '\u2028' || r == '\u2029':
				dst = append(dst, s[start:i]...)
				dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
				i += 3
				start = i
			default:
				i += size
			}
		}
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendEscape appends the escape of c, a control byte, '"' or '\\'.
func appendEscape(dst []byte, c byte) []byte {
	switch c {
	case '"', '\\':
		return append(dst, '\\', c)
	case '\b':
		return append(dst, '\\', 'b')
	case '\f':
		return append(dst, '\\', 'f')
	case '\n':
		return append(dst, '\\', 'n')
	case '\r':
		return append(dst, '\\', 'r')
	case '\t':
		return append(dst, '\\', 't')
	}
	return append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
}

// Byte masks for specialBytes.
const (
	lows  = 0x0101010101010101
	highs = 0x8080808080808080
)

// specialBytes flags, in the high bit of each byte of w, the bytes a
// JSON string may need to write differently: below 0x20, '"', '\\', and
// 0x80 or above. It can flag more than those (a borrow carries into the
// bytes above a flagged one), never fewer, and never a byte below the
// lowest flagged one, so the lowest flag is always one of them.
func specialBytes(w uint64) uint64 {
	control := (w - 0x20*lows) &^ w
	quote := w ^ '"'*lows
	quote = (quote - lows) &^ quote
	backslash := w ^ '\\'*lows
	backslash = (backslash - lows) &^ backslash
	return (control | quote | backslash | w) & highs
}
