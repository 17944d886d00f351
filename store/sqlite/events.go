package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/loomgate/loom/engine"
	"github.com/loomgate/loom/store/internal/records"
)

// AppendEvents adds events after the stored events of response id, in one
// statement: the events column grows by their joined lines.
func (d *DB) AppendEvents(ctx context.Context, id string, events []json.RawMessage) error {
	if len(events) == 0 {
		return nil
	}
	joined, err := records.JoinEvents(events)
	if err == nil {
		err = d.w.do(ctx, func(ctx context.Context, tx *sql.Tx) error {
			return records.Change(ctx, querier{tx}, `UPDATE responses SET events = events || ? WHERE id = ?`, joined, id)
		})
	}
	return records.Wrap(err, "sqlite: append events of %s", id)
}

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
	return records.SplitEvents(all, after), nil
}
