package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/loomgate/loom/store/internal/records"
)

// conversations are the conversation methods of engine.Store, which both
// stores share; the DB embeds them under this unexported name.
type conversations = records.Conversations

// newConversations runs the shared conversation methods on this pool:
// writes in a transaction that locks the conversation's row before it
// appends (concurrent appends take turns), reads of a page in a read-only
// repeatable-read transaction (one snapshot).
func (d *DB) newConversations() conversations {
	return conversations{
		Name:    "postgres",
		DB:      querier{d.pool},
		LockRow: " FOR UPDATE",
		Write: func(ctx context.Context, fn func(q records.Querier) error) error {
			return pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error { return fn(querier{tx}) })
		},
		Read: func(ctx context.Context, fn func(q records.Querier) error) error {
			return pgx.BeginTxFunc(ctx, d.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly, IsoLevel: pgx.RepeatableRead},
				func(tx pgx.Tx) error { return fn(querier{tx}) })
		},
	}
}
