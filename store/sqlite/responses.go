package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/loomgate/loom/engine"
	"github.com/loomgate/loom/responses"
)

// Item kinds, as stored in response_items.kind.
const (
	kindInput  = "input"
	kindOutput = "output"
)

// SaveResponse writes rec with its items and events in one transaction,
// replacing whatever was stored under rec.ID before.
func (d *DB) SaveResponse(ctx context.Context, rec *engine.Record) error {
	if rec == nil || rec.ID == "" {
		return errors.New("sqlite: save: record has no id")
	}
	// Encode before the transaction opens, so the write lock is held only
	// for the database work.
	input, err := encodeItems(rec.Input)
	if err != nil {
		return fmt.Errorf("sqlite: save %s: input: %w", rec.ID, err)
	}
	output, err := encodeItems(rec.Output)
	if err != nil {
		return fmt.Errorf("sqlite: save %s: output: %w", rec.ID, err)
	}

	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlite: save %s: %w", rec.ID, err)
	}
	defer tx.Rollback()

	if _, err := tx.StmtContext(ctx, d.st.upsertResponse).ExecContext(ctx,
		rec.ID, rec.PreviousResponseID, rec.CreatedAt, rec.Status, string(rec.Response)); err != nil {
		return fmt.Errorf("sqlite: save %s: %w", rec.ID, err)
	}
	// A re-save may have fewer items or events than the last one, so the
	// old rows go rather than being overwritten position by position.
	if _, err := tx.StmtContext(ctx, d.st.deleteItems).ExecContext(ctx, rec.ID); err != nil {
		return fmt.Errorf("sqlite: save %s: %w", rec.ID, err)
	}
	if _, err := tx.StmtContext(ctx, d.st.deleteEvents).ExecContext(ctx, rec.ID); err != nil {
		return fmt.Errorf("sqlite: save %s: %w", rec.ID, err)
	}

	insertItem := tx.StmtContext(ctx, d.st.insertItem)
	for _, g := range []struct {
		kind  string
		items []encodedItem
	}{{kindInput, input}, {kindOutput, output}} {
		for pos, it := range g.items {
			if _, err := insertItem.ExecContext(ctx, rec.ID, g.kind, pos, it.id, it.json); err != nil {
				return fmt.Errorf("sqlite: save %s: %s item %d: %w", rec.ID, g.kind, pos, err)
			}
		}
	}
	insertEvent := tx.StmtContext(ctx, d.st.insertEvent)
	for seq, ev := range rec.Events {
		if _, err := insertEvent.ExecContext(ctx, rec.ID, seq, string(ev)); err != nil {
			return fmt.Errorf("sqlite: save %s: event %d: %w", rec.ID, seq, err)
		}
	}

	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlite: save %s: %w", rec.ID, err)
	}
	return nil
}

// GetResponse returns the record stored under id, with its input and
// output items (nil when there are none) but not its events.
func (d *DB) GetResponse(ctx context.Context, id string) (*engine.Record, error) {
	// A read transaction gives both queries one snapshot, so a concurrent
	// re-save cannot pair the new response row with the old items.
	tx, err := d.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("sqlite: get %s: %w", id, err)
	}
	defer tx.Rollback()

	rec := &engine.Record{ID: id}
	var response []byte
	err = tx.StmtContext(ctx, d.st.getResponse).QueryRowContext(ctx, id).
		Scan(&rec.PreviousResponseID, &rec.CreatedAt, &rec.Status, &response)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, engine.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get %s: %w", id, err)
	}
	if len(response) > 0 {
		rec.Response = json.RawMessage(response)
	}

	rows, err := tx.StmtContext(ctx, d.st.getItems).QueryContext(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("sqlite: get %s: items: %w", id, err)
	}
	defer rows.Close()
	for rows.Next() {
		var kind string
		var data []byte
		if err := rows.Scan(&kind, &data); err != nil {
			return nil, fmt.Errorf("sqlite: get %s: items: %w", id, err)
		}
		var it responses.Item
		if err := json.Unmarshal(data, &it); err != nil {
			return nil, fmt.Errorf("sqlite: get %s: decode %s item: %w", id, kind, err)
		}
		if kind == kindInput {
			rec.Input = append(rec.Input, it)
		} else {
			rec.Output = append(rec.Output, it)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: get %s: items: %w", id, err)
	}
	return rec, nil
}

// DeleteResponse removes the response stored under id with its items and
// events.
func (d *DB) DeleteResponse(ctx context.Context, id string) error {
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlite: delete %s: %w", id, err)
	}
	defer tx.Rollback()

	// Children first: the foreign keys refuse to orphan them.
	if _, err := tx.StmtContext(ctx, d.st.deleteItems).ExecContext(ctx, id); err != nil {
		return fmt.Errorf("sqlite: delete %s: %w", id, err)
	}
	if _, err := tx.StmtContext(ctx, d.st.deleteEvents).ExecContext(ctx, id); err != nil {
		return fmt.Errorf("sqlite: delete %s: %w", id, err)
	}
	res, err := tx.StmtContext(ctx, d.st.deleteResponse).ExecContext(ctx, id)
	if err != nil {
		return fmt.Errorf("sqlite: delete %s: %w", id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("sqlite: delete %s: %w", id, err)
	}
	if n == 0 {
		return engine.ErrNotFound
	}
	return tx.Commit()
}

// encodedItem is an item ready to insert.
type encodedItem struct {
	id   string
	json string
}

func encodeItems(items []responses.Item) ([]encodedItem, error) {
	out := make([]encodedItem, len(items))
	for i := range items {
		b, err := json.Marshal(items[i])
		if err != nil {
			return nil, fmt.Errorf("item %d (%s): %w", i, items[i].Type, err)
		}
		out[i] = encodedItem{id: items[i].ID, json: string(b)}
	}
	return out, nil
}
