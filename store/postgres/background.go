package postgres

import (
	"context"

	"github.com/loomgate/loom/store/internal/records"
)

// RequestCancel sets the cancel flag of response id; a queued response
// becomes cancelled in the same statement.
func (d *DB) RequestCancel(ctx context.Context, id string) error {
	err := records.Change(ctx, querier{d.pool}, `UPDATE responses SET
			cancel_requested = true,
			status = CASE status WHEN 'queued' THEN 'cancelled' ELSE status END,
			response = CASE status WHEN 'queued' THEN jsonb_set(response::jsonb, '{status}', '"cancelled"')::text ELSE response END
		WHERE id = $1`, id)
	return records.Wrap(err, "postgres: cancel %s", id)
}

// CancelRequested reports whether response id's cancel flag is set.
func (d *DB) CancelRequested(ctx context.Context, id string) (bool, error) {
	flag, err := records.CancelRequested(ctx, querier{d.pool}, id)
	return flag, records.Wrap(err, "postgres: cancel flag of %s", id)
}
