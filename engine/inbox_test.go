package engine_test

import (
	"context"
	"strings"
	"testing"

	"github.com/loomgate/loom/engine"
	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/store/sqlite"
)

// TestInbox: input injected while the model answers is read in one more
// turn, after the answer, and joins the response's input; input injected
// in the last turn a response may take is dropped (the caller hands it
// back), and a closed inbox takes nothing.
func TestInbox(t *testing.T) {
	inbox := &engine.Inbox{}
	var taken, dropped []string
	inject := func(text string) {
		ok := inbox.Add(engine.Injection{
			Items:   []responses.Item{{Type: responses.ItemMessage, Role: "user", Content: []responses.ContentPart{{Type: responses.PartInputText, Text: text}}}},
			Taken:   func() { taken = append(taken, text) },
			Dropped: func() { dropped = append(dropped, text) }})
		if !ok {
			t.Fatalf("an open inbox refused %q", text)
		}
	}
	var b *fakeBackend
	b = &fakeBackend{stream: func(req *model.Request, emit func(model.Delta) error) error {
		answer := "one"
		if len(b.requests) == 1 {
			inject("first note")
		} else {
			answer = "two"
			inject("second note")
		}
		if err := emit(model.Delta{Kind: model.DeltaText, Text: answer}); err != nil {
			return err
		}
		return emit(model.Delta{Kind: model.DeltaFinish, FinishReason: model.FinishStop})
	}}
	db, err := sqlite.Open(context.Background(), ":memory:", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	e := engine.New(b, db, &engine.Options{Models: []string{"m"}, MaxTurns: 2})
	var kept *engine.Continuation
	resp, err := e.RunWith(context.Background(), decodeRequest(t, `{"model":"m","input":"start"}`), nil,
		&engine.RunOptions{Inbox: inbox, Keep: func(c *engine.Continuation) { kept = c }})
	if err != nil {
		t.Fatal(err)
	}
	inbox.Close()
	if resp.Status != responses.ResponseCompleted || len(b.requests) != 2 {
		t.Fatalf("status %s after %d turns, want completed after 2", resp.Status, len(b.requests))
	}
	if got := itemTexts(b.requests[1].Items); got != "user:start|assistant:one|user:first note" {
		t.Errorf("the second turn read %s", got)
	}
	if strings.Join(taken, ",") != "first note" || strings.Join(dropped, ",") != "second note" {
		t.Errorf("taken %v, dropped %v", taken, dropped)
	}
	if got := itemTexts(kept.Items); got != "user:start|user:first note|assistant:one|assistant:two" {
		t.Errorf("the response's conversation is %s", got)
	}
	if kept.Items[1].ID == "" {
		t.Error("the injected message has no id")
	}
	if inbox.Add(engine.Injection{}) {
		t.Error("a closed inbox took an injection")
	}
}

// itemTexts is "role:text" of each message, joined by "|".
func itemTexts(items []responses.Item) string {
	var parts []string
	for _, it := range items {
		if it.Type == responses.ItemMessage && len(it.Content) > 0 {
			parts = append(parts, it.Role+":"+it.Content[0].Text)
		}
	}
	return strings.Join(parts, "|")
}
