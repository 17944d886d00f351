package harmony

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/tiktoken-go/tokenizer"
)

// Special token ids of the o200k_harmony encoding used by gpt-oss.
//
// The ordinary vocabulary (o200k_base) occupies ids 0..199997; every id from
// 199998 to 201088 is a special token. Ids in 200000..201088 that have no
// name below are reserved and spelled <|reserved_N|>.
const (
	TokenStartOfText uint32 = 199998 // <|startoftext|>
	TokenEndOfText   uint32 = 199999 // <|endoftext|>
	TokenReturn      uint32 = 200002 // <|return|>: the model is done sampling
	TokenConstrain   uint32 = 200003 // <|constrain|>: content type marker, e.g. "<|constrain|>json"
	TokenChannel     uint32 = 200005 // <|channel|>
	TokenStart       uint32 = 200006 // <|start|>
	TokenEnd         uint32 = 200007 // <|end|>
	TokenMessage     uint32 = 200008 // <|message|>
	TokenCall        uint32 = 200012 // <|call|>: the assistant addressed a tool
)

const (
	firstSpecial uint32 = 199998
	lastSpecial  uint32 = 201088

	// maxSpecialLen is the length of the longest special token literal,
	// "<|reserved_201088|>"; text scanners hold back at most this much.
	maxSpecialLen = len("<|reserved_201088|>")
)

// namedSpecials are the special tokens with a name of their own; every other
// id in the special range is a reserved token.
var namedSpecials = map[uint32]string{
	TokenStartOfText: "<|startoftext|>",
	TokenEndOfText:   "<|endoftext|>",
	TokenReturn:      "<|return|>",
	TokenConstrain:   "<|constrain|>",
	TokenChannel:     "<|channel|>",
	TokenStart:       "<|start|>",
	TokenEnd:         "<|end|>",
	TokenMessage:     "<|message|>",
	TokenCall:        "<|call|>",
}

// constrainMarker is how <|constrain|> appears in a content type string.
const constrainMarker = "<|constrain|>"

// StopTokens returns the ids at which an engine should stop sampling an
// assistant turn: <|return|> and <|call|>. (The parser also ends a message at
// <|end|>, which the model emits between its own messages.)
func StopTokens() []uint32 { return []uint32{TokenReturn, TokenCall} }

// isParserStop reports whether id ends the message being parsed.
func isParserStop(id uint32) bool {
	return id == TokenReturn || id == TokenCall || id == TokenEnd
}

// IsSpecial reports whether id is in the special token range.
func IsSpecial(id uint32) bool { return id >= firstSpecial && id <= lastSpecial }

// SpecialTokenText returns the literal spelling of a special token, such as
// "<|end|>" for 200007.
func SpecialTokenText(id uint32) (string, bool) {
	if !IsSpecial(id) {
		return "", false
	}
	return vocab().pieces[id], true
}

// SpecialToken returns the id of a special token given its literal spelling.
func SpecialToken(text string) (uint32, bool) {
	id, ok := vocab().specials[text]
	return id, ok
}

// table holds the decoded vocabulary. It is built once, on first use, because
// the o200k vocabulary is large (about 200k entries).
type table struct {
	codec    tokenizer.Codec
	pieces   []string          // id -> bytes of the token (special tokens: their literal)
	specials map[string]uint32 // literal -> id, for every special token
}

var (
	tableOnce sync.Once
	theTable  *table
)

func vocab() *table {
	tableOnce.Do(func() {
		codec, err := tokenizer.Get(tokenizer.O200kBase)
		if err != nil {
			// The vocabulary is compiled into the binary; failing here means
			// the dependency itself is broken.
			panic("harmony: cannot load o200k_base: " + err.Error())
		}
		t := &table{
			codec:    codec,
			pieces:   make([]string, lastSpecial+1),
			specials: make(map[string]uint32, lastSpecial-firstSpecial+1),
		}
		one := make([]uint, 1)
		for id := uint32(0); id < firstSpecial; id++ {
			one[0] = uint(id)
			s, err := codec.Decode(one)
			if err == nil {
				t.pieces[id] = s
			}
		}
		for id := firstSpecial; id <= lastSpecial; id++ {
			lit, ok := namedSpecials[id]
			if !ok {
				lit = "<|reserved_" + strconv.FormatUint(uint64(id), 10) + "|>"
			}
			t.pieces[id] = lit
			t.specials[lit] = id
		}
		theTable = t
	})
	return theTable
}

// tokenBytes returns the bytes a token stands for. Special tokens stand for
// their literal spelling, as in the reference decoder.
func (t *table) tokenBytes(id uint32) (string, bool) {
	if id >= uint32(len(t.pieces)) {
		return "", false
	}
	p := t.pieces[id]
	return p, p != ""
}

// Encode encodes text as ordinary tokens. Text that spells a special token,
// such as a user typing "<|end|>", is encoded as ordinary text and can never
// produce a special id.
func Encode(text string) ([]uint32, error) { return AppendEncode(nil, text) }

// AppendEncode appends the ordinary encoding of text to dst.
func AppendEncode(dst []uint32, text string) ([]uint32, error) {
	if text == "" {
		return dst, nil
	}
	ids, _, err := vocab().codec.Encode(text)
	if err != nil {
		return dst, fmt.Errorf("harmony: encode: %w", err)
	}
	for _, id := range ids {
		dst = append(dst, uint32(id))
	}
	return dst, nil
}

// EncodeWithSpecial encodes text in which special tokens are written
// literally (tiktoken's allowed_special="all"). Use it only on trusted text,
// such as golden files or an engine's own output; never on user input.
func EncodeWithSpecial(text string) ([]uint32, error) {
	var out []uint32
	for text != "" {
		i, id, n := findSpecial(text)
		if i < 0 {
			return AppendEncode(out, text)
		}
		var err error
		if out, err = AppendEncode(out, text[:i]); err != nil {
			return out, err
		}
		out = append(out, id)
		text = text[i+n:]
	}
	return out, nil
}

// findSpecial finds the first complete special token literal in s and returns
// its byte offset, id and length; i is -1 when there is none.
func findSpecial(s string) (i int, id uint32, n int) {
	t := vocab()
	off := 0
	for {
		j := strings.Index(s[off:], "<|")
		if j < 0 {
			return -1, 0, 0
		}
		j += off
		end := min(len(s), j+maxSpecialLen)
		if k := strings.Index(s[j+2:end], "|>"); k >= 0 {
			lit := s[j : j+2+k+2]
			if id, ok := t.specials[lit]; ok {
				return j, id, len(lit)
			}
		}
		off = j + 1
	}
}

// ErrUnknownToken reports a token id outside the vocabulary.
var ErrUnknownToken = errors.New("harmony: unknown token id")

// Decode returns the bytes the tokens stand for, with special tokens written
// literally. The result is not guaranteed to be valid UTF-8 when ids split a
// character. Unknown ids give an error wrapping ErrUnknownToken.
func Decode(ids []uint32) (string, error) {
	t := vocab()
	var b strings.Builder
	for _, id := range ids {
		p, ok := t.tokenBytes(id)
		if !ok {
			return "", fmt.Errorf("%w: %d", ErrUnknownToken, id)
		}
		b.WriteString(p)
	}
	return b.String(), nil
}
