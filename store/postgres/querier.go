package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/loomgate/loom/store/internal/records"
)

// querier runs the reads both stores share (records.Querier) on the pool
// or a transaction.
type querier struct {
	q interface {
		QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
		Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
		Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	}
}

func (q querier) QueryRow(ctx context.Context, query string, args ...any) records.Row {
	return q.q.QueryRow(ctx, query, args...)
}

func (q querier) Query(ctx context.Context, query string, args ...any) (records.Rows, error) {
	rows, err := q.q.Query(ctx, query, args...)
	return rows, err
}

func (q querier) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	tag, err := q.q.Exec(ctx, query, args...)
	return tag.RowsAffected(), err
}
