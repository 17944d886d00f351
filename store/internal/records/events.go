package records

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// JoinEvents encodes events as one value: each event followed by '\n', in
// order. JSON can only hold a raw newline as whitespace between tokens, so
// an event with one is compacted first, which changes nothing but that
// whitespace; the events the engine records are compact already and are
// stored byte for byte.
func JoinEvents(events []json.RawMessage) (string, error) {
	n := 0
	for _, ev := range events {
		n += len(ev) + 1
	}
	var b strings.Builder
	b.Grow(n)
	var compact bytes.Buffer
	for seq, ev := range events {
		if bytes.IndexByte(ev, '\n') >= 0 {
			compact.Reset()
			if err := json.Compact(&compact, ev); err != nil {
				return "", fmt.Errorf("event %d: %w", seq, err)
			}
			ev = compact.Bytes()
		}
		b.Write(ev)
		b.WriteByte('\n')
	}
	return b.String(), nil
}

// SplitEvents returns the events of a JoinEvents value with sequence
// number greater than after. The events share all's memory; each is capped
// at its own length, so appending to one cannot overwrite the next.
func SplitEvents(all []byte, after int) []json.RawMessage {
	skip := max(after+1, 0)
	events := make([]json.RawMessage, 0, max(bytes.Count(all, []byte{'\n'})-skip, 0))
	for seq := 0; len(all) > 0; seq++ {
		i := bytes.IndexByte(all, '\n')
		if i < 0 {
			// Not written by JoinEvents; keep what is there.
			i = len(all)
		}
		if seq >= skip {
			events = append(events, json.RawMessage(all[:i:i]))
		}
		all = all[min(i+1, len(all)):]
	}
	return events
}
