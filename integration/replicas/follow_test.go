package replicas

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
)

// TestResponseFollowsAcrossReplicas follows one response through three
// replicas on one store: created (streamed) on A, retrieved on B,
// continued on C, its input items listed on B, deleted on C, gone on A.
func TestResponseFollowsAcrossReplicas(t *testing.T) {
	c := newCluster(t, nil, 3)
	a, b, cc := client(c.replicas[0].url()), client(c.replicas[1].url()), client(c.replicas[2].url())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	const question = "What is the first turn?\n#say The first turn's answer."
	stream := a.Responses.NewStreaming(ctx, responses.ResponseNewParams{
		Model: "mock-model",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(question)},
	})
	var first responses.Response
	for stream.Next() {
		if ev := stream.Current(); ev.Type == "response.completed" {
			first = ev.Response
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream on A: %v", err)
	}
	stream.Close()
	if first.ID == "" || first.OutputText() != "The first turn's answer." {
		t.Fatalf("stream on A ended without the completed response: %+v", first)
	}

	got, err := b.Responses.Get(ctx, first.ID, responses.ResponseGetParams{})
	if err != nil {
		t.Fatalf("get on B: %v", err)
	}
	if got.Status != "completed" || got.OutputText() != first.OutputText() {
		t.Errorf("B answers %s %q, want completed %q", got.Status, got.OutputText(), first.OutputText())
	}

	second, err := cc.Responses.New(ctx, responses.ResponseNewParams{
		Model:              "mock-model",
		PreviousResponseID: openai.String(first.ID),
		Input:              responses.ResponseNewParamsInputUnion{OfString: openai.String("And the second?\n#say The second.")},
	})
	if err != nil {
		t.Fatalf("continue on C: %v", err)
	}
	if second.Status != "completed" || second.PreviousResponseID != first.ID {
		t.Errorf("continuation on C: %s, previous %q", second.Status, second.PreviousResponseID)
	}
	// The upstream saw turn 1 (question and answer) before turn 2.
	reqs := c.mock.Requests()
	last := reqs[len(reqs)-1].Chat
	var seen []string
	for _, m := range last.Messages {
		seen = append(seen, m.Role+": "+m.Text())
	}
	want := []string{"user: " + question, "assistant: The first turn's answer.", "user: And the second?\n#say The second."}
	if !strings.HasSuffix(strings.Join(seen, "\n"), strings.Join(want, "\n")) {
		t.Errorf("the upstream's messages for turn 2:\n%s\nwant them to end with:\n%s", strings.Join(seen, "\n"), strings.Join(want, "\n"))
	}

	items, err := b.Responses.InputItems.List(ctx, first.ID, responses.InputItemListParams{})
	if err != nil {
		t.Fatalf("input items on B: %v", err)
	}
	if len(items.Data) != 1 || items.Data[0].Type != "message" {
		t.Fatalf("input items on B: %s", items.RawJSON())
	}
	if msg := items.Data[0].AsMessage(); len(msg.Content) != 1 || msg.Content[0].Text != question {
		t.Errorf("input item on B: %s, want the question", items.Data[0].RawJSON())
	}

	if err := cc.Responses.Delete(ctx, first.ID); err != nil {
		t.Fatalf("delete on C: %v", err)
	}
	_, err = a.Responses.Get(ctx, first.ID, responses.ResponseGetParams{})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
		t.Errorf("get on A after the delete: %v, want a 404", err)
	}
}
