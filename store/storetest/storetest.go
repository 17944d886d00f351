package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/store"
)

// Run runs the suite. newStore opens a new, empty store for the test it is
// given and closes it when that test ends.
func Run(t *testing.T, newStore func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"RoundTrip", testRoundTrip},
		{"SaveReplaces", testSaveReplaces},
		{"EmptyAndUnnamedItems", testEmptyAndUnnamedItems},
		{"SaveWithoutID", testSaveWithoutID},
		{"NotFound", testNotFound},
		{"Delete", testDelete},
		{"Events", testEvents},
		{"Paging", testPaging},
		{"PagingCursors", testPagingCursors},
		{"Chain", testChain},
		{"ChainCut", testChainCut},
		{"ConcurrentWriters", testConcurrentWriters},
		{"Leases", testLeases},
		{"LeaseSweepLimit", testLeaseSweepLimit},
		{"QueuedClaims", testQueuedClaims},
		{"FailUnleasedQueued", testFailUnleasedQueued},
		{"Retention", testRetention},
		{"AppendEvents", testAppendEvents},
		{"Cancel", testCancel},
		{"Secret", testSecret},
		{"Conversations", testConversations},
		{"ConversationItemsPaging", testConversationPaging},
		{"ConversationClaims", testConversationClaims},
		{"ConversationConcurrentAppends", testConversationConcurrentAppends},
		{"Ping", testPing},
		{"Sizes", testSizes},
		{"ListResponses", testListResponses},
		{"SetTimeline", testSetTimeline},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, newStore(t))
		})
	}
}

var ctx = context.Background()

// record is a completed response with one item of each kind loom stores,
// in the form they decode back to, so a round trip compares exactly.
func record(id, previous string) *store.Record {
	enc := "gAAAA-opaque"
	return &store.Record{
		ID:                 id,
		PreviousResponseID: previous,
		CreatedAt:          1767225600,
		Status:             responses.StatusCompleted,
		Response:           json.RawMessage(fmt.Sprintf(`{"id":%q,"object":"response","status":"completed","output":[]}`, id)),
		Input: []responses.Item{
			{Type: responses.ItemMessage, ID: "msg_in_" + id, Status: responses.StatusCompleted, Role: "user",
				Content: []responses.ContentPart{{Type: responses.PartInputText, Text: "What is the weather in Paris?\nLine two, ünïcödé, a tab\t and a quote \""}}},
			{Type: responses.ItemFunctionCallOutput, ID: "fco_" + id, Status: responses.StatusCompleted,
				Call: &responses.ItemCall{CallID: "call_1", Output: json.RawMessage(`"{\"temp_c\":21}"`)}},
		},
		Output: []responses.Item{
			{Type: responses.ItemReasoning, ID: "rs_" + id,
				Reasoning: &responses.ItemReasoningFields{Summary: []responses.ContentPart{{Type: responses.PartSummaryText, Text: "Need the weather tool."}}, EncryptedContent: &enc},
			},
			{Type: responses.ItemFunctionCall, ID: "fc_" + id, Status: responses.StatusCompleted,
				Call: &responses.ItemCall{CallID: "call_2", Name: "get_weather", Arguments: `{"city":"Paris"}`}},
			{Type: responses.ItemMessage, ID: "msg_out_" + id, Status: responses.StatusCompleted, Role: "assistant",
				Content: []responses.ContentPart{responses.OutputText("21°C and sunny.")}},
		},
		Events:  events(4),
		Pending: json.RawMessage(`{"calls":[{"request_id":"r1"}]}`),
		// The timeline comes back as saved, for the console.
		Timeline: json.RawMessage(`{"steps":[{"kind":"turn","start_ms":0,"end_ms":12}]}`),
		// Every read returns the owner and the trace id as saved (the
		// engine enforces ownership with them), and the session key (a
		// continuation inherits it from Chain's first record).
		Tenant:     owner(id),
		TraceID:    "4bf92f3577b34da6a3ce929d0e0e4736",
		SessionKey: "session of " + id,
	}
}

// owner is the tenant record gives response id.
func owner(id string) string { return "tenant of " + id }

func events(n int) []json.RawMessage {
	evs := make([]json.RawMessage, n)
	for i := range evs {
		evs[i] = json.RawMessage(fmt.Sprintf(`{"type":"response.in_progress","sequence_number":%d}`, i))
	}
	return evs
}

// inputs returns n input messages with ids in_0 .. in_{n-1}.
func inputs(n int) []responses.Item {
	items := make([]responses.Item, n)
	for i := range items {
		items[i] = responses.Item{Type: responses.ItemMessage, ID: fmt.Sprintf("in_%d", i),
			Status: responses.StatusCompleted, Role: "user",
			Content: []responses.ContentPart{{Type: responses.PartInputText, Text: fmt.Sprintf("message %d", i)}}}
	}
	return items
}

func ids(items []responses.Item) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.ID
	}
	return out
}

func save(t *testing.T, s store.Store, rec *store.Record) {
	t.Helper()
	if err := s.SaveResponse(ctx, rec); err != nil {
		t.Fatalf("SaveResponse(%s): %v", rec.ID, err)
	}
}

// withoutEvents is what GetResponse returns for rec.
func withoutEvents(rec *store.Record) *store.Record {
	c := *rec
	c.Events = nil
	return &c
}

func checkRecord(t *testing.T, got, want *store.Record) {
	t.Helper()
	want = withoutEvents(want)
	if string(got.Response) != string(want.Response) {
		t.Errorf("%s: response object %s, want %s byte for byte", want.ID, got.Response, want.Response)
	}
	if !got.LeaseUntil.Equal(want.LeaseUntil) {
		t.Errorf("%s: LeaseUntil %v, want %v", want.ID, got.LeaseUntil, want.LeaseUntil)
	}
	g, w := *got, *want
	g.LeaseUntil, w.LeaseUntil = time.Time{}, time.Time{}
	// Items compare as the JSON they are stored as: a store keeps what
	// the item encodes, not Go's zero values.
	gj, _ := json.Marshal(&g)
	wj, _ := json.Marshal(&w)
	if string(gj) != string(wj) {
		t.Errorf("record %s:\n got %s\nwant %s", want.ID, gj, wj)
	}
}

func testRoundTrip(t *testing.T, s store.Store) {
	want := record("resp_1", "resp_0")
	save(t, s, want)
	got, err := s.GetResponse(ctx, "resp_1")
	if err != nil {
		t.Fatal(err)
	}
	checkRecord(t, got, want)
	evs, err := s.Events(ctx, "resp_1", -1)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(evs, want.Events) {
		t.Errorf("events %s, want %s", evs, want.Events)
	}
}

func testSaveReplaces(t *testing.T, s store.Store) {
	// The in-progress save, then the final one with fewer items, other
	// events and no pending state: nothing of the first may remain.
	first := record("resp_r", "")
	first.Status = responses.ResponseInProgress
	first.Input = inputs(5)
	first.Events = events(2)
	first.LeaseOwner, first.LeaseUntil = "replica-a", time.UnixMilli(1767225600123)
	save(t, s, first)
	got, err := s.GetResponse(ctx, "resp_r")
	if err != nil {
		t.Fatal(err)
	}
	checkRecord(t, got, first)

	final := record("resp_r", "")
	final.Input = inputs(1)
	final.Events = events(7)
	final.Pending = nil
	save(t, s, final)
	got, err = s.GetResponse(ctx, "resp_r")
	if err != nil {
		t.Fatal(err)
	}
	checkRecord(t, got, final)
	items, more, err := s.ListInputItems(ctx, "resp_r", owner("resp_r"), store.Page{Limit: 100})
	if err != nil || more || !slices.Equal(ids(items), []string{"in_0"}) {
		t.Errorf("input items after re-save: %v more %v err %v, want [in_0]", ids(items), more, err)
	}
	evs, err := s.Events(ctx, "resp_r", -1)
	if err != nil || len(evs) != 7 {
		t.Errorf("events after re-save: %d, err %v; want 7", len(evs), err)
	}
}

func testEmptyAndUnnamedItems(t *testing.T, s store.Store) {
	empty := &store.Record{ID: "resp_e", CreatedAt: 1, Status: responses.StatusCompleted, Response: json.RawMessage(`{}`)}
	save(t, s, empty)
	got, err := s.GetResponse(ctx, "resp_e")
	if err != nil {
		t.Fatal(err)
	}
	checkRecord(t, got, empty)
	if evs, err := s.Events(ctx, "resp_e", -1); err != nil || len(evs) != 0 {
		t.Errorf("events of a record without any: %v, %v", evs, err)
	}
	if items, more, err := s.ListInputItems(ctx, "resp_e", "", store.Page{}); err != nil || more || len(items) != 0 {
		t.Errorf("input items of a record without any: %v %v %v", items, more, err)
	}

	// Items without ids (references, client items) keep their order.
	rec := record("resp_u", "")
	rec.Input = []responses.Item{
		{Type: responses.ItemReference, ID: ""},
		{Type: responses.ItemMessage, Role: "user", Content: []responses.ContentPart{{Type: responses.PartInputText, Text: "a"}}},
		{Type: responses.ItemMessage, Role: "user", Content: []responses.ContentPart{{Type: responses.PartInputText, Text: "b"}}},
	}
	save(t, s, rec)
	got, err = s.GetResponse(ctx, "resp_u")
	if err != nil {
		t.Fatal(err)
	}
	checkRecord(t, got, rec)
}

func testSaveWithoutID(t *testing.T, s store.Store) {
	if err := s.SaveResponse(ctx, &store.Record{Status: "completed"}); err == nil {
		t.Error("a record without an id was saved")
	}
}

func testNotFound(t *testing.T, s store.Store) {
	save(t, s, record("resp_other", ""))
	if _, err := s.GetResponse(ctx, "resp_nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetResponse: %v, want store.ErrNotFound", err)
	}
	if err := s.DeleteResponse(ctx, "resp_nope", owner("resp_nope")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("DeleteResponse: %v, want store.ErrNotFound", err)
	}
	if _, _, err := s.ListInputItems(ctx, "resp_nope", owner("resp_nope"), store.Page{}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("ListInputItems: %v, want store.ErrNotFound", err)
	}
	if _, _, err := s.ListInputItems(ctx, "resp_nope", owner("resp_nope"), store.Page{After: "msg_in_resp_other"}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("ListInputItems with a cursor: %v, want store.ErrNotFound", err)
	}
	if _, err := s.Events(ctx, "resp_nope", -1); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Events: %v, want store.ErrNotFound", err)
	}
	// Another tenant's response is absent to DeleteResponse and
	// ListInputItems, and such a delete removes nothing.
	if _, _, err := s.ListInputItems(ctx, "resp_other", "another tenant", store.Page{}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("ListInputItems of another tenant's response: %v, want store.ErrNotFound", err)
	}
	if err := s.DeleteResponse(ctx, "resp_other", "another tenant"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("DeleteResponse of another tenant's response: %v, want store.ErrNotFound", err)
	}
	if got, err := s.GetResponse(ctx, "resp_other"); err != nil {
		t.Errorf("GetResponse after another tenant's delete: %v", err)
	} else {
		checkRecord(t, got, record("resp_other", ""))
	}
	if _, err := s.Chain(ctx, "resp_nope", 10); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Chain: %v, want store.ErrNotFound", err)
	}
}

func testDelete(t *testing.T, s store.Store) {
	save(t, s, record("resp_a", ""))
	save(t, s, record("resp_b", "resp_a"))
	if err := s.DeleteResponse(ctx, "resp_a", owner("resp_a")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetResponse(ctx, "resp_a"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetResponse after delete: %v", err)
	}
	if _, _, err := s.ListInputItems(ctx, "resp_a", owner("resp_a"), store.Page{}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("ListInputItems after delete: %v", err)
	}
	if _, err := s.Events(ctx, "resp_a", -1); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Events after delete: %v", err)
	}
	if err := s.DeleteResponse(ctx, "resp_a", owner("resp_a")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("second delete: %v, want store.ErrNotFound", err)
	}
	// The other response is untouched, and the id can be used again.
	if got, err := s.GetResponse(ctx, "resp_b"); err != nil || len(got.Input) != 2 {
		t.Errorf("the other response after a delete: %+v, %v", got, err)
	}
	again := record("resp_a", "")
	again.Input = inputs(1)
	save(t, s, again)
	if got, err := s.GetResponse(ctx, "resp_a"); err != nil || len(got.Input) != 1 {
		t.Errorf("saved again after delete: %+v, %v", got, err)
	}
}

func testEvents(t *testing.T, s store.Store) {
	rec := record("resp_ev", "")
	rec.Events = events(5)
	// An event with newlines between tokens reads back compacted.
	rec.Events[2] = json.RawMessage("{\n  \"type\": \"response.in_progress\",\n  \"sequence_number\": 2\n}")
	save(t, s, rec)
	for _, tc := range []struct{ after, first, n int }{{-1, 0, 5}, {-5, 0, 5}, {0, 1, 4}, {3, 4, 1}, {4, 0, 0}, {99, 0, 0}} {
		evs, err := s.Events(ctx, "resp_ev", tc.after)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != tc.n {
			t.Errorf("after %d: %d events, want %d", tc.after, len(evs), tc.n)
			continue
		}
		for i, ev := range evs {
			want := fmt.Sprintf(`{"type":"response.in_progress","sequence_number":%d}`, tc.first+i)
			if string(ev) != want {
				t.Errorf("after %d: event %d is %s, want %s", tc.after, i, ev, want)
			}
		}
	}
	// Events never carry over into a neighbour: appending to one must
	// not overwrite the next.
	evs, _ := s.Events(ctx, "resp_ev", -1)
	if len(evs) == 5 {
		_ = append(evs[0], 'x')
		if string(evs[1]) != `{"type":"response.in_progress","sequence_number":1}` {
			t.Errorf("appending to event 0 changed event 1: %s", evs[1])
		}
	}
}

func testPaging(t *testing.T, s store.Store) {
	rec := record("resp_p", "")
	rec.Input = inputs(7)
	save(t, s, rec)
	for _, tc := range []struct {
		name string
		page store.Page
		want []string
		more bool
	}{
		{"first page", store.Page{Limit: 3}, []string{"in_0", "in_1", "in_2"}, true},
		{"next page", store.Page{After: "in_2", Limit: 3}, []string{"in_3", "in_4", "in_5"}, true},
		{"last page", store.Page{After: "in_5", Limit: 3}, []string{"in_6"}, false},
		{"exactly the rest", store.Page{After: "in_3", Limit: 3}, []string{"in_4", "in_5", "in_6"}, false},
		{"after the last", store.Page{After: "in_6", Limit: 3}, []string{}, false},
		{"desc first page", store.Page{Limit: 3, Desc: true}, []string{"in_6", "in_5", "in_4"}, true},
		{"desc next page", store.Page{After: "in_4", Limit: 3, Desc: true}, []string{"in_3", "in_2", "in_1"}, true},
		{"desc after the first", store.Page{After: "in_0", Limit: 3, Desc: true}, []string{}, false},
		{"desc from the second", store.Page{After: "in_1", Limit: 3, Desc: true}, []string{"in_0"}, false},
		{"default limit", store.Page{}, []string{"in_0", "in_1", "in_2", "in_3", "in_4", "in_5", "in_6"}, false},
		{"limit above 100", store.Page{Limit: 1000}, []string{"in_0", "in_1", "in_2", "in_3", "in_4", "in_5", "in_6"}, false},
	} {
		items, more, err := s.ListInputItems(ctx, "resp_p", owner("resp_p"), tc.page)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if got := ids(items); !slices.Equal(got, tc.want) || more != tc.more {
			t.Errorf("%s: %v more %v, want %v more %v", tc.name, got, more, tc.want, tc.more)
		}
	}
	// Page sizes are clamped to 1..100 with 20 the default.
	big := record("resp_big", "")
	big.Input = inputs(150)
	save(t, s, big)
	for _, tc := range []struct{ limit, want int }{{0, 20}, {-1, 20}, {100, 100}, {101, 100}, {1, 1}} {
		items, more, err := s.ListInputItems(ctx, "resp_big", owner("resp_big"), store.Page{Limit: tc.limit})
		if err != nil || len(items) != tc.want || !more {
			t.Errorf("limit %d: %d items more %v err %v, want %d and more", tc.limit, len(items), more, err, tc.want)
		}
	}
	// Walking every page visits every item once.
	var walked []string
	after := ""
	for range 20 {
		items, more, err := s.ListInputItems(ctx, "resp_big", owner("resp_big"), store.Page{After: after, Limit: 40})
		if err != nil {
			t.Fatal(err)
		}
		walked = append(walked, ids(items)...)
		if !more {
			break
		}
		after = items[len(items)-1].ID
	}
	if !slices.Equal(walked, ids(big.Input)) {
		t.Errorf("walk visited %d items, want %d in order", len(walked), len(big.Input))
	}
}

func testPagingCursors(t *testing.T, s store.Store) {
	rec := record("resp_c", "")
	rec.Input = inputs(4)
	save(t, s, rec)
	save(t, s, record("resp_neighbour", ""))
	for _, tc := range []struct{ name, after string }{
		{"unknown id", "in_nope"},
		{"an output item's id", "msg_out_resp_c"},
		{"another response's item", "msg_in_resp_neighbour"},
	} {
		_, _, err := s.ListInputItems(ctx, "resp_c", owner("resp_c"), store.Page{After: tc.after})
		if !errors.Is(err, store.ErrUnknownCursor) {
			t.Errorf("cursor %s: %v, want store.ErrUnknownCursor", tc.name, err)
		}
		if errors.Is(err, store.ErrNotFound) {
			t.Errorf("cursor %s: the error is also ErrNotFound, which the server would answer with a 404", tc.name)
		}
	}
	// A cursor whose item a re-save removed is unknown; the response
	// deleted, the cursor is a not-found.
	rec.Input = inputs(2)
	save(t, s, rec)
	if _, _, err := s.ListInputItems(ctx, "resp_c", owner("resp_c"), store.Page{After: "in_3"}); !errors.Is(err, store.ErrUnknownCursor) {
		t.Errorf("cursor removed by a re-save: %v, want store.ErrUnknownCursor", err)
	}
	if err := s.DeleteResponse(ctx, "resp_c", owner("resp_c")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.ListInputItems(ctx, "resp_c", owner("resp_c"), store.Page{After: "in_1"}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("cursor of a deleted response: %v, want store.ErrNotFound", err)
	}
}

// saveChain saves n linked responses resp_0 <- resp_1 <- ... and returns
// them oldest first.
func saveChain(t *testing.T, s store.Store, n int) []*store.Record {
	var chain []*store.Record
	prev := ""
	for i := range n {
		rec := record(fmt.Sprint("resp_", i), prev)
		rec.CreatedAt = int64(1000 + i)
		save(t, s, rec)
		chain = append(chain, rec)
		prev = rec.ID
	}
	return chain
}

func testChain(t *testing.T, s store.Store) {
	chain := saveChain(t, s, 6)
	save(t, s, record("resp_unrelated", "resp_2"))
	got, err := s.Chain(ctx, "resp_5", 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 6 {
		t.Fatalf("chain of 6: got %d records", len(got))
	}
	for i, rec := range got {
		// A chain carries the conversation, not the response objects.
		if rec.Response != nil {
			t.Errorf("chain record %s has its response object", rec.ID)
		}
		want := *chain[5-i]
		want.Response, want.Timeline = nil, nil
		checkRecord(t, rec, &want)
	}
	// The limit bounds the walk.
	got, err = s.Chain(ctx, "resp_5", 3)
	if err != nil {
		t.Fatal(err)
	}
	var gotIDs []string
	for _, rec := range got {
		gotIDs = append(gotIDs, rec.ID)
	}
	if !slices.Equal(gotIDs, []string{"resp_5", "resp_4", "resp_3"}) {
		t.Errorf("chain with limit 3: %v", gotIDs)
	}
	// The first of a chain is a chain of one.
	if got, err := s.Chain(ctx, "resp_0", 100); err != nil || len(got) != 1 || got[0].ID != "resp_0" {
		t.Errorf("chain of the first response: %v, %v", got, err)
	}
	// A cycle (which the engine never writes) ends at the limit.
	save(t, s, record("resp_x", "resp_y"))
	save(t, s, record("resp_y", "resp_x"))
	if got, err := s.Chain(ctx, "resp_x", 5); err != nil || len(got) != 5 {
		t.Errorf("chain of a cycle with limit 5: %d records, %v", len(got), err)
	}
}

func testChainCut(t *testing.T, s store.Store) {
	saveChain(t, s, 5)
	if err := s.DeleteResponse(ctx, "resp_2", owner("resp_2")); err != nil {
		t.Fatal(err)
	}
	got, err := s.Chain(ctx, "resp_4", 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != "resp_4" || got[1].ID != "resp_3" || got[1].PreviousResponseID != "resp_2" {
		t.Errorf("chain cut at resp_2: %d records (%v)", len(got), got)
	}
}

// testConcurrentWriters has writers re-save the same responses with a
// changing number of items while readers read them: every read must see
// one whole record, whose status says how many items and events it has.
func testConcurrentWriters(t *testing.T, s store.Store) {
	const (
		nIDs    = 4
		writers = 6
		readers = 4
		rounds  = 25
	)
	rec := func(id string, n int) *store.Record {
		r := record(id, "")
		r.Status = fmt.Sprint(n)
		r.Input = inputs(n)
		r.Events = events(n)
		return r
	}
	for i := range nIDs {
		save(t, s, rec(fmt.Sprint("resp_", i), 1))
	}
	var wg sync.WaitGroup
	errs := make(chan error, writers+readers)
	for w := range writers {
		wg.Go(func() {
			for r := range rounds {
				// Half the writes go to responses of their own.
				id := fmt.Sprint("resp_", (w+r)%nIDs)
				if r%2 == 1 {
					id = fmt.Sprintf("resp_w%d_%d", w, r)
				}
				if err := s.SaveResponse(ctx, rec(id, 1+(w*rounds+r)%9)); err != nil {
					errs <- fmt.Errorf("writer %d: %w", w, err)
					return
				}
			}
		})
	}
	for rd := range readers {
		wg.Go(func() {
			for r := range rounds {
				id := fmt.Sprint("resp_", (rd+r)%nIDs)
				got, err := s.GetResponse(ctx, id)
				if err != nil {
					errs <- fmt.Errorf("reader %d: %w", rd, err)
					return
				}
				if want := fmt.Sprint(len(got.Input)); got.Status != want {
					errs <- fmt.Errorf("reader %d: torn read: status %s with %d input items", rd, got.Status, len(got.Input))
					return
				}
				evs, err := s.Events(ctx, id, -1)
				if err != nil {
					errs <- fmt.Errorf("reader %d: events: %w", rd, err)
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
	// Every writer's own responses are all there.
	for w := range writers {
		for r := 1; r < rounds; r += 2 {
			if _, err := s.GetResponse(ctx, fmt.Sprintf("resp_w%d_%d", w, r)); err != nil {
				t.Errorf("writer %d's response %d: %v", w, r, err)
			}
		}
	}
}

// inFlight is an in-progress response leased by owner until until.
func inFlight(id, owner string, until time.Time) *store.Record {
	rec := record(id, "")
	rec.Status = responses.ResponseInProgress
	rec.Response = json.RawMessage(fmt.Sprintf(`{"id":%q,"object":"response","status":"in_progress","error":null,"output":[]}`, id))
	rec.Output = nil
	rec.LeaseOwner, rec.LeaseUntil = owner, until
	return rec
}

var stopped = json.RawMessage(`{"code":"server_error","message":"the server stopped"}`)

func testLeases(t *testing.T, s store.Store) {
	t0 := time.UnixMilli(1767225600000)
	save(t, s, inFlight("resp_a", "replica-a", t0.Add(5*time.Second)))
	save(t, s, inFlight("resp_b", "replica-b", t0.Add(5*time.Second)))
	done := record("resp_done", "")
	save(t, s, done)

	sweep := func(now time.Time, want int) {
		t.Helper()
		n, err := s.FailExpiredLeases(ctx, now, stopped, 100)
		if err != nil {
			t.Fatal(err)
		}
		if n != want {
			t.Errorf("sweep at %v: %d failed, want %d", now.Sub(t0), n, want)
		}
	}
	sweep(t0.Add(4*time.Second), 0)
	// Renewal extends the owner's leases only, and only of the ids given.
	if err := s.RenewLeases(ctx, "replica-a", []string{"resp_a", "resp_b"}, t0.Add(20*time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := s.RenewLeases(ctx, "replica-a", nil, t0.Add(30*time.Second)); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetResponse(ctx, "resp_a")
	if err != nil {
		t.Fatal(err)
	}
	if got.LeaseOwner != "replica-a" || !got.LeaseUntil.Equal(t0.Add(20*time.Second)) {
		t.Errorf("after renewal: lease %q until %v", got.LeaseOwner, got.LeaseUntil)
	}
	sweep(t0.Add(6*time.Second), 1) // resp_b: replica-b did not renew
	sweep(t0.Add(6*time.Second), 0) // marked once

	got, err = s.GetResponse(ctx, "resp_b")
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != responses.ResponseFailed || got.LeaseOwner != "" || !got.LeaseUntil.IsZero() {
		t.Errorf("swept: status %q lease %q %v", got.Status, got.LeaseOwner, got.LeaseUntil)
	}
	var obj struct {
		ID     string          `json:"id"`
		Status string          `json:"status"`
		Error  json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(got.Response, &obj); err != nil {
		t.Fatalf("swept response object: %v: %s", err, got.Response)
	}
	var gotErr, wantErr map[string]any
	json.Unmarshal(obj.Error, &gotErr)
	json.Unmarshal(stopped, &wantErr)
	if obj.ID != "resp_b" || obj.Status != responses.ResponseFailed || !reflect.DeepEqual(gotErr, wantErr) {
		t.Errorf("swept response object: %s", got.Response)
	}
	// A renewal of a failed response does not bring it back.
	if err := s.RenewLeases(ctx, "replica-b", []string{"resp_b"}, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.GetResponse(ctx, "resp_b"); got.Status != responses.ResponseFailed {
		t.Errorf("renewal revived a failed response: %s", got.Status)
	}
	// The owner finishing saves the final record with no lease: a sweep
	// long after leaves it alone, as it leaves finished responses.
	final := record("resp_a", "")
	save(t, s, final)
	sweep(t0.Add(time.Hour), 0)
	if got, _ := s.GetResponse(ctx, "resp_a"); got.Status != responses.StatusCompleted {
		t.Errorf("a finished response was swept: %s", got.Status)
	}
	if got, _ := s.GetResponse(ctx, "resp_done"); got.Status != responses.StatusCompleted {
		t.Errorf("a response without a lease was swept: %s", got.Status)
	}
}

func testLeaseSweepLimit(t *testing.T, s store.Store) {
	t0 := time.UnixMilli(1767225600000)
	for i := range 5 {
		save(t, s, inFlight(fmt.Sprint("resp_", i), "replica-gone", t0))
	}
	total := 0
	for _, want := range []int{2, 2, 1, 0} {
		n, err := s.FailExpiredLeases(ctx, t0.Add(time.Second), stopped, 2)
		if err != nil {
			t.Fatal(err)
		}
		if n != want {
			t.Errorf("sweep with limit 2: %d, want %d", n, want)
		}
		total += n
	}
	for i := range 5 {
		if got, err := s.GetResponse(ctx, fmt.Sprint("resp_", i)); err != nil || got.Status != responses.ResponseFailed {
			t.Errorf("resp_%d after sweeps: %v %v", i, got, err)
		}
	}
}

func testRetention(t *testing.T, s store.Store) {
	for i := range 5 {
		rec := record(fmt.Sprint("resp_", i), "")
		rec.CreatedAt = int64(100 * (i + 1)) // 100 .. 500
		save(t, s, rec)
	}
	// Small batches: a limit of 2 removes 2 of the 3 old ones.
	n, err := s.DeleteCreatedBefore(ctx, 350, 2)
	if err != nil || n != 2 {
		t.Fatalf("first batch: %d, %v; want 2", n, err)
	}
	n, err = s.DeleteCreatedBefore(ctx, 350, 2)
	if err != nil || n != 1 {
		t.Fatalf("second batch: %d, %v; want 1", n, err)
	}
	n, err = s.DeleteCreatedBefore(ctx, 350, 2)
	if err != nil || n != 0 {
		t.Fatalf("third batch: %d, %v; want 0", n, err)
	}
	for i := range 5 {
		id := fmt.Sprint("resp_", i)
		_, err := s.GetResponse(ctx, id)
		_, _, lerr := s.ListInputItems(ctx, id, owner(id), store.Page{})
		_, eerr := s.Events(ctx, id, -1)
		if i < 3 {
			if !errors.Is(err, store.ErrNotFound) || !errors.Is(lerr, store.ErrNotFound) || !errors.Is(eerr, store.ErrNotFound) {
				t.Errorf("%s (old) after retention: %v, %v, %v", id, err, lerr, eerr)
			}
		} else if err != nil || lerr != nil || eerr != nil {
			t.Errorf("%s (new) after retention: %v, %v, %v", id, err, lerr, eerr)
		}
	}
}

// testAppendEvents checks that events appended while a response runs read
// back in order after the ones saved with it, that concurrent appenders
// of different responses do not mix, and that the final save replaces
// them all.
func testAppendEvents(t *testing.T, s store.Store) {
	all := events(10)
	rec := inFlight("resp_app", "replica-a", time.Now().Add(time.Minute))
	rec.Events = all[:2]
	save(t, s, rec)
	other := inFlight("resp_app_other", "replica-a", time.Now().Add(time.Minute))
	other.Events = nil
	save(t, s, other)
	if err := s.AppendEvents(ctx, "resp_app", nil); err != nil {
		t.Fatalf("append nothing: %v", err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range 5 {
			if err := s.AppendEvents(ctx, "resp_app_other", all[i:i+1]); err != nil {
				t.Error(err)
			}
		}
	}()
	for _, batch := range [][]json.RawMessage{all[2:3], all[3:7], all[7:10]} {
		if err := s.AppendEvents(ctx, "resp_app", batch); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	for _, tc := range []struct {
		id    string
		after int
		first int
		n     int
	}{{"resp_app", -1, 0, 10}, {"resp_app", 6, 7, 3}, {"resp_app_other", -1, 0, 5}} {
		evs, err := s.Events(ctx, tc.id, tc.after)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != tc.n {
			t.Fatalf("%s after %d: %d events, want %d", tc.id, tc.after, len(evs), tc.n)
		}
		for i, ev := range evs {
			if want := string(all[tc.first+i]); string(ev) != want {
				t.Errorf("%s after %d: event %d is %s, want %s", tc.id, tc.after, i, ev, want)
			}
		}
	}
	final := record("resp_app", "")
	final.Events = all[:4]
	save(t, s, final)
	if evs, _ := s.Events(ctx, "resp_app", -1); len(evs) != 4 {
		t.Errorf("after the final save: %d events, want the 4 it saved", len(evs))
	}
	if err := s.AppendEvents(ctx, "resp_missing", all[:1]); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("append to a missing response: %v, want ErrNotFound", err)
	}
}

// testCancel checks the cancel flag: a queued response is cancelled at
// once, a running one keeps its status with the flag set (and keeps it
// through later saves, which the running replica makes), a finished one
// is unchanged.
func testCancel(t *testing.T, s store.Store) {
	queued := inFlight("resp_queued", "", time.Time{})
	queued.Status = responses.ResponseQueued
	queued.Response = json.RawMessage(`{"id":"resp_queued","object":"response","status":"queued","background":true,"output":[]}`)
	save(t, s, queued)
	running := inFlight("resp_running", "replica-a", time.Now().Add(time.Minute))
	save(t, s, running)
	done := record("resp_done", "")
	save(t, s, done)

	for _, id := range []string{"resp_queued", "resp_running", "resp_done"} {
		if got, err := s.CancelRequested(ctx, id); err != nil || got {
			t.Fatalf("%s before cancel: flag %v, %v; want false", id, got, err)
		}
		if err := s.RequestCancel(ctx, id); err != nil {
			t.Fatalf("cancel %s: %v", id, err)
		}
		if got, err := s.CancelRequested(ctx, id); err != nil || !got {
			t.Errorf("%s after cancel: flag %v, %v; want true", id, got, err)
		}
	}
	for _, tc := range []struct{ id, status string }{
		{"resp_queued", responses.ResponseCancelled},
		{"resp_running", responses.ResponseInProgress},
		{"resp_done", responses.StatusCompleted},
	} {
		got, err := s.GetResponse(ctx, tc.id)
		if err != nil {
			t.Fatal(err)
		}
		var obj struct {
			Status     string `json:"status"`
			Background bool   `json:"background"`
		}
		if err := json.Unmarshal(got.Response, &obj); err != nil {
			t.Fatalf("%s: %v", tc.id, err)
		}
		if got.Status != tc.status || obj.Status != tc.status {
			t.Errorf("%s after cancel: status column %q, object %q; want %q", tc.id, got.Status, obj.Status, tc.status)
		}
		if tc.id == "resp_queued" && !obj.Background {
			t.Errorf("cancelling rewrote the rest of the object: %s", got.Response)
		}
	}
	// The running replica saves the response again as it ends: the flag
	// stays, so a cancel racing with a save is not lost.
	running.Status = responses.ResponseCancelled
	save(t, s, running)
	if got, _ := s.CancelRequested(ctx, "resp_running"); !got {
		t.Error("a save cleared the cancel flag")
	}
	if err := s.RequestCancel(ctx, "resp_missing"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("cancel a missing response: %v, want ErrNotFound", err)
	}
	if _, err := s.CancelRequested(ctx, "resp_missing"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("flag of a missing response: %v, want ErrNotFound", err)
	}
}

// message is a conversation item with an id.
func message(id, text string) responses.Item {
	return responses.Item{Type: responses.ItemMessage, ID: id, Role: "user", Status: responses.StatusCompleted,
		Content: []responses.ContentPart{{Type: "input_text", Text: text}}}
}

func testConversations(t *testing.T, s store.Store) {
	c := &store.Conversation{ID: "conv_1", CreatedAt: 1767225600, Metadata: map[string]string{"topic": "demo"}, Tenant: "acme"}
	if err := s.CreateConversation(ctx, c, []responses.Item{message("msg_1", "one"), message("msg_2", "two")}); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetConversation(ctx, "conv_1")
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != c.ID || got.CreatedAt != c.CreatedAt || !reflect.DeepEqual(got.Metadata, c.Metadata) || got.LastResponseID != "" || got.Tenant != "acme" {
		t.Errorf("conversation read back as %+v, want %+v", got, c)
	}
	updated, err := s.SetConversationMetadata(ctx, "conv_1", map[string]string{"topic": "other", "k": "v"})
	if err != nil {
		t.Fatal(err)
	}
	if updated.Metadata["topic"] != "other" || len(updated.Metadata) != 2 || updated.CreatedAt != c.CreatedAt {
		t.Errorf("after the metadata update: %+v", updated)
	}
	if err := s.AddConversationItems(ctx, "conv_1", []responses.Item{message("msg_3", "three")}); err != nil {
		t.Fatal(err)
	}
	items, more, err := s.ConversationItems(ctx, "conv_1", store.Page{})
	if err != nil || more {
		t.Fatalf("all items: more %v, %v", more, err)
	}
	if got := ids(items); !slices.Equal(got, []string{"msg_1", "msg_2", "msg_3"}) {
		t.Errorf("items %v", got)
	}
	if !reflect.DeepEqual(items[2], message("msg_3", "three")) {
		t.Errorf("item read back as %+v", items[2])
	}
	it, err := s.ConversationItem(ctx, "conv_1", "msg_2")
	if err != nil || it.ID != "msg_2" || it.Content[0].Text != "two" {
		t.Errorf("item msg_2: %+v, %v", it, err)
	}
	if err := s.DeleteConversationItem(ctx, "conv_1", "msg_2"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ConversationItem(ctx, "conv_1", "msg_2"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("deleted item: %v, want ErrNotFound", err)
	}
	if err := s.DeleteConversationItem(ctx, "conv_1", "msg_2"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("deleting it again: %v, want ErrNotFound", err)
	}
	// Appending after a delete keeps the order.
	if err := s.AddConversationItems(ctx, "conv_1", []responses.Item{message("msg_4", "four")}); err != nil {
		t.Fatal(err)
	}
	items, _, _ = s.ConversationItems(ctx, "conv_1", store.Page{})
	if got := ids(items); !slices.Equal(got, []string{"msg_1", "msg_3", "msg_4"}) {
		t.Errorf("items after delete and append %v", got)
	}
	testConversationDeleted(t, s)
}

// testConversationDeleted deletes conv_1 (testConversations made it):
// everything on it is then not found, and a second conversation is
// untouched by the delete.
func testConversationDeleted(t *testing.T, s store.Store) {
	// A second conversation is untouched by the first's delete.
	if err := s.CreateConversation(ctx, &store.Conversation{ID: "conv_2", CreatedAt: 1}, []responses.Item{message("msg_1", "same id, other conversation")}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteConversation(ctx, "conv_1"); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"get":         func() error { _, err := s.GetConversation(ctx, "conv_1"); return err }(),
		"items":       func() error { _, _, err := s.ConversationItems(ctx, "conv_1", store.Page{}); return err }(),
		"item":        func() error { _, err := s.ConversationItem(ctx, "conv_1", "msg_1"); return err }(),
		"add":         s.AddConversationItems(ctx, "conv_1", []responses.Item{message("msg_x", "x")}),
		"delete":      s.DeleteConversation(ctx, "conv_1"),
		"delete item": s.DeleteConversationItem(ctx, "conv_1", "msg_1"),
		"metadata":    func() error { _, err := s.SetConversationMetadata(ctx, "conv_1", nil); return err }(),
		"claim":       s.ClaimConversation(ctx, "conv_1", "resp_1", time.Now(), time.Now().Add(time.Minute)),
		"finish":      s.FinishConversationTurn(ctx, "conv_1", "resp_1", []responses.Item{message("msg_y", "y")}),
	} {
		if !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s on a deleted conversation: %v, want ErrNotFound", name, err)
		}
	}
	if it, err := s.ConversationItem(ctx, "conv_2", "msg_1"); err != nil || it.Content[0].Text != "same id, other conversation" {
		t.Errorf("the other conversation's item: %+v, %v", it, err)
	}
	empty := &store.Conversation{ID: "conv_empty", CreatedAt: 2}
	if err := s.CreateConversation(ctx, empty, nil); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetConversation(ctx, "conv_empty"); err != nil || len(got.Metadata) != 0 {
		t.Errorf("a conversation without metadata: %+v, %v", got, err)
	}
	if items, more, err := s.ConversationItems(ctx, "conv_empty", store.Page{Limit: 20}); err != nil || len(items) != 0 || more {
		t.Errorf("an empty conversation's items: %v, %v, %v", items, more, err)
	}
}

func testConversationPaging(t *testing.T, s store.Store) {
	var items []responses.Item
	for i := range 7 {
		items = append(items, message(fmt.Sprintf("msg_%d", i), fmt.Sprint(i)))
	}
	if err := s.CreateConversation(ctx, &store.Conversation{ID: "conv_p", CreatedAt: 1}, items); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		page store.Page
		want []string
		more bool
	}{
		{store.Page{Limit: 3}, []string{"msg_0", "msg_1", "msg_2"}, true},
		{store.Page{Limit: 3, After: "msg_2"}, []string{"msg_3", "msg_4", "msg_5"}, true},
		{store.Page{Limit: 3, After: "msg_5"}, []string{"msg_6"}, false},
		{store.Page{Limit: 3, Desc: true}, []string{"msg_6", "msg_5", "msg_4"}, true},
		{store.Page{Limit: 4, Desc: true, After: "msg_4"}, []string{"msg_3", "msg_2", "msg_1", "msg_0"}, false},
		{store.Page{Limit: 7}, ids(items), false},
	} {
		got, more, err := s.ConversationItems(ctx, "conv_p", tc.page)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ids(got), tc.want) || more != tc.more {
			t.Errorf("page %+v: %v more %v, want %v more %v", tc.page, ids(got), more, tc.want, tc.more)
		}
	}
	if _, _, err := s.ConversationItems(ctx, "conv_p", store.Page{Limit: 3, After: "msg_nope"}); !errors.Is(err, store.ErrUnknownCursor) {
		t.Errorf("unknown cursor: %v, want ErrUnknownCursor", err)
	}
}

func testConversationClaims(t *testing.T, s store.Store) {
	if err := s.CreateConversation(ctx, &store.Conversation{ID: "conv_c", CreatedAt: 1}, []responses.Item{message("msg_0", "hi")}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if err := s.ClaimConversation(ctx, "conv_c", "resp_a", now, now.Add(time.Minute)); err != nil {
		t.Fatalf("first claim: %v", err)
	}
	if err := s.ClaimConversation(ctx, "conv_c", "resp_b", now, now.Add(time.Minute)); !errors.Is(err, store.ErrConversationBusy) {
		t.Fatalf("second response's claim: %v, want ErrConversationBusy", err)
	}
	if err := s.ClaimConversation(ctx, "conv_c", "resp_a", now, now.Add(2*time.Minute)); err != nil {
		t.Fatalf("the holder claims again: %v", err)
	}
	// A turn finished by another response adds nothing to the hold.
	if err := s.FinishConversationTurn(ctx, "conv_c", "resp_b", nil); err != nil {
		t.Fatal(err)
	}
	if err := s.ClaimConversation(ctx, "conv_c", "resp_b", now, now.Add(time.Minute)); !errors.Is(err, store.ErrConversationBusy) {
		t.Fatalf("a non-holder's finish released the hold: %v", err)
	}
	if err := s.FinishConversationTurn(ctx, "conv_c", "resp_a", []responses.Item{message("msg_1", "q"), message("msg_2", "a")}); err != nil {
		t.Fatal(err)
	}
	c, err := s.GetConversation(ctx, "conv_c")
	if err != nil || c.LastResponseID != "resp_a" {
		t.Errorf("last response %+v, %v; want resp_a", c, err)
	}
	items, _, _ := s.ConversationItems(ctx, "conv_c", store.Page{})
	if got := ids(items); !slices.Equal(got, []string{"msg_0", "msg_1", "msg_2"}) {
		t.Errorf("items after the turn %v", got)
	}
	if err := s.ClaimConversation(ctx, "conv_c", "resp_b", now, now.Add(time.Minute)); err != nil {
		t.Fatalf("claim after release: %v", err)
	}
	// A failed turn releases without adding or moving the last response.
	if err := s.FinishConversationTurn(ctx, "conv_c", "resp_b", nil); err != nil {
		t.Fatal(err)
	}
	if c, _ := s.GetConversation(ctx, "conv_c"); c.LastResponseID != "resp_a" {
		t.Errorf("a turn without items moved the last response to %q", c.LastResponseID)
	}
	// A hold that ran out (its replica died) is taken over.
	if err := s.ClaimConversation(ctx, "conv_c", "resp_dead", now, now.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := s.ClaimConversation(ctx, "conv_c", "resp_c", now.Add(2*time.Second), now.Add(time.Minute)); err != nil {
		t.Errorf("an expired hold was not taken over: %v", err)
	}
}

// testConversationConcurrentAppends: writers appending to one
// conversation at once lose nothing and duplicate nothing.
func testConversationConcurrentAppends(t *testing.T, s store.Store) {
	if err := s.CreateConversation(ctx, &store.Conversation{ID: "conv_race", CreatedAt: 1}, nil); err != nil {
		t.Fatal(err)
	}
	const writers, turns = 8, 5
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range turns {
				batch := []responses.Item{message(fmt.Sprintf("msg_%d_%d_q", w, i), "q"), message(fmt.Sprintf("msg_%d_%d_a", w, i), "a")}
				if err := s.AddConversationItems(ctx, "conv_race", batch); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	items, _, err := s.ConversationItems(ctx, "conv_race", store.Page{})
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != writers*turns*2 {
		t.Fatalf("%d items, want %d", len(items), writers*turns*2)
	}
	seen := map[string]bool{}
	for i, it := range items {
		if seen[it.ID] {
			t.Fatalf("item %s twice", it.ID)
		}
		seen[it.ID] = true
		// A batch is written whole: its answer follows its question.
		if strings.HasSuffix(it.ID, "_q") && (i+1 >= len(items) || items[i+1].ID != strings.TrimSuffix(it.ID, "_q")+"_a") {
			t.Errorf("batch of %s interleaved", it.ID)
		}
	}
}

// testPing: an open store answers a ping; a closed one does not (the
// readiness check must see a store that can no longer serve).
func testPing(t *testing.T, s store.Store) {
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping of an open store: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Ping(ctx); err == nil {
		t.Fatal("Ping of a closed store succeeded")
	}
}

// testSizes: ChainSize and ConversationSize count what Chain and
// ConversationItems would load, and the bytes of the items as stored
// (text k bytes longer is k bytes more), with the owner; an absent id is
// ErrNotFound.
func testSizes(t *testing.T, s store.Store) {
	chain := saveChain(t, s, 4)
	perRecord := len(chain[0].Input) + len(chain[0].Output)
	got, err := s.ChainSize(ctx, "resp_3", 100)
	if err != nil {
		t.Fatal(err)
	}
	if got.Responses != 4 || got.Items != 4*perRecord || got.Tenant != owner("resp_3") || got.Bytes <= 0 {
		t.Fatalf("ChainSize of 4 records of %d items: %+v", perRecord, got)
	}
	// The limit bounds the walk, as Chain's.
	if lim, err := s.ChainSize(ctx, "resp_3", 2); err != nil || lim.Responses != 2 || lim.Items != 2*perRecord {
		t.Errorf("ChainSize with limit 2: %+v, %v", lim, err)
	}
	// 1000 more bytes of text in one item of the chain: 1000 more bytes.
	longer := record("resp_3", "resp_2")
	longer.Input[0].Content[0].Text += strings.Repeat("x", 1000)
	save(t, s, longer)
	if g, err := s.ChainSize(ctx, "resp_3", 100); err != nil || g.Bytes != got.Bytes+1000 || g.Items != got.Items {
		t.Errorf("ChainSize after 1000 bytes more text: %+v (before %+v), %v", g, got, err)
	}
	if _, err := s.ChainSize(ctx, "resp_missing", 100); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("ChainSize of an absent response: %v, want ErrNotFound", err)
	}

	c := &store.Conversation{ID: "conv_size", CreatedAt: 1, Tenant: "acme"}
	if err := s.CreateConversation(ctx, c, []responses.Item{message("m1", "one"), message("m2", "two")}); err != nil {
		t.Fatal(err)
	}
	cs, err := s.ConversationSize(ctx, c.ID)
	if err != nil || cs.Items != 2 || cs.Tenant != "acme" || cs.Bytes <= 0 {
		t.Fatalf("ConversationSize of 2 items: %+v, %v", cs, err)
	}
	if err := s.AddConversationItems(ctx, c.ID, []responses.Item{message("m3", "three"+strings.Repeat("y", 500))}); err != nil {
		t.Fatal(err)
	}
	three, err := s.ConversationSize(ctx, c.ID)
	// m3's item is m1's (half of cs.Bytes) with "three" and 500 bytes in
	// place of "one": 502 bytes longer.
	if err != nil || three.Items != 3 || three.Bytes != cs.Bytes+cs.Bytes/2+502 {
		t.Errorf("ConversationSize after an item of 505 bytes of text: %+v (before %+v), %v", three, cs, err)
	}
	if _, err := s.ConversationSize(ctx, "conv_missing"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("ConversationSize of an absent conversation: %v, want ErrNotFound", err)
	}
	empty := &store.Conversation{ID: "conv_empty", CreatedAt: 1}
	if err := s.CreateConversation(ctx, empty, nil); err != nil {
		t.Fatal(err)
	}
	if e, err := s.ConversationSize(ctx, empty.ID); err != nil || e.Items != 0 || e.Bytes != 0 {
		t.Errorf("ConversationSize of an empty conversation: %+v, %v", e, err)
	}
}
