package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/loomgate/loom/engine"
)

// Events returns the stored events of response id whose sequence number
// (the event's index in Record.Events) is greater than after, in order;
// after -1 returns them all. A stored response without events, or with
// none after the given one, yields an empty result and no error.
func (d *DB) Events(ctx context.Context, id string, after int) ([]json.RawMessage, error) {
	tx, err := d.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("sqlite: events of %s: %w", id, err)
	}
	defer tx.Rollback()

	var one int
	err = tx.StmtContext(ctx, d.st.responseExists).QueryRowContext(ctx, id).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, engine.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: events of %s: %w", id, err)
	}

	rows, err := tx.StmtContext(ctx, d.st.eventsAfter).QueryContext(ctx, id, after)
	if err != nil {
		return nil, fmt.Errorf("sqlite: events of %s: %w", id, err)
	}
	defer rows.Close()
	events := []json.RawMessage{}
	for rows.Next() {
		var ev []byte
		if err := rows.Scan(&ev); err != nil {
			return nil, fmt.Errorf("sqlite: events of %s: %w", id, err)
		}
		events = append(events, json.RawMessage(ev))
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: events of %s: %w", id, err)
	}
	return events, nil
}
