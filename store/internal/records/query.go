package records

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

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

// GetConversation reads conversation id: engine.ErrNotFound if there is
// none.
func GetConversation(ctx context.Context, q Querier, id string) (*engine.Conversation, error) {
	c := &engine.Conversation{ID: id}
	var meta string
	err := q.QueryRow(ctx, `SELECT created_at, metadata, last_response_id, tenant FROM conversations WHERE id = $1`, id).
		Scan(&c.CreatedAt, &meta, &c.LastResponseID, &c.Tenant)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, engine.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(meta), &c.Metadata); err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	return c, nil
}

// ConversationItems reads a page of the items of conversation id, and
// whether more follow: engine.ErrNotFound without the conversation,
// engine.ErrUnknownCursor when page.After names no item of it. q should be
// a read-only transaction, so the check, the cursor and the page see one
// snapshot.
func ConversationItems(ctx context.Context, q Querier, id string, page engine.Page) ([]responses.Item, bool, error) {
	var one int
	err := q.QueryRow(ctx, `SELECT 1 FROM conversations WHERE id = $1`, id).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, engine.ErrNotFound
	}
	if err != nil {
		return nil, false, err
	}
	// Positions start at 0, so without a cursor an ascending page starts
	// after -1 and a descending one before the largest position there is
	// (PostgreSQL's column is an integer).
	from := int64(-1)
	if page.Desc {
		from = math.MaxInt32
	}
	if page.After != "" {
		err := q.QueryRow(ctx, `SELECT position FROM conversation_items WHERE conversation_id = $1 AND item_id = $2 ORDER BY position LIMIT 1`,
			id, page.After).Scan(&from)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, false, fmt.Errorf("%w %q in conversation %s", engine.ErrUnknownCursor, page.After, id)
		}
		if err != nil {
			return nil, false, err
		}
	}
	limit := int64(page.Limit)
	if limit <= 0 {
		limit = math.MaxInt32
	}
	query := `SELECT item FROM conversation_items WHERE conversation_id = $1 AND position > $2 ORDER BY position LIMIT $3`
	if page.Desc {
		query = `SELECT item FROM conversation_items WHERE conversation_id = $1 AND position < $2 ORDER BY position DESC LIMIT $3`
	}
	// One row more than the page tells whether more follow.
	rows, err := q.Query(ctx, query, id, from, limit+1)
	if err != nil {
		return nil, false, err
	}
	defer rows.Close()
	var items []responses.Item
	for rows.Next() {
		if int64(len(items)) == limit {
			return items, true, nil
		}
		var raw []byte
		if err := rows.Scan(&raw); err != nil {
			return nil, false, err
		}
		var it responses.Item
		if err := DecodeItem(raw, &it); err != nil {
			return nil, false, err
		}
		items = append(items, it)
	}
	return items, false, rows.Err()
}

// ConversationItem reads item itemID of conversation id: engine.ErrNotFound
// if there is none.
func ConversationItem(ctx context.Context, q Querier, id, itemID string) (responses.Item, error) {
	var raw []byte
	err := q.QueryRow(ctx, `SELECT item FROM conversation_items WHERE conversation_id = $1 AND item_id = $2 ORDER BY position LIMIT 1`,
		id, itemID).Scan(&raw)
	if errors.Is(err, sql.ErrNoRows) {
		return responses.Item{}, engine.ErrNotFound
	}
	if err != nil {
		return responses.Item{}, err
	}
	var it responses.Item
	err = DecodeItem(raw, &it)
	return it, err
}

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

// SetConversationMetadata replaces the metadata of conversation id and
// returns the conversation as it now is.
func SetConversationMetadata(ctx context.Context, q Querier, id string, metadata map[string]string) (*engine.Conversation, error) {
	meta, err := EncodeMetadata(metadata)
	if err != nil {
		return nil, err
	}
	if metadata == nil {
		metadata = map[string]string{} // as a read of it will return
	}
	c := &engine.Conversation{ID: id, Metadata: metadata}
	err = q.QueryRow(ctx, `UPDATE conversations SET metadata = $1 WHERE id = $2 RETURNING created_at, last_response_id, tenant`, meta, id).
		Scan(&c.CreatedAt, &c.LastResponseID, &c.Tenant)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, engine.ErrNotFound
	}
	return c, err
}

// DeleteConversationItem removes item itemID of conversation id.
func DeleteConversationItem(ctx context.Context, q Querier, id, itemID string) error {
	return Change(ctx, q, `DELETE FROM conversation_items WHERE conversation_id = $1 AND item_id = $2`, id, itemID)
}

// ClaimConversation holds conversation id for responseID until until,
// unless another response holds it past now: engine.ErrConversationBusy.
func ClaimConversation(ctx context.Context, q Querier, id, responseID string, now, until time.Time) error {
	n, err := q.Exec(ctx, `UPDATE conversations SET busy_response = $1, busy_until = $2
		WHERE id = $3 AND (busy_response = '' OR busy_response = $1 OR busy_until < $4)`,
		responseID, until.UnixMilli(), id, now.UnixMilli())
	if err != nil || n == 1 {
		return err
	}
	if _, err := GetConversation(ctx, q, id); err != nil {
		return err
	}
	return engine.ErrConversationBusy
}

// EndConversationTurn releases responseID's hold on conversation id and,
// when the turn added items, makes it the conversation's last response.
func EndConversationTurn(ctx context.Context, q Querier, id, responseID string, addedItems bool) error {
	last := ""
	if addedItems {
		last = responseID
	}
	_, err := q.Exec(ctx, `UPDATE conversations SET
			last_response_id = CASE WHEN $1 <> '' THEN $1 ELSE last_response_id END,
			busy_response = CASE WHEN busy_response = $2 THEN '' ELSE busy_response END,
			busy_until = CASE WHEN busy_response = $2 THEN 0 ELSE busy_until END
		WHERE id = $3`, last, responseID, id)
	return err
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
