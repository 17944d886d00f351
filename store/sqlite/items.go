package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"

	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/store"
	"github.com/loomgate/loom/store/internal/records"
)

// ListInputItems returns one page of the input items of response id in the
// order they were given (or reversed with page.Desc), starting after the
// item page.After, and whether more items follow the page. A Limit below 1
// means 20, above 100 means 100.
func (d *DB) ListInputItems(ctx context.Context, id, tenant string, page store.Page) ([]responses.Item, bool, error) {
	limit := page.Size()

	// One snapshot for the existence check, the cursor and the page, so a
	// concurrent re-save cannot move the cursor under us.
	tx, err := d.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, false, fmt.Errorf("sqlite: input items of %s: %w", id, err)
	}
	defer tx.Rollback()

	var one int
	err = tx.StmtContext(ctx, d.st.responseExists).QueryRowContext(ctx, id, tenant).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, store.ErrNotFound
	}
	if err != nil {
		return nil, false, fmt.Errorf("sqlite: input items of %s: %w", id, err)
	}

	// Positions start at 0, so without a cursor an ascending page starts
	// after -1 and a descending one before the largest position there is.
	from := int64(-1)
	if page.Desc {
		from = math.MaxInt64
	}
	if page.After != "" {
		err := tx.StmtContext(ctx, d.st.cursorPosition).QueryRowContext(ctx, id, page.After).Scan(&from)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, false, fmt.Errorf("%w %q in response %s", store.ErrUnknownCursor, page.After, id)
		}
		if err != nil {
			return nil, false, fmt.Errorf("sqlite: input items of %s: %w", id, err)
		}
	}

	query := d.st.inputPageAsc
	if page.Desc {
		query = d.st.inputPageDesc
	}
	// One row more than the page tells whether there is more, without a
	// second count query.
	rows, err := tx.StmtContext(ctx, query).QueryContext(ctx, id, from, limit+1)
	if err != nil {
		return nil, false, fmt.Errorf("sqlite: input items of %s: %w", id, err)
	}
	defer rows.Close()
	items := make([]responses.Item, 0, limit)
	hasMore := false
	for rows.Next() {
		if len(items) == limit {
			hasMore = true
			break
		}
		var data []byte
		if err := rows.Scan(&data); err != nil {
			return nil, false, fmt.Errorf("sqlite: input items of %s: %w", id, err)
		}
		var it responses.Item
		if err := records.DecodeItem(data, &it); err != nil {
			return nil, false, fmt.Errorf("sqlite: input items of %s: decode: %w", id, err)
		}
		items = append(items, it)
	}
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("sqlite: input items of %s: %w", id, err)
	}
	return items, hasMore, nil
}
