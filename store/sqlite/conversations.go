package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/loomgate/loom/engine"
	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/store/internal/records"
)

// CreateConversation stores c and its first items in one transaction.
func (d *DB) CreateConversation(ctx context.Context, c *engine.Conversation, items []responses.Item) error {
	meta, err := records.EncodeMetadata(c.Metadata)
	if err != nil {
		return fmt.Errorf("sqlite: create conversation: %w", err)
	}
	rows, err := encodeConversationItems(items)
	if err != nil {
		return fmt.Errorf("sqlite: create conversation %s: %w", c.ID, err)
	}
	err = d.w.do(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO conversations (id, created_at, metadata, tenant) VALUES (?, ?, ?, ?)`,
			c.ID, c.CreatedAt, meta, c.Tenant); err != nil {
			return err
		}
		return insertConversationItems(ctx, tx, c.ID, 0, rows)
	})
	if err != nil {
		return fmt.Errorf("sqlite: create conversation %s: %w", c.ID, err)
	}
	return nil
}

// GetConversation returns conversation id.
func (d *DB) GetConversation(ctx context.Context, id string) (*engine.Conversation, error) {
	return getConversation(ctx, querier{d.db}, id)
}

func getConversation(ctx context.Context, q querier, id string) (*engine.Conversation, error) {
	c, err := records.GetConversation(ctx, q, id)
	if err != nil && !errors.Is(err, engine.ErrNotFound) {
		return nil, fmt.Errorf("sqlite: conversation %s: %w", id, err)
	}
	return c, err
}

// SetConversationMetadata replaces the metadata of conversation id.
func (d *DB) SetConversationMetadata(ctx context.Context, id string, metadata map[string]string) (*engine.Conversation, error) {
	meta, err := records.EncodeMetadata(metadata)
	if err != nil {
		return nil, fmt.Errorf("sqlite: update conversation %s: %w", id, err)
	}
	var c *engine.Conversation
	err = d.w.do(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE conversations SET metadata = ? WHERE id = ?`, meta, id)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return engine.ErrNotFound
		}
		c, err = getConversation(ctx, querier{tx}, id)
		return err
	})
	if errors.Is(err, engine.ErrNotFound) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: update conversation %s: %w", id, err)
	}
	return c, nil
}

// DeleteConversation removes conversation id and its items.
func (d *DB) DeleteConversation(ctx context.Context, id string) error {
	err := d.w.do(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM conversation_items WHERE conversation_id = ?`, id); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM conversations WHERE id = ?`, id)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return engine.ErrNotFound
		}
		return nil
	})
	if err != nil && !errors.Is(err, engine.ErrNotFound) {
		return fmt.Errorf("sqlite: delete conversation %s: %w", id, err)
	}
	return err
}

// AddConversationItems appends items to conversation id.
func (d *DB) AddConversationItems(ctx context.Context, id string, items []responses.Item) error {
	rows, err := encodeConversationItems(items)
	if err != nil {
		return fmt.Errorf("sqlite: add items to %s: %w", id, err)
	}
	err = d.w.do(ctx, func(ctx context.Context, tx *sql.Tx) error {
		next, err := nextPosition(ctx, tx, id)
		if err != nil {
			return err
		}
		return insertConversationItems(ctx, tx, id, next, rows)
	})
	if err != nil && !errors.Is(err, engine.ErrNotFound) {
		return fmt.Errorf("sqlite: add items to %s: %w", id, err)
	}
	return err
}

// nextPosition is the position of the next item of conversation id;
// ErrNotFound if the conversation is absent.
func nextPosition(ctx context.Context, tx *sql.Tx, id string) (int64, error) {
	var next int64
	err := tx.QueryRowContext(ctx, `SELECT COALESCE((SELECT MAX(position) + 1 FROM conversation_items WHERE conversation_id = ?1), 0)
		FROM conversations WHERE id = ?1`, id).Scan(&next)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, engine.ErrNotFound
	}
	return next, err
}

type conversationItemRow struct {
	id   string
	item string
}

func encodeConversationItems(items []responses.Item) ([]conversationItemRow, error) {
	rows := make([]conversationItemRow, len(items))
	for i := range items {
		b, err := json.Marshal(&items[i])
		if err != nil {
			return nil, fmt.Errorf("item %d (%s): %w", i, items[i].Type, err)
		}
		rows[i] = conversationItemRow{items[i].ID, string(b)}
	}
	return rows, nil
}

func insertConversationItems(ctx context.Context, tx *sql.Tx, id string, first int64, rows []conversationItemRow) error {
	if len(rows) == 0 {
		return nil
	}
	st, err := tx.PrepareContext(ctx, `INSERT INTO conversation_items (conversation_id, position, item_id, item) VALUES (?, ?, ?, ?)`)
	if err != nil {
		return err
	}
	defer st.Close()
	for i, r := range rows {
		if _, err := st.ExecContext(ctx, id, first+int64(i), r.id, r.item); err != nil {
			return err
		}
	}
	return nil
}

// ConversationItems returns a page of the items of conversation id, in
// one read-only transaction.
func (d *DB) ConversationItems(ctx context.Context, id string, page engine.Page) ([]responses.Item, bool, error) {
	tx, err := d.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, false, fmt.Errorf("sqlite: items of %s: %w", id, err)
	}
	defer tx.Rollback()
	items, more, err := records.ConversationItems(ctx, querier{tx}, id, page)
	if err != nil && !errors.Is(err, engine.ErrNotFound) && !errors.Is(err, engine.ErrUnknownCursor) {
		return nil, false, fmt.Errorf("sqlite: items of %s: %w", id, err)
	}
	return items, more, err
}

// ConversationItem returns item itemID of conversation id.
func (d *DB) ConversationItem(ctx context.Context, id, itemID string) (responses.Item, error) {
	it, err := records.ConversationItem(ctx, querier{d.db}, id, itemID)
	if err != nil && !errors.Is(err, engine.ErrNotFound) {
		return responses.Item{}, fmt.Errorf("sqlite: item %s of %s: %w", itemID, id, err)
	}
	return it, err
}

// DeleteConversationItem removes item itemID of conversation id.
func (d *DB) DeleteConversationItem(ctx context.Context, id, itemID string) error {
	err := d.w.do(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM conversation_items WHERE conversation_id = ? AND item_id = ?`, id, itemID)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return engine.ErrNotFound
		}
		return nil
	})
	if err != nil && !errors.Is(err, engine.ErrNotFound) {
		return fmt.Errorf("sqlite: delete item %s of %s: %w", itemID, id, err)
	}
	return err
}

// ClaimConversation holds conversation id for responseID until until.
func (d *DB) ClaimConversation(ctx context.Context, id, responseID string, now, until time.Time) error {
	err := d.w.do(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE conversations SET busy_response = ?1, busy_until = ?2
			WHERE id = ?3 AND (busy_response = '' OR busy_response = ?1 OR busy_until < ?4)`,
			responseID, until.UnixMilli(), id, now.UnixMilli())
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 1 {
			return nil
		}
		if _, err := getConversation(ctx, querier{tx}, id); err != nil {
			return err
		}
		return engine.ErrConversationBusy
	})
	if err != nil && !errors.Is(err, engine.ErrNotFound) && !errors.Is(err, engine.ErrConversationBusy) {
		return fmt.Errorf("sqlite: claim conversation %s: %w", id, err)
	}
	return err
}

// FinishConversationTurn appends a response's items and releases its hold.
func (d *DB) FinishConversationTurn(ctx context.Context, id, responseID string, items []responses.Item) error {
	rows, err := encodeConversationItems(items)
	if err != nil {
		return fmt.Errorf("sqlite: finish turn on %s: %w", id, err)
	}
	err = d.w.do(ctx, func(ctx context.Context, tx *sql.Tx) error {
		next, err := nextPosition(ctx, tx, id)
		if err != nil {
			return err
		}
		if err := insertConversationItems(ctx, tx, id, next, rows); err != nil {
			return err
		}
		last := ""
		if len(rows) > 0 {
			last = responseID
		}
		_, err = tx.ExecContext(ctx, `UPDATE conversations SET
				last_response_id = CASE WHEN ?1 <> '' THEN ?1 ELSE last_response_id END,
				busy_response = CASE WHEN busy_response = ?2 THEN '' ELSE busy_response END,
				busy_until = CASE WHEN busy_response = ?2 THEN 0 ELSE busy_until END
			WHERE id = ?3`, last, responseID, id)
		return err
	})
	if err != nil && !errors.Is(err, engine.ErrNotFound) {
		return fmt.Errorf("sqlite: finish turn on %s: %w", id, err)
	}
	return err
}
