package integration

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// socketOutput returns the output of a final WebSocket event.
func socketOutput(t *testing.T, ev socketEvent) []map[string]any {
	t.Helper()
	var final struct {
		Response struct {
			Output []map[string]any `json:"output"`
		} `json:"response"`
	}
	if err := json.Unmarshal(ev.raw, &final); err != nil {
		t.Fatal(err)
	}
	return final.Response.Output
}

// TestWebSocketCompactionTriggerAndAsync: over WebSocket mode, store
// false (the connection keeps the chain), a compaction_trigger is
// answered with one compaction item that the next response.create
// continues from, and an async tool's call does not end its response,
// its output coming in a later response.create. On both upstreams.
func TestWebSocketCompactionTriggerAndAsync(t *testing.T) {
	forEachUpstream(t, func(t *testing.T, h *harness) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		c := dialSocket(ctx, t, h)
		c.create(ctx, map[string]any{"input": "#say answer-1\nquestion-1\n", "store": false})
		first := finalOf(t, c.response(ctx))
		c.create(ctx, map[string]any{"input": []any{map[string]any{"type": "compaction_trigger"}}, "store": false,
			"previous_response_id": first.Response.ID})
		compacted := finalOf(t, c.response(ctx))
		if out := socketOutput(t, compacted); compacted.Response.Status != "completed" || len(out) != 1 || out[0]["type"] != "compaction" {
			t.Fatalf("the trigger's response: %s", compacted.raw)
		}
		c.create(ctx, map[string]any{"input": "#say went on\nquestion-2", "store": false, "previous_response_id": compacted.Response.ID})
		finalOf(t, c.response(ctx))
		checkCompactedPrompt(t, h, "question-2", 1)

		tool := map[string]any{"type": "function", "name": "get_weather", "async": true, "parameters": map[string]any{"type": "object"}}
		c.create(ctx, map[string]any{"input": asyncScript, "store": false, "tools": []any{tool}})
		async := finalOf(t, c.response(ctx))
		out := socketOutput(t, async)
		if len(out) != 2 || out[0]["type"] != "function_call" || out[0]["async"] != true || out[1]["type"] != "message" {
			t.Fatalf("the async call's response: %s", async.raw)
		}
		c.create(ctx, map[string]any{"store": false, "tools": []any{tool}, "previous_response_id": async.Response.ID,
			"input": []any{map[string]any{"type": "function_call_output", "call_id": out[0]["call_id"], "output": "sunny, 24C"}}})
		later := finalOf(t, c.response(ctx))
		if later.Response.Status != "completed" || !strings.Contains(string(later.raw), "sunny, 24C") {
			t.Errorf("the later output's response: %s", later.raw)
		}
	})
}
