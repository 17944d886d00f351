package jsonscan

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// Scanner reads the few fields a chunk has straight from its JSON, in one
// pass, without reflection: a chunk's decoding is the per-token cost of
// every stream, and encoding/json spent most of it on reflection and on
// re-checking the validity of each nested value it had already checked.
// Values the caller does not ask for are skipped, and checked while they
// are skipped, so malformed JSON anywhere in the payload is an error.
//
// A caller walks one value at a time: Object calls its function with each
// key, which must consume that key's value (with String, Int, Object,
// Array, Null or Skip); End reports whether anything follows the value.
type Scanner struct {
	b []byte
	i int
	// maxDepth, when set, is how deeply SkipDepth follows a value in
	// place of MaxDepth (SetMaxDepth).
	maxDepth int
}

// SetMaxDepth makes SkipDepth refuse a value nested deeper than n (at most
// MaxDepth), with ErrTooDeep. A caller that skips values found some levels
// into a text sets it lower by those levels, so that no value it takes
// makes the whole text deeper than MaxDepth.
func (s *Scanner) SetMaxDepth(n int) { s.maxDepth = min(n, MaxDepth) }

// NewScanner returns a Scanner over one JSON value.
func NewScanner(b []byte) *Scanner { return &Scanner{b: b} }

// Reset starts the Scanner over b, so one Scanner serves every chunk.
func (s *Scanner) Reset(b []byte) { s.b, s.i = b, 0 }

var errUnexpectedEnd = errors.New("unexpected end of JSON input")

func (s *Scanner) syntax(what string) error {
	if s.i >= len(s.b) {
		return errUnexpectedEnd
	}
	return fmt.Errorf("invalid character %q at offset %d: %s", s.b[s.i], s.i, what)
}

func (s *Scanner) space() {
	// Most bodies are compact: the next byte is the token itself.
	if s.i < len(s.b) && s.b[s.i] > ' ' {
		return
	}
	s.skipSpace()
}

// skipSpace skips the white space at i.
func (s *Scanner) skipSpace() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
			continue
		}
		break
	}
}

// peek returns the first byte of the next value, after white space; 0 at
// the end of the input.
func (s *Scanner) peek() byte {
	s.space()
	if s.i >= len(s.b) {
		return 0
	}
	return s.b[s.i]
}

// End checks that nothing but white space follows the value read.
func (s *Scanner) End() error {
	// Not peek() != 0: peek returns 0 for a NUL byte too.
	if s.space(); s.i < len(s.b) {
		return s.syntax("after the top-level value")
	}
	return nil
}

// Null consumes a null and reports whether there was one.
func (s *Scanner) Null() bool {
	if s.peek() == 'n' && len(s.b)-s.i >= 4 && string(s.b[s.i:s.i+4]) == "null" {
		s.i += 4
		return true
	}
	return false
}

// Object reads an object, calling key for each of its keys (valid until
// key returns). A null is an empty object.
func (s *Scanner) Object(key func(k []byte) error) error {
	if s.Null() {
		return nil
	}
	if s.peek() != '{' {
		return s.syntax("looking for an object")
	}
	s.i++
	if s.peek() == '}' {
		s.i++
		return nil
	}
	return s.ObjectRest(key)
}

// ObjectRest reads the rest of an object from where a member begins: just
// after its opening brace (when it has a member) or after a comma. It
// calls key for each member that follows, and consumes the closing brace.
// A caller that knows an object's first members (decoded before, from the
// same text) starts here, after the comma that follows the last of them.
func (s *Scanner) ObjectRest(key func(k []byte) error) error {
	for {
		if s.peek() != '"' {
			return s.syntax("looking for an object key")
		}
		start := s.i + 1
		if _, err := s.stringBody(); err != nil {
			return err
		}
		k := s.b[start : s.i-1]
		if s.peek() != ':' {
			return s.syntax("after an object key")
		}
		s.i++
		if err := key(k); err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.i++
		case '}':
			s.i++
			return nil
		default:
			return s.syntax("after an object value")
		}
	}
}

// Array reads an array, calling elem for each element, which elem must
// consume. A null is an empty array.
func (s *Scanner) Array(elem func() error) error {
	if s.Null() {
		return nil
	}
	if s.peek() != '[' {
		return s.syntax("looking for an array")
	}
	s.i++
	if s.peek() == ']' {
		s.i++
		return nil
	}
	for {
		if err := elem(); err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.i++
		case ']':
			s.i++
			return nil
		default:
			return s.syntax("after an array element")
		}
	}
}

// String reads a string; a null is "".
func (s *Scanner) String() (string, error) {
	raw, plain, err := s.plainString()
	if err != nil || plain {
		return string(raw), err
	}
	return unquote(raw)
}

// StringBytes reads a string as String does, without a copy when it can:
// a plain string (plainString) is the input's own bytes, valid as long as
// the input is; any other is unquoted into new ones. A null is nil. For a
// value that is only compared, not kept.
func (s *Scanner) StringBytes() ([]byte, error) {
	raw, plain, err := s.plainString()
	if err != nil || plain {
		return raw, err
	}
	v, err := unquote(raw)
	return []byte(v), err
}

// plainString consumes a string (or a null: nil, plain) and returns its
// bytes between the quotes, and whether they are its value as they are.
// RawString stops at the closing quote without unescaping; most tokens
// hold no escape and are valid UTF-8, for which unquote would change
// nothing.
func (s *Scanner) plainString() (raw []byte, plain bool, err error) {
	if s.Null() {
		return nil, true, nil
	}
	if s.peek() != '"' {
		return nil, false, s.syntax("looking for a string")
	}
	raw, escaped, err := s.RawString()
	if err != nil {
		return nil, false, err
	}
	return raw, !escaped && utf8.Valid(raw), nil
}

// RawString consumes a string, checking it, and returns its bytes
// between the quotes, escapes left as they are, and whether it holds
// any. The bytes are the input's: a caller that keeps them copies them.
func (s *Scanner) RawString() (raw []byte, escaped bool, err error) {
	if s.peek() != '"' {
		return nil, false, s.syntax("looking for a string")
	}
	start := s.i + 1
	if escaped, err = s.stringBody(); err != nil {
		return nil, false, err
	}
	return s.b[start : s.i-1], escaped, nil
}

// stringBody consumes the string whose opening quote is at i, checking
// it, and reports whether it holds an escape.
func (s *Scanner) stringBody() (escaped bool, err error) {
	i := s.i + 1
	for {
		// Most strings (keys, values of a few words) end in their first
		// 8 bytes, which are checked here without a call.
		if i+8 <= len(s.b) {
			if m := specialBytes(binary.LittleEndian.Uint64(s.b[i:])); m != 0 {
				i += bits.TrailingZeros64(m) / 8
			} else {
				i = plainRun(s.b, i+8)
			}
		} else {
			i = plainRun(s.b, i)
		}
		if i >= len(s.b) {
			s.i = len(s.b)
			return escaped, errUnexpectedEnd
		}
		switch s.b[i] {
		case '"':
			s.i = i + 1
			return escaped, nil
		case '\\':
			escaped = true
			s.i = i
			if err := s.escape(); err != nil {
				return escaped, err
			}
			i = s.i
		default:
			s.i = i
			return escaped, s.syntax("in a string")
		}
	}
}

// escape checks the escape at i (a backslash) and moves past it.
func (s *Scanner) escape() error {
	if s.i+1 >= len(s.b) {
		s.i = len(s.b)
		return errUnexpectedEnd
	}
	switch s.b[s.i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		s.i += 2
		return nil
	case 'u':
		if _, ok := hex4(s.b[s.i+2:]); ok {
			s.i += 6
			return nil
		}
		if len(s.b)-s.i < 6 {
			s.i = len(s.b)
			return errUnexpectedEnd
		}
	}
	s.i++
	return s.syntax("in a string escape")
}

// unquote decodes a string's escapes and replaces each byte of invalid
// UTF-8 with U+FFFD, as encoding/json does.
func unquote(raw []byte) (string, error) {
	out := make([]byte, 0, len(raw))
	for i := 0; i < len(raw); {
		c := raw[i]
		if c >= utf8.RuneSelf {
			r, n := utf8.DecodeRune(raw[i:])
			out = utf8.AppendRune(out, r) // RuneError for a bad byte
			i += n
			continue
		}
		if c != '\\' {
			out = append(out, c)
			i++
			continue
		}
		if i+1 >= len(raw) {
			return "", errUnexpectedEnd
		}
		switch e := raw[i+1]; e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := hex4(raw[i+2:])
			if !ok {
				return "", fmt.Errorf("invalid \\u escape in a string")
			}
			i += 6
			if utf16.IsSurrogate(r) {
				if r2, ok := hex4(raw[min(i+2, len(raw)):]); ok && i+1 < len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
					if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
						out = utf8.AppendRune(out, dec)
						i += 6
						continue
					}
				}
				r = utf8.RuneError
			}
			out = utf8.AppendRune(out, r)
			continue
		default:
			return "", fmt.Errorf("invalid escape \\%c in a string", e)
		}
		i += 2
	}
	return string(out), nil
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// Int reads an integer; a null is 0.
func (s *Scanner) Int() (int, error) {
	if s.Null() {
		return 0, nil
	}
	start := s.i
	if err := s.number(); err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(string(s.b[start:s.i]))
	if err != nil {
		return 0, fmt.Errorf("number %s is not an integer", s.b[start:s.i])
	}
	return n, nil
}

// number consumes a JSON number.
func (s *Scanner) number() error {
	s.peek()
	start := s.i
	if s.i < len(s.b) && s.b[s.i] == '-' {
		s.i++
	}
	digits := func() int {
		n := 0
		for s.i < len(s.b) && '0' <= s.b[s.i] && s.b[s.i] <= '9' {
			s.i++
			n++
		}
		return n
	}
	if s.i < len(s.b) && s.b[s.i] == '0' {
		// No leading zeros: "0" is a number, "01" is not.
		s.i++
	} else if digits() == 0 {
		s.i = start
		return s.syntax("looking for a number")
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if digits() == 0 {
			return s.syntax("after a decimal point")
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if digits() == 0 {
			return s.syntax("in an exponent")
		}
	}
	return nil
}

// MaxDepth is how deeply Skip follows nested objects and arrays, as
// encoding/json does: a deeper value is an error, not a deep recursion.
const MaxDepth = 10000

// ErrTooDeep is the error (wrapped) of a value nested deeper than
// MaxDepth, for a caller that names where a text went too deep.
var ErrTooDeep = errors.New("exceeded max depth")

// Skip consumes any value, checking it.
func (s *Scanner) Skip() error {
	_, err := s.SkipDepth()
	return err
}

// SkipDepth consumes any value, checking it, and returns how deeply it
// nests objects and arrays (0 for a scalar, 1 for [1]).
//
// It walks nested values in a loop, not by recursion through Object and
// Array: skipping is most of the work of checking a long input. Its
// offset is a local variable (i), not the Scanner's, so that it stays in
// a register through the walk; a string without escapes is read by
// plainStringEnd on b and i; other strings, white space, numbers,
// literals and errors are the Scanner's methods, at s.i = i.
func (s *Scanner) SkipDepth() (deepest int, err error) {
	// Bit d of inObject says whether the container at depth d is an
	// object; 256 levels fit without an allocation.
	var words [4]uint64
	inObject := words[:]
	depth := 0
	limit := MaxDepth
	if s.maxDepth > 0 {
		limit = s.maxDepth
	}
	b, i := s.b, s.i
	key := false // the next token is an object's key
	for {
		// A value (or, with key, a key) starts here.
		i = s.token(i)
		c := byteAt(b, i)
		if key && c != '"' {
			s.i = i
			return deepest, s.syntax("looking for an object key")
		}
		switch c {
		case '{', '[':
			if depth >= limit {
				s.i = i
				return deepest, fmt.Errorf("%w at offset %d", ErrTooDeep, i)
			}
			if depth/64 == len(inObject) {
				inObject = append(inObject, make([]uint64, len(inObject))...)
			}
			deepest = max(deepest, depth+1)
			bit := uint64(1) << (depth % 64)
			inObject[depth/64] &^= bit
			i = s.token(i + 1)
			if c == '{' {
				inObject[depth/64] |= bit
			}
			if end := byteAt(b, i); c == '{' && end == '}' || c == '[' && end == ']' {
				i++
				break
			}
			depth++
			key = c == '{'
			continue
		case '"':
			if end := plainStringEnd(b, i+1); end > 0 {
				i = end
			} else {
				s.i = i
				if _, err := s.stringBody(); err != nil {
					return deepest, err
				}
				i = s.i
			}
			if key {
				if i = s.token(i); byteAt(b, i) != ':' {
					s.i = i
					return deepest, s.syntax("after an object key")
				}
				i++
				key = false
				continue
			}
		case 't', 'f', 'n':
			s.i = i
			if err := s.literal(); err != nil {
				return deepest, err
			}
			i = s.i
		default:
			s.i = i
			if err := s.number(); err != nil {
				return deepest, err
			}
			i = s.i
		}
		// A value ended: what follows it closes its containers or
		// starts the next value.
		for next := false; !next; {
			if depth == 0 {
				s.i = i
				return deepest, nil
			}
			object := inObject[(depth-1)/64]&(uint64(1)<<((depth-1)%64)) != 0
			i = s.token(i)
			switch c := byteAt(b, i); {
			case c == ',':
				i++
				key = object
				next = true
			case object && c == '}', !object && c == ']':
				i++
				depth--
			case object:
				s.i = i
				return deepest, s.syntax("after an object value")
			default:
				s.i = i
				return deepest, s.syntax("after an array element")
			}
		}
	}
}

// token returns the offset of the next token at or after i, past white
// space: i itself in a compact value, checked inline.
func (s *Scanner) token(i int) int {
	if i < len(s.b) && s.b[i] > ' ' {
		return i
	}
	return s.spaceFrom(i)
}

// spaceFrom skips the white space at i and returns the offset after it.
func (s *Scanner) spaceFrom(i int) int {
	s.i = i
	s.skipSpace()
	return s.i
}

// byteAt returns b[i], or 0 past its end.
func byteAt(b []byte, i int) byte {
	if i < len(b) {
		return b[i]
	}
	return 0
}

// literal consumes true, false or null.
func (s *Scanner) literal() error {
	for _, lit := range [...]string{"true", "false", "null"} {
		if len(s.b)-s.i >= len(lit) && string(s.b[s.i:s.i+len(lit)]) == lit {
			s.i += len(lit)
			return nil
		}
	}
	return s.syntax("looking for a value")
}

// Raw consumes any value and returns its bytes; a null gives nil.
func (s *Scanner) Raw() ([]byte, error) {
	if s.Null() {
		return nil, nil
	}
	start := s.i
	if err := s.Skip(); err != nil {
		return nil, err
	}
	return s.b[start:s.i], nil
}

// Offset returns how many bytes of the input the Scanner has consumed.
func (s *Scanner) Offset() int { return s.i }

// Seek moves the Scanner back (or on) to an offset Offset returned, so
// that a caller can read a value again another way.
func (s *Scanner) Seek(offset int) { s.i = offset }

// Peek returns the first byte of the next value ('{', '[', '"', 't',
// 'f', 'n', a digit or '-'), after white space; 0 at the end of the
// input. It consumes nothing.
func (s *Scanner) Peek() byte { return s.peek() }

// Bool reads true or false.
func (s *Scanner) Bool() (bool, error) {
	for _, lit := range [...]string{"true", "false"} {
		if s.peek() == lit[0] && len(s.b)-s.i >= len(lit) && string(s.b[s.i:s.i+len(lit)]) == lit {
			s.i += len(lit)
			return lit == "true", nil
		}
	}
	return false, s.syntax("looking for true or false")
}

// Number reads a number and returns its text.
func (s *Scanner) Number() ([]byte, error) {
	s.peek()
	start := s.i
	if err := s.number(); err != nil {
		return nil, err
	}
	return s.b[start:s.i], nil
}

// RawArray consumes an array, checking it, and returns its text and how
// many elements it has (a caller can size what it decodes it into
// without a second pass to count them).
func (s *Scanner) RawArray() (raw []byte, n int, err error) {
	if s.peek() != '[' {
		return nil, 0, s.syntax("looking for an array")
	}
	start := s.i
	err = s.Array(func() error {
		n++
		return s.Skip()
	})
	return s.b[start:s.i], n, err
}
