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
