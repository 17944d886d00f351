package sqlite

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/loomgate/loom/store"
)

func TestListInputItems(t *testing.T) {
	ctx := context.Background()
	d := openTest(t, Memory)
	rec := sampleRecord("resp_1")
	rec.Input = inputItems(5)
	if err := d.SaveResponse(ctx, rec); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name     string
		page     store.Page
		want     []string
		wantMore bool
	}{
		{"all", store.Page{Limit: 100}, []string{"in_0", "in_1", "in_2", "in_3", "in_4"}, false},
		{"default limit", store.Page{}, []string{"in_0", "in_1", "in_2", "in_3", "in_4"}, false},
		{"first page", store.Page{Limit: 2}, []string{"in_0", "in_1"}, true},
		{"after", store.Page{After: "in_1", Limit: 2}, []string{"in_2", "in_3"}, true},
		{"last page exactly full", store.Page{After: "in_2", Limit: 2}, []string{"in_3", "in_4"}, false},
		{"limit equals count", store.Page{Limit: 5}, []string{"in_0", "in_1", "in_2", "in_3", "in_4"}, false},
		{"after last", store.Page{After: "in_4", Limit: 2}, []string{}, false},
		{"desc first page", store.Page{Desc: true, Limit: 2}, []string{"in_4", "in_3"}, true},
		{"desc after", store.Page{Desc: true, After: "in_3", Limit: 10}, []string{"in_2", "in_1", "in_0"}, false},
		{"desc after first", store.Page{Desc: true, After: "in_0", Limit: 10}, []string{}, false},
		{"limit one", store.Page{After: "in_0", Limit: 1}, []string{"in_1"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			items, more, err := d.ListInputItems(ctx, "resp_1", "", tt.page)
			if err != nil {
				t.Fatal(err)
			}
			if got := itemIDs(items); !reflect.DeepEqual(got, tt.want) || more != tt.wantMore {
				t.Errorf("ListInputItems(%+v) = %v, more=%v; want %v, more=%v", tt.page, got, more, tt.want, tt.wantMore)
			}
		})
	}
}

func TestListInputItemsUnknownCursor(t *testing.T) {
	ctx := context.Background()
	d := openTest(t, Memory)
	rec := sampleRecord("resp_1")
	rec.Input = inputItems(3)
	if err := d.SaveResponse(ctx, rec); err != nil {
		t.Fatal(err)
	}
	// An output item's id is not a cursor into the input.
	for _, after := range []string{"in_nope", rec.Output[0].ID} {
		for _, desc := range []bool{false, true} {
			_, _, err := d.ListInputItems(ctx, "resp_1", "", store.Page{After: after, Limit: 10, Desc: desc})
			if !errors.Is(err, store.ErrUnknownCursor) {
				t.Errorf("After %q desc=%v: %v, want ErrUnknownCursor", after, desc, err)
			}
			if errors.Is(err, store.ErrNotFound) {
				t.Errorf("After %q: unknown cursor reported as ErrNotFound", after)
			}
		}
	}
}

// TestListInputItemsWalk follows the cursor through every page, both ways,
// the way a client does.
func TestListInputItemsWalk(t *testing.T) {
	ctx := context.Background()
	d := openTest(t, Memory)
	const n = 250
	rec := sampleRecord("resp_1")
	rec.Input = inputItems(n)
	if err := d.SaveResponse(ctx, rec); err != nil {
		t.Fatal(err)
	}
	for _, desc := range []bool{false, true} {
		for _, limit := range []int{1, 7, 100, 1000} {
			var seen []string
			after := ""
			for pages := 0; ; pages++ {
				if pages > n {
					t.Fatalf("desc=%v limit=%d: paging does not end", desc, limit)
				}
				items, more, err := d.ListInputItems(ctx, "resp_1", "", store.Page{After: after, Limit: limit, Desc: desc})
				if err != nil {
					t.Fatal(err)
				}
				if max := min(limit, store.MaxPageLimit); len(items) > max {
					t.Fatalf("limit %d: page of %d items", limit, len(items))
				}
				seen = append(seen, itemIDs(items)...)
				if !more {
					break
				}
				after = items[len(items)-1].ID
			}
			if len(seen) != n {
				t.Fatalf("desc=%v limit=%d: saw %d items, want %d", desc, limit, len(seen), n)
			}
			for i, id := range seen {
				want := i
				if desc {
					want = n - 1 - i
				}
				if id != fmt.Sprintf("in_%d", want) {
					t.Fatalf("desc=%v limit=%d: item %d is %s, want in_%d", desc, limit, i, id, want)
				}
			}
		}
	}
}
