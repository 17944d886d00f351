package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/loomgate/loom/engine"
	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/store/internal/records"
)

// Chain returns response id and the responses it continues, newest first,
// at most limit of them, with their items but not their events: two
// queries whatever the length (the records by a recursive query, then all
// their items), in one read snapshot.
func (d *DB) Chain(ctx context.Context, id string, limit int) ([]*engine.Record, error) {
	if limit < 1 {
		limit = 1
	}
	tx, err := d.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("sqlite: chain of %s: %w", id, err)
	}
	defer tx.Rollback()

	rows, err := tx.StmtContext(ctx, d.st.chain).QueryContext(ctx, id, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: chain of %s: %w", id, err)
	}
	var chain []*engine.Record
	byID := map[string]*engine.Record{}
	for rows.Next() {
		rec := &engine.Record{}
		var response, pending []byte
		var leaseUntil int64
		if err := rows.Scan(&rec.ID, &rec.PreviousResponseID, &rec.CreatedAt, &rec.Status, &response, &pending, &rec.LeaseOwner, &leaseUntil, &rec.Tenant, &rec.TraceID); err != nil {
			rows.Close()
			return nil, fmt.Errorf("sqlite: chain of %s: %w", id, err)
		}
		if len(response) > 0 {
			rec.Response = json.RawMessage(response)
		}
		if len(pending) > 0 {
			rec.Pending = json.RawMessage(pending)
		}
		rec.LeaseUntil = leaseTime(leaseUntil)
		chain = append(chain, rec)
		byID[rec.ID] = rec
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: chain of %s: %w", id, err)
	}
	if len(chain) == 0 {
		return nil, engine.ErrNotFound
	}

	ids := make([]string, len(chain))
	for i, rec := range chain {
		ids[i] = rec.ID
	}
	idList, err := json.Marshal(ids)
	if err != nil {
		return nil, err
	}
	items, err := tx.StmtContext(ctx, d.st.chainItems).QueryContext(ctx, string(idList))
	if err != nil {
		return nil, fmt.Errorf("sqlite: chain of %s: items: %w", id, err)
	}
	defer items.Close()
	for items.Next() {
		var rid, kind string
		var data []byte
		if err := items.Scan(&rid, &kind, &data); err != nil {
			return nil, fmt.Errorf("sqlite: chain of %s: items: %w", id, err)
		}
		var it responses.Item
		if err := records.DecodeItem(data, &it); err != nil {
			return nil, fmt.Errorf("sqlite: chain of %s: decode %s item of %s: %w", id, kind, rid, err)
		}
		rec := byID[rid]
		if kind == kindInput {
			rec.Input = append(rec.Input, it)
		} else {
			rec.Output = append(rec.Output, it)
		}
	}
	if err := items.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: chain of %s: items: %w", id, err)
	}
	return chain, nil
}
