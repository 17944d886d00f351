package sqlite

import (
	"context"
	"database/sql"
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
	ids, raws, err := records.EncodeItems(items)
	if err != nil {
		return fmt.Errorf("sqlite: create conversation %s: %w", c.ID, err)
	}
	err = d.w.do(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO conversations (id, created_at, metadata, tenant) VALUES (?, ?, ?, ?)`,
			c.ID, c.CreatedAt, meta, c.Tenant); err != nil {
			return err
		}
		return insertConversationItems(ctx, tx, c.ID, 0, ids, raws)
	})
	if err != nil {
		return fmt.Errorf("sqlite: create conversation %s: %w", c.ID, err)
	}
	return nil
}

// GetConversation returns conversation id.
func (d *DB) GetConversation(ctx context.Context, id string) (*engine.Conversation, error) {
	c, err := records.GetConversation(ctx, querier{d.db}, id)
	return c, records.Wrap(err, "sqlite: conversation %s", id)
}

// SetConversationMetadata replaces the metadata of conversation id.
func (d *DB) SetConversationMetadata(ctx context.Context, id string, metadata map[string]string) (*engine.Conversation, error) {
	var c *engine.Conversation
	err := d.w.do(ctx, func(ctx context.Context, tx *sql.Tx) error {
		var err error
		c, err = records.SetConversationMetadata(ctx, querier{tx}, id, metadata)
		return err
	})
	return c, records.Wrap(err, "sqlite: update conversation %s", id)
}

// DeleteConversation removes conversation id and its items.
func (d *DB) DeleteConversation(ctx context.Context, id string) error {
	err := d.w.do(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM conversation_items WHERE conversation_id = ?`, id); err != nil {
			return err
		}
		return records.Change(ctx, querier{tx}, `DELETE FROM conversations WHERE id = ?`, id)
	})
	return records.Wrap(err, "sqlite: delete conversation %s", id)
}

// AddConversationItems appends items to conversation id.
func (d *DB) AddConversationItems(ctx context.Context, id string, items []responses.Item) error {
	ids, raws, err := records.EncodeItems(items)
	if err != nil {
		return fmt.Errorf("sqlite: add items to %s: %w", id, err)
	}
	err = d.w.do(ctx, func(ctx context.Context, tx *sql.Tx) error {
		next, err := nextPosition(ctx, tx, id)
		if err != nil {
			return err
		}
		return insertConversationItems(ctx, tx, id, next, ids, raws)
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

// insertConversationItems writes the items at positions from first on.
func insertConversationItems(ctx context.Context, tx *sql.Tx, id string, first int64, ids, raws []string) error {
	if len(ids) == 0 {
		return nil
	}
	st, err := tx.PrepareContext(ctx, `INSERT INTO conversation_items (conversation_id, position, item_id, item) VALUES (?, ?, ?, ?)`)
	if err != nil {
		return err
	}
	defer st.Close()
	for i := range ids {
		if _, err := st.ExecContext(ctx, id, first+int64(i), ids[i], raws[i]); err != nil {
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
	return items, more, records.Wrap(err, "sqlite: items of %s", id)
}

// ConversationItem returns item itemID of conversation id.
func (d *DB) ConversationItem(ctx context.Context, id, itemID string) (responses.Item, error) {
	it, err := records.ConversationItem(ctx, querier{d.db}, id, itemID)
	return it, records.Wrap(err, "sqlite: item %s of %s", itemID, id)
}

// DeleteConversationItem removes item itemID of conversation id.
func (d *DB) DeleteConversationItem(ctx context.Context, id, itemID string) error {
	err := d.w.do(ctx, func(ctx context.Context, tx *sql.Tx) error {
		return records.DeleteConversationItem(ctx, querier{tx}, id, itemID)
	})
	return records.Wrap(err, "sqlite: delete item %s of %s", itemID, id)
}

// ClaimConversation holds conversation id for responseID until until.
func (d *DB) ClaimConversation(ctx context.Context, id, responseID string, now, until time.Time) error {
	err := d.w.do(ctx, func(ctx context.Context, tx *sql.Tx) error {
		return records.ClaimConversation(ctx, querier{tx}, id, responseID, now, until)
	})
	return records.Wrap(err, "sqlite: claim conversation %s", id)
}

// FinishConversationTurn appends a response's items and releases its hold.
func (d *DB) FinishConversationTurn(ctx context.Context, id, responseID string, items []responses.Item) error {
	ids, raws, err := records.EncodeItems(items)
	if err != nil {
		return fmt.Errorf("sqlite: finish turn on %s: %w", id, err)
	}
	err = d.w.do(ctx, func(ctx context.Context, tx *sql.Tx) error {
		next, err := nextPosition(ctx, tx, id)
		if err != nil {
			return err
		}
		if err := insertConversationItems(ctx, tx, id, next, ids, raws); err != nil {
			return err
		}
		return records.EndConversationTurn(ctx, querier{tx}, id, responseID, len(items) > 0)
	})
	return records.Wrap(err, "sqlite: finish turn on %s", id)
}
