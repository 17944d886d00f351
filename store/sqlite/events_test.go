package sqlite

import (
	"context"
	"encoding/json"
	"testing"
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
