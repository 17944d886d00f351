package integration

import (
	"context"
	"log/slog"
	"testing"

	"github.com/loomgate/loom/engine"
	"github.com/loomgate/loom/store/postgres"
	"github.com/loomgate/loom/store/postgres/pgtest"
	"github.com/loomgate/loom/store/sqlite"
)

// storeKinds are the stores loom runs on, for tests of behaviour that goes
// through the store: each runs on every one (harnessOptions.OpenStore).
var storeKinds = []struct {
	name string
	open func(testing.TB) engine.Store
}{
	{"sqlite", openSQLite},
	{"postgres", openPostgres},
}

// openSQLite opens an in-memory SQLite store, closed when t ends.
func openSQLite(t testing.TB) engine.Store {
	db, err := sqlite.Open(context.Background(), ":memory:", &sqlite.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// openPostgres opens a PostgreSQL store on a database of t's own, closed
// (and dropped) when t ends.
func openPostgres(t testing.TB) engine.Store {
	db, err := postgres.Open(context.Background(), pgtest.URL(t), &postgres.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}
