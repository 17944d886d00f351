package records

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/store"
)

// Conversations implements the conversation methods of store.Store once
// for both stores: their tables and their SQL are the same. A store embeds
// it, set up with its own ways to run statements.
type Conversations struct {
	// Name prefixes the store's errors ("sqlite", "postgres").
	Name string
	// DB runs single statements that read.
	DB Querier
	// Write runs fn in a write transaction, committed when fn returns nil.
	Write func(ctx context.Context, fn func(q Querier) error) error
	// Read runs fn in a read-only transaction: one snapshot.
	Read func(ctx context.Context, fn func(q Querier) error) error
	// LockRow ends a SELECT of a conversation's row so that it is locked
	// until the transaction ends, where concurrent writers would
	// otherwise race (" FOR UPDATE"); "" where writes are serial anyway.
	LockRow string
}

// maxItemRows is the most item rows one INSERT writes (four parameters a
// row, well within either database's limit).
const maxItemRows = 256

// CreateConversation stores c and its first items in one transaction.
func (cs *Conversations) CreateConversation(ctx context.Context, c *store.Conversation, items []responses.Item) error {
	meta, err := EncodeMetadata(c.Metadata)
	if err == nil {
		err = cs.Write(ctx, func(q Querier) error {
			if _, err := q.Exec(ctx, `INSERT INTO conversations (id, created_at, metadata, tenant) VALUES ($1, $2, $3, $4)`,
				c.ID, c.CreatedAt, meta, c.Tenant); err != nil {
				return err
			}
			return insertConversationItems(ctx, q, c.ID, 0, items)
		})
	}
	if err != nil {
		return fmt.Errorf("%s: create conversation %s: %w", cs.Name, c.ID, err)
	}
	return nil
}

// GetConversation returns conversation id.
func (cs *Conversations) GetConversation(ctx context.Context, id string) (*store.Conversation, error) {
	c, err := getConversation(ctx, cs.DB, id)
	return c, Wrap(err, "%s: conversation %s", cs.Name, id)
}

func getConversation(ctx context.Context, q Querier, id string) (*store.Conversation, error) {
	c := &store.Conversation{ID: id}
	var meta string
	err := q.QueryRow(ctx, `SELECT created_at, metadata, last_response_id, tenant FROM conversations WHERE id = $1`, id).
		Scan(&c.CreatedAt, &meta, &c.LastResponseID, &c.Tenant)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(meta), &c.Metadata); err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	return c, nil
}

// SetConversationMetadata replaces the metadata of conversation id.
func (cs *Conversations) SetConversationMetadata(ctx context.Context, id string, metadata map[string]string) (*store.Conversation, error) {
	meta, err := EncodeMetadata(metadata)
	if metadata == nil {
		metadata = map[string]string{} // as a read of it will return
	}
	c := &store.Conversation{ID: id, Metadata: metadata}
	if err == nil {
		err = cs.Write(ctx, func(q Querier) error {
			err := q.QueryRow(ctx, `UPDATE conversations SET metadata = $1 WHERE id = $2 RETURNING created_at, last_response_id, tenant`, meta, id).
				Scan(&c.CreatedAt, &c.LastResponseID, &c.Tenant)
			if errors.Is(err, sql.ErrNoRows) {
				return store.ErrNotFound
			}
			return err
		})
	}
	if err != nil {
		return nil, Wrap(err, "%s: update conversation %s", cs.Name, id)
	}
	return c, nil
}

// DeleteConversation removes conversation id and its items.
func (cs *Conversations) DeleteConversation(ctx context.Context, id string) error {
	err := cs.Write(ctx, func(q Querier) error {
		if _, err := q.Exec(ctx, `DELETE FROM conversation_items WHERE conversation_id = $1`, id); err != nil {
			return err
		}
		return Change(ctx, q, `DELETE FROM conversations WHERE id = $1`, id)
	})
	return Wrap(err, "%s: delete conversation %s", cs.Name, id)
}

// AddConversationItems appends items to conversation id.
func (cs *Conversations) AddConversationItems(ctx context.Context, id string, items []responses.Item) error {
	err := cs.Write(ctx, func(q Querier) error {
		return cs.appendItems(ctx, q, id, items)
	})
	return Wrap(err, "%s: add items to %s", cs.Name, id)
}

// appendItems writes items after the last item of conversation id:
// store.ErrNotFound if there is no such conversation. The conversation's
// row is locked first (LockRow), so concurrent appends take turns.
func (cs *Conversations) appendItems(ctx context.Context, q Querier, id string, items []responses.Item) error {
	var one int
	err := q.QueryRow(ctx, `SELECT 1 FROM conversations WHERE id = $1`+cs.LockRow, id).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return store.ErrNotFound
	}
	if err != nil {
		return err
	}
	// A statement of its own, after the lock: on PostgreSQL it then sees
	// the items of the append it waited for.
	var next int64
	if err := q.QueryRow(ctx, `SELECT COALESCE(MAX(position) + 1, 0) FROM conversation_items WHERE conversation_id = $1`, id).Scan(&next); err != nil {
		return err
	}
	return insertConversationItems(ctx, q, id, next, items)
}

// insertConversationItems writes items at positions from first on, up to
// maxItemRows a statement.
func insertConversationItems(ctx context.Context, q Querier, id string, first int64, items []responses.Item) error {
	ids, raws, err := EncodeItems(items)
	if err != nil {
		return err
	}
	for start := 0; start < len(ids); start += maxItemRows {
		end := min(start+maxItemRows, len(ids))
		var b strings.Builder
		b.WriteString(`INSERT INTO conversation_items (conversation_id, position, item_id, item) VALUES `)
		args := []any{id}
		for i := start; i < end; i++ {
			if i > start {
				b.WriteString(", ")
			}
			n := len(args)
			fmt.Fprintf(&b, "($1, $%d, $%d, $%d)", n+1, n+2, n+3)
			args = append(args, first+int64(i), ids[i], raws[i])
		}
		if _, err := q.Exec(ctx, b.String(), args...); err != nil {
			return err
		}
	}
	return nil
}

// ConversationItems returns a page of the items of conversation id, and
// whether more follow, from one read-only snapshot: store.ErrNotFound
// without the conversation, store.ErrUnknownCursor when page.After names
// no item of it.
func (cs *Conversations) ConversationItems(ctx context.Context, id string, page store.Page) ([]responses.Item, bool, error) {
	var items []responses.Item
	more := false
	err := cs.Read(ctx, func(q Querier) error {
		var err error
		items, more, err = conversationItems(ctx, q, id, page)
		return err
	})
	if err != nil {
		return nil, false, Wrap(err, "%s: items of %s", cs.Name, id)
	}
	return items, more, nil
}

func conversationItems(ctx context.Context, q Querier, id string, page store.Page) ([]responses.Item, bool, error) {
	var one int
	err := q.QueryRow(ctx, `SELECT 1 FROM conversations WHERE id = $1`, id).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, store.ErrNotFound
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
			return nil, false, fmt.Errorf("%w %q in conversation %s", store.ErrUnknownCursor, page.After, id)
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

// ConversationItem returns item itemID of conversation id.
func (cs *Conversations) ConversationItem(ctx context.Context, id, itemID string) (responses.Item, error) {
	var raw []byte
	err := cs.DB.QueryRow(ctx, `SELECT item FROM conversation_items WHERE conversation_id = $1 AND item_id = $2 ORDER BY position LIMIT 1`,
		id, itemID).Scan(&raw)
	var it responses.Item
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return it, store.ErrNotFound
	case err == nil:
		err = DecodeItem(raw, &it)
	}
	return it, Wrap(err, "%s: item %s of %s", cs.Name, itemID, id)
}

// DeleteConversationItem removes item itemID of conversation id.
func (cs *Conversations) DeleteConversationItem(ctx context.Context, id, itemID string) error {
	err := cs.Write(ctx, func(q Querier) error {
		return Change(ctx, q, `DELETE FROM conversation_items WHERE conversation_id = $1 AND item_id = $2`, id, itemID)
	})
	return Wrap(err, "%s: delete item %s of %s", cs.Name, itemID, id)
}

// ClaimConversation holds conversation id for responseID until until,
// unless another response holds it past now: store.ErrConversationBusy.
func (cs *Conversations) ClaimConversation(ctx context.Context, id, responseID string, now, until time.Time) error {
	err := cs.Write(ctx, func(q Querier) error {
		n, err := q.Exec(ctx, `UPDATE conversations SET busy_response = $1, busy_until = $2
			WHERE id = $3 AND (busy_response = '' OR busy_response = $1 OR busy_until < $4)`,
			responseID, until.UnixMilli(), id, now.UnixMilli())
		if err != nil || n == 1 {
			return err
		}
		if _, err := getConversation(ctx, q, id); err != nil {
			return err
		}
		return store.ErrConversationBusy
	})
	return Wrap(err, "%s: claim conversation %s", cs.Name, id)
}

// FinishConversationTurn appends a response's items and releases its
// hold, in one transaction; a turn that added items makes the response
// the conversation's last.
func (cs *Conversations) FinishConversationTurn(ctx context.Context, id, responseID string, items []responses.Item) error {
	last := ""
	if len(items) > 0 {
		last = responseID
	}
	err := cs.Write(ctx, func(q Querier) error {
		if err := cs.appendItems(ctx, q, id, items); err != nil {
			return err
		}
		_, err := q.Exec(ctx, `UPDATE conversations SET
				last_response_id = CASE WHEN $1 <> '' THEN $1 ELSE last_response_id END,
				busy_response = CASE WHEN busy_response = $2 THEN '' ELSE busy_response END,
				busy_until = CASE WHEN busy_response = $2 THEN 0 ELSE busy_until END
			WHERE id = $3`, last, responseID, id)
		return err
	})
	return Wrap(err, "%s: finish turn on %s", cs.Name, id)
}
