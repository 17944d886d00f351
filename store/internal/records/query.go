package records

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/loomgate/loom/engine"
	"github.com/loomgate/loom/responses"
)

// Row is one row of a query, as both drivers return it (*sql.Row and
// pgx.Row).
type Row interface {
	Scan(dest ...any) error
}

// Rows are the rows of a query, as both drivers return them (pgx.Rows as it
// is; *sql.Rows with a Close that returns nothing).
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close()
}

// Querier runs the reads both stores share on a connection pool or a
// transaction of either. The statements use $1-style placeholders, which
// SQLite and PostgreSQL both accept, and standard SQL both run alike, so
// each read is written once. Either driver's "no rows" error is
// sql.ErrNoRows to errors.Is.
type Querier interface {
	QueryRow(ctx context.Context, query string, args ...any) Row
	Query(ctx context.Context, query string, args ...any) (Rows, error)
	// Exec runs a statement and returns how many rows it changed.
	Exec(ctx context.Context, query string, args ...any) (int64, error)
}

// Wrap prefixes a store's failure with what was being done. nil and the
// engine's sentinel errors (ErrNotFound, ErrUnknownCursor,
// ErrConversationBusy), which callers compare, come back as they are.
func Wrap(err error, format string, args ...any) error {
	if err == nil || errors.Is(err, engine.ErrNotFound) || errors.Is(err, engine.ErrUnknownCursor) ||
		errors.Is(err, engine.ErrConversationBusy) {
		return err
	}
	return fmt.Errorf(format+": %w", append(args, err)...)
}

// Change runs a statement that changes the rows of one object:
// engine.ErrNotFound when it changed none.
func Change(ctx context.Context, q Querier, query string, args ...any) error {
	n, err := q.Exec(ctx, query, args...)
	if err == nil && n == 0 {
		return engine.ErrNotFound
	}
	return err
}

// UpsertResponse writes a response row, replacing the one stored under its
// id. An upsert rather than a delete and insert (SQLite's INSERT OR
// REPLACE): the old row's items still point at it.
const UpsertResponse = `INSERT INTO responses
	(id, previous_response_id, created_at, status, response, events, pending, lease_owner, lease_until, tenant, trace_id)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
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
		trace_id = excluded.trace_id`

// CancelRequested reads response id's cancel flag: engine.ErrNotFound if
// there is no such response.
func CancelRequested(ctx context.Context, q Querier, id string) (bool, error) {
	var flag bool
	err := q.QueryRow(ctx, `SELECT cancel_requested FROM responses WHERE id = $1`, id).Scan(&flag)
	if errors.Is(err, sql.ErrNoRows) {
		return false, engine.ErrNotFound
	}
	return flag, err
}

// EncodeItems returns the ids and the stored JSON of items, for an insert
// of their rows.
func EncodeItems(items []responses.Item) (ids, raws []string, err error) {
	ids = make([]string, len(items))
	raws = make([]string, len(items))
	for i := range items {
		b, err := json.Marshal(&items[i])
		if err != nil {
			return nil, nil, fmt.Errorf("item %d (%s): %w", i, items[i].Type, err)
		}
		ids[i], raws[i] = items[i].ID, string(b)
	}
	return ids, raws, nil
}
