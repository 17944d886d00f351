package sqlite

import (
	"context"
	"database/sql"

	"github.com/loomgate/loom/store/internal/records"
)

// querier runs the reads both stores share (records.Querier) on the
// database or a transaction.
type querier struct {
	q interface {
		QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
		QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
		ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	}
}

func (q querier) QueryRow(ctx context.Context, query string, args ...any) records.Row {
	return q.q.QueryRowContext(ctx, query, args...)
}

func (q querier) Query(ctx context.Context, query string, args ...any) (records.Rows, error) {
	rows, err := q.q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return sqlRows{rows}, nil
}

// sqlRows is *sql.Rows with the Close of records.Rows; its error is the
// one Err reports.
type sqlRows struct{ *sql.Rows }

func (r sqlRows) Close() { r.Rows.Close() }

func (q querier) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := q.q.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}
