package records

import (
	"context"
	"errors"
	"fmt"

	"github.com/loomgate/loom/store"
)

// Row is one row of a query, as both drivers return it (*sql.Row and
// pgx.Row).
type Row interface {
	Scan(dest ...any) error
}

// Rows are the rows of a query, as both drivers return them (pgx.Rows as it
// is; *sql.Rows with a Close that returns nothing).
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close()
}

// Querier runs the reads both stores share on a connection pool or a
// transaction of either. The statements use $1-style placeholders, which
// SQLite and PostgreSQL both accept, and standard SQL both run alike, so
// each read is written once. Either driver's "no rows" error is
// sql.ErrNoRows to errors.Is.
type Querier interface {
	QueryRow(ctx context.Context, query string, args ...any) Row
	Query(ctx context.Context, query string, args ...any) (Rows, error)
	// Exec runs a statement and returns how many rows it changed.
	Exec(ctx context.Context, query string, args ...any) (int64, error)
}

// Wrap prefixes a store's failure with what was being done. nil and the
// engine's sentinel errors (ErrNotFound, ErrUnknownCursor,
// ErrConversationBusy), which callers compare, come back as they are.
func Wrap(err error, format string, args ...any) error {
	if err == nil || errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrUnknownCursor) ||
		errors.Is(err, store.ErrConversationBusy) {
		return err
	}
	return fmt.Errorf(format+": %w", append(args, err)...)
}

// Change runs a statement that changes the rows of one object:
// store.ErrNotFound when it changed none.
func Change(ctx context.Context, q Querier, query string, args ...any) error {
	n, err := q.Exec(ctx, query, args...)
	if err == nil && n == 0 {
		return store.ErrNotFound
	}
	return err
}
