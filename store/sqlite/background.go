package sqlite

import (
	"context"
	"database/sql"

	"github.com/loomgate/loom/store/internal/records"
)

// RequestCancel sets the cancel flag of response id; a queued response
// becomes cancelled in the same statement.
func (d *DB) RequestCancel(ctx context.Context, id string) error {
	err := d.w.do(ctx, func(ctx context.Context, tx *sql.Tx) error {
		return records.Change(ctx, querier{tx}, `UPDATE responses SET
				cancel_requested = 1,
				status = CASE status WHEN 'queued' THEN 'cancelled' ELSE status END,
				response = CASE status WHEN 'queued' THEN json_set(response, '$.status', 'cancelled') ELSE response END
			WHERE id = ?`, id)
	})
	return records.Wrap(err, "sqlite: cancel %s", id)
}

// CancelRequested reports whether response id's cancel flag is set.
func (d *DB) CancelRequested(ctx context.Context, id string) (bool, error) {
	flag, err := records.CancelRequested(ctx, querier{d.db}, id)
	return flag, records.Wrap(err, "sqlite: cancel flag of %s", id)
}
