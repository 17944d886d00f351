package postgres

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"

	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/store"
	"github.com/loomgate/loom/store/postgres/pgtest"
)

// BenchmarkChain loads a previous_response_id chain of 1 and 50 responses
// (one input and one output message each), as the engine does for every
// continued response: one statement.
func BenchmarkChain(b *testing.B) {
	for _, turns := range []int{1, 50} {
		b.Run(fmt.Sprintf("turns=%d", turns), func(b *testing.B) {
			d, err := Open(b.Context(), pgtest.URL(b), &Options{Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				b.Fatal(err)
			}
			defer d.Close()
			prev := ""
			for i := range turns {
				rec := &store.Record{ID: fmt.Sprint("resp_", i), PreviousResponseID: prev, CreatedAt: 1, Status: "completed",
					Response: json.RawMessage(`{}`),
					Input: []responses.Item{{Type: responses.ItemMessage, ID: fmt.Sprint("msg_in_", i), Role: "user",
						Content: []responses.ContentPart{{Type: responses.PartInputText, Text: "a question"}}}},
					Output: []responses.Item{{Type: responses.ItemMessage, ID: fmt.Sprint("msg_out_", i), Role: "assistant", Status: "completed",
						Content: []responses.ContentPart{responses.OutputText("an answer")}}},
				}
				if err := d.SaveResponse(b.Context(), rec); err != nil {
					b.Fatal(err)
				}
				prev = rec.ID
			}
			b.ReportAllocs()
			for b.Loop() {
				chain, err := d.Chain(b.Context(), prev, 1001)
				if err != nil || len(chain) != turns {
					b.Fatalf("chain: %d, %v", len(chain), err)
				}
			}
		})
	}
}
