package integration

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
)

// TestWebSocketGenerateFalse: a response.create with generate false (the
// warm-up Codex sends when a provider supports WebSocket mode) prepares
// the response without calling the model: it completes with no output,
// and a later response.create continues it with previous_response_id, the
// prepared input in front of the model. With store false it lives on the
// connection; stored, a POST on any replica continues it.
func TestWebSocketGenerateFalse(t *testing.T) {
	forEachUpstream(t, func(t *testing.T, h *harness) {
		for _, store := range []bool{false, true} {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			c := dialSocket(ctx, t, h)
			before := len(h.Mock.Requests())
			// openai-go's typed client event, as Codex sends it.
			err := c.conn.Send(ctx, openai.BetaResponsesClientEventUnionParam{OfResponseCreate: &openai.BetaResponsesClientEventResponseCreateParam{
				Model:    "mock-model",
				Input:    openai.BetaResponsesClientEventResponseCreateInputUnionParam{OfString: openai.String("the prepared context: teal")},
				Store:    openai.Bool(store),
				Generate: openai.Bool(false),
			}})
			if err != nil {
				t.Fatal(err)
			}
			evs := c.response(ctx)
			final := finalOf(t, evs)
			var types []string
			for _, ev := range evs {
				types = append(types, ev.Type)
			}
			if strings.Join(types, ",") != "response.created,response.in_progress,response.completed" {
				t.Errorf("store %v: the prepared response's events %v, want created, in_progress, completed", store, types)
			}
			var body struct {
				Response struct {
					Output []json.RawMessage `json:"output"`
				} `json:"response"`
			}
			json.Unmarshal(final.raw, &body)
			if len(body.Response.Output) != 0 {
				t.Errorf("store %v: the prepared response has output %s", store, body.Response.Output)
			}
			if n := len(h.Mock.Requests()) - before; n != 0 {
				t.Fatalf("store %v: the model was called %d times for generate false", store, n)
			}
			next := map[string]any{"model": "mock-model", "input": "#say it was teal\nwhat colour?", "store": store, "previous_response_id": final.Response.ID}
			if store {
				// Stored: continued over HTTP, as on another replica.
				waitStored(ctx, t, h, final.Response.ID)
				if resp := postJSON(t, h, next); resp["status"] != "completed" {
					t.Fatalf("continuing the prepared response over HTTP: %v", resp)
				}
			} else {
				c.create(ctx, next)
				finalOf(t, c.response(ctx))
			}
			if n := len(h.Mock.Requests()) - before; n != 1 {
				t.Errorf("store %v: %d model requests, want 1", store, n)
			}
			if prompt := lastPrompt(t, h); !strings.Contains(prompt, "the prepared context: teal") || !strings.Contains(prompt, "what colour?") {
				t.Errorf("store %v: the continuation's prompt lacks the prepared input or the new one:\n%s", store, prompt)
			}
		}
	})
}
