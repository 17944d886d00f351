package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/loomgate/loom/engine"
	"github.com/loomgate/loom/store/internal/records"
)

// AppendEvents adds events after the stored events of response id, in one
// statement, and notifies the followers of the response on every replica
// (see Notifier).
func (d *DB) AppendEvents(ctx context.Context, id string, events []json.RawMessage) error {
	if len(events) == 0 {
		return nil
	}
	joined, err := records.JoinEvents(events)
	if err != nil {
		return fmt.Errorf("postgres: append events of %s: %w", id, err)
	}
	// The notification goes out when the update commits, so a follower
	// woken by it reads the new events.
	var one int
	err = d.pool.QueryRow(ctx, `WITH u AS (UPDATE responses SET events = events || $1 WHERE id = $2 RETURNING id)
		SELECT 1 FROM u, LATERAL (SELECT pg_notify($3, u.id)) n`, joined, id, eventsChannel).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return engine.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("postgres: append events of %s: %w", id, err)
	}
	return nil
}

// RequestCancel sets the cancel flag of response id; a queued response
// becomes cancelled in the same statement.
func (d *DB) RequestCancel(ctx context.Context, id string) error {
	tag, err := d.pool.Exec(ctx, `UPDATE responses SET
			cancel_requested = true,
			status = CASE status WHEN 'queued' THEN 'cancelled' ELSE status END,
			response = CASE status WHEN 'queued' THEN jsonb_set(response::jsonb, '{status}', '"cancelled"')::text ELSE response END
		WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("postgres: cancel %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return engine.ErrNotFound
	}
	return nil
}

// CancelRequested reports whether response id's cancel flag is set.
func (d *DB) CancelRequested(ctx context.Context, id string) (bool, error) {
	flag, err := records.CancelRequested(ctx, querier{d.pool}, id)
	if err != nil && !errors.Is(err, engine.ErrNotFound) {
		return false, fmt.Errorf("postgres: cancel flag of %s: %w", id, err)
	}
	return flag, err
}
