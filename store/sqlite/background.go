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
	if err != nil {
		return fmt.Errorf("sqlite: append events of %s: %w", id, err)
	}
	var n int64
	err = d.w.do(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE responses SET events = events || ? WHERE id = ?`, joined, id)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlite: append events of %s: %w", id, err)
	}
	if n == 0 {
		return engine.ErrNotFound
	}
	return nil
}

// RequestCancel sets the cancel flag of response id; a queued response
// becomes cancelled in the same statement.
func (d *DB) RequestCancel(ctx context.Context, id string) error {
	var n int64
	err := d.w.do(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE responses SET
				cancel_requested = 1,
				status = CASE status WHEN 'queued' THEN 'cancelled' ELSE status END,
				response = CASE status WHEN 'queued' THEN json_set(response, '$.status', 'cancelled') ELSE response END
			WHERE id = ?`, id)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlite: cancel %s: %w", id, err)
	}
	if n == 0 {
		return engine.ErrNotFound
	}
	return nil
}

// CancelRequested reports whether response id's cancel flag is set.
func (d *DB) CancelRequested(ctx context.Context, id string) (bool, error) {
	flag, err := records.CancelRequested(ctx, querier{d.db}, id)
	if err != nil && !errors.Is(err, engine.ErrNotFound) {
		return false, fmt.Errorf("sqlite: cancel flag of %s: %w", id, err)
	}
	return flag, err
}
