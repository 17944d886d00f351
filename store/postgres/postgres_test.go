package postgres

import (
	"log/slog"
	"os"
	"testing"

	"github.com/loomgate/loom/engine"
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
	storetest.Run(t, func(t *testing.T) engine.Store { return openTest(t) })
}
