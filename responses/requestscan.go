package responses

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/loomgate/loom/internal/jsonscan"
)

// errNotScanned says that scanRequest left a body to encoding/json: a
// key, a value or a repetition it does not take, or JSON that is not
// valid (encoding/json then reports it as it always has).
var errNotScanned = BadRequest("", "not scanned")

// scanRequest decodes a create request in one pass over the body with
// the validating scanner: no encoding/json pass that checks the whole
// body and then walks its top level before the fields are decoded. It
// takes the forms clients send and gives up (errNotScanned) on anything
// else, so that every accepted shape and every error stays what
// encoding/json makes of it (TestScanRequestMatchesEncodingJSON holds it
// there): a key in another case or with an escape (encoding/json matches
// those too), a key given twice, a value of an unexpected kind, and text
// that is not valid Unicode (validText), which it checks once the walk is
// done. A limit refused while decoding (too many items) is returned as it
// is, once the text is known to be valid.
func scanRequest(body []byte, r *Request) *APIError {
	sc := newScanner(body)
	s := sc.js
	if s.Peek() != '{' {
		return errNotScanned
	}
	var seen [len(requestFields)]bool
	var refused *APIError
	err := s.Object(func(key []byte) error {
		i, ok := requestFieldIndex(key)
		if !ok {
			if !skippable(key) {
				return errNotScanned
			}
			return s.Skip()
		}
		if seen[i] {
			return errNotScanned // the last one wins: encoding/json's rule
		}
		seen[i] = true
		err := requestFields[i].decode(sc, r)
		if limit, ok := err.(*APIError); ok && limit != errNotScanned {
			// A limit is refused once the whole body is known to be
			// JSON, as encoding/json, which checks the body first,
			// refuses it.
			refused, err = limit, nil
		}
		return err
	})
	if err != nil || s.End() != nil || !validText(body) {
		return errNotScanned
	}
	return refused
}

// skippable reports whether encoding/json would ignore a key scanRequest
// does not know: one that names no field of Request in any case, plain
// ASCII without escapes (encoding/json unescapes keys and folds some
// non-ASCII letters).
func skippable(key []byte) bool {
	for _, c := range key {
		if c >= 0x80 || c == '\\' {
			return false
		}
	}
	_, known := requestKeys[strings.ToLower(string(key))]
	return !known
}

// requestField decodes one key of the request.
type requestField struct {
	key    string
	decode func(s *scanner, r *Request) error
}

// requestFields are the keys of Request, each with its decoder.
var requestFields = [...]requestField{
	{"model", func(s *scanner, r *Request) error { return scanString(s.js, &r.Model) }},
	{"input", scanInput},
	{"instructions", func(s *scanner, r *Request) error { return scanOptionalString(s.js, &r.Instructions) }},
	{"tools", scanTools},
	{"tool_choice", func(s *scanner, r *Request) error { return scanUnmarshaler(s.js, &r.ToolChoice) }},
	{"parallel_tool_calls", func(s *scanner, r *Request) error { return scanOptionalBool(s.js, &r.ParallelToolCalls) }},
	{"max_tool_calls", func(s *scanner, r *Request) error { return scanOptionalInt(s.js, &r.MaxToolCalls) }},
	{"max_output_tokens", func(s *scanner, r *Request) error { return scanOptionalInt(s.js, &r.MaxOutputTokens) }},
	{"temperature", func(s *scanner, r *Request) error { return scanOptionalFloat(s.js, &r.Temperature) }},
	{"top_p", func(s *scanner, r *Request) error { return scanOptionalFloat(s.js, &r.TopP) }},
	{"top_logprobs", func(s *scanner, r *Request) error { return scanOptionalInt(s.js, &r.TopLogprobs) }},
	{"presence_penalty", func(s *scanner, r *Request) error { return scanOptionalFloat(s.js, &r.PresencePenalty) }},
	{"frequency_penalty", func(s *scanner, r *Request) error { return scanOptionalFloat(s.js, &r.FrequencyPenalty) }},
	{"text", func(s *scanner, r *Request) error { return scanValue(s.js, &r.Text) }},
	{"reasoning", func(s *scanner, r *Request) error { return scanValue(s.js, &r.Reasoning) }},
	{"include", func(s *scanner, r *Request) error { return scanInclude(s.js, r) }},
	{"store", func(s *scanner, r *Request) error { return scanOptionalBool(s.js, &r.Store) }},
	{"background", func(s *scanner, r *Request) error { return scanOptionalBool(s.js, &r.Background) }},
	{"previous_response_id", func(s *scanner, r *Request) error { return scanOptionalString(s.js, &r.PreviousResponseID) }},
	{"conversation", func(s *scanner, r *Request) error { return scanRaw(s.js, &r.Conversation) }},
	{"stream", func(s *scanner, r *Request) error { return scanStream(s.js, r) }},
	{"stream_options", func(s *scanner, r *Request) error { return scanRaw(s.js, &r.StreamOptions) }},
	{"truncation", func(s *scanner, r *Request) error { return scanOptionalString(s.js, &r.Truncation) }},
	{"metadata", func(s *scanner, r *Request) error { return scanValue(s.js, &r.Metadata) }},
	{"prompt_cache_key", func(s *scanner, r *Request) error { return scanOptionalString(s.js, &r.PromptCacheKey) }},
	{"safety_identifier", func(s *scanner, r *Request) error { return scanOptionalString(s.js, &r.SafetyIdentifier) }},
	{"service_tier", func(s *scanner, r *Request) error { return scanOptionalString(s.js, &r.ServiceTier) }},
	{"user", func(s *scanner, r *Request) error { return scanOptionalString(s.js, &r.User) }},
	{"prompt", func(s *scanner, r *Request) error { return scanRaw(s.js, &r.Prompt) }},
	{"context_management", func(s *scanner, r *Request) error { return scanRaw(s.js, &r.ContextManagement) }},
	{"generate", func(s *scanner, r *Request) error { return scanOptionalBool(s.js, &r.Generate) }},
}

// requestKeys are the keys encoding/json decodes into a Request, in
// lower case, each with its field's index in requestFields when it has
// one.
var requestKeys = func() map[string]int {
	keys := map[string]int{}
	for k := range jsonKeys[Request]() {
		keys[k] = -1
	}
	for i, f := range requestFields {
		if _, ok := keys[f.key]; !ok {
			panic("responses: requestFields names " + f.key + ", which is no key of Request")
		}
		keys[f.key] = i
	}
	for k, i := range keys {
		if i < 0 {
			panic("responses: no decoder in requestFields for the key " + k)
		}
	}
	return keys
}()

// requestFieldIndex finds the field named exactly key.
func requestFieldIndex(key []byte) (int, bool) {
	i, ok := requestKeys[string(key)]
	return i, ok && requestFields[i].key == string(key)
}

// scanString decodes a string; null leaves it as it is.
func scanString(s *jsonscan.Scanner, dst *string) error {
	switch s.Peek() {
	case 'n':
		s.Null()
		return nil
	case '"':
		v, err := s.String()
		*dst = v
		return err
	}
	return errNotScanned
}

// scanOptionalString decodes a string into a new pointer; null is nil.
func scanOptionalString(s *jsonscan.Scanner, dst **string) error {
	if s.Null() {
		*dst = nil
		return nil
	}
	v := new(string)
	*dst = v
	return scanString(s, v)
}

// scanBool decodes true or false; set is false for null.
func scanBool(s *jsonscan.Scanner) (v, set bool, err error) {
	if s.Null() {
		return false, false, nil
	}
	if c := s.Peek(); c != 't' && c != 'f' {
		return false, false, errNotScanned
	}
	v, err = s.Bool()
	return v, true, err
}

// scanOptionalBool decodes true or false into a new pointer; null is nil.
func scanOptionalBool(s *jsonscan.Scanner, dst **bool) error {
	v, set, err := scanBool(s)
	*dst = nil
	if set {
		*dst = &v
	}
	return err
}

// scanStream decodes stream, a bool that null leaves false.
func scanStream(s *jsonscan.Scanner, r *Request) error {
	v, _, err := scanBool(s)
	r.Stream = v
	return err
}

// scanNumber returns the text of a number; nil for null.
func scanNumber(s *jsonscan.Scanner) ([]byte, error) {
	if s.Null() {
		return nil, nil
	}
	if c := s.Peek(); c != '-' && (c < '0' || c > '9') {
		return nil, errNotScanned
	}
	return s.Number()
}

// scanOptionalInt decodes an integer into a new pointer; null is nil. A
// number that is not an integer (1.5, 1e3) is left to encoding/json,
// which refuses it.
func scanOptionalInt(s *jsonscan.Scanner, dst **int) error {
	*dst = nil
	text, err := scanNumber(s)
	if err != nil || text == nil {
		return err
	}
	n, err := strconv.ParseInt(string(text), 10, strconv.IntSize)
	if err != nil {
		return errNotScanned
	}
	v := int(n)
	*dst = &v
	return nil
}

// scanOptionalFloat decodes a number into a new pointer; null is nil.
func scanOptionalFloat(s *jsonscan.Scanner, dst **float64) error {
	*dst = nil
	text, err := scanNumber(s)
	if err != nil || text == nil {
		return err
	}
	v, err := strconv.ParseFloat(string(text), 64)
	if err != nil {
		return errNotScanned // out of range
	}
	*dst = &v
	return nil
}

// scanRaw keeps a value's text as encoding/json keeps a json.RawMessage
// (a copy; null is the text null).
func scanRaw(s *jsonscan.Scanner, dst *json.RawMessage) error {
	if s.Null() {
		*dst = json.RawMessage("null")
		return nil
	}
	raw, err := s.Raw()
	*dst = append(json.RawMessage(nil), raw...)
	return err
}

// scanValue decodes a small value (text, reasoning, metadata) with
// encoding/json from its text, which the scanner has checked.
func scanValue(s *jsonscan.Scanner, dst any) error {
	raw, err := rawOrNull(s)
	if err != nil {
		return err
	}
	if json.Unmarshal(raw, dst) != nil {
		return errNotScanned
	}
	return nil
}

// scanUnmarshaler hands a value's checked text to its type's
// UnmarshalJSON, as encoding/json does; null is nil.
func scanUnmarshaler[T any, P interface {
	*T
	json.Unmarshaler
}](s *jsonscan.Scanner, dst *P) error {
	if s.Null() {
		*dst = nil
		return nil
	}
	raw, err := s.Raw()
	if err != nil {
		return err
	}
	v := P(new(T))
	if v.UnmarshalJSON(raw) != nil {
		return errNotScanned
	}
	*dst = v
	return nil
}

// rawOrNull returns the next value's text, null included.
func rawOrNull(s *jsonscan.Scanner) ([]byte, error) {
	if s.Null() {
		return []byte("null"), nil
	}
	return s.Raw()
}

// scanInput decodes input: a string or a list of items, the items
// decoded in the walk that checks them (scanner.items), a limit refused
// before they are built.
func scanInput(s *scanner, r *Request) error {
	if s.next() == '[' {
		items, err := s.items()
		if err != nil {
			if limit, ok := err.(*APIError); ok {
				return limit
			}
			return errNotScanned
		}
		r.Input = Input{Items: items, Set: true}
		return nil
	}
	if s.next() == '"' {
		// The most common input of all, a single user message, read
		// without encoding/json.
		text, err := s.js.String()
		if err != nil {
			return err
		}
		r.Input = stringInput(text)
		return nil
	}
	raw, err := rawOrNull(s.js)
	if err != nil {
		return err
	}
	if err := r.Input.UnmarshalJSON(raw); err != nil {
		if limit, ok := err.(*APIError); ok {
			return limit
		}
		return errNotScanned
	}
	return nil
}

// scanTools decodes the tools, each in the walk that checks it, as
// Tool.UnmarshalJSON decodes it; null is none.
func scanTools(s *scanner, r *Request) error {
	if s.js.Null() {
		r.Tools = nil
		return nil
	}
	if s.next() != '[' {
		return errNotScanned
	}
	tools, err := s.tools()
	if err != nil {
		return errNotScanned
	}
	r.Tools = tools
	return nil
}

// scanInclude decodes include, a list of strings; null is none.
func scanInclude(s *jsonscan.Scanner, r *Request) error {
	if s.Null() {
		r.Include = nil
		return nil
	}
	if s.Peek() != '[' {
		return errNotScanned
	}
	r.Include = []string{}
	return s.Array(func() error {
		var v string
		if err := scanString(s, &v); err != nil {
			return err
		}
		r.Include = append(r.Include, v)
		return nil
	})
}
