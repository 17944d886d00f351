package sqlite

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/loomgate/loom/store"
	"github.com/loomgate/loom/store/internal/records"
)

// Chain returns response id and the responses it continues, newest first,
// at most limit of them, with their items but not their response objects
// or events: one statement whatever the length (a recursive query, the
// items of each response joined into one value per kind).
func (d *DB) Chain(ctx context.Context, id string, limit int) ([]*store.Record, error) {
	var chain []*store.Record
	err := readApart(func() (err error) {
		chain, err = d.chain(ctx, id, limit)
		return err
	})
	return chain, err
}

// chain is Chain on the caller's goroutine.
func (d *DB) chain(ctx context.Context, id string, limit int) ([]*store.Record, error) {
	rows, err := d.st.chain.QueryContext(ctx, id, max(limit, 1))
	if err != nil {
		return nil, fmt.Errorf("sqlite: chain of %s: %w", id, err)
	}
	defer rows.Close()
	var chain []*store.Record
	for rows.Next() {
		rec := &store.Record{}
		var pending, input, output []byte
		var leaseUntil int64
		if err := rows.Scan(&rec.ID, &rec.PreviousResponseID, &rec.CreatedAt, &rec.Status, &pending, &rec.LeaseOwner, &leaseUntil, &rec.Tenant, &rec.TraceID, &rec.SessionKey, &input, &output); err != nil {
			return nil, fmt.Errorf("sqlite: chain of %s: %w", id, err)
		}
		if len(pending) > 0 {
			rec.Pending = json.RawMessage(pending)
		}
		rec.LeaseUntil = records.LeaseTime(leaseUntil)
		if rec.Input, err = records.SplitItems(input); err != nil {
			return nil, fmt.Errorf("sqlite: chain of %s: input item of %s: %w", id, rec.ID, err)
		}
		if rec.Output, err = records.SplitItems(output); err != nil {
			return nil, fmt.Errorf("sqlite: chain of %s: output item of %s: %w", id, rec.ID, err)
		}
		chain = append(chain, rec)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: chain of %s: %w", id, err)
	}
	if len(chain) == 0 {
		return nil, store.ErrNotFound
	}
	return chain, nil
}
