package sqlite

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/store"
)

func TestFilePersistsAcrossReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "loom.db")
	d, err := Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := sampleRecord("resp_1")
	if err := d.SaveResponse(ctx, want); err != nil {
		t.Fatal(err)
	}
	var mode string
	if err := d.db.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if !strings.EqualFold(mode, "wal") {
		t.Errorf("journal_mode = %q, want wal", mode)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}

	d = openTest(t, path)
	got, err := d.GetResponse(ctx, "resp_1")
	if err != nil {
		t.Fatalf("after reopen: %v", err)
	}
	evs, err := d.Events(ctx, "resp_1", -1)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != len(want.Events) {
		t.Errorf("after reopen: %d events, want %d", len(evs), len(want.Events))
	}
	want.Events = nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("after reopen got %+v, want %+v", got, want)
	}
}

func TestMemoryDatabasesAreSeparate(t *testing.T) {
	ctx := context.Background()
	a := openTest(t, Memory)
	b := openTest(t, Memory)
	if err := a.SaveResponse(ctx, sampleRecord("resp_1")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.GetResponse(ctx, "resp_1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("second in-memory store sees the first one's data: %v", err)
	}
}

func TestOpenErrors(t *testing.T) {
	ctx := context.Background()
	for _, path := range []string{
		"",
		filepath.Join(t.TempDir(), "what?.db"),
		filepath.Join(t.TempDir(), "missing", "dir", "loom.db"),
	} {
		if d, err := Open(ctx, path, nil); err == nil {
			d.Close()
			t.Errorf("Open(%q) succeeded", path)
		}
	}
}

// TestConcurrent runs writers that keep re-saving the same responses with
// a changing number of items while readers read them. Every read must see
// one whole record: its status names how many items and events it has.
func TestConcurrent(t *testing.T) {
	for _, path := range []string{Memory, ""} {
		t.Run(map[string]string{Memory: "memory", "": "file"}[path], func(t *testing.T) {
			ctx := context.Background()
			d := openTest(t, path)
			const (
				ids     = 4
				writers = 4
				readers = 4
				rounds  = 30
			)
			record := func(id string, n int) *store.Record {
				r := sampleRecord(id)
				r.Status = fmt.Sprint(n)
				r.Input = inputItems(n)
				r.Events = makeEvents(n)
				return r
			}
			for i := range ids {
				if err := d.SaveResponse(ctx, record(fmt.Sprint("resp_", i), 1)); err != nil {
					t.Fatal(err)
				}
			}

			var wg sync.WaitGroup
			errs := make(chan error, writers+readers)
			for w := range writers {
				wg.Go(func() {
					for r := range rounds {
						id := fmt.Sprint("resp_", (w+r)%ids)
						if err := d.SaveResponse(ctx, record(id, 1+(w*rounds+r)%9)); err != nil {
							errs <- fmt.Errorf("writer %d: %w", w, err)
							return
						}
					}
				})
			}
			for rd := range readers {
				wg.Go(func() {
					for r := range rounds {
						id := fmt.Sprint("resp_", (rd+r)%ids)
						rec, err := d.GetResponse(ctx, id)
						if err != nil {
							errs <- fmt.Errorf("reader %d: %w", rd, err)
							return
						}
						if want := fmt.Sprint(len(rec.Input)); rec.Status != want {
							errs <- fmt.Errorf("reader %d: torn read: status %s with %d input items", rd, rec.Status, len(rec.Input))
							return
						}
						items, _, err := d.ListInputItems(ctx, id, "", store.Page{Limit: 100})
						if err != nil {
							errs <- fmt.Errorf("reader %d: list: %w", rd, err)
							return
						}
						if len(items) == 0 || items[0].Type != responses.ItemMessage {
							errs <- fmt.Errorf("reader %d: list returned %d items", rd, len(items))
							return
						}
						evs, err := d.Events(ctx, id, -1)
						if err != nil {
							errs <- fmt.Errorf("reader %d: events: %w", rd, err)
							return
						}
						// Whole events of one save: 1..9 of them,
						// numbered from 0 without a gap.
						if len(evs) < 1 || len(evs) > 9 {
							errs <- fmt.Errorf("reader %d: torn read: %d events", rd, len(evs))
							return
						}
						for seq, ev := range evs {
							if want := fmt.Sprintf(`{"type":"response.in_progress","sequence_number":%d}`, seq); string(ev) != want {
								errs <- fmt.Errorf("reader %d: torn read: event %d is %s", rd, seq, ev)
								return
							}
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
		})
	}
}
