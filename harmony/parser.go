package harmony

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ParserState is where a Parser is within a message.
type ParserState int

const (
	// StateExpectStart waits for <|start|>.
	StateExpectStart ParserState = iota
	// StateHeader collects the header up to <|message|>.
	StateHeader
	// StateContent collects content up to <|end|>, <|call|> or <|return|>.
	StateContent
)

func (s ParserState) String() string {
	switch s {
	case StateExpectStart:
		return "ExpectStart"
	case StateHeader:
		return "Header"
	case StateContent:
		return "Content"
	}
	return fmt.Sprintf("ParserState(%d)", int(s))
}

// ParseOptions configures a Parser. A nil *ParseOptions means the zero
// value: strict, expecting <|start|> first.
type ParseOptions struct {
	// Role, when set, is the role of a first message whose "<|start|>role"
	// was part of the prompt (RenderForCompletion ends with
	// "<|start|>assistant"), so parsing begins inside that header. Leave it
	// empty to parse text that begins with <|start|>.
	Role Role

	// Lenient recovers a first message whose header never reached
	// <|message|>, as models sometimes emit "<|channel|>analysis I must
	// refuse<|end|>": at the stop token the words after the channel become
	// the content. (The reference calls this non-strict mode; it only
	// applies while Role is pending, as in the reference.) In strict mode
	// such input is an error.
	Lenient bool
}

// Parser is a streaming parser for the model's output. Feed it token ids
// one at a time with Process (or text with ProcessText), then ProcessEOS
// when the engine stops. Between calls it exposes the current header
// (Author, Channel, Recipient, ContentType), the content added by the last
// call (Delta) and the messages completed so far (Messages).
//
// A Parser is not safe for concurrent use.
type Parser struct {
	t       *table
	role    Role // ParseOptions.Role, for Reset
	lenient bool

	state    ParserState
	nextRole Role // role of the first message when given in the options

	header    []byte // header bytes so far
	headerBad bool   // the header holds an id outside the vocabulary

	cur     Message // header of the message being parsed (no content)
	content []byte  // content so far; always valid UTF-8
	pending []byte  // bytes of an unfinished UTF-8 sequence
	from    int     // len(content) when the current call first added content; -1 if it has not
	delta   []byte

	hold []byte // ProcessText: a trailing "<|..." that may still become a special token
	buf  []byte // scratch for ProcessText

	messages []Message
}

// NewParser returns a parser configured by opts (nil for defaults).
func NewParser(opts *ParseOptions) *Parser {
	p := &Parser{t: vocab()}
	if opts != nil {
		p.role = opts.Role
		p.lenient = opts.Lenient
	}
	p.Reset()
	return p
}

// Reset returns the parser to its initial state and forgets its messages,
// keeping its buffers so that a reused parser does not allocate again.
func (p *Parser) Reset() {
	p.state = StateExpectStart
	p.nextRole = p.role
	if p.role != "" {
		p.state = StateHeader
	}
	p.header = p.header[:0]
	p.headerBad = false
	p.cur = Message{}
	p.content = p.content[:0]
	p.pending = p.pending[:0]
	p.from = -1
	p.delta = nil
	p.hold = p.hold[:0]
	p.messages = nil // earlier results stay valid for their holders
}

// State reports where the parser is within a message.
func (p *Parser) State() ParserState { return p.state }

// Author returns the author of the message being parsed: its parsed header
// in StateContent, the role given in ParseOptions before that, or the zero
// Author.
func (p *Parser) Author() Author {
	if p.state == StateContent {
		return p.cur.Author
	}
	return Author{Role: p.nextRole}
}

// Channel returns the channel of the message whose content is being parsed.
func (p *Parser) Channel() string {
	if p.state != StateContent {
		return ""
	}
	return p.cur.Channel
}

// Recipient returns the recipient of the message whose content is being
// parsed, e.g. "functions.get_weather".
func (p *Parser) Recipient() string {
	if p.state != StateContent {
		return ""
	}
	return p.cur.Recipient
}

// ContentType returns the content type of the message whose content is
// being parsed, e.g. "<|constrain|>json".
func (p *Parser) ContentType() string {
	if p.state != StateContent {
		return ""
	}
	return p.cur.ContentType
}

// Delta returns the content added by the last call to Process, ProcessText
// or ProcessEOS. It is empty when the call added none (a header token, or a
// token holding part of a UTF-8 character). When the call ended a message,
// Delta holds what the end added (a U+FFFD for bytes left unfinished, or
// the content recovered by Lenient mode) and belongs to that message, now
// the last of Messages.
//
// The slice aliases the parser's buffer: it is valid only until the next
// call and must not be modified. Copy it to keep it. Concatenating the
// deltas of a message gives exactly its content.
func (p *Parser) Delta() []byte { return p.delta }

// CurrentContent returns the content of the message being parsed so far.
func (p *Parser) CurrentContent() string {
	if p.state != StateContent {
		return ""
	}
	return string(p.content)
}

// Messages returns the messages completed so far, in order. A call that ends
// a message grows it by one; that is the message boundary. Callers must not
// modify the slice; it stays valid after Reset, which starts a new one.
func (p *Parser) Messages() []Message { return p.messages }

// begin starts a public call: the delta of the previous call is gone.
func (p *Parser) begin() {
	p.delta = nil
	p.from = -1
}

// end publishes the delta of a call that did not end a message.
func (p *Parser) end() {
	if p.from >= 0 && p.state == StateContent {
		p.delta = p.content[p.from:]
	}
}

// mark records where this call's content starts.
func (p *Parser) mark() {
	if p.from < 0 {
		p.from = len(p.content)
	}
}

// Process consumes one token id.
func (p *Parser) Process(id uint32) error {
	p.begin()
	err := p.token(id)
	p.end()
	return err
}

// ProcessEOS tells the parser the engine stopped. A message in progress is
// completed (its unfinished bytes flushed as U+FFFD); a header in progress
// is an error. The parser is then ready for a new message.
func (p *Parser) ProcessEOS() error {
	p.begin()
	var err error
	if len(p.hold) > 0 {
		err = p.ordinary(string(p.hold))
		p.hold = p.hold[:0]
	}
	if err == nil {
		switch p.state {
		case StateHeader:
			err = errors.New("harmony: unexpected end of stream while waiting for message header to complete")
		case StateContent:
			p.finish()
		}
	}
	p.end()
	return err
}

func (p *Parser) token(id uint32) error {
	switch p.state {
	case StateExpectStart:
		if id != TokenStart {
			return fmt.Errorf("harmony: unexpected token %d while expecting start token %d", id, TokenStart)
		}
		p.startHeader()
		return nil

	case StateHeader:
		if id == TokenMessage {
			return p.finishHeader()
		}
		if p.lenient && isParserStop(id) {
			return p.recoverHeader()
		}
		// In strict mode even a stop token is kept: the header then fails
		// to parse at <|message|>, or the stream ends inside it.
		piece, ok := p.t.tokenBytes(id)
		if !ok {
			p.headerBad = true
			return nil
		}
		p.header = append(p.header, piece...)
		return nil

	default: // StateContent
		if isParserStop(id) {
			p.finish()
			return nil
		}
		p.mark()
		piece, ok := p.t.tokenBytes(id)
		if !ok {
			// An id outside the vocabulary stands for no bytes: the
			// reader sees U+FFFD where it was.
			p.flushPending()
			p.content = append(p.content, replacement...)
			return nil
		}
		p.appendContent(piece)
		return nil
	}
}

func (p *Parser) startHeader() {
	p.state = StateHeader
	p.header = p.header[:0]
	p.headerBad = false
}

// ordinary consumes text that is not a special token (ProcessText).
func (p *Parser) ordinary(b string) error {
	if len(b) == 0 {
		return nil
	}
	switch p.state {
	case StateExpectStart:
		return fmt.Errorf("harmony: unexpected text %q while expecting <|start|>", truncate(b, 32))
	case StateHeader:
		p.header = append(p.header, b...)
	default:
		p.mark()
		p.appendContent(b)
	}
	return nil
}

func truncate(b string, n int) string {
	if len(b) > n {
		return b[:n]
	}
	return b
}

// appendContent adds token bytes to the content, holding back a UTF-8
// sequence that is not finished yet and replacing invalid bytes with U+FFFD
// (one per maximal invalid subsequence, as String::from_utf8_lossy does).
func (p *Parser) appendContent(piece string) {
	if len(p.pending) == 0 && utf8.ValidString(piece) {
		p.content = append(p.content, piece...)
		return
	}
	p.pending = append(p.pending, piece...)
	b := p.pending
	for len(b) > 0 {
		n, status := utf8Prefix(b)
		switch status {
		case seqValid:
			p.content = append(p.content, b[:n]...)
		case seqInvalid:
			p.content = append(p.content, replacement...)
		case seqIncomplete:
			// Wait for the next token; keep b at the front of pending.
			p.pending = append(p.pending[:0], b...)
			return
		}
		b = b[n:]
	}
	p.pending = p.pending[:0]
}

// flushPending replaces an unfinished UTF-8 sequence with U+FFFD.
func (p *Parser) flushPending() {
	if len(p.pending) > 0 {
		p.mark()
		p.content = append(p.content, replacement...)
		p.pending = p.pending[:0]
	}
}

type seqStatus int

const (
	seqValid      seqStatus = iota // b[:n] is valid UTF-8
	seqInvalid                     // b[:n] is one maximal invalid subsequence
	seqIncomplete                  // b is the start of a character not finished yet
)

// utf8Prefix classifies the front of b: the longest valid run, or one
// invalid subsequence, or an unfinished character.
func utf8Prefix(b []byte) (int, seqStatus) {
	n := 0
	for n < len(b) {
		if b[n] < utf8.RuneSelf {
			n++
			continue
		}
		r, size := utf8.DecodeRune(b[n:])
		if r == utf8.RuneError && size <= 1 {
			break
		}
		n += size
	}
	if n > 0 {
		return n, seqValid
	}
	// b[0] starts an invalid or unfinished sequence. utf8.FullRune is
	// false exactly while the bytes can still become a character, so the
	// maximal invalid subsequence is the longest prefix it is false for
	// (at least the first byte).
	if !utf8.FullRune(b) {
		return 0, seqIncomplete
	}
	n = 1
	for n < len(b) && !utf8.FullRune(b[:n+1]) {
		n++
	}
	return n, seqInvalid
}

// finish completes the current message.
func (p *Parser) finish() {
	p.flushPending()
	if p.from >= 0 {
		p.delta = p.content[p.from:]
	}
	p.from = -1
	m := p.cur
	m.Content = []Content{Text(p.content)}
	p.messages = append(p.messages, m)
	p.cur = Message{}
	p.content = p.content[:0]
	p.state = StateExpectStart
}

// finishHeader parses the header at <|message|>.
func (p *Parser) finishHeader() error {
	role := p.nextRole
	p.state = StateExpectStart // as the reference: a bad header drops the message
	p.nextRole = ""
	h, err := p.headerString()
	if err != nil {
		return err
	}
	hdr, rest, err := parseHeader(h, role, true)
	if err != nil {
		return err
	}
	if rest != "" {
		return fmt.Errorf("harmony: unexpected tokens remaining in message header: %q", rest)
	}
	p.cur = hdr
	p.content = p.content[:0]
	p.pending = p.pending[:0]
	p.state = StateContent
	return nil
}

// recoverHeader handles a stop token in the header in lenient mode.
func (p *Parser) recoverHeader() error {
	role := p.nextRole
	p.state = StateExpectStart
	p.nextRole = ""
	if role == "" || len(p.header) == 0 {
		// The reference drops such a message silently.
		return nil
	}
	h, err := p.headerString()
	if err != nil {
		return err
	}
	hdr, rest, err := parseHeader(h, role, false)
	if err != nil {
		return err
	}
	p.cur = hdr
	p.content = append(p.content[:0], rest...)
	p.pending = p.pending[:0]
	p.from = 0
	p.finish()
	return nil
}

func (p *Parser) headerString() (string, error) {
	if p.headerBad {
		return "", errors.New("harmony: could not decode header: unknown token id")
	}
	if !utf8.Valid(p.header) {
		return "", errors.New("harmony: could not decode header: invalid UTF-8")
	}
	return string(p.header), nil
}

// parseHeader parses a decoded header such as
//
//	assistant to=functions.f<|channel|>commentary <|constrain|>json
//	assistant<|channel|>commentary to=functions.f <|constrain|>json
//	browser.search to=assistant<|channel|>commentary
//
// role is the role already known (from ParseOptions) or "" to read it from
// the header. With recipientAndType false (lenient recovery) every word
// after the role and channel is returned as rest. The rules follow the
// reference parser, including which word is taken for what.
func parseHeader(h string, role Role, recipientAndType bool) (Message, string, error) {
	var m Message
	if i := strings.Index(h, "<|channel|>"); i >= 0 {
		after := h[i+len("<|channel|>"):]
		end := strings.IndexFunc(after, func(r rune) bool { return unicode.IsSpace(r) || r == '<' })
		if end < 0 {
			end = len(after)
		}
		if end == 0 {
			return m, "", errors.New("harmony: channel marker present but no channel value found in header")
		}
		m.Channel = after[:end]
		h = h[:i] + after[end:]
	}
	h = strings.TrimSpace(h)
	// "to=f<|constrain|>json": give the content type its own word.
	if strings.Contains(h, constrainMarker) {
		h = strings.TrimSpace(strings.ReplaceAll(h, constrainMarker, " "+constrainMarker))
	}
	parts := splitASCIISpace(h)

	roleWord := ""
	if role == "" {
		if len(parts) == 0 {
			return m, "", errors.New("harmony: message header did not contain a role")
		}
		roleWord = parts[0]
		if r, ok := parseRole(roleWord); ok {
			role = r
		} else if len(parts) > 1 || strings.HasPrefix(parts[0], "to=") {
			// An unknown first word followed by more is a tool answering,
			// e.g. "browser.search to=assistant".
			parts = parts[1:]
			role = RoleTool
		} else {
			return m, "", fmt.Errorf("harmony: unknown role: %s", roleWord)
		}
	}
	if len(parts) > 0 && parts[0] == string(role) {
		parts = parts[1:]
	}
	m.Author.Role = role
	if role == RoleTool && roleWord != "" {
		m.Author.Name = roleWord
	}

	if recipientAndType && len(parts) > 0 {
		n := len(parts)
		last := parts[n-1]
		parts = parts[:n-1]
		switch {
		case strings.HasPrefix(last, "to="):
			m.Recipient = last[len("to="):]
		case n == 1 && !strings.HasPrefix(last, constrainMarker):
			m.Recipient = last
		default:
			m.ContentType = last
			if k := len(parts); k > 0 {
				m.Recipient = strings.TrimPrefix(parts[k-1], "to=")
				parts = parts[:k-1]
			}
		}
	}
	return m, strings.Join(parts, " "), nil
}

// splitASCIISpace splits on runs of ASCII whitespace (not vertical tab),
// like Rust's split_ascii_whitespace.
func splitASCIISpace(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool {
		return r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '\f'
	})
}

// ProcessText consumes text from an engine that returns its output as text
// with special tokens written literally ("<|channel|>final<|message|>Hi").
// It consumes a prefix of s containing at most one special token, so that
// Delta and Messages describe one step, and returns the number of bytes
// consumed; call it until s is used up:
//
//	for len(s) > 0 {
//		n, err := p.ProcessText(s)
//		if err != nil { ... }
//		use(p.Delta())
//		s = s[n:]
//	}
//
// A trailing fragment that may be the start of a special token split across
// chunks ("<|en") is held back until the next call or ProcessEOS.
// The text of a special token is recognised wherever it appears, so feed
// only engine output here, never user text.
func (p *Parser) ProcessText(s string) (int, error) {
	p.begin()
	n, err := p.text(s)
	p.end()
	return n, err
}

func (p *Parser) text(s string) (int, error) {
	if len(p.hold) > 0 {
		k := min(len(s), maxSpecialLen-len(p.hold))
		p.buf = append(append(p.buf[:0], p.hold...), s[:k]...)
		if i := bytes.Index(p.buf[min(2, len(p.buf)):], []byte("|>")); i >= 0 {
			lit := p.buf[:i+4]
			if id, ok := p.t.specials[string(lit)]; ok {
				consumed := len(lit) - len(p.hold)
				p.hold = p.hold[:0]
				return consumed, p.token(id)
			}
		} else if k == len(s) && len(p.buf) < maxSpecialLen && couldBeSpecial(string(p.buf)) {
			p.hold = append(p.hold, s...)
			return len(s), nil
		}
		// Not a special token after all: it is ordinary text.
		err := p.ordinary(string(p.hold))
		p.hold = p.hold[:0]
		if err != nil {
			return 0, err
		}
	}
	i, id, n := findSpecial(s)
	if i < 0 {
		cut := heldSuffix(s)
		if err := p.ordinary(s[:cut]); err != nil {
			return 0, err
		}
		p.hold = append(p.hold, s[cut:]...)
		return len(s), nil
	}
	if err := p.ordinary(s[:i]); err != nil {
		return 0, err
	}
	return i + n, p.token(id)
}

// couldBeSpecial reports whether b may grow into a special token literal.
func couldBeSpecial(b string) bool {
	if len(b) == 0 || b[0] != '<' {
		return false
	}
	if len(b) >= 2 && b[1] != '|' {
		return false
	}
	for _, c := range []byte(b[min(2, len(b)):]) {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '|') {
			return false
		}
	}
	return true
}

// heldSuffix returns where a trailing possible special-token prefix of s
// begins (len(s) if there is none).
func heldSuffix(s string) int {
	from := max(0, len(s)-maxSpecialLen+1)
	for j := len(s) - 1; j >= from; j-- {
		if s[j] == '<' {
			if couldBeSpecial(s[j:]) {
				return j
			}
			return len(s)
		}
	}
	return len(s)
}

// replacement is U+FFFD, written for bytes that are not valid UTF-8.
const replacement = "\uFFFD"

// ParseMessages parses a complete completion (the reference's
// parse_messages_from_completion_tokens): every id, then the end of stream.
func ParseMessages(ids []uint32, opts *ParseOptions) ([]Message, error) {
	p := NewParser(opts)
	for _, id := range ids {
		if err := p.Process(id); err != nil {
			return p.Messages(), err
		}
	}
	err := p.ProcessEOS()
	return p.Messages(), err
}
