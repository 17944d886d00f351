package sqlite

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/loomgate/loom/store"
)

func TestEvents(t *testing.T) {
	ctx := context.Background()
	d := openTest(t, Memory)
	rec := sampleRecord("resp_1")
	rec.Events = makeEvents(6)
	if err := d.SaveResponse(ctx, rec); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		after int
		want  []int // sequence numbers
	}{
		{-1, []int{0, 1, 2, 3, 4, 5}},
		{0, []int{1, 2, 3, 4, 5}},
		{3, []int{4, 5}},
		{4, []int{5}},
		{5, nil},
		{100, nil},
	}
	for _, tt := range tests {
		evs, err := d.Events(ctx, "resp_1", tt.after)
		if err != nil {
			t.Fatalf("Events(after %d): %v", tt.after, err)
		}
		if len(evs) != len(tt.want) {
			t.Errorf("Events(after %d): %d events, want %d", tt.after, len(evs), len(tt.want))
			continue
		}
		for i, ev := range evs {
			var e struct {
				SequenceNumber int `json:"sequence_number"`
			}
			if err := json.Unmarshal(ev, &e); err != nil {
				t.Fatalf("event %s: %v", ev, err)
			}
			if e.SequenceNumber != tt.want[i] {
				t.Errorf("Events(after %d)[%d] has sequence_number %d, want %d", tt.after, i, e.SequenceNumber, tt.want[i])
			}
			if string(ev) != string(rec.Events[tt.want[i]]) {
				t.Errorf("event bytes changed: %s, want %s", ev, rec.Events[tt.want[i]])
			}
		}
	}
}

// TestEventsEncoding stores events that the one-column encoding must keep
// apart: escaped newlines inside strings, an empty object, large events,
// and an event with raw newlines between tokens, which is stored compacted
// (whitespace is all that changes).
func TestEventsEncoding(t *testing.T) {
	ctx := context.Background()
	d := openTest(t, Memory)
	big := `{"type":"response.output_text.delta","sequence_number":3,"delta":"` + strings.Repeat("x", 70000) + `"}`
	rec := sampleRecord("resp_1")
	rec.Events = []json.RawMessage{
		json.RawMessage(`{"type":"response.output_text.delta","sequence_number":0,"delta":"a\nb\\n\r\u2028"}`),
		json.RawMessage(`{}`),
		json.RawMessage("{\n  \"type\": \"response.completed\",\n  \"sequence_number\": 2\n}"),
		json.RawMessage(big),
	}
	if err := d.SaveResponse(ctx, rec); err != nil {
		t.Fatal(err)
	}
	want := []string{
		string(rec.Events[0]),
		`{}`,
		`{"type":"response.completed","sequence_number":2}`,
		big,
	}
	evs, err := d.Events(ctx, "resp_1", -1)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != len(want) {
		t.Fatalf("%d events, want %d", len(evs), len(want))
	}
	for i := range want {
		if string(evs[i]) != want[i] {
			t.Errorf("event %d = %.100s, want %.100s", i, evs[i], want[i])
		}
	}
	// The events share one buffer; appending to one must not reach into
	// the next.
	_ = append(evs[0], "garbage"...)
	if string(evs[1]) != `{}` {
		t.Errorf("append to event 0 changed event 1: %s", evs[1])
	}

	bad := sampleRecord("resp_bad")
	bad.Events = []json.RawMessage{json.RawMessage("{\n")}
	if err := d.SaveResponse(ctx, bad); err == nil {
		t.Error("SaveResponse accepted an event that is not JSON and spans lines")
	}
	if _, err := d.GetResponse(ctx, "resp_bad"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("failed save left a record: %v", err)
	}
}
