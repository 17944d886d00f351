package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/store"
)

// listed saves a response of tenant, model and status created at createdAt.
func listed(t *testing.T, s store.Store, id, tenant, model, status string, createdAt int64) {
	t.Helper()
	save(t, s, &store.Record{ID: id, CreatedAt: createdAt, Status: status, Tenant: tenant, TraceID: "trace of " + id,
		Response: json.RawMessage(fmt.Sprintf(`{"id":%q,"object":"response","model":%q,"status":%q}`, id, model, status)),
		Input:    inputs(1), Events: events(2), Pending: json.RawMessage(`{"calls":[]}`), Timeline: json.RawMessage(`{"steps":[]}`)})
}

// list returns the ids ListResponses returns for q, and whether more follow.
func list(t *testing.T, s store.Store, q store.ResponseQuery) ([]string, bool) {
	t.Helper()
	recs, more, err := s.ListResponses(ctx, q)
	if err != nil {
		t.Fatalf("ListResponses(%+v): %v", q, err)
	}
	ids := make([]string, len(recs))
	for i, r := range recs {
		ids[i] = r.ID
	}
	return ids, more
}

func testListResponses(t *testing.T, s store.Store) {
	if ids, more := list(t, s, store.ResponseQuery{}); len(ids) != 0 || more {
		t.Fatalf("empty store lists %v (more %v)", ids, more)
	}
	// Two share a second, so the id breaks the tie (descending).
	listed(t, s, "resp_a", "acme", "gpt-oss-20b", responses.ResponseCompleted, 100)
	listed(t, s, "resp_b", "", "gpt-oss-120b", responses.ResponseFailed, 200)
	listed(t, s, "resp_c", "acme", "gpt-oss-120b", responses.ResponseCompleted, 200)
	listed(t, s, "resp_d", "globex", "gpt-oss-20b", responses.ResponseInProgress, 300)
	listed(t, s, "resp_e", "acme", "gpt-oss-20b", responses.ResponseQueued, 400)

	ids, more := list(t, s, store.ResponseQuery{})
	if want := []string{"resp_e", "resp_d", "resp_c", "resp_b", "resp_a"}; !reflect.DeepEqual(ids, want) || more {
		t.Errorf("all: %v (more %v), want %v, newest first", ids, more, want)
	}

	// Pages of two follow one another to the end, by cursor.
	var paged []string
	after := ""
	for range 5 {
		ids, more := list(t, s, store.ResponseQuery{After: after, Limit: 2})
		paged = append(paged, ids...)
		if !more {
			break
		}
		after = ids[len(ids)-1]
	}
	if want := []string{"resp_e", "resp_d", "resp_c", "resp_b", "resp_a"}; !reflect.DeepEqual(paged, want) {
		t.Errorf("paged by two: %v, want %v", paged, want)
	}
	// A response saved after the first page does not shift the next one.
	ids, _ = list(t, s, store.ResponseQuery{Limit: 2})
	listed(t, s, "resp_f", "acme", "gpt-oss-20b", responses.ResponseCompleted, 500)
	if next, _ := list(t, s, store.ResponseQuery{After: ids[1], Limit: 2}); !reflect.DeepEqual(next, []string{"resp_c", "resp_b"}) {
		t.Errorf("page after %s: %v, want [resp_c resp_b]", ids[1], next)
	}

	acme, anonymous := "acme", ""
	for _, tc := range []struct {
		name string
		q    store.ResponseQuery
		want []string
	}{
		{"tenant", store.ResponseQuery{Tenant: &acme}, []string{"resp_f", "resp_e", "resp_c", "resp_a"}},
		{"anonymous tenant", store.ResponseQuery{Tenant: &anonymous}, []string{"resp_b"}},
		{"status", store.ResponseQuery{Statuses: []string{responses.ResponseCompleted}}, []string{"resp_f", "resp_c", "resp_a"}},
		{"in flight", store.ResponseQuery{Statuses: []string{responses.ResponseQueued, responses.ResponseInProgress}}, []string{"resp_e", "resp_d"}},
		{"model", store.ResponseQuery{Model: "gpt-oss-120b"}, []string{"resp_c", "resp_b"}},
		{"all three", store.ResponseQuery{Tenant: &acme, Statuses: []string{responses.ResponseCompleted}, Model: "gpt-oss-20b"}, []string{"resp_f", "resp_a"}},
		{"none", store.ResponseQuery{Model: "no-such-model"}, nil},
	} {
		if ids, _ := list(t, s, tc.q); !slices.Equal(ids, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, ids, tc.want)
		}
	}

	// A listed record has its columns, object and timeline, not its
	// items, events or pending state.
	recs, _, err := s.ListResponses(ctx, store.ResponseQuery{Model: "gpt-oss-120b", Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	got := recs[0]
	if got.ID != "resp_c" || got.Tenant != "acme" || got.Status != responses.ResponseCompleted || got.CreatedAt != 200 ||
		got.TraceID != "trace of resp_c" || string(got.Response) != `{"id":"resp_c","object":"response","model":"gpt-oss-120b","status":"completed"}` {
		t.Errorf("listed record %+v", got)
	}
	if string(got.Timeline) != `{"steps":[]}` {
		t.Errorf("listed record's timeline %s", got.Timeline)
	}
	if got.Input != nil || got.Events != nil || got.Pending != nil {
		t.Errorf("listed record carries items, events or pending state: %+v", got)
	}

	if _, _, err := s.ListResponses(ctx, store.ResponseQuery{After: "resp_nope"}); !errors.Is(err, store.ErrUnknownCursor) {
		t.Errorf("unknown cursor: %v, want ErrUnknownCursor", err)
	}
}

func testSetTimeline(t *testing.T, s store.Store) {
	rec := record("resp_1", "")
	save(t, s, rec)
	timeline := json.RawMessage(`{"steps":[{"kind":"cleanup","start_us":5,"end_us":9}]}`)
	if err := s.SetTimeline(ctx, "resp_1", timeline); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetResponse(ctx, "resp_1")
	if err != nil {
		t.Fatal(err)
	}
	want := *rec
	want.Timeline = timeline
	checkRecord(t, got, &want)
	if err := s.SetTimeline(ctx, "resp_nope", timeline); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("SetTimeline of an absent response: %v, want ErrNotFound", err)
	}
}
