package harmony

import (
	"encoding/binary"
	"strings"
	"testing"
	"unicode/utf8"
)

// fuzzIDs turns fuzz input into token ids: little-endian 32-bit words,
// folded into the vocabulary plus a few ids past it (u32::MAX is kept, as
// the reference tests use it), so that mutations mostly produce real tokens.
func fuzzIDs(data []byte) []uint32 {
	ids := make([]uint32, 0, len(data)/4)
	for len(data) >= 4 {
		w := binary.LittleEndian.Uint32(data)
		if w != ^uint32(0) {
			w %= lastSpecial + 16
		}
		ids = append(ids, w)
		data = data[4:]
	}
	return ids
}

func fuzzBytes(ids []uint32) []byte {
	b := make([]byte, 0, 4*len(ids))
	for _, id := range ids {
		b = binary.LittleEndian.AppendUint32(b, id)
	}
	return b
}

// FuzzParser feeds arbitrary token streams, by id or as text, and checks
// that the parser never panics, that the deltas of every message add up to
// its content, that the content in progress matches its deltas, and that
// all content is valid UTF-8.
//
// mode: bit 0 role=assistant, bit 1 lenient, bit 2 feed as text, bits 3-7
// text chunk size.
func FuzzParser(f *testing.F) {
	for _, file := range caseFiles(f, "parse") {
		c := loadJSON[parseCase](f, file)
		var mode byte
		if c.Role != nil {
			mode |= 1
		}
		if !c.Strict {
			mode |= 2
		}
		f.Add(fuzzBytes(c.Tokens), mode)
		f.Add(fuzzBytes(c.Tokens), mode|4|3<<3)
	}
	f.Fuzz(func(t *testing.T, data []byte, mode byte) {
		opts := &ParseOptions{Lenient: mode&2 != 0}
		if mode&1 != 0 {
			opts.Role = RoleAssistant
		}
		p := NewParser(opts)
		var done []string
		var cur strings.Builder
		step := func() {
			cur.Write(p.Delta())
			if n := len(p.Messages()); n > len(done) {
				if n != len(done)+1 {
					t.Fatalf("one call completed %d messages", n-len(done))
				}
				done = append(done, cur.String())
				cur.Reset()
			}
			// Comparing the whole content at every step would be quadratic
			// on long inputs; compare lengths always and bytes while short.
			if p.State() == StateContent {
				if len(p.content) != cur.Len() || (cur.Len() < 512 && p.CurrentContent() != cur.String()) {
					t.Fatalf("current content %q, deltas %q", p.CurrentContent(), cur.String())
				}
			}
		}
		ids := fuzzIDs(data)
		if mode&4 == 0 {
			for _, id := range ids {
				_ = p.Process(id) // errors are fine; the parser must stay usable
				step()
			}
		} else {
			text, err := Decode(ids)
			if err != nil {
				return
			}
			chunk := int(mode>>3) + 1
			for len(text) > 0 {
				part := text[:min(chunk, len(text))]
				text = text[len(part):]
				for len(part) > 0 {
					n, err := p.ProcessText(part)
					step()
					if err != nil {
						n = max(n, 1) // skip what was refused
					}
					part = part[min(n, len(part)):]
				}
			}
		}
		_ = p.ProcessEOS()
		step()
		msgs := p.Messages()
		if len(msgs) != len(done) {
			t.Fatalf("%d messages, %d boundaries", len(msgs), len(done))
		}
		for i, m := range msgs {
			if m.Text() != done[i] {
				t.Fatalf("message %d: content %q, deltas %q", i, m.Text(), done[i])
			}
			if !utf8.ValidString(m.Text()) {
				t.Fatalf("message %d: invalid UTF-8 %q", i, m.Text())
			}
		}
	})
}
