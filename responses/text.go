package responses

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// textError returns a 400 when a request's JSON strings carry text that
// is not valid Unicode: raw bytes that are not UTF-8, or a \u escape of a
// lone UTF-16 surrogate. encoding/json would silently replace both with
// U+FFFD, so the model would see something other than what was sent.
// fields are the body's top-level fields; the error names the first one
// at fault.
func textError(body []byte, fields map[string]json.RawMessage) *APIError {
	if validText(body) {
		return nil
	}
	param := ""
	for name, raw := range fields {
		if !utf8.Valid(raw) || hasLoneSurrogate(raw) {
			if param == "" || name < param {
				param = name
			}
		}
	}
	return BadRequest(param, "the request contains text that is not valid Unicode (invalid UTF-8 or a lone surrogate escape)")
}

// validText reports whether the JSON text b is valid UTF-8 with no lone
// surrogate escape.
func validText(b []byte) bool { return utf8.Valid(b) && !hasLoneSurrogate(b) }

// hasLoneSurrogate reports whether b, JSON text, holds a \uXXXX escape of
// a high surrogate not followed by a low one, or a low surrogate alone.
func hasLoneSurrogate(b []byte) bool {
	for {
		i := bytes.IndexByte(b, '\\')
		if i < 0 || i+1 >= len(b) {
			return false
		}
		if b[i+1] != 'u' {
			b = b[i+2:] // an escape of one character, such as \\ or \"
			continue
		}
		r, ok := hex4(b[i+2:])
		if !ok {
			return false // malformed; the decoder reports it
		}
		b = b[i+6:]
		switch {
		case r >= 0xDC00 && r <= 0xDFFF:
			return true
		case r >= 0xD800 && r <= 0xDBFF:
			if len(b) < 6 || b[0] != '\\' || b[1] != 'u' {
				return true
			}
			lo, ok := hex4(b[2:])
			if !ok || lo < 0xDC00 || lo > 0xDFFF {
				return true
			}
			b = b[6:]
		}
	}
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c-'a') + 10
		case c >= 'A' && c <= 'F':
			r |= rune(c-'A') + 10
		default:
			return 0, false
		}
	}
	return r, true
}
