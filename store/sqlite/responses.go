package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/store"
	"github.com/loomgate/loom/store/internal/records"
)

// SaveResponse writes rec with its items and events in one transaction,
// replacing whatever was stored under rec.ID before.
//
// However many events there are, the save is three statements (for up to
// maxItemBatch items): the response row, which carries the events as one
// column; the delete of any earlier items; one INSERT of all the items.
func (d *DB) SaveResponse(ctx context.Context, rec *store.Record) error {
	if rec == nil || rec.ID == "" {
		return errors.New("sqlite: save: record has no id")
	}
	// Encode, and prepare the item insert, before the transaction opens,
	// so the write lock is held only for the database work.
	args, err := encodeItems(rec.ID, rec.Input, rec.Output)
	if err != nil {
		return fmt.Errorf("sqlite: save %s: %w", rec.ID, err)
	}
	events, err := records.JoinEvents(rec.Events)
	if err != nil {
		return fmt.Errorf("sqlite: save %s: %w", rec.ID, err)
	}
	inserts, err := d.itemInserts(ctx, (len(args)-1)/itemArgs)
	if err != nil {
		return fmt.Errorf("sqlite: save %s: %w", rec.ID, err)
	}

	err = d.w.do(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.StmtContext(ctx, d.st.upsertResponse).ExecContext(ctx,
			rec.ID, rec.PreviousResponseID, rec.CreatedAt, rec.Status, string(rec.Response), events, string(rec.Pending),
			rec.LeaseOwner, records.LeaseMillis(rec.LeaseUntil), rec.Tenant, rec.TraceID, rec.SessionKey, string(rec.Timeline)); err != nil {
			return err
		}
		// A re-save may have fewer items than the last one, so the old
		// rows go rather than being overwritten position by position.
		if _, err := tx.StmtContext(ctx, d.st.deleteItems).ExecContext(ctx, rec.ID); err != nil {
			return err
		}
		for _, ins := range inserts {
			batch := args
			if len(inserts) > 1 {
				batch = make([]any, 0, 1+ins.n*itemArgs)
				batch = append(batch, rec.ID)
				batch = append(batch, args[1+ins.first*itemArgs:1+(ins.first+ins.n)*itemArgs]...)
			}
			if _, err := tx.StmtContext(ctx, ins.stmt).ExecContext(ctx, batch...); err != nil {
				return fmt.Errorf("items %d..%d: %w", ins.first, ins.first+ins.n-1, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sqlite: save %s: %w", rec.ID, err)
	}
	return nil
}

// itemInsert is one multi-row INSERT of a save: n items from the first.
type itemInsert struct {
	stmt     *sql.Stmt
	first, n int
}

// itemInserts returns the INSERTs that write n items.
func (d *DB) itemInserts(ctx context.Context, n int) ([]itemInsert, error) {
	var out []itemInsert
	for first := 0; first < n; first += maxItemBatch {
		size := min(n-first, maxItemBatch)
		st, err := d.st.insertItemsStmt(ctx, d.db, size)
		if err != nil {
			return nil, err
		}
		out = append(out, itemInsert{stmt: st, first: first, n: size})
	}
	return out, nil
}

// GetResponse returns the record stored under id, with its input and
// output items (nil when there are none) but not its events, in one
// statement.
func (d *DB) GetResponse(ctx context.Context, id string) (*store.Record, error) {
	var rec *store.Record
	err := readApart(func() (err error) {
		rec, err = d.getResponse(ctx, id)
		return err
	})
	return rec, err
}

// getResponse is GetResponse on the caller's goroutine.
func (d *DB) getResponse(ctx context.Context, id string) (*store.Record, error) {
	rec := &store.Record{ID: id}
	var response, pending, timeline, input, output []byte
	var leaseUntil int64
	err := d.st.getResponse.QueryRowContext(ctx, id).
		Scan(&rec.PreviousResponseID, &rec.CreatedAt, &rec.Status, &response, &pending, &rec.LeaseOwner, &leaseUntil, &rec.Tenant, &rec.TraceID, &rec.SessionKey, &timeline, &input, &output)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get %s: %w", id, err)
	}
	if len(response) > 0 {
		rec.Response = json.RawMessage(response)
	}
	if len(pending) > 0 {
		rec.Pending = json.RawMessage(pending)
	}
	if len(timeline) > 0 {
		rec.Timeline = json.RawMessage(timeline)
	}
	rec.LeaseUntil = records.LeaseTime(leaseUntil)
	if rec.Input, err = records.SplitItems(input); err != nil {
		return nil, fmt.Errorf("sqlite: get %s: decode input item: %w", id, err)
	}
	if rec.Output, err = records.SplitItems(output); err != nil {
		return nil, fmt.Errorf("sqlite: get %s: decode output item: %w", id, err)
	}
	return rec, nil
}

// DeleteResponse removes the response of tenant stored under id with its
// items and events.
func (d *DB) DeleteResponse(ctx context.Context, id, tenant string) error {
	var found bool
	err := d.w.do(ctx, func(ctx context.Context, tx *sql.Tx) error {
		// The owner is checked before the items go.
		var one int
		err := tx.StmtContext(ctx, d.st.responseExists).QueryRowContext(ctx, id, tenant).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		found, err = deleteResponse(ctx, tx, &d.st, id)
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlite: delete %s: %w", id, err)
	}
	if !found {
		return store.ErrNotFound
	}
	return nil
}

// deleteResponse removes response id with its items and events inside tx,
// and reports whether it was there.
func deleteResponse(ctx context.Context, tx *sql.Tx, st *statements, id string) (bool, error) {
	// Items first: the foreign keys refuse to orphan them. The events
	// go with the response's row.
	if _, err := tx.StmtContext(ctx, st.deleteItems).ExecContext(ctx, id); err != nil {
		return false, err
	}
	res, err := tx.StmtContext(ctx, st.deleteResponse).ExecContext(ctx, id)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

// itemArgs is the number of parameters of one item row, after the
// response id every row shares.
const itemArgs = 4

// encodeItems returns the parameters of an INSERT of all the items of
// response id: the id, then itemArgs per row (kind, position, item_id,
// item), input items then output items.
func encodeItems(id string, input, output []responses.Item) ([]any, error) {
	args := make([]any, 1, 1+(len(input)+len(output))*itemArgs)
	args[0] = id
	err := records.EncodeRecordItems(input, output, func(kind string, pos int, itemID string, item []byte) {
		args = append(args, kind, pos, itemID, string(item))
	})
	if err != nil {
		return nil, err
	}
	return args, nil
}

// ListResponses pages through the stored responses that match q, newest
// first.
func (d *DB) ListResponses(ctx context.Context, q store.ResponseQuery) ([]*store.Record, bool, error) {
	var recs []*store.Record
	var more bool
	err := readApart(func() (err error) {
		recs, more, err = records.ListResponses(ctx, querier{d.db}, "sqlite", `json_extract(response, '$.model')`, q)
		return err
	})
	return recs, more, err
}

// SetTimeline replaces the timeline of response id.
func (d *DB) SetTimeline(ctx context.Context, id string, timeline json.RawMessage) error {
	err := d.w.do(ctx, func(ctx context.Context, tx *sql.Tx) error {
		return records.Change(ctx, querier{tx}, records.SetTimeline, string(timeline), id)
	})
	return records.Wrap(err, "sqlite: set the timeline of %s", id)
}
