package responses

import (
	"encoding/json"
	"maps"
	"reflect"
	"strings"
	"unicode/utf8"

	"github.com/loomgate/loom/internal/jsonscan"
)

// scanner reads JSON text that has already been checked, by encoding/json
// (an UnmarshalJSON method is only ever handed a complete, valid value) or
// by the validating scanner of scanRequest (internal/jsonscan). It
// decodes the hot shapes of a request (the items of a long input) in the
// same pass that finds their ends, where encoding/json would validate and
// scan each nested level again for every UnmarshalJSON it calls. Whatever
// it does not know it leaves to encoding/json, so that every accepted
// shape and every error stays exactly what encoding/json makes of it.
type scanner struct {
	data []byte
	pos  int
	// blocks, when set, hold the strings, parts and raw values decoded
	// (a list of items or tools); otherwise each is allocated on its own.
	blocks *scanBlocks
}

// next skips white space and returns the next byte (0 at the end).
func (s *scanner) next() byte {
	// Most bodies are compact: the next byte is the token itself.
	if s.pos < len(s.data) && s.data[s.pos] > ' ' {
		return s.data[s.pos]
	}
	for s.pos < len(s.data) {
		switch c := s.data[s.pos]; c {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return c
		}
	}
	return 0
}

// value moves past the next value and returns its text.
func (s *scanner) value() []byte {
	s.next()
	start, depth := s.pos, 0
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case '"':
			s.skipString()
			if depth == 0 {
				return s.data[start:s.pos]
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return s.data[start:s.pos]
			}
			depth--
			if depth == 0 {
				s.pos++
				return s.data[start:s.pos]
			}
		case ',', ':', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return s.data[start:s.pos]
			}
		}
		s.pos++
	}
	return s.data[start:s.pos]
}

// skipString moves past the string that starts at pos and reports whether
// it holds an escape. The text is checked: the string ends at the first
// quote that is not escaped, and jsonscan.PlainRun finds the next quote
// or backslash 8 bytes a step (most strings are a few words long, where
// a call of bytes.IndexByte per string cost more than the scan).
func (s *scanner) skipString() (escaped bool) {
	s.pos++
	for {
		s.pos = jsonscan.PlainRun(s.data, s.pos)
		if s.pos >= len(s.data) {
			return escaped
		}
		if s.data[s.pos] == '"' {
			s.pos++
			return escaped
		}
		escaped = true
		s.pos += 2 // a backslash and the character it escapes
	}
}

// str decodes the string at pos; ok is false if the next value is not one.
func (s *scanner) str() (string, bool) {
	if s.next() != '"' {
		return "", false
	}
	start := s.pos
	if !s.skipString() {
		return s.text(s.data[start+1 : s.pos-1]), true
	}
	var v string
	if json.Unmarshal(s.data[start:s.pos], &v) != nil {
		return "", false
	}
	return v, true
}

// text returns b, a string's text without escapes, as a string: one of
// the values every item or tool repeats (intern), or a copy, in the
// blocks when the scanner has them.
func (s *scanner) text(b []byte) string {
	if v, ok := intern(b); ok {
		return v
	}
	if s.blocks != nil {
		return s.blocks.string(b)
	}
	return string(b)
}

// rawCopy returns a copy of a raw value's text, in the blocks when the
// scanner has them.
func (s *scanner) rawCopy(b []byte) json.RawMessage {
	if s.blocks != nil {
		return s.blocks.rawCopy(b)
	}
	return append(json.RawMessage(nil), b...)
}

// partList returns a list of n zero parts, from the blocks when the
// scanner has them.
func (s *scanner) partList(n int) []ContentPart {
	if s.blocks != nil {
		return s.blocks.partList(n)
	}
	return make([]ContentPart, n)
}

// intern returns the text as a string, without allocating one, when it
// is one of the values every item of a long input repeats (its type,
// role, status and part types) or every tool of a long list (its type).
func intern(b []byte) (string, bool) {
	switch string(b) { // compared without a conversion
	case ItemMessage:
		return ItemMessage, true
	case "user":
		return "user", true
	case "assistant":
		return "assistant", true
	case "system":
		return "system", true
	case "developer":
		return "developer", true
	case PartInputText:
		return PartInputText, true
	case PartOutputText:
		return PartOutputText, true
	case StatusCompleted:
		return StatusCompleted, true
	case ItemFunctionCall:
		return ItemFunctionCall, true
	case ItemFunctionCallOutput:
		return ItemFunctionCallOutput, true
	case ItemReasoning:
		return ItemReasoning, true
	case ToolFunction:
		return ToolFunction, true
	}
	return "", false
}

// stringField decodes a string into dst as encoding/json does (null
// leaves it as it is); ok is false for any other kind of value.
func (s *scanner) stringField(dst *string) bool {
	switch s.next() {
	case '"':
		v, ok := s.str()
		*dst = v
		return ok
	case 'n':
		s.value()
		return true
	}
	return false
}

// object decodes the object at pos, handing each member's key to field,
// which decodes its value; false (an unknown key, a value of another
// kind) stops it. The key is the text of the object when it holds no
// escape (field reads it, as switch string(key) does, without a copy:
// a string made of each would be one allocation per key per item).
func (s *scanner) object(field func(key []byte) bool) bool {
	if s.next() != '{' {
		return false
	}
	s.pos++
	for {
		if s.next() == ',' {
			s.pos++
		}
		if s.next() == '}' {
			s.pos++
			return true
		}
		key, ok := s.key()
		if !ok || s.next() != ':' {
			return false
		}
		s.pos++
		if !field(key) {
			return false
		}
	}
}

// key returns the text of the key at pos, decoded if it holds an escape.
func (s *scanner) key() ([]byte, bool) {
	if s.next() != '"' {
		return nil, false
	}
	start := s.pos
	if !s.skipString() {
		return s.data[start+1 : s.pos-1], true
	}
	var v string
	if json.Unmarshal(s.data[start:s.pos], &v) != nil {
		return nil, false
	}
	return []byte(v), true
}

// jsonKeys returns the keys encoding/json decodes into a struct of type
// T, in lower case (it matches them without regard to case).
func jsonKeys[T any]() map[string]bool {
	keys := map[string]bool{}
	t := reflect.TypeFor[T]()
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		keys[strings.ToLower(name)] = true
	}
	return keys
}

// union adds b's keys to a and returns a.
func union(a, b map[string]bool) map[string]bool {
	maps.Copy(a, b)
	return a
}

// The keys of the types the scanner decodes into.
var (
	// An item's keys are Item's and those of the fields behind
	// Item.Call, Item.Reasoning and Item.Tool.
	itemKeys = union(union(union(jsonKeys[Item](), jsonKeys[ItemCall]()), jsonKeys[ItemReasoningFields]()), jsonKeys[ItemTool]())
	partKeys = union(jsonKeys[ContentPart](), jsonKeys[PartMedia]())
	toolKeys = jsonKeys[Tool]()
)

// ignored skips the value of a key that encoding/json would ignore, one
// that names no field of the type whose keys are known; false for a key
// that does (in any case) and that the scanner leaves to encoding/json.
func (s *scanner) ignored(key []byte, known map[string]bool) bool {
	for i := range len(key) {
		if key[i] >= utf8.RuneSelf {
			return false // encoding/json folds some non-ASCII letters
		}
	}
	if known[strings.ToLower(string(key))] {
		return false
	}
	s.value()
	return true
}

// decodeItems decodes a JSON array of input items. Items of the common
// shapes (messages, function calls and their outputs) are decoded here;
// any other item, or one with a key or value this scanner does not take,
// goes to Item.UnmarshalJSON as it is.
// outputRoom is how many items past the end a decoded input list has room
// for: a turn's output (reasoning, a message, a call and its result).
const outputRoom = 8

func decodeItems(data []byte) ([]Item, error) {
	if !utf8.Valid(data) {
		// encoding/json replaces invalid UTF-8; let it.
		var items []Item
		err := json.Unmarshal(data, &items)
		return items, err
	}
	s := &scanner{data: data}
	s.next()
	s.pos++ // '['
	// Count first, so that the slice is allocated once at its size: a
	// long input would otherwise leave a trail of half-sized copies.
	n := 0
	for s.next() != ']' && s.pos < len(data) {
		s.value()
		n++
		if s.next() == ',' {
			s.pos++
		}
	}
	return decodeCountedItems(data, n)
}

// decodeCountedItems decodes an array of n input items, valid UTF-8 and
// checked JSON, as decodeItems does.
func decodeCountedItems(data []byte, n int) ([]Item, error) {
	if n > MaxInputItems {
		// Refused before a single item is built.
		return nil, tooManyItems(n)
	}
	// The room past the end is for the response's output: a server runs
	// the conversation on the input it decoded and appends the model's
	// items to it, which would otherwise copy the whole input.
	items := make([]Item, n, n+outputRoom)
	err := decodeElements(data, items,
		func(s *scanner, it *Item, _ int) bool { return s.item(it) },
		(*Item).decodeFields)
	if err != nil {
		return nil, err
	}
	return items, nil
}

// decodeElements decodes the elements of the checked JSON array in
// data into list, which has one per element: each by fast from the
// scanner at its start, or, where fast declines, by slow from its text
// into a zero value. What fast decodes is cut from shared blocks.
func decodeElements[T any](data []byte, list []T, fast func(s *scanner, v *T, i int) bool, slow func(v *T, raw []byte) error) error {
	s := &scanner{data: data, blocks: newScanBlocks(len(list))}
	s.next()
	s.pos++ // '['
	for i := range list {
		if s.next() == ',' {
			s.pos++
		}
		start := s.pos
		if fast(s, &list[i], i) {
			continue
		}
		s.pos = start
		var zero T
		list[i] = zero
		if err := slow(&list[i], s.value()); err != nil {
			return err
		}
	}
	return nil
}

// item decodes one input item of a common shape; false leaves it to
// encoding/json.
func (s *scanner) item(it *Item) bool {
	var text string // content given as a string, when isText
	var isText bool
	ok := s.object(func(key []byte) bool {
		switch string(key) {
		case "type":
			return s.stringField(&it.Type)
		case "id":
			return s.stringField(&it.ID)
		case "status":
			return s.stringField(&it.Status)
		case "role":
			return s.stringField(&it.Role)
		case "phase":
			return s.stringField(&it.EditTool().Phase)
		case "call_id":
			return s.stringField(&it.EditCall().CallID)
		case "name":
			return s.stringField(&it.EditCall().Name)
		case "arguments":
			return s.stringField(&it.EditCall().Arguments)
		case "output":
			it.EditCall().Output = s.rawCopy(s.value())
			return true
		case "content":
			var ok bool
			text, isText, ok = s.content(it)
			return ok
		}
		return s.ignored(key, itemKeys)
	})
	if ok {
		it.normalise(nil)
		if isText {
			it.Content = s.partList(1)
			it.Content[0] = textPart(it.Role, text)
		}
	}
	return ok
}

// content decodes a message's content: a string (returned with isText,
// for normalise to make a part of it once the role is known; returned by
// value, as a pointer to it would be one more allocation per item), null,
// or an array of text parts.
func (s *scanner) content(it *Item) (text string, isText, ok bool) {
	switch s.next() {
	case '"':
		text, ok = s.str()
		return text, true, ok
	case 'n':
		s.value()
		it.Content = nil
		return "", false, true
	case '[':
	default:
		return "", false, false
	}
	s.pos++
	// The parts are decoded here, then copied into a list of their
	// number (from the blocks).
	var decoded [4]ContentPart
	parts := decoded[:0]
	for {
		switch s.next() {
		case ',':
			s.pos++
			continue
		case ']':
			s.pos++
			it.Content = s.partList(len(parts))
			copy(it.Content, parts)
			return "", false, true
		}
		var p ContentPart
		ok := s.object(func(key []byte) bool {
			switch string(key) {
			case "type":
				return s.stringField(&p.Type)
			case "text":
				return s.stringField(&p.Text)
			case "annotations":
				return s.emptyArray(&p.Annotations)
			}
			return s.ignored(key, partKeys)
		})
		if !ok {
			return "", false, false
		}
		parts = append(parts, p)
	}
}

// emptyArray decodes [] as encoding/json does (an empty, non-nil slice);
// false for anything else.
func (s *scanner) emptyArray(dst *[]json.RawMessage) bool {
	if s.next() != '[' {
		return false
	}
	s.pos++
	if s.next() != ']' {
		return false
	}
	s.pos++
	*dst = []json.RawMessage{}
	return true
}

// function decodes a function tool of the usual shape into t; false
// leaves the tool to encoding/json.
func (s *scanner) function(t *Tool) bool {
	if !utf8.Valid(s.data) {
		return false
	}
	return s.functionAt(t, new(functionValues))
}

// functionValues holds what a decoded function tool points at: its
// description and strict flag. A list of tools takes them from one
// block (decodeCountedTools), not two allocations per tool.
type functionValues struct {
	description string
	strict      bool
}

// functionAt decodes the function tool at pos, of valid UTF-8, as
// function does, its pointers into v.
func (s *scanner) functionAt(t *Tool, v *functionValues) bool {
	ok := s.object(func(key []byte) bool {
		var ok bool
		switch string(key) {
		case "type":
			ok = s.stringField(&t.Type)
		case "name":
			ok = s.stringField(&t.Name)
		case "description":
			t.Description, ok = s.optionalString(&v.description)
		case "parameters":
			t.Parameters = s.rawCopy(s.value())
			ok = true
		case "strict":
			t.Strict, ok = s.optionalBool(&v.strict)
		default:
			ok = s.ignored(key, toolKeys)
		}
		return ok
	})
	return ok && t.Type == ToolFunction
}

// optionalString decodes a string into *into and returns into, or null
// into nil, as encoding/json does.
func (s *scanner) optionalString(into *string) (*string, bool) {
	if s.next() == 'n' {
		s.value()
		return nil, true
	}
	v, ok := s.str()
	*into = v
	return into, ok
}

// optionalBool decodes true or false into *into and returns into, or
// null into nil.
func (s *scanner) optionalBool(into *bool) (*bool, bool) {
	switch string(s.value()) {
	case "true":
		*into = true
		return into, true
	case "false":
		*into = false
		return into, true
	case "null":
		return nil, true
	}
	return nil, false
}

// decodeCountedTools decodes an array of n tools, valid UTF-8 and
// checked JSON: function tools of the usual shape here, any other as
// Tool.UnmarshalJSON decodes it. An element that is not an object is
// errNotScanned, for encoding/json to refuse.
func decodeCountedTools(data []byte, n int) ([]Tool, error) {
	tools := make([]Tool, n)
	values := make([]functionValues, n)
	err := decodeElements(data, tools,
		func(s *scanner, t *Tool, i int) bool { return s.functionAt(t, &values[i]) },
		func(t *Tool, raw []byte) error {
			if raw[0] != '{' {
				return errNotScanned
			}
			return t.UnmarshalJSON(raw)
		})
	if err != nil {
		return nil, err
	}
	return tools, nil
}

// depth returns how deeply the value at pos nests objects and arrays (0
// for a scalar) and moves past it.
func (s *scanner) depth() int {
	if c := s.next(); c != '{' && c != '[' {
		s.value()
		return 0
	}
	depth, deepest := 0, 0
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case '"':
			s.skipString()
			if depth == 0 {
				return deepest
			}
			continue
		case '{', '[':
			depth++
			deepest = max(deepest, depth)
		case '}', ']':
			depth--
			if depth <= 0 {
				s.pos++
				return deepest
			}
		}
		s.pos++
	}
	return deepest
}
