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

// dbQuerier is the querier of the database itself, for the single-row
// reads both stores share: each runs, query and scan, on a goroutine of
// its own (readApart), which a row's Scan waits for. Query and Exec are
// the querier's.
type dbQuerier struct{ querier }

func (q dbQuerier) QueryRow(ctx context.Context, query string, args ...any) records.Row {
	return apartRow{q: q.querier, ctx: ctx, query: query, args: args}
}

// apartRow is a row whose query runs when it is scanned, apart: a
// *sql.Row keeps the query's error for Scan too.
type apartRow struct {
	q     querier
	ctx   context.Context
	query string
	args  []any
}

func (r apartRow) Scan(dest ...any) error {
	return readApart(func() error { return r.q.q.QueryRowContext(r.ctx, r.query, r.args...).Scan(dest...) })
}
