package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/loomgate/loom/engine"
	"github.com/loomgate/loom/responses"
)

// Run runs the suite. newStore opens a new, empty store for the test it is
// given and closes it when that test ends.
func Run(t *testing.T, newStore func(t *testing.T) engine.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s engine.Store)
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
		{"Retention", testRetention},
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
func record(id, previous string) *engine.Record {
	enc := "gAAAA-opaque"
	return &engine.Record{
		ID:                 id,
		PreviousResponseID: previous,
		CreatedAt:          1767225600,
		Status:             responses.StatusCompleted,
		Response:           json.RawMessage(fmt.Sprintf(`{"id":%q,"object":"response","status":"completed","output":[]}`, id)),
		Input: []responses.Item{
			{Type: responses.ItemMessage, ID: "msg_in_" + id, Status: responses.StatusCompleted, Role: "user",
				Content: []responses.ContentPart{{Type: responses.PartInputText, Text: "What is the weather in Paris?\nLine two, ünïcödé, a tab\t and a quote \""}}},
			{Type: responses.ItemFunctionCallOutput, ID: "fco_" + id, Status: responses.StatusCompleted,
				CallID: "call_1", Output: json.RawMessage(`"{\"temp_c\":21}"`)},
		},
		Output: []responses.Item{
			{Type: responses.ItemReasoning, ID: "rs_" + id,
				Summary:          []responses.ContentPart{{Type: responses.PartSummaryText, Text: "Need the weather tool."}},
				EncryptedContent: &enc},
			{Type: responses.ItemFunctionCall, ID: "fc_" + id, Status: responses.StatusCompleted,
				CallID: "call_2", Name: "get_weather", Arguments: `{"city":"Paris"}`},
			{Type: responses.ItemMessage, ID: "msg_out_" + id, Status: responses.StatusCompleted, Role: "assistant",
				Content: []responses.ContentPart{responses.OutputText("21°C and sunny.")}},
		},
		Events:  events(4),
		Pending: json.RawMessage(`{"calls":[{"request_id":"r1"}]}`),
	}
}

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

func save(t *testing.T, s engine.Store, rec *engine.Record) {
	t.Helper()
	if err := s.SaveResponse(ctx, rec); err != nil {
		t.Fatalf("SaveResponse(%s): %v", rec.ID, err)
	}
}

// withoutEvents is what GetResponse returns for rec.
func withoutEvents(rec *engine.Record) *engine.Record {
	c := *rec
	c.Events = nil
	return &c
}

func checkRecord(t *testing.T, got, want *engine.Record) {
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

func testRoundTrip(t *testing.T, s engine.Store) {
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

func testSaveReplaces(t *testing.T, s engine.Store) {
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
	items, more, err := s.ListInputItems(ctx, "resp_r", engine.Page{Limit: 100})
	if err != nil || more || !slices.Equal(ids(items), []string{"in_0"}) {
		t.Errorf("input items after re-save: %v more %v err %v, want [in_0]", ids(items), more, err)
	}
	evs, err := s.Events(ctx, "resp_r", -1)
	if err != nil || len(evs) != 7 {
		t.Errorf("events after re-save: %d, err %v; want 7", len(evs), err)
	}
}

func testEmptyAndUnnamedItems(t *testing.T, s engine.Store) {
	empty := &engine.Record{ID: "resp_e", CreatedAt: 1, Status: responses.StatusCompleted, Response: json.RawMessage(`{}`)}
	save(t, s, empty)
	got, err := s.GetResponse(ctx, "resp_e")
	if err != nil {
		t.Fatal(err)
	}
	checkRecord(t, got, empty)
	if evs, err := s.Events(ctx, "resp_e", -1); err != nil || len(evs) != 0 {
		t.Errorf("events of a record without any: %v, %v", evs, err)
	}
	if items, more, err := s.ListInputItems(ctx, "resp_e", engine.Page{}); err != nil || more || len(items) != 0 {
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

func testSaveWithoutID(t *testing.T, s engine.Store) {
	if err := s.SaveResponse(ctx, &engine.Record{Status: "completed"}); err == nil {
		t.Error("a record without an id was saved")
	}
}

func testNotFound(t *testing.T, s engine.Store) {
	save(t, s, record("resp_other", ""))
	if _, err := s.GetResponse(ctx, "resp_nope"); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("GetResponse: %v, want engine.ErrNotFound", err)
	}
	if err := s.DeleteResponse(ctx, "resp_nope"); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("DeleteResponse: %v, want engine.ErrNotFound", err)
	}
	if _, _, err := s.ListInputItems(ctx, "resp_nope", engine.Page{}); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("ListInputItems: %v, want engine.ErrNotFound", err)
	}
	if _, _, err := s.ListInputItems(ctx, "resp_nope", engine.Page{After: "msg_in_resp_other"}); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("ListInputItems with a cursor: %v, want engine.ErrNotFound", err)
	}
	if _, err := s.Events(ctx, "resp_nope", -1); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("Events: %v, want engine.ErrNotFound", err)
	}
	if _, err := s.Chain(ctx, "resp_nope", 10); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("Chain: %v, want engine.ErrNotFound", err)
	}
}

func testDelete(t *testing.T, s engine.Store) {
	save(t, s, record("resp_a", ""))
	save(t, s, record("resp_b", "resp_a"))
	if err := s.DeleteResponse(ctx, "resp_a"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetResponse(ctx, "resp_a"); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("GetResponse after delete: %v", err)
	}
	if _, _, err := s.ListInputItems(ctx, "resp_a", engine.Page{}); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("ListInputItems after delete: %v", err)
	}
	if _, err := s.Events(ctx, "resp_a", -1); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("Events after delete: %v", err)
	}
	if err := s.DeleteResponse(ctx, "resp_a"); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("second delete: %v, want engine.ErrNotFound", err)
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

func testEvents(t *testing.T, s engine.Store) {
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

func testPaging(t *testing.T, s engine.Store) {
	rec := record("resp_p", "")
	rec.Input = inputs(7)
	save(t, s, rec)
	for _, tc := range []struct {
		name string
		page engine.Page
		want []string
		more bool
	}{
		{"first page", engine.Page{Limit: 3}, []string{"in_0", "in_1", "in_2"}, true},
		{"next page", engine.Page{After: "in_2", Limit: 3}, []string{"in_3", "in_4", "in_5"}, true},
		{"last page", engine.Page{After: "in_5", Limit: 3}, []string{"in_6"}, false},
		{"exactly the rest", engine.Page{After: "in_3", Limit: 3}, []string{"in_4", "in_5", "in_6"}, false},
		{"after the last", engine.Page{After: "in_6", Limit: 3}, []string{}, false},
		{"desc first page", engine.Page{Limit: 3, Desc: true}, []string{"in_6", "in_5", "in_4"}, true},
		{"desc next page", engine.Page{After: "in_4", Limit: 3, Desc: true}, []string{"in_3", "in_2", "in_1"}, true},
		{"desc after the first", engine.Page{After: "in_0", Limit: 3, Desc: true}, []string{}, false},
		{"desc from the second", engine.Page{After: "in_1", Limit: 3, Desc: true}, []string{"in_0"}, false},
		{"default limit", engine.Page{}, []string{"in_0", "in_1", "in_2", "in_3", "in_4", "in_5", "in_6"}, false},
		{"limit above 100", engine.Page{Limit: 1000}, []string{"in_0", "in_1", "in_2", "in_3", "in_4", "in_5", "in_6"}, false},
	} {
		items, more, err := s.ListInputItems(ctx, "resp_p", tc.page)
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
		items, more, err := s.ListInputItems(ctx, "resp_big", engine.Page{Limit: tc.limit})
		if err != nil || len(items) != tc.want || !more {
			t.Errorf("limit %d: %d items more %v err %v, want %d and more", tc.limit, len(items), more, err, tc.want)
		}
	}
	// Walking every page visits every item once.
	var walked []string
	after := ""
	for range 20 {
		items, more, err := s.ListInputItems(ctx, "resp_big", engine.Page{After: after, Limit: 40})
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

func testPagingCursors(t *testing.T, s engine.Store) {
	rec := record("resp_c", "")
	rec.Input = inputs(4)
	save(t, s, rec)
	save(t, s, record("resp_neighbour", ""))
	for _, tc := range []struct{ name, after string }{
		{"unknown id", "in_nope"},
		{"an output item's id", "msg_out_resp_c"},
		{"another response's item", "msg_in_resp_neighbour"},
	} {
		_, _, err := s.ListInputItems(ctx, "resp_c", engine.Page{After: tc.after})
		if !errors.Is(err, engine.ErrUnknownCursor) {
			t.Errorf("cursor %s: %v, want engine.ErrUnknownCursor", tc.name, err)
		}
		if errors.Is(err, engine.ErrNotFound) {
			t.Errorf("cursor %s: the error is also ErrNotFound, which the server would answer with a 404", tc.name)
		}
	}
	// A cursor whose item a re-save removed is unknown; the response
	// deleted, the cursor is a not-found.
	rec.Input = inputs(2)
	save(t, s, rec)
	if _, _, err := s.ListInputItems(ctx, "resp_c", engine.Page{After: "in_3"}); !errors.Is(err, engine.ErrUnknownCursor) {
		t.Errorf("cursor removed by a re-save: %v, want engine.ErrUnknownCursor", err)
	}
	if err := s.DeleteResponse(ctx, "resp_c"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.ListInputItems(ctx, "resp_c", engine.Page{After: "in_1"}); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("cursor of a deleted response: %v, want engine.ErrNotFound", err)
	}
}

// saveChain saves n linked responses resp_0 <- resp_1 <- ... and returns
// them oldest first.
func saveChain(t *testing.T, s engine.Store, n int) []*engine.Record {
	var chain []*engine.Record
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

func testChain(t *testing.T, s engine.Store) {
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
		want.Response = nil
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

func testChainCut(t *testing.T, s engine.Store) {
	saveChain(t, s, 5)
	if err := s.DeleteResponse(ctx, "resp_2"); err != nil {
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
func testConcurrentWriters(t *testing.T, s engine.Store) {
	const (
		nIDs    = 4
		writers = 6
		readers = 4
		rounds  = 25
	)
	rec := func(id string, n int) *engine.Record {
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
func inFlight(id, owner string, until time.Time) *engine.Record {
	rec := record(id, "")
	rec.Status = responses.ResponseInProgress
	rec.Response = json.RawMessage(fmt.Sprintf(`{"id":%q,"object":"response","status":"in_progress","error":null,"output":[]}`, id))
	rec.Output = nil
	rec.LeaseOwner, rec.LeaseUntil = owner, until
	return rec
}

var stopped = json.RawMessage(`{"code":"server_error","message":"the server stopped"}`)

func testLeases(t *testing.T, s engine.Store) {
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

func testLeaseSweepLimit(t *testing.T, s engine.Store) {
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

func testRetention(t *testing.T, s engine.Store) {
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
		_, _, lerr := s.ListInputItems(ctx, id, engine.Page{})
		_, eerr := s.Events(ctx, id, -1)
		if i < 3 {
			if !errors.Is(err, engine.ErrNotFound) || !errors.Is(lerr, engine.ErrNotFound) || !errors.Is(eerr, engine.ErrNotFound) {
				t.Errorf("%s (old) after retention: %v, %v, %v", id, err, lerr, eerr)
			}
		} else if err != nil || lerr != nil || eerr != nil {
			t.Errorf("%s (new) after retention: %v, %v, %v", id, err, lerr, eerr)
		}
	}
}
