package integration

import (
	"fmt"
	"strings"
	"testing"
)

// Tests of compaction_trigger, context_management and async tools with
// the openai npm package's strict stream helper (testdata/node/request.mjs).

// turnsInput is n question/answer turns as input items.
func turnsInput(n int) []any {
	var items []any
	for i := 1; i <= n; i++ {
		items = append(items,
			map[string]any{"role": "user", "content": fmt.Sprintf("question-%d\n", i)},
			map[string]any{"role": "assistant", "content": fmt.Sprintf("answer-%d", i)})
	}
	return items
}

// TestNodeCompaction: the history with a compaction_trigger last is
// answered with one compaction item, which the next request carries in
// place of the history; a request past its context_management threshold
// gets the compaction item, then the answer. On both upstreams.
func TestNodeCompaction(t *testing.T) {
	forEachUpstream(t, func(t *testing.T, h *harness) {
		trigger := runNodeRequest(t, h, map[string]any{"model": "mock-model", "store": false,
			"input": append(turnsInput(2), map[string]any{"type": "compaction_trigger"})})
		if trigger.Status != "completed" || len(trigger.Output) != 1 || trigger.Output[0]["type"] != "compaction" || trigger.Output[0]["encrypted_content"] == "" {
			t.Fatalf("trigger: %+v, want one compaction item", trigger.Output)
		}
		next := runNodeRequest(t, h, map[string]any{"model": "mock-model", "store": false,
			"input": []any{trigger.Output[0], map[string]any{"role": "user", "content": "#say node went on\nquestion-3"}}})
		if next.OutputText != "node went on" {
			t.Errorf("continued: %q", next.OutputText)
		}
		checkCompactedPrompt(t, h, "question-3", 2)

		over := runNodeRequest(t, h, map[string]any{"model": "mock-model",
			"context_management": []any{map[string]any{"type": "compaction", "compact_threshold": 20}},
			"input":              append(turnsInput(3), map[string]any{"role": "user", "content": "#say over\nquestion-4"})})
		if len(over.Output) != 2 || over.Output[0]["type"] != "compaction" || over.OutputText != "over" {
			t.Fatalf("over the threshold: %+v", over.Output)
		}
		checkCompactedPrompt(t, h, "question-4", 3)
	})
}

// TestNodeAsyncTool: an async function tool's call comes with async: true
// and the answer after it in the same response; the output comes later
// on the chain. On both upstreams.
func TestNodeAsyncTool(t *testing.T) {
	forEachUpstream(t, func(t *testing.T, h *harness) {
		tool := map[string]any{"type": "function", "name": "get_weather", "description": "The weather in a city.", "async": true,
			"parameters": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}}}
		first := runNodeRequest(t, h, map[string]any{"model": "mock-model", "tools": []any{tool}, "input": asyncScript})
		if first.Status != "completed" || len(first.Output) != 2 || first.Output[0]["type"] != "function_call" || first.Output[0]["async"] != true || first.OutputText != "Pack an umbrella anyway." {
			t.Fatalf("first: %+v", first.Output)
		}
		checkAcknowledged(t, h)
		later := runNodeRequest(t, h, map[string]any{"model": "mock-model", "tools": []any{tool}, "previous_response_id": first.ID,
			"input": []any{map[string]any{"type": "function_call_output", "call_id": first.Output[0]["call_id"], "output": "sunny, 24C"}}})
		if later.Status != "completed" || !strings.Contains(later.OutputText, "sunny, 24C") {
			t.Errorf("later: %q", later.OutputText)
		}
	})
}
