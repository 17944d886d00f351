package sqlite

import (
	"context"
	"path/filepath"
	"testing"
)

func TestMigrationsIdempotent(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "loom.db")
	for range 3 {
		d, err := Open(ctx, path, nil)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		v, err := d.SchemaVersion(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if v != len(migrations) {
			t.Errorf("SchemaVersion = %d, want %d", v, len(migrations))
		}
		var rows, userVersion int
		if err := d.db.QueryRow(`SELECT COUNT(*) FROM schema_migrations`).Scan(&rows); err != nil {
			t.Fatal(err)
		}
		if rows != len(migrations) {
			t.Errorf("schema_migrations has %d rows, want %d", rows, len(migrations))
		}
		if err := d.db.QueryRow(`PRAGMA user_version`).Scan(&userVersion); err != nil {
			t.Fatal(err)
		}
		if userVersion != len(migrations) {
			t.Errorf("user_version = %d, want %d", userVersion, len(migrations))
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMigrationsApplyOnlyNewSteps adds a step to a migrated database: only
// that step runs (re-running step 1 would fail, its tables exist), and a
// build that knows fewer steps than the database refuses it.
func TestMigrationsApplyOnlyNewSteps(t *testing.T) {
	ctx := context.Background()
	d := openTest(t, Memory)

	if n, err := migrate(ctx, d.db, migrations); err != nil || n != 0 {
		t.Fatalf("migrate on an up-to-date database = %d, %v; want 0, nil", n, err)
	}

	next := append(migrations[:len(migrations):len(migrations)], migration{
		Version: len(migrations) + 1,
		Name:    "test step",
		Stmts:   []string{`CREATE TABLE test_step (x INTEGER) STRICT`},
	})
	if n, err := migrate(ctx, d.db, next); err != nil || n != 1 {
		t.Fatalf("migrate with one new step = %d, %v; want 1, nil", n, err)
	}
	if _, err := d.db.Exec(`INSERT INTO test_step (x) VALUES (1)`); err != nil {
		t.Errorf("new step's table missing: %v", err)
	}
	if v, _ := d.SchemaVersion(ctx); v != len(next) {
		t.Errorf("SchemaVersion = %d, want %d", v, len(next))
	}
	if n, err := migrate(ctx, d.db, next); err != nil || n != 0 {
		t.Errorf("second migrate = %d, %v; want 0, nil", n, err)
	}
	if _, err := migrate(ctx, d.db, migrations); err == nil {
		t.Error("migrate accepted a database newer than its steps")
	}
}

func TestMigrationFailureRollsBack(t *testing.T) {
	ctx := context.Background()
	d := openTest(t, Memory)
	bad := append(migrations[:len(migrations):len(migrations)],
		migration{Version: len(migrations) + 1, Name: "good", Stmts: []string{`CREATE TABLE good_step (x INTEGER)`}},
		migration{Version: len(migrations) + 2, Name: "bad", Stmts: []string{`CREATE TABLE broken (`}},
	)
	if _, err := migrate(ctx, d.db, bad); err == nil {
		t.Fatal("migrate with a broken step succeeded")
	}
	if v, _ := d.SchemaVersion(ctx); v != len(migrations) {
		t.Errorf("SchemaVersion after failed migration = %d, want %d", v, len(migrations))
	}
	var n int
	d.db.QueryRow(`SELECT COUNT(*) FROM sqlite_schema WHERE name = 'good_step'`).Scan(&n)
	if n != 0 {
		t.Error("the step before the broken one was kept")
	}
}

func TestMigrationsOutOfOrder(t *testing.T) {
	d := openTest(t, Memory)
	steps := []migration{{Version: 2, Name: "skips 1"}}
	if _, err := migrate(context.Background(), d.db, steps); err == nil {
		t.Error("migrate accepted steps out of order")
	}
}
