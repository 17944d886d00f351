package sqlite

import (
	"context"
	"database/sql"

	"github.com/loomgate/loom/store/internal/records"
)

// The conversation and event methods of store.Store, which both stores
// share; the DB embeds them under these unexported names.
type (
	conversations = records.Conversations
	events        = records.Events
	sizes         = records.Sizes
)

// share sets up the shared methods on this database. Writes go through
// the writer (serial, so no row needs locking); reads of a conversation
// page run in a read-only transaction (on a goroutine of their own:
// readApart), a read of events with its prepared statement.
func (d *DB) share() {
	d.conversations = conversations{
		Name: "sqlite",
		DB:   dbQuerier{querier{d.db}},
		Write: func(ctx context.Context, fn func(q records.Querier) error) error {
			return d.w.do(ctx, func(ctx context.Context, tx *sql.Tx) error { return fn(querier{tx}) })
		},
		Read: func(ctx context.Context, fn func(q records.Querier) error) error {
			return readApart(func() error {
				tx, err := d.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
				if err != nil {
					return err
				}
				defer tx.Rollback()
				return fn(querier{tx})
			})
		},
	}
	d.sizes = sizes{Name: "sqlite", DB: dbQuerier{querier{d.db}}}
	d.events = events{
		Name: "sqlite",
		Append: func(ctx context.Context, id, joined string) error {
			return d.w.do(ctx, func(ctx context.Context, tx *sql.Tx) error {
				return records.Change(ctx, querier{tx}, `UPDATE responses SET events = events || ? WHERE id = ?`, joined, id)
			})
		},
		Read: func(ctx context.Context, id string) records.Row {
			return d.st.getEvents.QueryRowContext(ctx, id)
		},
	}
}
