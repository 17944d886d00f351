package integration

import (
	"strings"
	"testing"
)

// TestToolNotOfferedEndToEnd: over both backends, the model calls a tool
// the request did not offer, then answers. The output is the answer
// alone, nothing a client would run; the model's second turn carried the
// refusal; every body and event is checked
// against the Open Responses schema by the harness.
func TestToolNotOfferedEndToEnd(t *testing.T) {
	forEachUpstream(t, func(t *testing.T, h *harness) {
		resp := postJSON(t, h, map[string]any{
			"model": "mock-model",
			"input": "#call rm_rf {\"path\": \"/\"}\n#then\n#say I cannot do that.",
			"tools": []any{map[string]any{"type": "function", "name": "get_weather", "parameters": map[string]any{"type": "object"}}},
		})
		if resp["status"] != "completed" {
			t.Fatalf("status %v: %v", resp["status"], resp)
		}
		var types []string
		for _, raw := range resp["output"].([]any) {
			types = append(types, raw.(map[string]any)["type"].(string))
		}
		if strings.Join(types, ",") != "message" {
			t.Errorf("output types %v, want the answer alone", types)
		}
		reqs := h.Mock.Requests()
		if len(reqs) != 2 {
			t.Fatalf("%d upstream requests, want 2", len(reqs))
		}
		// The second turn carries the call and the refusal: as chat
		// messages, or in the harmony prompt's decoded text.
		seen := string(reqs[1].Body)
		if reqs[1].Completion != nil {
			seen = reqs[1].Completion.PromptText
		}
		if !strings.Contains(seen, "rm_rf") || !strings.Contains(seen, `no tool named`) {
			t.Errorf("the second turn does not carry the call and its refusal: %s", seen)
		}
	})
}

// TestToolChoiceRequiredEndToEnd: over both backends, tool_choice
// "required" and a model that answers with text: the response ends
// incomplete with reason tool_choice_required, its text kept.
func TestToolChoiceRequiredEndToEnd(t *testing.T) {
	forEachUpstream(t, func(t *testing.T, h *harness) {
		resp := postJSON(t, h, map[string]any{
			"model":       "mock-model",
			"input":       "#say Just text.",
			"tool_choice": "required",
			"tools":       []any{map[string]any{"type": "function", "name": "get_weather", "parameters": map[string]any{"type": "object"}}},
		})
		details, _ := resp["incomplete_details"].(map[string]any)
		if resp["status"] != "incomplete" || details["reason"] != "tool_choice_required" {
			t.Fatalf("status %v, incomplete_details %v", resp["status"], resp["incomplete_details"])
		}
		out := resp["output"].([]any)
		if len(out) != 1 || out[0].(map[string]any)["type"] != "message" {
			t.Errorf("output %v", out)
		}
	})
}
