package responses

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// appendStringByByte is appendString as it was before it looked at 8
// bytes per step: one byte or rune at a time. It stays as the reference
// the word-at-a-time encoder must match byte for byte.
func appendStringByByte(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// specials are the byte sequences appendString writes differently or
// must look at: every byte below 0x20, the quote and backslash, DEL and
// the bytes around the classes' edges, every valid and invalid start of
// a multi-byte sequence, truncated sequences, surrogates, overlong forms,
// code points past U+10FFFF, U+2028 and U+2029 and their neighbours.
func specials() []string {
	out := []string{`"`, `\`, "\x7f", " ", "!", "#", "[", "]", "\u2027", "\u2028", "\u2029", "\u202a",
		"é", "€", "😀", "\U0010ffff", "\xf4\x90\x80\x80", "\xed\xa0\x80", "\xed\x9f\xbf", "\xe0\x80\x80",
		"\xe0\xa0\x80", "\xf0\x80\x80\x80", "\xf0\x90\x80\x80", "\xc0\x80", "\xc1\xbf", "\xc2\x80", "\xe2\x80",
		"\xe2", "\xf0\x9f\x98", "\xe2\x80\xa8\xe2\x80\xa9", "\xff", "\xfe", "\x80", "\xbf"}
	for c := range 0x20 {
		out = append(out, string(rune(c)))
	}
	for c := 0x80; c < 0x100; c++ {
		out = append(out, string([]byte{byte(c)}), string([]byte{byte(c), 0x80}), string([]byte{byte(c), 0xa0, 0x80}),
			string([]byte{byte(c), 0x90, 0x80, 0x80}), string([]byte{byte(c), 0x80, 0x80}), string([]byte{byte(c), 0xbf, 0xbf}),
			string([]byte{byte(c), 0xbf, 'a'}), string([]byte{byte(c), 'a', 0x80}), string([]byte{byte(c), 0xc0, 0x80}))
	}
	return out
}

// Every special sequence at every offset of a clean run from 0 to 24
// bytes long, followed by 0 to 17 clean bytes: each lands at every
// position of an 8-byte word and across words' edges.
func TestAppendStringMatchesByteByByte(t *testing.T) {
	clean := strings.Repeat("abcdefgh", 4)
	for _, sp := range specials() {
		for before := 0; before <= 24; before++ {
			for after := 0; after <= 17; after++ {
				s := clean[:before] + sp + clean[:after]
				if got, want := appendString(nil, s), appendStringByByte(nil, s); string(got) != string(want) {
					t.Fatalf("%q: got %s, want %s", s, got, want)
				}
			}
		}
	}
	// Two specials in one word, and long runs of each.
	sps := specials()
	for i, a := range sps {
		b := sps[(i*7+3)%len(sps)]
		for gap := 0; gap <= 9; gap++ {
			s := "ab" + a + clean[:gap] + b + "xyz"
			if got, want := appendString(nil, s), appendStringByByte(nil, s); string(got) != string(want) {
				t.Fatalf("%q: got %s, want %s", s, got, want)
			}
		}
		s := strings.Repeat(a, 20)
		if got, want := appendString(nil, s), appendStringByByte(nil, s); string(got) != string(want) {
			t.Fatalf("%q: got %s, want %s", s, got, want)
		}
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain text of some length", "a\"b\\c\n\x00", "\u2028\u2029", "é ünïcödé 😀 ﷽",
		"\xff\xfe bad \xc3 utf-8 \xe2\x82", "\xed\xa0\x80\xf4\x90\x80\x80", strings.Repeat("word ", 30) + "\x1f"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := appendString([]byte("x"), s), appendStringByByte([]byte("x"), s); string(got) != string(want) {
			t.Fatalf("%q: got %s, want %s", s, got, want)
		}
	})
}

// appendStringTexts are the texts a long history has: plain English,
// text with quotes and newlines, and text with non-ASCII (accents, CJK).
var appendStringTexts = []struct{ name, s string }{
	{"ascii", strings.Repeat("answer 17: it is sunny and warm, about twenty degrees. ", 20)},
	{"escapes", strings.Repeat("line one\n\"quoted\" and a back\\slash\tthen more plain text here. ", 20)},
	{"accents", strings.Repeat("Ça va très bien, merci; déjà vu à l'hôtel. ", 20)},
	{"cjk", strings.Repeat("今天天气很好，我们去公园散步吧。", 20)},
}

// BenchmarkAppendString measures the string encoder, and the reference
// one beside it, on appendStringTexts.
//
//	go test ./responses -run '^$' -bench AppendString -benchmem
func BenchmarkAppendString(b *testing.B) {
	for _, enc := range []struct {
		name string
		f    func([]byte, string) []byte
	}{{"words", appendString}, {"bytes", appendStringByByte}} {
		for _, c := range appendStringTexts {
			b.Run(enc.name+"/"+c.name, func(b *testing.B) {
				buf := make([]byte, 0, 4*len(c.s))
				b.SetBytes(int64(len(c.s)))
				b.ReportAllocs()
				for b.Loop() {
					buf = enc.f(buf[:0], c.s)
				}
			})
		}
	}
}
