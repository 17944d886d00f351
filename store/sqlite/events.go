package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/loomgate/loom/engine"
)

// Events returns the stored events of response id whose sequence number
// (the event's index in Record.Events) is greater than after, in order;
// after -1 returns them all. A stored response without events, or with
// none after the given one, yields an empty result and no error.
func (d *DB) Events(ctx context.Context, id string, after int) ([]json.RawMessage, error) {
	// One statement reads one row, so it sees one save whole; no
	// transaction is needed.
	var all []byte
	err := d.st.getEvents.QueryRowContext(ctx, id).Scan(&all)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, engine.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: events of %s: %w", id, err)
	}
	return splitEvents(all, after), nil
}

// joinEvents encodes events for the events column: each event followed by
// '\n', in order. JSON can only hold a raw newline as whitespace between
// tokens, so an event with one is compacted first, which changes nothing
// but that whitespace; the events the engine records are compact already
// and are stored byte for byte.
func joinEvents(events []json.RawMessage) (string, error) {
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

// splitEvents returns the events of an events column with sequence number
// greater than after. The events share all's memory; each is capped at its
// own length, so appending to one cannot overwrite the next.
func splitEvents(all []byte, after int) []json.RawMessage {
	skip := max(after+1, 0)
	events := make([]json.RawMessage, 0, max(bytes.Count(all, []byte{'\n'})-skip, 0))
	for seq := 0; len(all) > 0; seq++ {
		i := bytes.IndexByte(all, '\n')
		if i < 0 {
			// Not written by joinEvents; keep what is there.
			i = len(all)
		}
		if seq >= skip {
			events = append(events, json.RawMessage(all[:i:i]))
		}
		all = all[min(i+1, len(all)):]
	}
	return events
}
