package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/loomgate/loom/engine"
	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/store"
	"github.com/loomgate/loom/store/sqlite"
)

// loadCountingStore counts the loads of a history, which a continuation
// past the bounds must not reach.
type loadCountingStore struct {
	engine.Store
	loads int
}

func (s *loadCountingStore) Chain(ctx context.Context, id string, limit int) ([]*store.Record, error) {
	s.loads++
	return s.Store.Chain(ctx, id, limit)
}

func (s *loadCountingStore) ConversationItems(ctx context.Context, id string, page store.Page) ([]responses.Item, bool, error) {
	s.loads++
	return s.Store.ConversationItems(ctx, id, page)
}

// TestHistoryBounds: a continuation (previous_response_id or conversation)
// whose stored history is past MaxHistoryItems or MaxHistoryBytes is a
// 400 naming the parameter, decided before the history is loaded; one
// within them runs.
func TestHistoryBounds(t *testing.T) {
	db, err := sqlite.Open(context.Background(), ":memory:", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	st := &loadCountingStore{Store: db}
	answer := &fakeBackend{stream: deltas(model.Delta{Kind: model.DeltaText, Text: "ok"})}
	ctx := context.Background()
	run := func(e *engine.Engine, body string) (*responses.Response, error) {
		return e.Run(ctx, decodeRequest(t, body), nil)
	}
	// 4 items: the first response's input (3) and output (1).
	small := engine.New(answer, st, &engine.Options{Models: []string{"m"}, MaxHistoryItems: 3})
	first, err := run(small, `{"model":"m","input":[{"role":"user","content":"a"},{"role":"user","content":"b"},{"role":"user","content":"c"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	conv, err := small.CreateConversation(ctx, []responses.Item{
		{Type: responses.ItemMessage, Role: "user", Content: []responses.ContentPart{{Type: responses.PartInputText, Text: strings.Repeat("x", 2000)}}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	bytesBound := engine.New(answer, st, &engine.Options{Models: []string{"m"}, MaxHistoryBytes: 1000})
	for _, tc := range []struct {
		name, body, param string
		e                 *engine.Engine
	}{
		{"items of a chain", fmt.Sprintf(`{"model":"m","input":"more","previous_response_id":%q}`, first.ID), "previous_response_id", small},
		{"bytes of a conversation", fmt.Sprintf(`{"model":"m","input":"more","conversation":%q}`, conv.ID), "conversation", bytesBound},
	} {
		st.loads = 0
		resp, err := run(tc.e, tc.body)
		var apiErr *responses.APIError
		if resp != nil || !errors.As(err, &apiErr) || apiErr.Kind != responses.EInvalid || apiErr.Param != tc.param {
			t.Errorf("%s past the bound: %v, %v; want a 400 naming %s", tc.name, resp, err, tc.param)
		}
		if st.loads != 0 {
			t.Errorf("%s past the bound: the history was loaded %d times", tc.name, st.loads)
		}
	}
	// Within the bounds (the defaults), both run.
	roomy := engine.New(answer, st, &engine.Options{Models: []string{"m"}})
	for _, body := range []string{
		fmt.Sprintf(`{"model":"m","input":"more","previous_response_id":%q}`, first.ID),
		fmt.Sprintf(`{"model":"m","input":"more","conversation":%q}`, conv.ID),
	} {
		if resp, err := run(roomy, body); err != nil || resp.Status != responses.ResponseCompleted {
			t.Errorf("%s within the bounds: %v, %v", body, resp, err)
		}
	}
}
