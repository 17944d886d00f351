package sqlite

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkSaveGet measures one store round of the engine's hot path: save
// a finished response (3 input, 3 output items, 40 events), read it back.
func BenchmarkSaveGet(b *testing.B) {
	for _, path := range []string{Memory, ""} {
		b.Run(map[string]string{Memory: "memory", "": "file"}[path], func(b *testing.B) {
			ctx := context.Background()
			d := openTest(b, path)
			rec := sampleRecord("resp_bench")
			rec.Events = makeEvents(40)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				rec.ID = fmt.Sprint("resp_", i%64)
				i++
				if err := d.SaveResponse(ctx, rec); err != nil {
					b.Fatal(err)
				}
				if _, err := d.GetResponse(ctx, rec.ID); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkChain loads a previous_response_id chain of 1 and 50 responses
// (3 input and 3 output items each), as the engine does for every
// continued response.
func BenchmarkChain(b *testing.B) {
	for _, turns := range []int{1, 50} {
		b.Run(fmt.Sprintf("turns=%d", turns), func(b *testing.B) {
			ctx := context.Background()
			d := openTest(b, "")
			prev := ""
			for i := range turns {
				rec := sampleRecord(fmt.Sprint("resp_", i))
				rec.PreviousResponseID = prev
				if err := d.SaveResponse(ctx, rec); err != nil {
					b.Fatal(err)
				}
				prev = rec.ID
			}
			b.ReportAllocs()
			for b.Loop() {
				chain, err := d.Chain(ctx, prev, 1001)
				if err != nil || len(chain) != turns {
					b.Fatalf("chain: %d, %v", len(chain), err)
				}
			}
		})
	}
}
