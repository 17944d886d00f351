package responses

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"reflect"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/loomgate/loom/internal/jsonscan"
)

// scanner decodes the hot shapes of a request (the items of a long
// input, function tools) straight from the text, in the same walk that
// checks it (the validating jsonscan.Scanner): where encoding/json would
// validate and scan each nested level again for every UnmarshalJSON it
// calls, and where a request was checked by one walk and decoded by a
// second. Whatever it does not know it leaves to encoding/json, so that
// every accepted shape and every error stays exactly what encoding/json
// makes of it. A string without escapes is its bytes: the text is valid
// UTF-8, checked before the walk (decodeItems) or, for a request, once
// the walk is done (scanRequest), which refuses a request whose text is
// not valid whatever was made of it.
type scanner struct {
	js   *jsonscan.Scanner
	data []byte // what js reads
	// blocks, when set, hold the strings, parts and raw values decoded
	// (a list of items or tools); otherwise each is allocated on its own.
	blocks *scanBlocks
}

// newScanner returns a scanner over data.
func newScanner(data []byte) *scanner {
	js := jsonscan.NewScanner(data)
	// The values it skips are at most scanLevels into the body: none it
	// takes can make the body deeper than MaxNesting, counted from the
	// body as encoding/json counts. One that may is left to encoding/json,
	// which then refuses the body or not.
	js.SetMaxDepth(MaxNesting - scanLevels)
	return &scanner{js: js, data: data}
}

// scanLevels bounds how many objects and arrays of a request enclose a
// value the scanner skips or takes raw: an item's field is three levels
// in (the body, input, the item), a content part's five.
const scanLevels = 8

// errDeclined stops a walk of the scanner's at a key or value it leaves
// to encoding/json.
var errDeclined = errors.New("left to encoding/json")

// next returns the first byte of the next value (0 at the end).
func (s *scanner) next() byte { return s.js.Peek() }

// value moves past the next value, checking it, and returns its text
// (null as the text null).
func (s *scanner) value() ([]byte, bool) {
	raw, err := rawOrNull(s.js)
	return raw, err == nil
}

// str decodes the string at the scanner; ok is false if the next value
// is not one, or not a valid one.
func (s *scanner) str() (string, bool) {
	start := s.js.Offset()
	raw, escaped, err := s.js.RawString()
	switch {
	case err != nil:
		return "", false
	case !escaped:
		return s.text(raw), true
	}
	s.js.Seek(start)
	v, err := s.js.String()
	return v, err == nil
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
		return s.js.Null()
	}
	return false
}

// object decodes the object at the scanner, handing each member's key to
// field, which decodes its value; false (an unknown key, a value of
// another kind, text that is not JSON) stops it. The key is the text
// between its quotes, escapes as they are: field reads it, as switch
// string(key) does, without a copy (a string made of each would be one
// allocation per key per item), and no key of a switch has an escape, so
// that one with an escape reaches ignored, which declines it.
func (s *scanner) object(field func(key []byte) bool) bool {
	if s.next() != '{' {
		return false
	}
	return s.js.Object(func(key []byte) error {
		if !field(key) {
			return errDeclined
		}
		return nil
	}) == nil
}

// jsonKeys returns the keys encoding/json decodes into a struct of type
// T, in lower case (it matches them without regard to case).
func jsonKeys[T any]() map[string]bool {
	keys := map[string]bool{}
	t := reflect.TypeFor[T]()
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
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
// that does (in any case) and that the scanner leaves to encoding/json,
// and for a key with an escape (encoding/json matches it unescaped).
func (s *scanner) ignored(key []byte, known map[string]bool) bool {
	for i := range len(key) {
		if key[i] >= utf8.RuneSelf || key[i] == '\\' {
			return false // encoding/json folds some non-ASCII letters
		}
	}
	if known[strings.ToLower(string(key))] {
		return false
	}
	_, ok := s.value()
	return ok
}

// outputRoom is how many items past the end a decoded input list has room
// for: a turn's output (reasoning, a message, a call and its result).
const outputRoom = 8

// decodeItems decodes a JSON array of input items, valid JSON. Items of
// the common shapes (messages, function calls and their outputs) are
// decoded here; any other item, or one with a key or value this scanner
// does not take, goes to Item.UnmarshalJSON as it is.
func decodeItems(data []byte) ([]Item, error) {
	if !utf8.Valid(data) {
		// encoding/json replaces invalid UTF-8; let it.
		var items []Item
		err := json.Unmarshal(data, &items)
		return items, err
	}
	return newScanner(data).items()
}

// items decodes the array of input items at the scanner, in the walk
// that checks it, into a list allocated once: a long input would
// otherwise leave a trail of half-sized copies. Its size comes from the
// braces in the rest of the text (itemsBound, by bytes.Count with vector
// instructions), which no list of objects can exceed; where that bound
// is loose enough to waste memory (many braces for few bytes: inside
// strings, nested values), the items are counted first by a walk that
// checks them. A limit is refused before a single item is built.
func (s *scanner) items() ([]Item, error) {
	s.next() // the bound counts from the '['
	start := s.js.Offset()
	rest := s.data[start:]
	n := itemsBound(rest)
	if n > shortInput {
		// The bound counts the braces of what follows the input too:
		// a short input before many tools would have room for a list
		// per brace of their schemas.
		if count, ok := s.countShort(start); ok {
			n = count
		}
	}
	if n > len(rest)/itemBytesPerBrace || n > MaxInputItems {
		_, count, err := s.js.RawArray()
		if err != nil {
			return nil, errNotScanned
		}
		if count > MaxInputItems {
			return nil, tooManyItems(count)
		}
		n = count
		s.js.Seek(start)
	}
	// The room past the end is for the response's output: a server runs
	// the conversation on the input it decoded and appends the model's
	// items to it, which would otherwise copy the whole input.
	items := make([]Item, 0, n+outputRoom)
	items, err := decodeElements(s, items, n, MaxInputItems, decodeItem, (*Item).decodeFields)
	return s.itemsDecoded(start, items, err)
}

// decodeItem decodes an item of a common shape (messages first, then the
// others); false leaves it to encoding/json.
func decodeItem(s *scanner, it *Item) bool {
	at := s.js.Offset()
	if s.message(it) {
		return true
	}
	s.js.Seek(at)
	*it = Item{}
	return s.item(it)
}

// itemsDecoded returns what decoding the items of the array at start
// gave: too many of them is the limit's error, with their count.
func (s *scanner) itemsDecoded(start int, items []Item, err error) ([]Item, error) {
	if err == errTooMany {
		s.js.Seek(start)
		_, count, err := s.js.RawArray()
		if err != nil {
			return nil, errNotScanned
		}
		return nil, tooManyItems(count)
	}
	return items, err
}

// shortInput is how many elements countShort counts before it gives up:
// a walk of so few costs little next to decoding a long input.
const shortInput = 16

// countShort counts the elements of the array at offset start when it
// has at most shortInput of them, checking them; false for a longer one
// or text that is not JSON (which the decode reports). The scanner is
// back at start.
func (s *scanner) countShort(start int) (int, bool) {
	n := 0
	err := s.js.Array(func() error {
		if n == shortInput {
			return errTooMany
		}
		n++
		return s.js.Skip()
	})
	s.js.Seek(start)
	return n, err == nil
}

// itemsBound returns at least the number of objects in the array that
// starts rest: its '{' less those that open the first element of an
// array other than this one ("[{", a message's first content part, a
// tools list), which are not its elements either. ('[' is rare enough in
// JSON for bytes.Count of "[{" to cost little.)
func itemsBound(rest []byte) int {
	n := bytes.Count(rest, []byte{'{'}) - bytes.Count(rest, []byte("[{"))
	if bytes.HasPrefix(rest, []byte("[{")) {
		n++ // the first element of this array
	}
	return n
}

// itemBytesPerBrace is the fewest bytes of text per '{' for which items
// sizes the list by the braces: at most one unused Item per 32 bytes of
// text.
const itemBytesPerBrace = 32

// errTooMany says that a list has more elements than decodeElements was
// told to take.
var errTooMany = errors.New("too many elements")

// decodeElements decodes the elements of the array at the scanner,
// checking it, appended to list (whose room past its length is zero), at
// most limit of them (errTooMany): each by fast from the scanner at its
// start, or, where fast declines, by slow from its text into a zero
// value. What fast decodes is cut from shared blocks, sized for about
// expected elements. Text that is not JSON is errNotScanned, for
// encoding/json to report.
func decodeElements[T any](s *scanner, list []T, expected, limit int, fast func(s *scanner, v *T) bool, slow func(v *T, raw []byte) error) ([]T, error) {
	if s.next() != '[' {
		return nil, errNotScanned
	}
	s.blocks = newScanBlocks(expected)
	var zero T
	var failed error
	elem := func() error {
		i := len(list)
		if i == limit {
			return errTooMany
		}
		if i < cap(list) {
			list = list[:i+1] // zero: the list's room was never written
		} else {
			list = append(list, zero)
		}
		start := s.js.Offset()
		if fast(s, &list[i]) {
			return nil
		}
		s.js.Seek(start)
		list[i] = zero
		raw, err := rawOrNull(s.js)
		if err != nil {
			return err
		}
		if err := slow(&list[i], raw); err != nil {
			failed = err
			return err
		}
		return nil
	}
	err := s.js.Array(elem)
	switch {
	case failed != nil:
		return nil, failed
	case err == errTooMany:
		return nil, err
	case err != nil:
		return nil, errNotScanned
	}
	return list, nil
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
			raw, ok := s.value()
			it.EditCall().Output = s.rawCopy(raw)
			return ok
		case "async":
			var async bool
			_, ok := s.optionalBool(&async)
			if async {
				it.EditCall().Async = true
			}
			return ok
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
		it.Content = nil
		return "", false, s.js.Null()
	case '[':
	default:
		return "", false, false
	}
	// The parts are decoded here, then copied into a list of their
	// number (from the blocks).
	var decoded [4]ContentPart
	parts := decoded[:0]
	err := s.js.Array(func() error {
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
			return errDeclined
		}
		parts = append(parts, p)
		return nil
	})
	if err != nil {
		return "", false, false
	}
	it.Content = s.partList(len(parts))
	copy(it.Content, parts)
	return "", false, true
}

// emptyArray decodes [] as encoding/json does (an empty, non-nil slice);
// false for anything else.
func (s *scanner) emptyArray(dst *[]json.RawMessage) bool {
	if s.next() != '[' {
		return false
	}
	if s.js.Array(func() error { return errDeclined }) != nil {
		return false
	}
	*dst = []json.RawMessage{}
	return true
}

// function decodes a function tool of the usual shape into t; false
// leaves the tool to encoding/json.
func (s *scanner) function(t *Tool) bool {
	if !utf8.Valid(s.data) {
		return false
	}
	return s.functionAt(t, new(functionValues)) && s.js.End() == nil
}

// functionValues holds what a decoded function tool points at: its
// description and strict flag. A list of tools takes them from one
// block (tools), not two allocations per tool.
type functionValues struct {
	description string
	strict      bool
}

// functionAt decodes the function tool at the scanner as function does,
// its pointers into v.
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
			ok = s.parameters(t)
		case "strict":
			t.Strict, ok = s.optionalBool(&v.strict)
		case "async":
			t.Async, ok = s.optionalBool(new(bool))
		default:
			ok = s.ignored(key, toolKeys)
		}
		return ok
	})
	return ok && t.Type == ToolFunction
}

// parameters decodes a function tool's schema into t.
func (s *scanner) parameters(t *Tool) bool {
	if s.next() == 'n' {
		t.Parameters = s.rawCopy([]byte("null"))
		return s.js.Null()
	}
	raw, err := s.js.Raw()
	if err != nil {
		return false
	}
	t.Parameters = s.rawCopy(raw)
	return true
}

// optionalString decodes a string into *into and returns into, or null
// into nil, as encoding/json does.
func (s *scanner) optionalString(into *string) (*string, bool) {
	if s.next() == 'n' {
		return nil, s.js.Null()
	}
	v, ok := s.str()
	*into = v
	return into, ok
}

// optionalBool decodes true or false into *into and returns into, or
// null into nil.
func (s *scanner) optionalBool(into *bool) (*bool, bool) {
	switch s.next() {
	case 'n':
		return nil, s.js.Null()
	case 't', 'f':
		v, err := s.js.Bool()
		*into = v
		return into, err == nil
	}
	return nil, false
}

// tools decodes the array of tools at the scanner, in the walk that
// checks it: function tools of the usual shape here, any other as
// Tool.UnmarshalJSON decodes it. An element that is not an object is
// errNotScanned, for encoding/json to refuse.
//
// Nothing cheap bounds the list's length closely (the count of braces is
// several times the tools), so the tools are decoded into a list kept
// from one request to the next (toolLists) and copied into one of their
// number: a list grown as it is decoded was half of what the decode
// allocated (8, 16, ... 128 Tools for 100).
func (s *scanner) tools() ([]Tool, error) {
	kept := toolLists.Get().(*[]Tool)
	list, err := decodeElements(s, (*kept)[:0], 8, -1,
		func(s *scanner, t *Tool) bool {
			return s.functionAt(t, s.blocks.functionValues())
		},
		func(t *Tool, raw []byte) error {
			if raw[0] != '{' {
				return errNotScanned
			}
			return t.UnmarshalJSON(raw)
		})
	if err != nil {
		// What the walk wrote into the kept list is unknown: let it go.
		return nil, err
	}
	// The tools are moved out of the kept list, which goes back zero, as
	// decodeElements takes it, and pointing at nothing of this request.
	tools := make([]Tool, len(list))
	for i := range list {
		tools[i], list[i] = list[i], Tool{}
	}
	if cap(list) <= maxKeptTools {
		*kept = list[:0] // the kept list, or the one it grew into
		toolLists.Put(kept)
	}
	return tools, nil
}

// toolLists holds the lists tools decodes into, each of up to
// maxKeptTools.
var toolLists = sync.Pool{New: func() any {
	list := make([]Tool, 0, 64)
	return &list
}}

const maxKeptTools = 256
