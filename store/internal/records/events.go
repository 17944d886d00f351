package records

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/loomgate/loom/store"
)

// Events implements the event methods of store.Store once for both
// stores: the events of a response are one column of its row, the joined
// lines of JoinEvents. A store embeds it, set up with its own two
// statements, run its own way.
type Events struct {
	// Name prefixes the store's errors ("sqlite", "postgres").
	Name string
	// Append adds joined, a JoinEvents value, to the events column of
	// response id in one statement: store.ErrNotFound if there is no
	// such response.
	Append func(ctx context.Context, id, joined string) error
	// Read reads the events column of response id in one statement (one
	// row, so it sees one save whole); its Scan fails with sql.ErrNoRows
	// if there is no such response.
	Read func(ctx context.Context, id string) Row
}

// AppendEvents adds events after the stored events of response id.
func (es *Events) AppendEvents(ctx context.Context, id string, events []json.RawMessage) error {
	if len(events) == 0 {
		return nil
	}
	joined, err := JoinEvents(events)
	if err == nil {
		err = es.Append(ctx, id, joined)
	}
	return Wrap(err, "%s: append events of %s", es.Name, id)
}

// Events returns the stored events of response id whose sequence number
// (the event's index in Record.Events) is greater than after, in order;
// after -1 returns them all. A stored response without events, or with
// none after the given one, yields an empty result and no error.
func (es *Events) Events(ctx context.Context, id string, after int) ([]json.RawMessage, error) {
	var all []byte
	err := es.Read(ctx, id).Scan(&all)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("%s: events of %s: %w", es.Name, id, err)
	}
	return SplitEvents(all, after), nil
}

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
