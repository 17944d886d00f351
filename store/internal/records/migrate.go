package records

import (
	"context"
	"fmt"
)

// A Migration is one step of a store's schema history. Released steps are
// never edited; a change to the schema is a new step at the end, so every
// database, however old, reaches the same schema by the same path.
type Migration struct {
	Version int
	Name    string
	Stmts   []string
}

// Migrate applies the steps newer than the database's version, through q,
// a transaction the caller opened (and locked, where its database needs
// that) and commits. The version is the highest recorded in the
// schema_migrations table, which createTable creates if needed; recordStep
// records a step ($1 its version, $2 its name). It returns how many steps
// it applied. A database newer than steps is refused: running old code on
// a newer schema could drop or misread what the newer code writes.
func Migrate(ctx context.Context, q Querier, steps []Migration, createTable, recordStep string) (int, error) {
	for i, m := range steps {
		if m.Version != i+1 {
			return 0, fmt.Errorf("migration %d (%s) is out of order", m.Version, m.Name)
		}
	}
	if _, err := q.Exec(ctx, createTable); err != nil {
		return 0, err
	}
	var current int
	if err := q.QueryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&current); err != nil {
		return 0, err
	}
	if current > len(steps) {
		return 0, fmt.Errorf("database schema version %d is newer than this build knows (%d)", current, len(steps))
	}
	applied := 0
	for _, m := range steps[current:] {
		for _, s := range m.Stmts {
			if _, err := q.Exec(ctx, s); err != nil {
				return 0, fmt.Errorf("migration %d (%s): %w", m.Version, m.Name, err)
			}
		}
		if _, err := q.Exec(ctx, recordStep, m.Version, m.Name); err != nil {
			return 0, err
		}
		applied++
	}
	return applied, nil
}

// SchemaVersion is the highest schema migration recorded.
func SchemaVersion(ctx context.Context, q Querier) (int, error) {
	var v int
	err := q.QueryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&v)
	return v, err
}
