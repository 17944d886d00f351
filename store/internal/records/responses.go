package records

import (
	"context"
	"database/sql"
	"errors"

	"github.com/loomgate/loom/store"
)

// UpsertResponse writes a response row, replacing the one stored under its
// id. An upsert rather than a delete and insert (SQLite's INSERT OR
// REPLACE): the old row's items still point at it.
const UpsertResponse = `INSERT INTO responses
	(id, previous_response_id, created_at, status, response, events, pending, lease_owner, lease_until, tenant, trace_id, session_key, timeline)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
	ON CONFLICT (id) DO UPDATE SET
		previous_response_id = excluded.previous_response_id,
		created_at = excluded.created_at,
		status = excluded.status,
		response = excluded.response,
		events = excluded.events,
		pending = excluded.pending,
		lease_owner = excluded.lease_owner,
		lease_until = excluded.lease_until,
		tenant = excluded.tenant,
		trace_id = excluded.trace_id,
		session_key = excluded.session_key,
		timeline = excluded.timeline`

// CancelRequested reads response id's cancel flag: store.ErrNotFound if
// there is no such response.
func CancelRequested(ctx context.Context, q Querier, id string) (bool, error) {
	var flag bool
	err := q.QueryRow(ctx, `SELECT cancel_requested FROM responses WHERE id = $1`, id).Scan(&flag)
	if errors.Is(err, sql.ErrNoRows) {
		return false, store.ErrNotFound
	}
	return flag, err
}

// SetTimeline replaces the timeline of one response ($2).
const SetTimeline = `UPDATE responses SET timeline = $1 WHERE id = $2`
