package records

import (
	"context"
	"fmt"

	"github.com/loomgate/loom/store"
)

// Sizes implements the store's size reads (store.Store's ChainSize and
// ConversationSize) once for both stores: they count the item rows a
// continuation would load and add up their stored lengths, without
// reading the items. octet_length reads a value's length from its
// header in both databases (SQLite does not load a long value's overflow
// pages for it, PostgreSQL does not detoast it).
type Sizes struct {
	// Name prefixes the store's errors ("sqlite", "postgres").
	Name string
	// DB runs single statements that read.
	DB Querier
}

// chainSize sums the items of the chain that chainQuery follows: the
// same links, the same bound. The first column tells whether the
// response exists, and whose it is.
const chainSize = `WITH RECURSIVE chain (id, depth) AS (
		SELECT CAST($1 AS text), 0
		UNION ALL
		SELECT r.previous_response_id, c.depth + 1
		FROM chain c JOIN responses r ON r.id = c.id
		WHERE r.previous_response_id <> '' AND c.depth + 1 < $2
	)
	SELECT (SELECT tenant FROM responses WHERE id = $1),
		(SELECT count(*) FROM chain c JOIN responses r ON r.id = c.id),
		count(i.item), COALESCE(sum(octet_length(i.item)), 0)
	FROM chain c JOIN response_items i ON i.response_id = c.id`

// ChainSize returns the size of what Chain(id, limit) returns.
func (s *Sizes) ChainSize(ctx context.Context, id string, limit int) (store.Size, error) {
	var tenant *string
	var size store.Size
	err := s.DB.QueryRow(ctx, chainSize, id, max(limit, 1)).Scan(&tenant, &size.Responses, &size.Items, &size.Bytes)
	if err != nil {
		return store.Size{}, fmt.Errorf("%s: size of the chain of %s: %w", s.Name, id, err)
	}
	if tenant == nil {
		return store.Size{}, store.ErrNotFound
	}
	size.Tenant = *tenant
	return size, nil
}

// ConversationSize returns the size of conversation id's items.
func (s *Sizes) ConversationSize(ctx context.Context, id string) (store.Size, error) {
	var tenant *string
	var size store.Size
	err := s.DB.QueryRow(ctx, `SELECT (SELECT tenant FROM conversations WHERE id = $1),
		count(item), COALESCE(sum(octet_length(item)), 0) FROM conversation_items WHERE conversation_id = $1`, id).
		Scan(&tenant, &size.Items, &size.Bytes)
	if err != nil {
		return store.Size{}, fmt.Errorf("%s: size of conversation %s: %w", s.Name, id, err)
	}
	if tenant == nil {
		return store.Size{}, store.ErrNotFound
	}
	size.Tenant = *tenant
	return size, nil
}
