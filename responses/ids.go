package responses

import "unicode/utf8"

// MaxIDBytes is the longest id loom takes: of a response, a conversation,
// an item. The ids loom makes are about 55 bytes; a client's item ids are
// kept as sent, and a store indexes them.
const MaxIDBytes = 256

// ValidID reports whether s can be an id: 1 to MaxIDBytes bytes of valid
// UTF-8 with no control character. An id a store holds is one (loom's ids
// are, and a client's item id that is not is refused where it is given),
// so one that is not names nothing; and PostgreSQL cannot take some of
// them at all (a NUL, bytes that are not UTF-8).
func ValidID(s string) bool {
	if len(s) == 0 || len(s) > MaxIDBytes {
		return false
	}
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == 0x7f {
				return false
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 || r >= 0x80 && r < 0xa0 {
			return false // not UTF-8, or a C1 control character
		}
		i += n
	}
	return true
}

// checkItemID is the 400 for an item whose id cannot be one.
func (it *Item) checkItemID(param string) *APIError {
	if it.ID == "" || ValidID(it.ID) {
		return nil
	}
	return BadRequest(param+".id", "an item id must be 1 to %d bytes of text without control characters", MaxIDBytes)
}
