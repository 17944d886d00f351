package responses

import "bytes"

// A function tool in the echo's form is written exactly as appendJSON
// writes it: the keys type, name, description, parameters and strict in
// that order, compact, its strings without escapes. It is what the
// OpenAI SDKs send (they marshal the same fields in the same order), and
// what every response echoes back; a request whose tools are written
// this way is decoded by matching the fixed text between the values
// (echoedFunction) and echoed by copying each tool's text (echoText),
// not by walking the tool's keys and encoding its fields again.
const (
	echoOpen        = `{"type":"function","name":`
	echoDescription = `,"description":`
	echoParameters  = `,"parameters":`
	echoStrict      = `,"strict":`
)

// echoedFunction reads the function tool at the scanner when it is
// written in the echo's form, and returns where its values are in the
// scanner's bytes: the walk writes no Tool (and so no pointer), so that
// each tool of a long list is written once, from its copied text, by
// echoedTool. On false the scanner's offset is wherever it stopped: the
// caller seeks back and decodes the tool the general way.
func (s *scanner) echoedFunction() (echoSpan, bool) {
	none := echoSpan{at: -1}
	sp := echoSpan{at: s.js.Offset(), desc: -1, strict: -1}
	if !s.fixed(echoOpen) {
		return none, false
	}
	name, ok := s.echoString()
	if !ok || !s.fixed(echoDescription) {
		return none, false
	}
	sp.nameLen = len(name)
	if s.at('"') {
		desc, ok := s.echoString()
		if !ok {
			return none, false
		}
		sp.desc, sp.descLen = s.js.Offset()-len(desc)-1-sp.at, len(desc)
	} else if !s.at('n') || !s.js.Null() {
		return none, false
	}
	if !s.fixed(echoParameters) || !s.at('{') {
		return none, false
	}
	sp.params = s.js.Offset() - sp.at
	raw, depth, compact, err := s.js.RawDepth()
	if err != nil || !compact || !s.fixed(echoStrict) {
		return none, false
	}
	sp.paramsLen, sp.depth = len(raw), depth
	switch {
	case s.at('t'), s.at('f'):
		var strict bool
		strict, err = s.js.Bool()
		sp.strict = 0
		if strict {
			sp.strict = 1
		}
	case s.at('n') && s.js.Null():
	default:
		return none, false
	}
	if err != nil || !s.at('}') {
		return none, false
	}
	s.js.Seek(s.js.Offset() + 1)
	sp.n = s.js.Offset() - sp.at
	return sp, true
}

// echoSpan is where a tool in the echo's form was read from: its text's
// offset in the scanner's bytes (-1 for a tool not in that form) and
// length; the offsets in its text of its description's text (-1 for
// null) and of its parameters, and their lengths; the parameters' depth;
// and strict (-1 for null, 0 false, 1 true). Its name starts at a fixed offset. It
// holds no pointer: the kept lists of spans cost the collector nothing.
type echoSpan struct {
	at, n             int
	nameLen           int
	desc, descLen     int
	params, paramsLen int
	depth             int
	strict            int
}

// echoedTool writes the tool read at sp into t, its text and parameters
// in text (the tool's text, copied), its strings from the scanner's
// blocks: the same Tool functionAt makes of it.
func (s *scanner) echoedTool(t *Tool, sp *echoSpan, text []byte) {
	v := s.blocks.functionValues()
	name := len(echoOpen) + 1
	t.Type = ToolFunction
	t.Name = s.text(text[name : name+sp.nameLen])
	if sp.desc >= 0 {
		v.description = s.text(text[sp.desc : sp.desc+sp.descLen])
		t.Description = &v.description
	}
	if sp.strict >= 0 {
		v.strict = sp.strict == 1
		t.Strict = &v.strict
	}
	end := sp.params + sp.paramsLen
	t.Parameters = text[sp.params:end:end]
	t.schema = noteSchema(t.Parameters, sp.depth, true)
	t.echo = text
}

// at reports whether the next byte is c, with no white space before it.
func (s *scanner) at(c byte) bool {
	i := s.js.Offset()
	return i < len(s.data) && s.data[i] == c
}

// fixed consumes text when it comes next, byte for byte.
func (s *scanner) fixed(text string) bool {
	i := s.js.Offset()
	if !bytes.HasPrefix(s.data[i:], []byte(text)) {
		return false
	}
	s.js.Seek(i + len(text))
	return true
}

// echoString consumes a string that appendString writes as it is
// written here (no escape, no U+2028 or U+2029; the text is valid UTF-8)
// and returns its bytes between the quotes.
func (s *scanner) echoString() ([]byte, bool) {
	if !s.at('"') {
		return nil, false
	}
	raw, escaped, err := s.js.RawString()
	if err != nil || escaped {
		return nil, false
	}
	if bytes.IndexByte(raw, 0xe2) >= 0 && (bytes.Contains(raw, []byte("\u2028")) || bytes.Contains(raw, []byte("\u2029"))) {
		return nil, false
	}
	return raw, true
}

// echoText returns the tool's text as the decoder copied it when that is
// still what appendJSON writes for the tool (nil otherwise): a caller
// may have changed a field since, which is checked here, field by field,
// against the text (the name and description by their bytes, the
// parameters by identity, as the schema's note is).
func (t *Tool) echoText() []byte {
	e := t.echo
	if e == nil || t.Type != ToolFunction || t.DeferLoading || t.Raw != nil || !t.schema.holds(t.Parameters) {
		return nil
	}
	p := len(echoOpen)
	if !stringAt(e, p, t.Name) {
		return nil
	}
	p += len(t.Name) + 2
	if !hasAt(e, p, echoDescription) {
		return nil
	}
	p += len(echoDescription)
	switch {
	case t.Description == nil && hasAt(e, p, "null"):
		p += len("null")
	case t.Description != nil && stringAt(e, p, *t.Description):
		p += len(*t.Description) + 2
	default:
		return nil
	}
	if !hasAt(e, p, echoParameters) {
		return nil
	}
	p += len(echoParameters)
	if p >= len(e) || &e[p] != &t.Parameters[0] {
		return nil
	}
	p += len(t.Parameters)
	if !hasAt(e, p, echoStrict) {
		return nil
	}
	p += len(echoStrict)
	strict := "null"
	if t.Strict != nil {
		strict = "false"
		if *t.Strict {
			strict = "true"
		}
	}
	if !hasAt(e, p, strict) || len(e) != p+len(strict)+1 {
		return nil
	}
	return e
}

// stringAt reports whether b holds v as a JSON string at offset p, in
// quotes. A string of a text in the echo's form holds no quote, escape
// or character appendString would escape, and is valid UTF-8: a v that
// matches it up to a quote is all of it, and is written as it is.
func stringAt(b []byte, p int, v string) bool {
	end := p + 1 + len(v)
	return end < len(b) && b[p] == '"' && string(b[p+1:end]) == v && b[end] == '"'
}
