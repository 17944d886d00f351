package jsonscan

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// plainRunByByte is plainRun one byte a step: the reference.
func plainRunByByte(b []byte, i int) int {
	for ; i < len(b); i++ {
		if c := b[i]; c == '"' || c == '\\' || c < 0x20 {
			return i
		}
	}
	return i
}

// TestPlainRunEveryByteEveryPosition: every byte value, at every position
// of runs that cross the 8-byte words, after plain bytes of both halves
// of the byte range (a borrow from one must not hide the other), stops
// the run where the byte-at-a-time reference stops it.
func TestPlainRunEveryByteEveryPosition(t *testing.T) {
	for _, fill := range []byte{'a', 0x7f, 0x80, 0xff, ' ', '!', '#', '[', ']'} {
		for n := range 26 {
			b := []byte(strings.Repeat(string(fill), n))
			for pos := range n {
				for c := range 256 {
					b[pos] = byte(c)
					for from := range min(pos+1, 9) {
						if got, want := plainRun(b, from), plainRunByByte(b, from); got != want {
							t.Fatalf("fill %#x, %d bytes, %#x at %d, from %d: %d, want %d", fill, n, c, pos, from, got, want)
						}
					}
				}
				b[pos] = fill
			}
		}
	}
}

// TestPlainStringEndEveryByteEveryPosition: every byte value at every
// position of string bodies that cross the 8-byte words ends the string
// (a quote), refuses it (a backslash or a control byte: 0, which sends
// the string to the checking read) or is part of it, as the byte-at-a-
// time reference says; a body without its quote is refused.
func TestPlainStringEndEveryByteEveryPosition(t *testing.T) {
	for n := range 26 {
		b := []byte(strings.Repeat("a", n) + `"`)
		for pos := range n {
			for c := range 256 {
				b[pos] = byte(c)
				for from := range min(pos+1, 9) {
					want := 0
					if end := plainRunByByte(b, from); b[end] == '"' {
						want = end + 1
					}
					if got := plainStringEnd(b, from); got != want {
						t.Fatalf("%d bytes, %#x at %d, from %d: %d, want %d", n, c, pos, from, got, want)
					}
					if got := plainStringEnd(b[:n], from); got != 0 && bytes.IndexByte(b[from:n], '"') < 0 {
						t.Fatalf("%d bytes without a quote, %#x at %d, from %d: %d, want 0", n, c, pos, from, got)
					}
				}
			}
			b[pos] = 'a'
		}
	}
}

// TestScannerStringAtEveryPosition: a string with an escape, a control
// character, a non-ASCII letter or a byte of invalid UTF-8 at every
// position of strings longer than a word, and every truncation of it,
// decodes (or fails) as encoding/json decodes it, through String and
// through Skip.
func TestScannerStringAtEveryPosition(t *testing.T) {
	for _, special := range []string{
		`\"`, `\\`, `\/`, `\n`, `\t`, `\u00e9`, `\ud83d\ude00`, `\ud83d`, `\q`, `\u12x4`, `\`,
		"\x00", "\x01", "\x1f", "\x7f", "é", "世", "\xff", "\xe4\xb8", `"`,
	} {
		for n := range 20 {
			for pos := range n + 1 {
				text := strings.Repeat("x", pos) + special + strings.Repeat("y", n-pos)
				in := `"` + text + `"`
				for cut := range len(in) + 1 {
					checkString(t, in[:cut])
				}
				checkString(t, `{"k":`+in+`,"n":1}`)
			}
		}
	}
}

// checkString compares the Scanner with encoding/json on one text: the
// same string or a failure from both, and Skip accepting exactly what
// encoding/json accepts.
func checkString(t *testing.T, in string) {
	t.Helper()
	valid := json.Valid([]byte(in))
	s := NewScanner([]byte(in))
	err := s.Skip()
	if err == nil {
		err = s.End()
	}
	if (err == nil) != valid {
		t.Fatalf("%q: Skip says %v, encoding/json valid %v", in, err, valid)
	}
	var want string
	if !valid || json.Unmarshal([]byte(in), &want) != nil {
		return // not valid, or not a string
	}
	s = NewScanner([]byte(in))
	got, err := s.String()
	if err == nil {
		err = s.End()
	}
	if err != nil || got != want {
		t.Fatalf("%q: String %q, %v; encoding/json %q", in, got, err, want)
	}
}

// FuzzScanner holds the Scanner to encoding/json on any text: Skip
// accepts exactly what encoding/json accepts, and a string decodes to
// what encoding/json makes of it.
func FuzzScanner(f *testing.F) {
	for _, seed := range []string{
		`{"a":[1,-2.5e3,true,null,{"b":"c\"d\\e\u00e9"}]}`, `"x\ud83d\ude00y"`, "\"bad \xff\"", `[{"k":"v"},]`, `01`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkString(t, string(data))
	})
}
