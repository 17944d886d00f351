package sqlite

import (
	"context"
	"database/sql"

	"github.com/loomgate/loom/store/internal/records"
)

// conversations are the conversation methods of engine.Store, which both
// stores share; the DB embeds them under this unexported name.
type conversations = records.Conversations

// newConversations runs the shared conversation methods on this database:
// writes through the writer (serial, so no row needs locking), reads of a
// page in a read-only transaction.
func (d *DB) newConversations() conversations {
	return conversations{
		Name: "sqlite",
		DB:   querier{d.db},
		Write: func(ctx context.Context, fn func(q records.Querier) error) error {
			return d.w.do(ctx, func(ctx context.Context, tx *sql.Tx) error { return fn(querier{tx}) })
		},
		Read: func(ctx context.Context, fn func(q records.Querier) error) error {
			tx, err := d.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
			if err != nil {
				return err
			}
			defer tx.Rollback()
			return fn(querier{tx})
		},
	}
}
