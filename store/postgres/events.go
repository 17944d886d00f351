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
	if err == nil {
		// The notification goes out when the update commits, so a
		// follower woken by it reads the new events.
		var one int
		err = d.pool.QueryRow(ctx, `WITH u AS (UPDATE responses SET events = events || $1 WHERE id = $2 RETURNING id)
			SELECT 1 FROM u, LATERAL (SELECT pg_notify($3, u.id)) n`, joined, id, eventsChannel).Scan(&one)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return engine.ErrNotFound
	}
	return records.Wrap(err, "postgres: append events of %s", id)
}

// Events returns the stored events of response id with sequence number
// greater than after.
func (d *DB) Events(ctx context.Context, id string, after int) ([]json.RawMessage, error) {
	var all []byte
	err := d.pool.QueryRow(ctx, `SELECT events FROM responses WHERE id = $1`, id).Scan(&all)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, engine.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: events of %s: %w", id, err)
	}
	return records.SplitEvents(all, after), nil
}
