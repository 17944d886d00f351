package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/store"
)

// openTest opens a store for a test and closes it when the test ends.
// path "" means a file in the test's temporary directory.
func openTest(t testing.TB, path string) *DB {
	t.Helper()
	if path == "" {
		path = filepath.Join(t.TempDir(), "loom.db")
	}
	// Quiet: migration messages would only clutter test and benchmark
	// output. Open with nil options is covered by the migration tests.
	d, err := Open(context.Background(), path, &Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("Open(%q): %v", path, err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return d
}

// sampleRecord is a completed response with one item of each type loom
// stores, written in the form they decode back to (statuses set, output
// text with annotations) so a round trip can compare them exactly.
func sampleRecord(id string) *store.Record {
	enc := "gAAAA-opaque"
	return &store.Record{
		ID:                 id,
		PreviousResponseID: "resp_prev",
		CreatedAt:          1767225600,
		Status:             responses.StatusCompleted,
		Response:           json.RawMessage(fmt.Sprintf(`{"id":%q,"object":"response","status":"completed"}`, id)),
		Input: []responses.Item{
			{Type: responses.ItemMessage, ID: "msg_in_" + id, Status: responses.StatusCompleted, Role: "user",
				Content: []responses.ContentPart{{Type: responses.PartInputText, Text: "What is the weather in Paris?"}}},
			{Type: responses.ItemFunctionCallOutput, ID: "fco_" + id, Status: responses.StatusCompleted,
				Call: &responses.ItemCall{CallID: "call_1", Output: json.RawMessage(`"{\"temp_c\":21}"`)}},
			{Type: responses.ItemReference, ID: "msg_earlier"},
		},
		Output: []responses.Item{
			{Type: responses.ItemReasoning, ID: "rs_" + id,
				Reasoning: &responses.ItemReasoningFields{Summary: []responses.ContentPart{{Type: responses.PartSummaryText, Text: "Need the weather tool."}}, EncryptedContent: &enc},
				Content:   []responses.ContentPart{{Type: responses.PartReasoningText, Text: "The user asks about Paris."}},
			},
			{Type: responses.ItemFunctionCall, ID: "fc_" + id, Status: responses.StatusCompleted,
				Call: &responses.ItemCall{CallID: "call_2", Name: "get_weather", Arguments: `{"city":"Paris"}`}},
			{Type: responses.ItemMessage, ID: "msg_out_" + id, Status: responses.StatusCompleted, Role: "assistant",
				Tool: &responses.ItemTool{Phase: "final_answer"}, Content: []responses.ContentPart{responses.OutputText("21°C and sunny.")}},
		},
		Events: makeEvents(4),
	}
}

func makeEvents(n int) []json.RawMessage {
	evs := make([]json.RawMessage, n)
	for i := range evs {
		evs[i] = json.RawMessage(fmt.Sprintf(`{"type":"response.in_progress","sequence_number":%d}`, i))
	}
	return evs
}

// inputItems returns n input messages with ids in_0 .. in_{n-1}.
func inputItems(n int) []responses.Item {
	items := make([]responses.Item, n)
	for i := range items {
		items[i] = responses.Item{Type: responses.ItemMessage, ID: fmt.Sprintf("in_%d", i),
			Status: responses.StatusCompleted, Role: "user",
			Content: []responses.ContentPart{{Type: responses.PartInputText, Text: fmt.Sprintf("message %d", i)}}}
	}
	return items
}

func itemIDs(items []responses.Item) []string {
	ids := make([]string, len(items))
	for i, it := range items {
		ids[i] = it.ID
	}
	return ids
}

// countRows counts the rows of table that belong to response id.
func countRows(t testing.TB, d *DB, table, column, id string) int {
	t.Helper()
	var n int
	if err := d.db.QueryRow(`SELECT COUNT(*) FROM `+table+` WHERE `+column+` = ?`, id).Scan(&n); err != nil {
		t.Fatalf("count %s: %v", table, err)
	}
	return n
}
