package integration

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/conversations"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/loomgate/loom/model/mockllm"
	loomresponses "github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/store"
)

// TestOpenAIGoConversation: with openai-go, a conversation is created with
// an item, two responses are made on it, its items list both turns in
// order, the second turn's upstream request held the first, and an item
// can be read and deleted.
func TestOpenAIGoConversation(t *testing.T) {
	h := newHarness(t, nil)
	client := newOpenAIGo(h)
	ctx := clientCtx(t)

	conv, err := client.Conversations.New(ctx, conversations.ConversationNewParams{
		Metadata: shared.Metadata{"topic": "colours"},
		Items: []responses.ResponseInputItemUnionParam{{OfMessage: &responses.EasyInputMessageParam{
			Role: responses.EasyInputMessageRoleUser, Content: responses.EasyInputMessageContentUnionParam{OfString: openai.String("my favourite colour is teal")},
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(conv.ID, "conv_") || !strings.Contains(conv.RawJSON(), `"topic":"colours"`) {
		t.Fatalf("created %+v", conv)
	}
	turn := func(input string) *responses.Response {
		t.Helper()
		resp, err := client.Responses.New(ctx, responses.ResponseNewParams{
			Model:        mockllm.DefaultModel,
			Input:        textInput(input),
			Conversation: responses.ResponseNewParamsConversationUnion{OfString: openai.String(conv.ID)},
		})
		if err != nil {
			t.Fatal(err)
		}
		if resp.Conversation.ID != conv.ID {
			t.Errorf("response names conversation %q, want %q", resp.Conversation.ID, conv.ID)
		}
		return resp
	}
	first := turn("#say noted, teal")
	second := turn("#say it was teal\nwhat was my colour?")
	if first.OutputText() != "noted, teal" || second.OutputText() != "it was teal" {
		t.Fatalf("answers %q, %q", first.OutputText(), second.OutputText())
	}
	// The second turn's upstream request carried the conversation so far.
	var texts []string
	for _, m := range lastChatRequest(t, h).Messages {
		texts = append(texts, m.Role+":"+string(m.Content))
	}
	joined := strings.Join(texts, "|")
	for _, want := range []string{"my favourite colour is teal", "#say noted, teal", "noted, teal", "what was my colour?"} {
		if !strings.Contains(joined, want) {
			t.Errorf("second upstream request lacks %q: %s", want, joined)
		}
	}

	page, err := client.Conversations.Items.List(ctx, conv.ID, conversations.ItemListParams{Order: conversations.ItemListParamsOrderAsc})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, it := range page.Data {
		text := ""
		for _, c := range it.AsMessage().Content {
			text += c.Text
		}
		got = append(got, it.Role+":"+text)
	}
	want := []string{"user:my favourite colour is teal", "user:#say noted, teal", "assistant:noted, teal",
		"user:#say it was teal\nwhat was my colour?", "assistant:it was teal"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("items\n%q\nwant\n%q", got, want)
	}

	again, err := client.Conversations.Get(ctx, conv.ID)
	if err != nil || again.ID != conv.ID || again.CreatedAt != conv.CreatedAt {
		t.Fatalf("retrieve: %+v, %v", again, err)
	}
	firstItem := page.Data[0].ID
	item, err := client.Conversations.Items.Get(ctx, conv.ID, firstItem, conversations.ItemGetParams{})
	if err != nil || item.ID != firstItem {
		t.Fatalf("item get: %+v, %v", item, err)
	}
	if _, err := client.Conversations.Items.Delete(ctx, conv.ID, firstItem); err != nil {
		t.Fatal(err)
	}
	_, err = client.Conversations.Items.Get(ctx, conv.ID, firstItem, conversations.ItemGetParams{})
	var apiErr *openai.Error
	if !asAPIError(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
		t.Errorf("deleted item: %v, want a 404", err)
	}
	page, _ = client.Conversations.Items.List(ctx, conv.ID, conversations.ItemListParams{Limit: openai.Int(2)})
	if len(page.Data) != 2 || page.Data[0].Role != "assistant" || !page.HasMore {
		t.Errorf("newest two first: %+v", page.Data)
	}

	// conversation with previous_response_id is a 400 on conversation.
	_, err = client.Responses.New(ctx, responses.ResponseNewParams{
		Model: mockllm.DefaultModel, Input: textInput("x"),
		Conversation:       responses.ResponseNewParamsConversationUnion{OfString: openai.String(conv.ID)},
		PreviousResponseID: openai.String(second.ID),
	})
	if !asAPIError(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Param != "conversation" {
		t.Errorf("conversation with previous_response_id: %v, want a 400 on conversation", err)
	}

	// Deleting the conversation deletes its items; its responses stay.
	if _, err := client.Conversations.Delete(ctx, conv.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Conversations.Get(ctx, conv.ID); !asAPIError(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
		t.Errorf("deleted conversation: %v, want a 404", err)
	}
	if _, _, err := h.Store.ConversationItems(ctx, conv.ID, store.Page{}); err == nil {
		t.Error("the deleted conversation's items are still there")
	}
	if r, err := client.Responses.Get(ctx, first.ID, responses.ResponseGetParams{}); err != nil || r.ID != first.ID {
		t.Errorf("a response of the deleted conversation: %v", err)
	}
	_, err = client.Responses.New(ctx, responses.ResponseNewParams{
		Model: mockllm.DefaultModel, Input: textInput("x"),
		Conversation: responses.ResponseNewParamsConversationUnion{OfString: openai.String(conv.ID)},
	})
	if !asAPIError(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound || apiErr.Param != "conversation" {
		t.Errorf("a response on a deleted conversation: %v, want a 404 on conversation", err)
	}
}

func asAPIError(err error, target **openai.Error) bool {
	return errors.As(err, target)
}

// TestConversationConcurrency: 20 clients each add turns to their own
// conversation while 5 race on one shared conversation. Every own
// conversation ends with every turn once, in order; on the shared one a
// response that found another running is refused with a 409 naming
// conversation, and the items are exactly the accepted turns, whole.
func TestConversationConcurrency(t *testing.T) {
	h := newHarness(t, nil)
	client := newOpenAIGo(h)
	ctx := clientCtx(t)
	const own, racers, turns = 20, 5, 3
	newConv := func() string {
		c, err := client.Conversations.New(ctx, conversations.ConversationNewParams{})
		if err != nil {
			t.Fatal(err)
		}
		return c.ID
	}
	say := func(conv, text string) error {
		_, err := client.Responses.New(ctx, responses.ResponseNewParams{
			Model: mockllm.DefaultModel, Input: textInput("#latency 1ms\n#say " + text),
			Conversation: responses.ResponseNewParamsConversationUnion{OfString: openai.String(conv)},
		})
		return err
	}
	owns := make([]string, own)
	for i := range owns {
		owns[i] = newConv()
	}
	shared := newConv()
	var wg sync.WaitGroup
	var mu sync.Mutex
	accepted := map[string]bool{}
	refused := 0
	for i := range own {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range turns {
				if err := say(owns[i], fmt.Sprintf("c%d t%d", i, n)); err != nil {
					t.Errorf("own conversation %d turn %d: %v", i, n, err)
				}
			}
		}()
	}
	for i := range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range turns {
				text := fmt.Sprintf("r%d t%d", i, n)
				err := say(shared, text)
				var apiErr *openai.Error
				switch {
				case err == nil:
					mu.Lock()
					accepted[text] = true
					mu.Unlock()
				case asAPIError(err, &apiErr) && apiErr.StatusCode == http.StatusConflict && apiErr.Param == "conversation":
					mu.Lock()
					refused++
					mu.Unlock()
				default:
					t.Errorf("racer %d turn %d: %v", i, n, err)
				}
			}
		}()
	}
	wg.Wait()

	// Checked against the store, not the API.
	for i, id := range owns {
		items, _, err := h.Store.ConversationItems(context.Background(), id, store.Page{})
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for n := range turns {
			want = append(want, fmt.Sprintf("#latency 1ms\n#say c%d t%d", i, n), fmt.Sprintf("c%d t%d", i, n))
		}
		if got := itemTexts(items); strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("own conversation %d: %q, want %q", i, got, want)
		}
	}
	items, _, err := h.Store.ConversationItems(context.Background(), shared, store.Page{})
	if err != nil {
		t.Fatal(err)
	}
	got := itemTexts(items)
	if len(got) != 2*len(accepted) {
		t.Fatalf("shared conversation has %d items for %d accepted turns: %q", len(got), len(accepted), got)
	}
	for k := 0; k < len(got); k += 2 {
		answer := got[k+1]
		if !accepted[answer] || got[k] != "#latency 1ms\n#say "+answer {
			t.Errorf("shared conversation turn %d is %q, %q: not an accepted turn whole", k/2, got[k], answer)
		}
		delete(accepted, answer)
	}
	if len(accepted) != 0 {
		t.Errorf("accepted turns missing from the shared conversation: %v", accepted)
	}
	t.Logf("shared conversation: %d turns accepted, %d refused with 409", len(got)/2, refused)
}

// itemTexts is each item's text.
func itemTexts(items []loomresponses.Item) []string {
	var out []string
	for _, it := range items {
		text := ""
		for _, c := range it.Content {
			text += c.Text
		}
		out = append(out, text)
	}
	return out
}
