package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/store"
	"github.com/loomgate/loom/store/internal/records"
)

// insertItems writes every item of a save from four parallel arrays: one
// statement whatever the number of items.
const insertItems = `INSERT INTO response_items (response_id, kind, position, item_id, item)
	SELECT $1, k, p, i, it FROM unnest($2::text[], $3::integer[], $4::text[], $5::text[]) AS t (k, p, i, it)`

// SaveResponse writes rec with its items and events, replacing whatever
// was stored under rec.ID, in one round trip: the statements go as one
// batch, which the server runs as one implicit transaction, so readers see
// the old record or the new one, never a mix.
func (d *DB) SaveResponse(ctx context.Context, rec *store.Record) error {
	if rec == nil || rec.ID == "" {
		return errNoID
	}
	events, err := records.JoinEvents(rec.Events)
	if err != nil {
		return fmt.Errorf("postgres: save %s: %w", rec.ID, err)
	}
	n := len(rec.Input) + len(rec.Output)
	kinds := make([]string, 0, n)
	positions := make([]int32, 0, n)
	itemIDs := make([]string, 0, n)
	items := make([]string, 0, n)
	err = records.EncodeRecordItems(rec.Input, rec.Output, func(kind string, pos int, id string, item []byte) {
		kinds = append(kinds, kind)
		positions = append(positions, int32(pos))
		itemIDs = append(itemIDs, id)
		items = append(items, string(item))
	})
	if err != nil {
		return fmt.Errorf("postgres: save %s: %w", rec.ID, err)
	}

	b := &pgx.Batch{}
	if deadline, ok := ctx.Deadline(); ok && n > 0 {
		// A large save may run past the statement timeout set for the
		// pool's connections: the caller's deadline, which grows with
		// what is written, bounds it instead, for this transaction only
		// (the batch is one implicit transaction).
		b.Queue(`SELECT set_config('statement_timeout', $1, true)`, strconv.FormatInt(max(time.Until(deadline).Milliseconds(), 1), 10))
	}
	b.Queue(records.UpsertResponse, rec.ID, rec.PreviousResponseID, rec.CreatedAt, rec.Status, string(rec.Response), events,
		string(rec.Pending), rec.LeaseOwner, records.LeaseMillis(rec.LeaseUntil), rec.Tenant, rec.TraceID, rec.SessionKey, string(rec.Timeline))
	// A re-save may have fewer items than the last one.
	b.Queue(`DELETE FROM response_items WHERE response_id = $1`, rec.ID)
	if n > 0 {
		b.Queue(insertItems, rec.ID, kinds, positions, itemIDs, items)
	}
	if err := d.pool.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("postgres: save %s: %w", rec.ID, err)
	}
	return nil
}

// recordColumns are the columns of a record read back, with its items as
// two arrays in order: one statement, so one snapshot.
const recordColumns = `r.id, r.previous_response_id, r.created_at, r.status, r.response, r.pending, r.lease_owner, r.lease_until, r.tenant, r.trace_id, r.session_key, r.timeline,` + itemColumns

// itemColumns are a record's items as two arrays, in order.
const itemColumns = `
	ARRAY(SELECT item FROM response_items i WHERE i.response_id = r.id AND i.kind = 'input' ORDER BY i.position),
	ARRAY(SELECT item FROM response_items i WHERE i.response_id = r.id AND i.kind = 'output' ORDER BY i.position)`

// chainColumns are recordColumns but the response object, which a chain
// does not need.
const chainColumns = `r.id, r.previous_response_id, r.created_at, r.status, NULL::text, r.pending, r.lease_owner, r.lease_until, r.tenant, r.trace_id, r.session_key, NULL::text,` + itemColumns

// scanRecord reads one row of recordColumns or chainColumns.
func scanRecord(row pgx.Row) (*store.Record, error) {
	rec := &store.Record{}
	var response, timeline *string
	var pending string
	var leaseUntil int64
	var input, output []string
	if err := row.Scan(&rec.ID, &rec.PreviousResponseID, &rec.CreatedAt, &rec.Status, &response, &pending,
		&rec.LeaseOwner, &leaseUntil, &rec.Tenant, &rec.TraceID, &rec.SessionKey, &timeline, &input, &output); err != nil {
		return nil, err
	}
	if response != nil && *response != "" {
		rec.Response = json.RawMessage(*response)
	}
	if pending != "" {
		rec.Pending = json.RawMessage(pending)
	}
	if timeline != nil && *timeline != "" {
		rec.Timeline = json.RawMessage(*timeline)
	}
	rec.LeaseUntil = records.LeaseTime(leaseUntil)
	var err error
	if rec.Input, err = decodeItems(input); err != nil {
		return nil, fmt.Errorf("decode input item: %w", err)
	}
	if rec.Output, err = decodeItems(output); err != nil {
		return nil, fmt.Errorf("decode output item: %w", err)
	}
	return rec, nil
}

func decodeItems(raw []string) ([]responses.Item, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	items := make([]responses.Item, len(raw))
	for i, s := range raw {
		if err := records.DecodeItem([]byte(s), &items[i]); err != nil {
			return nil, err
		}
	}
	return items, nil
}

// GetResponse returns the record stored under id, with its items but not
// its events.
func (d *DB) GetResponse(ctx context.Context, id string) (*store.Record, error) {
	rec, err := scanRecord(d.pool.QueryRow(ctx, `SELECT `+recordColumns+` FROM responses r WHERE r.id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: get %s: %w", id, err)
	}
	return rec, nil
}

// chainQuery follows previous_response_id inside the database; depth
// bounds it (and any cycle).
const chainQuery = `WITH RECURSIVE chain (id, depth) AS (
		SELECT $1::text, 0
		UNION ALL
		SELECT r.previous_response_id, c.depth + 1
		FROM chain c JOIN responses r ON r.id = c.id
		WHERE r.previous_response_id <> '' AND c.depth + 1 < $2
	)
	SELECT ` + chainColumns + `
	FROM chain c JOIN responses r ON r.id = c.id
	ORDER BY c.depth`

// Chain returns response id and those it continues, newest first, at most
// limit, with their items: one statement whatever the length.
func (d *DB) Chain(ctx context.Context, id string, limit int) ([]*store.Record, error) {
	rows, err := d.pool.Query(ctx, chainQuery, id, max(limit, 1))
	if err != nil {
		return nil, fmt.Errorf("postgres: chain of %s: %w", id, err)
	}
	defer rows.Close()
	var chain []*store.Record
	for rows.Next() {
		rec, err := scanRecord(rows)
		if err != nil {
			return nil, fmt.Errorf("postgres: chain of %s: %w", id, err)
		}
		chain = append(chain, rec)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: chain of %s: %w", id, err)
	}
	if len(chain) == 0 {
		return nil, store.ErrNotFound
	}
	return chain, nil
}

// DeleteResponse removes response id of tenant; its items go with it (ON DELETE
// CASCADE), its events are a column of its row.
func (d *DB) DeleteResponse(ctx context.Context, id, tenant string) error {
	err := records.Change(ctx, querier{d.pool}, `DELETE FROM responses WHERE id = $1 AND tenant = $2`, id, tenant)
	return records.Wrap(err, "postgres: delete %s", id)
}

// ListInputItems returns one page of the input items of response id, and
// whether more follow, in one statement: the response's existence, the
// cursor's position and the page come from one snapshot.
func (d *DB) ListInputItems(ctx context.Context, id, tenant string, page store.Page) ([]responses.Item, bool, error) {
	limit := page.Size()
	order, cmp := "ASC", ">"
	if page.Desc {
		order, cmp = "DESC", "<"
	}
	// found: whether the response exists; cursor: the position after
	// which the page starts (NULL: the cursor names no item); the page
	// then fetches one row more than asked to tell whether more follow.
	query := `WITH found AS (SELECT EXISTS (SELECT 1 FROM responses WHERE id = $1 AND tenant = $4) AS ok),
		cursor AS (SELECT CASE WHEN $2 = '' THEN NULL ELSE (
			SELECT position FROM response_items
			WHERE response_id = $1 AND kind = 'input' AND item_id = $2
			ORDER BY position LIMIT 1) END AS pos)
		SELECT found.ok, $2 = '' OR cursor.pos IS NOT NULL, page.item
		FROM found CROSS JOIN cursor LEFT JOIN LATERAL (
			SELECT item FROM response_items
			WHERE response_id = $1 AND kind = 'input' AND found.ok
				AND ($2 = '' OR position ` + cmp + ` cursor.pos)
			ORDER BY position ` + order + ` LIMIT $3) page ON true`
	rows, err := d.pool.Query(ctx, query, id, page.After, limit+1, tenant)
	if err != nil {
		return nil, false, fmt.Errorf("postgres: input items of %s: %w", id, err)
	}
	defer rows.Close()
	items := make([]responses.Item, 0, limit)
	hasMore := false
	found, cursorOK := false, false
	for rows.Next() {
		var item *string
		if err := rows.Scan(&found, &cursorOK, &item); err != nil {
			return nil, false, fmt.Errorf("postgres: input items of %s: %w", id, err)
		}
		if item == nil {
			continue
		}
		if len(items) == limit {
			hasMore = true
			continue
		}
		var it responses.Item
		if err := records.DecodeItem([]byte(*item), &it); err != nil {
			return nil, false, fmt.Errorf("postgres: input items of %s: decode: %w", id, err)
		}
		items = append(items, it)
	}
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("postgres: input items of %s: %w", id, err)
	}
	if !found {
		return nil, false, store.ErrNotFound
	}
	if !cursorOK {
		return nil, false, fmt.Errorf("%w %q in response %s", store.ErrUnknownCursor, page.After, id)
	}
	return items, hasMore, nil
}

// RenewLeases moves the lease expiry of owner's queued or in-progress
// responses ids to until.
func (d *DB) RenewLeases(ctx context.Context, owner string, ids []string, until time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := d.pool.Exec(ctx, `UPDATE responses SET lease_until = $1
		WHERE id = ANY($3) AND lease_owner = $2 AND status IN ('queued', 'in_progress')`, until.UnixMilli(), owner, ids)
	if err != nil {
		return fmt.Errorf("postgres: renew leases of %s: %w", owner, err)
	}
	return nil
}

// FailExpiredLeases marks failed up to limit queued or in-progress
// responses whose lease ran out before now. Rows another sweeper holds are skipped, and
// the conditions are checked again on the locked row, so a response its
// owner finished meanwhile is left alone.
func (d *DB) FailExpiredLeases(ctx context.Context, now time.Time, errorObject json.RawMessage, limit int) (int, error) {
	// The batch is chosen once (MATERIALIZED) and locked; the outer
	// conditions are checked again on each locked row.
	tag, err := d.pool.Exec(ctx, `WITH expired AS MATERIALIZED (
			SELECT id FROM responses
			WHERE status IN ('queued', 'in_progress') AND lease_until > 0 AND lease_until < $1
			ORDER BY lease_until LIMIT $3 FOR UPDATE SKIP LOCKED)
		UPDATE responses r
		SET status = 'failed',
			response = jsonb_set(jsonb_set(r.response::jsonb, '{status}', '"failed"'), '{error}', $2::jsonb)::text,
			lease_owner = '', lease_until = 0
		FROM expired
		WHERE r.id = expired.id AND r.status IN ('queued', 'in_progress') AND r.lease_until > 0 AND r.lease_until < $1`,
		now.UnixMilli(), string(errorObject), limit)
	if err != nil {
		return 0, fmt.Errorf("postgres: fail expired leases: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// ClaimQueued leases queued response id to owner until until, unless it
// is leased already, and reports whether it did.
func (d *DB) ClaimQueued(ctx context.Context, id, owner string, until time.Time) (bool, error) {
	// One statement: the update, and whether the response exists at all.
	var exists, claimed bool
	err := d.pool.QueryRow(ctx, `WITH claimed AS (
			UPDATE responses SET lease_owner = $2, lease_until = $3
			WHERE id = $1 AND status = 'queued' AND lease_owner = ''
			RETURNING id)
		SELECT EXISTS (SELECT 1 FROM responses WHERE id = $1), EXISTS (SELECT 1 FROM claimed)`,
		id, owner, until.UnixMilli()).Scan(&exists, &claimed)
	if err != nil {
		return false, fmt.Errorf("postgres: claim %s: %w", id, err)
	}
	if !exists {
		return false, store.ErrNotFound
	}
	return claimed, nil
}

// FailUnleasedQueued marks failed those of ids that are queued and not
// leased.
func (d *DB) FailUnleasedQueued(ctx context.Context, ids []string, errorObject json.RawMessage) (int, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	tag, err := d.pool.Exec(ctx, `UPDATE responses
		SET status = 'failed',
			response = jsonb_set(jsonb_set(response::jsonb, '{status}', '"failed"'), '{error}', $2::jsonb)::text
		WHERE id = ANY($1) AND status = 'queued' AND lease_owner = ''`, ids, string(errorObject))
	if err != nil {
		return 0, fmt.Errorf("postgres: fail unleased queued responses: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// DeleteCreatedBefore removes up to limit responses created before before
// (Unix seconds), oldest first, with their items and events.
func (d *DB) DeleteCreatedBefore(ctx context.Context, before int64, limit int) (int, error) {
	tag, err := d.pool.Exec(ctx, `WITH old AS MATERIALIZED (
			SELECT id FROM responses WHERE created_at < $1 ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED)
		DELETE FROM responses r USING old WHERE r.id = old.id`, before, limit)
	if err != nil {
		return 0, fmt.Errorf("postgres: delete responses created before %d: %w", before, err)
	}
	return int(tag.RowsAffected()), nil
}

// ListResponses pages through the stored responses that match q, newest
// first.
func (d *DB) ListResponses(ctx context.Context, q store.ResponseQuery) ([]*store.Record, bool, error) {
	return records.ListResponses(ctx, querier{d.pool}, "postgres", `(response::json ->> 'model')`, q)
}

// SetTimeline replaces the timeline of response id.
func (d *DB) SetTimeline(ctx context.Context, id string, timeline json.RawMessage) error {
	return records.Wrap(records.Change(ctx, querier{d.pool}, records.SetTimeline, string(timeline), id),
		"postgres: set the timeline of %s", id)
}
