package sqlite

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/store"
)

func TestRoundTrip(t *testing.T) {
	ctx := context.Background()
	for _, path := range []string{Memory, ""} {
		t.Run(map[string]string{Memory: "memory", "": "file"}[path], func(t *testing.T) {
			d := openTest(t, path)
			want := sampleRecord("resp_1")
			if err := d.SaveResponse(ctx, want); err != nil {
				t.Fatalf("SaveResponse: %v", err)
			}
			got, err := d.GetResponse(ctx, "resp_1")
			if err != nil {
				t.Fatalf("GetResponse: %v", err)
			}
			if got.Events != nil {
				t.Errorf("GetResponse returned %d events, want none", len(got.Events))
			}
			want.Events = nil
			if !reflect.DeepEqual(got, want) {
				g, _ := json.MarshalIndent(got, "", " ")
				w, _ := json.MarshalIndent(want, "", " ")
				t.Fatalf("round trip differs\n got: %s\nwant: %s", g, w)
			}
		})
	}
}

func TestSaveReplaces(t *testing.T) {
	ctx := context.Background()
	d := openTest(t, Memory)

	first := sampleRecord("resp_1")
	first.Status = responses.StatusInProgress
	first.Input = inputItems(5)
	first.Events = makeEvents(10)
	if err := d.SaveResponse(ctx, first); err != nil {
		t.Fatal(err)
	}
	other := sampleRecord("resp_other")
	if err := d.SaveResponse(ctx, other); err != nil {
		t.Fatal(err)
	}

	second := &store.Record{
		ID:        "resp_1",
		CreatedAt: 42,
		Status:    responses.StatusCompleted,
		Response:  json.RawMessage(`{"status":"completed"}`),
		Input:     inputItems(2),
		Events:    makeEvents(3),
	}
	if err := d.SaveResponse(ctx, second); err != nil {
		t.Fatal(err)
	}

	got, err := d.GetResponse(ctx, "resp_1")
	if err != nil {
		t.Fatal(err)
	}
	wantEvents := second.Events
	second.Events = nil
	if !reflect.DeepEqual(got, second) {
		t.Fatalf("after re-save got %+v, want %+v", got, second)
	}
	evs, err := d.Events(ctx, "resp_1", -1)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 3 {
		t.Errorf("Events after re-save: %d, want 3 (old ones left behind)", len(evs))
	} else {
		for i, ev := range evs {
			if string(ev) != string(wantEvents[i]) {
				t.Errorf("event %d after re-save = %s, want %s", i, ev, wantEvents[i])
			}
		}
	}
	if n := countRows(t, d, "response_items", "response_id", "resp_1"); n != 2 {
		t.Errorf("response_items rows for resp_1: %d, want 2 (old ones left behind)", n)
	}

	// The other response is untouched.
	gotOther, err := d.GetResponse(ctx, "resp_other")
	if err != nil {
		t.Fatal(err)
	}
	otherEvents := other.Events
	other.Events = nil
	if !reflect.DeepEqual(gotOther, other) {
		t.Errorf("unrelated record changed by re-save")
	}
	if evs, err := d.Events(ctx, "resp_other", -1); err != nil || !reflect.DeepEqual(evs, otherEvents) {
		t.Errorf("unrelated record's events = %s, %v; want %s", evs, err, otherEvents)
	}
}

func TestDelete(t *testing.T) {
	ctx := context.Background()
	d := openTest(t, Memory)
	for _, id := range []string{"resp_1", "resp_2"} {
		if err := d.SaveResponse(ctx, sampleRecord(id)); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.DeleteResponse(ctx, "resp_1", ""); err != nil {
		t.Fatalf("DeleteResponse: %v", err)
	}
	for _, table := range []struct{ name, column string }{
		{"responses", "id"}, {"response_items", "response_id"},
	} {
		if n := countRows(t, d, table.name, table.column, "resp_1"); n != 0 {
			t.Errorf("%s still has %d rows of the deleted response", table.name, n)
		}
	}
	if _, err := d.GetResponse(ctx, "resp_1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetResponse after delete: %v, want ErrNotFound", err)
	}
	if err := d.DeleteResponse(ctx, "resp_1", ""); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("second DeleteResponse: %v, want ErrNotFound", err)
	}
	if _, err := d.GetResponse(ctx, "resp_2"); err != nil {
		t.Errorf("other response gone after delete: %v", err)
	}
	// The id can be used again.
	if err := d.SaveResponse(ctx, sampleRecord("resp_1")); err != nil {
		t.Errorf("save after delete: %v", err)
	}
}

func TestNotFound(t *testing.T) {
	ctx := context.Background()
	d := openTest(t, Memory)
	if err := d.SaveResponse(ctx, sampleRecord("resp_1")); err != nil {
		t.Fatal(err)
	}
	calls := map[string]func() error{
		"GetResponse":    func() error { _, err := d.GetResponse(ctx, "resp_missing"); return err },
		"DeleteResponse": func() error { return d.DeleteResponse(ctx, "resp_missing", "") },
		"ListInputItems": func() error {
			_, _, err := d.ListInputItems(ctx, "resp_missing", "", store.Page{Limit: 10})
			return err
		},
		"Events": func() error { _, err := d.Events(ctx, "resp_missing", -1); return err },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s: %v, want ErrNotFound", name, err)
		}
	}
}

func TestItemsWithoutIDs(t *testing.T) {
	ctx := context.Background()
	d := openTest(t, Memory)
	rec := sampleRecord("resp_1")
	rec.Input = []responses.Item{
		{Type: responses.ItemMessage, Status: responses.StatusCompleted, Role: "user",
			Content: []responses.ContentPart{{Type: responses.PartInputText, Text: "a"}}},
		{Type: responses.ItemMessage, Status: responses.StatusCompleted, Role: "user",
			Content: []responses.ContentPart{{Type: responses.PartInputText, Text: "b"}}},
	}
	if err := d.SaveResponse(ctx, rec); err != nil {
		t.Fatal(err)
	}
	got, err := d.GetResponse(ctx, "resp_1")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Input, rec.Input) {
		t.Errorf("input without ids: got %+v, want %+v", got.Input, rec.Input)
	}
	page, _, err := d.ListInputItems(ctx, "resp_1", "", store.Page{Limit: 10})
	if err != nil || len(page) != 2 || page[0].Text() != "a" || page[1].Text() != "b" {
		t.Errorf("ListInputItems = %+v, %v; want a, b", page, err)
	}
}

func TestEmptyRecord(t *testing.T) {
	ctx := context.Background()
	d := openTest(t, Memory)
	rec := &store.Record{ID: "resp_empty", Status: responses.StatusInProgress}
	if err := d.SaveResponse(ctx, rec); err != nil {
		t.Fatal(err)
	}
	got, err := d.GetResponse(ctx, "resp_empty")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, rec) {
		t.Errorf("got %+v, want %+v", got, rec)
	}
	evs, err := d.Events(ctx, "resp_empty", -1)
	if err != nil || len(evs) != 0 {
		t.Errorf("Events = %v, %v; want none", evs, err)
	}
}

func TestSaveRejectsRecordWithoutID(t *testing.T) {
	d := openTest(t, Memory)
	for _, rec := range []*store.Record{nil, {Status: "completed"}} {
		if err := d.SaveResponse(context.Background(), rec); err == nil {
			t.Errorf("SaveResponse(%+v) succeeded", rec)
		}
	}
}

func TestCanceledContext(t *testing.T) {
	d := openTest(t, Memory)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := d.SaveResponse(ctx, sampleRecord("resp_1")); err == nil {
		t.Error("SaveResponse with a canceled context succeeded")
	}
	if _, err := d.GetResponse(context.Background(), "resp_1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("canceled save left a record: %v", err)
	}
}
