package postgres

import (
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/loomgate/loom/store"
	"github.com/loomgate/loom/store/postgres/pgtest"
	"github.com/loomgate/loom/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// openTest opens a store on a fresh database, closed when t ends.
func openTest(t *testing.T) *DB {
	t.Helper()
	d, err := Open(t.Context(), pgtest.URL(t), &Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return openTest(t) })
}

func TestConformanceShared(t *testing.T) {
	storetest.RunShared(t, func(t *testing.T) func() (store.Store, error) {
		url := pgtest.URL(t)
		return func() (store.Store, error) {
			return Open(t.Context(), url, &Options{Logger: slog.New(slog.DiscardHandler), PoolSize: 4})
		}
	})
}

// TestConcurrentOpenMigratesOnce opens one new database from several
// replicas at once: the advisory lock makes one migrate and the others
// find the schema current, so every open succeeds and each step is
// recorded once.
func TestConcurrentOpenMigratesOnce(t *testing.T) {
	url := pgtest.URL(t)
	const replicas = 6
	errs := make(chan error, replicas)
	dbs := make(chan *DB, replicas)
	for range replicas {
		go func() {
			d, err := Open(t.Context(), url, &Options{Logger: slog.New(slog.DiscardHandler), PoolSize: 2})
			errs <- err
			dbs <- d
		}()
	}
	for range replicas {
		if err := <-errs; err != nil {
			t.Errorf("concurrent open: %v", err)
		}
		if d := <-dbs; d != nil {
			t.Cleanup(func() { d.Close() })
		}
	}
	check, err := Open(t.Context(), url, &Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer check.Close()
	var steps, distinct int
	if err := check.pool.QueryRow(t.Context(), `SELECT count(*), count(DISTINCT version) FROM schema_migrations`).Scan(&steps, &distinct); err != nil {
		t.Fatal(err)
	}
	if steps != len(migrations) || distinct != len(migrations) {
		t.Errorf("schema_migrations has %d rows (%d versions), want %d", steps, distinct, len(migrations))
	}
	if v, err := check.SchemaVersion(t.Context()); err != nil || v != len(migrations) {
		t.Errorf("schema version %d, %v", v, err)
	}
}

// TestNewerSchemaRefused: a database a newer loom migrated is not opened.
func TestNewerSchemaRefused(t *testing.T) {
	url := pgtest.URL(t)
	d, err := Open(t.Context(), url, &Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.pool.Exec(t.Context(), `INSERT INTO schema_migrations (version, name) VALUES (99, 'from the future')`); err != nil {
		t.Fatal(err)
	}
	d.Close()
	if _, err := Open(t.Context(), url, &Options{Logger: slog.New(slog.DiscardHandler)}); err == nil || !strings.Contains(err.Error(), "newer") {
		t.Errorf("open of a newer schema: %v", err)
	}
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://loom:secret@db:5432/loom":                "postgres://loom:xxxxx@db:5432/loom",
		"postgresql://loom@db/loom?sslmode=require":          "postgresql://loom@db/loom?sslmode=require",
		"postgres://db/loom?password=secret&sslmode=disable": "postgres://db/loom?password=xxxxx&sslmode=disable",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
	if _, err := Open(t.Context(), "postgres://loom:secret@127.0.0.1:1/loom?connect_timeout=1", nil); err == nil || strings.Contains(err.Error(), "secret") {
		t.Errorf("failed open: %v (must fail, must not name the password)", err)
	}
}

// TestStatementTimeoutAndPoolSize: the options reach the server and the
// pool.
func TestStatementTimeoutAndPoolSize(t *testing.T) {
	d, err := Open(t.Context(), pgtest.URL(t), &Options{Logger: slog.New(slog.DiscardHandler), PoolSize: 3, StatementTimeout: 150 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if got := d.pool.Config().MaxConns; got != 3 {
		t.Errorf("pool size %d, want 3", got)
	}
	var setting string
	if err := d.pool.QueryRow(t.Context(), `SHOW statement_timeout`).Scan(&setting); err != nil || setting != "150ms" {
		t.Errorf("statement_timeout %q, %v; want 150ms", setting, err)
	}
	if _, err := d.pool.Exec(t.Context(), `SELECT pg_sleep(5)`); err == nil || !strings.Contains(err.Error(), "statement timeout") {
		t.Errorf("a 5s statement under a 150ms timeout: %v", err)
	}
}
