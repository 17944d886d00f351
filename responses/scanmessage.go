package responses

import (
	"encoding/json"

	"github.com/loomgate/loom/internal/jsonscan"
)

// message decodes the input message at the scanner when it has the shape
// a client resending its history gives nearly every one of them: type,
// role, id, status and content keys only, string values, the content a
// string or a list of parts of type, text and empty annotations. It
// reads the text in place, each key matched with its quotes and colon,
// where item goes through the Scanner's Object for every key and value
// (a call per token): a long input is a thousand such messages. False
// (any other key, kind of value or item type; text that is not JSON)
// leaves the item, and the scanner's offset, to item, whose result it
// would have been: what it takes it decodes as item does.
func (s *scanner) message(it *Item) bool {
	b := s.data
	i := s.js.Offset()
	if byteAt(b, i) != '{' {
		return false
	}
	i = skipSpace(b, i+1)
	var text string // content given as a string, when isText
	var isText, ok bool
	for {
		var dst *string
		switch {
		case hasAt(b, i, `"type":`):
			dst, i = &it.Type, i+len(`"type":`)
		case hasAt(b, i, `"role":`):
			dst, i = &it.Role, i+len(`"role":`)
		case hasAt(b, i, `"content":`):
			i = skipSpace(b, i+len(`"content":`))
			if byteAt(b, i) == '"' {
				if text, i, ok = s.plainString(b, i); !ok {
					return false
				}
				isText = true
			} else {
				if i, ok = s.textParts(it, b, i); !ok {
					return false
				}
				isText = false
			}
		case hasAt(b, i, `"id":`):
			dst, i = &it.ID, i+len(`"id":`)
		case hasAt(b, i, `"status":`):
			dst, i = &it.Status, i+len(`"status":`)
		default:
			return false
		}
		if dst != nil {
			if *dst, i, ok = s.plainString(b, skipSpace(b, i)); !ok {
				return false
			}
		}
		i = skipSpace(b, i)
		switch byteAt(b, i) {
		case ',':
			i = skipSpace(b, i+1)
			continue
		case '}':
			i++
		default:
			return false
		}
		break
	}
	if it.Type != "" && it.Type != ItemMessage || it.Role == "" {
		return false // item takes these (and a vendor-prefixed type)
	}
	if it.Type == "" {
		it.Type = ItemMessage
	}
	if isText {
		// Field by field: the part is zero, and a store of a whole part
		// into the heap is a barrier for each of its pointers while the
		// collector runs.
		it.Content = s.partList(1)
		p := &it.Content[0]
		p.Type, p.Text = textPartType(it.Role), text
	}
	s.js.Seek(i)
	return true
}

// textParts decodes a message's list of parts at b[i] when each has only
// type, text and empty annotations, and returns the offset after it.
func (s *scanner) textParts(it *Item, b []byte, i int) (int, bool) {
	if byteAt(b, i) != '[' {
		return i, false
	}
	var decoded [4]ContentPart
	parts := decoded[:0]
	i = skipSpace(b, i+1)
	for byteAt(b, i) != ']' {
		if byteAt(b, i) != '{' {
			return i, false
		}
		var p ContentPart
		var ok bool
		i = skipSpace(b, i+1)
		for {
			switch {
			case hasAt(b, i, `"type":`):
				p.Type, i, ok = s.plainString(b, skipSpace(b, i+len(`"type":`)))
			case hasAt(b, i, `"text":`):
				p.Text, i, ok = s.plainString(b, skipSpace(b, i+len(`"text":`)))
			case hasAt(b, i, `"annotations":`):
				i = skipSpace(b, i+len(`"annotations":`))
				if ok = byteAt(b, i) == '['; ok {
					if i = skipSpace(b, i+1); byteAt(b, i) != ']' {
						return i, false
					}
					i++
					p.Annotations = []json.RawMessage{}
				}
			default:
				return i, false
			}
			if !ok {
				return i, false
			}
			i = skipSpace(b, i)
			if c := byteAt(b, i); c == ',' {
				i = skipSpace(b, i+1)
				continue
			} else if c != '}' {
				return i, false
			}
			i = skipSpace(b, i+1)
			break
		}
		parts = append(parts, p)
		switch byteAt(b, i) {
		case ',':
			i = skipSpace(b, i+1)
			if byteAt(b, i) == ']' {
				return i, false // [{...},]
			}
		case ']':
		default:
			return i, false
		}
	}
	it.Content = s.partList(len(parts))
	copy(it.Content, parts)
	return i + 1, true
}

// plainString decodes the string at b[i] (its opening quote) and returns
// the offset after it: in place when it has no escape, through str
// otherwise.
func (s *scanner) plainString(b []byte, i int) (string, int, bool) {
	if byteAt(b, i) != '"' {
		return "", i, false
	}
	if end := jsonscan.PlainEnd(b, i+1); byteAt(b, end) == '"' {
		return s.text(b[i+1 : end]), end + 1, true
	}
	s.js.Seek(i)
	v, ok := s.str()
	return v, s.js.Offset(), ok
}

// hasAt reports whether b holds lit at i.
func hasAt(b []byte, i int, lit string) bool {
	return len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit
}

// byteAt returns b[i], or 0 past its end.
func byteAt(b []byte, i int) byte {
	if i < len(b) {
		return b[i]
	}
	return 0
}

// skipSpace returns the offset of the first byte at or after i that is
// not JSON white space: i itself in a compact body.
func skipSpace(b []byte, i int) int {
	for i < len(b) && b[i] <= ' ' && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}
