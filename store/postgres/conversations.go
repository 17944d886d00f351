package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loomgate/loom/engine"
	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/store/internal/records"
)

// CreateConversation stores c and its first items in one transaction.
func (d *DB) CreateConversation(ctx context.Context, c *engine.Conversation, items []responses.Item) error {
	meta, err := records.EncodeMetadata(c.Metadata)
	if err != nil {
		return fmt.Errorf("postgres: create conversation: %w", err)
	}
	ids, raws, err := records.EncodeItems(items)
	if err != nil {
		return fmt.Errorf("postgres: create conversation %s: %w", c.ID, err)
	}
	err = pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO conversations (id, created_at, metadata, tenant) VALUES ($1, $2, $3, $4)`, c.ID, c.CreatedAt, meta, c.Tenant); err != nil {
			return err
		}
		return insertConversationItems(ctx, tx, c.ID, 0, ids, raws)
	})
	if err != nil {
		return fmt.Errorf("postgres: create conversation %s: %w", c.ID, err)
	}
	return nil
}

// GetConversation returns conversation id.
func (d *DB) GetConversation(ctx context.Context, id string) (*engine.Conversation, error) {
	c, err := records.GetConversation(ctx, querier{d.pool}, id)
	if err != nil && !errors.Is(err, engine.ErrNotFound) {
		return nil, fmt.Errorf("postgres: conversation %s: %w", id, err)
	}
	return c, err
}

// SetConversationMetadata replaces the metadata of conversation id.
func (d *DB) SetConversationMetadata(ctx context.Context, id string, metadata map[string]string) (*engine.Conversation, error) {
	c, err := records.SetConversationMetadata(ctx, querier{d.pool}, id, metadata)
	return c, records.Wrap(err, "postgres: update conversation %s", id)
}

// DeleteConversation removes conversation id and (by cascade) its items.
func (d *DB) DeleteConversation(ctx context.Context, id string) error {
	err := records.Change(ctx, querier{d.pool}, `DELETE FROM conversations WHERE id = $1`, id)
	return records.Wrap(err, "postgres: delete conversation %s", id)
}

// AddConversationItems appends items to conversation id.
func (d *DB) AddConversationItems(ctx context.Context, id string, items []responses.Item) error {
	ids, raws, err := records.EncodeItems(items)
	if err != nil {
		return fmt.Errorf("postgres: add items to %s: %w", id, err)
	}
	err = pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error {
		next, err := lockNextPosition(ctx, tx, id)
		if err != nil {
			return err
		}
		return insertConversationItems(ctx, tx, id, next, ids, raws)
	})
	if err != nil && !errors.Is(err, engine.ErrNotFound) {
		return fmt.Errorf("postgres: add items to %s: %w", id, err)
	}
	return err
}

// lockNextPosition locks conversation id's row, so concurrent appends
// take turns, and returns the position of its next item.
func lockNextPosition(ctx context.Context, tx pgx.Tx, id string) (int32, error) {
	var one int
	err := tx.QueryRow(ctx, `SELECT 1 FROM conversations WHERE id = $1 FOR UPDATE`, id).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, engine.ErrNotFound
	}
	if err != nil {
		return 0, err
	}
	var next int32
	err = tx.QueryRow(ctx, `SELECT COALESCE(MAX(position) + 1, 0) FROM conversation_items WHERE conversation_id = $1`, id).Scan(&next)
	return next, err
}

// insertConversationItems writes the items in one statement, at positions
// from first on.
func insertConversationItems(ctx context.Context, tx pgx.Tx, id string, first int32, ids, raws []string) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := tx.Exec(ctx, `INSERT INTO conversation_items (conversation_id, position, item_id, item)
		SELECT $1, $2 + ord - 1, i, it FROM unnest($3::text[], $4::text[]) WITH ORDINALITY AS t (i, it, ord)`,
		id, first, ids, raws)
	return err
}

// ConversationItems returns a page of the items of conversation id, in
// one read-only transaction.
func (d *DB) ConversationItems(ctx context.Context, id string, page engine.Page) ([]responses.Item, bool, error) {
	var items []responses.Item
	more := false
	err := pgx.BeginTxFunc(ctx, d.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly, IsoLevel: pgx.RepeatableRead}, func(tx pgx.Tx) error {
		var err error
		items, more, err = records.ConversationItems(ctx, querier{tx}, id, page)
		return err
	})
	return items, more, records.Wrap(err, "postgres: items of %s", id)
}

// ConversationItem returns item itemID of conversation id.
func (d *DB) ConversationItem(ctx context.Context, id, itemID string) (responses.Item, error) {
	it, err := records.ConversationItem(ctx, querier{d.pool}, id, itemID)
	return it, records.Wrap(err, "postgres: item %s of %s", itemID, id)
}

// DeleteConversationItem removes item itemID of conversation id.
func (d *DB) DeleteConversationItem(ctx context.Context, id, itemID string) error {
	err := records.DeleteConversationItem(ctx, querier{d.pool}, id, itemID)
	return records.Wrap(err, "postgres: delete item %s of %s", itemID, id)
}

// ClaimConversation holds conversation id for responseID until until.
func (d *DB) ClaimConversation(ctx context.Context, id, responseID string, now, until time.Time) error {
	err := records.ClaimConversation(ctx, querier{d.pool}, id, responseID, now, until)
	return records.Wrap(err, "postgres: claim conversation %s", id)
}

// FinishConversationTurn appends a response's items and releases its hold,
// in one transaction.
func (d *DB) FinishConversationTurn(ctx context.Context, id, responseID string, items []responses.Item) error {
	ids, raws, err := records.EncodeItems(items)
	if err != nil {
		return fmt.Errorf("postgres: finish turn on %s: %w", id, err)
	}
	err = pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error {
		next, err := lockNextPosition(ctx, tx, id)
		if err != nil {
			return err
		}
		if err := insertConversationItems(ctx, tx, id, next, ids, raws); err != nil {
			return err
		}
		return records.EndConversationTurn(ctx, querier{tx}, id, responseID, len(items) > 0)
	})
	return records.Wrap(err, "postgres: finish turn on %s", id)
}
