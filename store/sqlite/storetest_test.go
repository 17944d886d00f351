package sqlite

import (
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/loomgate/loom/store"
	"github.com/loomgate/loom/store/storetest"
)

func TestConformance(t *testing.T) {
	for _, name := range []string{"memory", "file"} {
		t.Run(name, func(t *testing.T) {
			storetest.Run(t, func(t *testing.T) store.Store {
				path := Memory
				if name == "file" {
					path = filepath.Join(t.TempDir(), "loom.db")
				}
				d, err := Open(t.Context(), path, &Options{Logger: slog.New(slog.DiscardHandler)})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { d.Close() })
				return d
			})
		})
	}
}

func TestConformanceShared(t *testing.T) {
	storetest.RunShared(t, func(t *testing.T) func() (store.Store, error) {
		path := filepath.Join(t.TempDir(), "loom.db")
		return func() (store.Store, error) {
			return Open(t.Context(), path, &Options{Logger: slog.New(slog.DiscardHandler)})
		}
	})
}
