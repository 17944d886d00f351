package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/loomgate/loom/store"
	"github.com/loomgate/loom/store/internal/records"
)

// The conversation and event methods of store.Store, which both stores
// share; the DB embeds them under these unexported names.
type (
	conversations = records.Conversations
	events        = records.Events
	sizes         = records.Sizes
)

// share sets up the shared methods on this pool. Conversation writes run
// in a transaction that locks the conversation's row before it appends
// (concurrent appends take turns), reads of a page in a read-only
// repeatable-read transaction (one snapshot). An event append is one
// statement that also notifies the followers of the response on every
// replica (see Notifier): the notification goes out when the update
// commits, so a follower woken by it reads the new events.
func (d *DB) share() {
	d.conversations = conversations{
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
	d.sizes = sizes{Name: "postgres", DB: querier{d.pool}}
	d.events = events{
		Name: "postgres",
		Append: func(ctx context.Context, id, joined string) error {
			var one int
			err := d.pool.QueryRow(ctx, `WITH u AS (UPDATE responses SET events = events || $1 WHERE id = $2 RETURNING id)
				SELECT 1 FROM u, LATERAL (SELECT pg_notify($3, u.id)) n`, joined, id, eventsChannel).Scan(&one)
			if errors.Is(err, pgx.ErrNoRows) {
				return store.ErrNotFound
			}
			return err
		},
		Read: func(ctx context.Context, id string) records.Row {
			return d.pool.QueryRow(ctx, `SELECT events FROM responses WHERE id = $1`, id)
		},
	}
}
