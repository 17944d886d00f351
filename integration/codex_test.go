package integration

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/loomgate/loom/engine"
	"github.com/loomgate/loom/model/mockllm"
)

// A Codex-style exchange (issue 3, done-when 6). Codex keeps the history
// itself: every request is store false, asks for
// include ["reasoning.encrypted_content"], streams, and resends every item
// of the conversation, the reasoning items carrying only their id, summary
// and encrypted_content. loom must put that reasoning back in front of the
// model (harmony: an analysis message before the call; chat: the assistant
// message's reasoning), and refuse a blob it did not seal.

const codexReasoning = "The user wants the weather in Paris; get_weather answers that."

// codexRequest is a request body as Codex sends it.
func codexRequest(input []any) string {
	b, _ := json.Marshal(map[string]any{
		"model":               mockllm.DefaultModel,
		"instructions":        "You are a coding agent.",
		"input":               input,
		"tools":               []json.RawMessage{json.RawMessage(weatherToolJSON)},
		"tool_choice":         "auto",
		"parallel_tool_calls": false,
		"store":               false,
		"stream":              true,
		"include":             []string{engine.IncludeEncryptedReasoning},
	})
	return string(b)
}

// streamFinal posts a streaming request and returns the final response of
// a well-ordered stream.
func streamFinal(t *testing.T, h *harness, body string) (final struct {
	ID     string       `json:"id"`
	Status string       `json:"status"`
	Output []outputItem `json:"output"`
}, events []sseEvent) {
	t.Helper()
	status, raw := postStream(t, h.BaseURL+"/responses", body, nil)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, raw)
	}
	events = parseSSE(t, raw)
	var raws []json.RawMessage
	for _, ev := range events {
		raws = append(raws, ev.Data)
	}
	sum := checkEventStream(t, raws)
	if err := json.Unmarshal(sum.Final, &final); err != nil {
		t.Fatalf("final response: %v: %s", err, sum.Final)
	}
	if final.Status != "completed" {
		t.Fatalf("final response %s: %s", final.Status, sum.Final)
	}
	return final, events
}

// tamper flips one bit of the blob's authentication tag, keeping it valid
// base64url of the same length.
func tamper(t *testing.T, blob string) string {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(blob)
	if err != nil || len(raw) == 0 {
		t.Fatalf("encrypted_content %q is not base64url: %v", blob, err)
	}
	raw[len(raw)-1] ^= 0x01
	return base64.RawURLEncoding.EncodeToString(raw)
}

func TestCodexEncryptedReasoningRoundTrip(t *testing.T) {
	for _, up := range upstreams {
		t.Run(up.name, func(t *testing.T) {
			sealer, err := engine.NewSealer([]byte("codex test key"))
			if err != nil {
				t.Fatal(err)
			}
			h := up.harness(t, &harnessOptions{Sealer: sealer})

			user := map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{
				"type": "input_text",
				"text": "What is the weather in Paris?\n#reason " + codexReasoning + "\n#call get_weather " + weatherArgs + "\n#then",
			}}}
			first, events := streamFinal(t, h, codexRequest([]any{user}))
			if got := itemTypes(first.Output); !slices.Equal(got, []string{"reasoning", "function_call"}) {
				t.Fatalf("first output %v, want reasoning then function_call", got)
			}
			rs, call := first.Output[0], first.Output[1]
			if rs.EncryptedContent == nil || *rs.EncryptedContent == "" {
				t.Fatalf("the reasoning item has no encrypted_content: %+v", rs)
			}
			if strings.Contains(*rs.EncryptedContent, "Paris") {
				t.Errorf("encrypted_content shows the reasoning in clear: %q", *rs.EncryptedContent)
			}
			if text, err := sealer.Open(*rs.EncryptedContent); err != nil || text != codexReasoning {
				t.Errorf("the blob opens to %q (%v), want the reasoning %q", text, err, codexReasoning)
			}
			// The streamed item carries the blob too: Codex takes its items
			// from response.output_item.done.
			var streamedBlob bool
			for _, ev := range events {
				var d struct{ Item outputItem }
				if ev.Type == "response.output_item.done" && json.Unmarshal(ev.Data, &d) == nil && d.Item.Type == "reasoning" {
					streamedBlob = d.Item.EncryptedContent != nil && *d.Item.EncryptedContent == *rs.EncryptedContent
				}
			}
			if !streamedBlob {
				t.Error("response.output_item.done for the reasoning item lacks its encrypted_content")
			}
			if call.Name != "get_weather" || !jsonEqual(call.Arguments, weatherArgs) || call.CallID == "" {
				t.Fatalf("call %+v", call)
			}

			// history is turn two as Codex sends it: the reasoning item with
			// only id, summary and encrypted_content.
			history := func(blob string) []any {
				return []any{
					user,
					map[string]any{"type": "reasoning", "id": rs.ID, "summary": []any{}, "encrypted_content": blob},
					map[string]any{"type": "function_call", "id": call.ID, "call_id": call.CallID, "name": call.Name, "arguments": call.Arguments},
					map[string]any{"type": "function_call_output", "call_id": call.CallID, "output": weatherResult},
				}
			}
			second, _ := streamFinal(t, h, codexRequest(history(*rs.EncryptedContent)))
			if len(second.Output) == 0 || second.Output[len(second.Output)-1].text() != "tool said: "+weatherResult {
				t.Errorf("second output %+v, want the answer from the tool result", second.Output)
			}
			if n := len(h.Mock.Requests()); n != 2 {
				t.Fatalf("upstream got %d requests, want 2", n)
			}
			// The analysis is back in front of the model.
			if isCompletions(t, h) {
				req := lastCompletion(t, h)
				requireHarmonyAnalysisBeforeCall(t, req, codexReasoning, "get_weather")
				requireHarmonyRoundTrip(t, req.PromptMessages, "get_weather", weatherArgs, weatherResult)
			} else {
				msgs := lastChatRequest(t, h).Messages
				at := slices.IndexFunc(msgs, func(m mockllm.Message) bool {
					return m.Role == "assistant" && slices.ContainsFunc(m.ToolCalls, func(tc mockllm.ToolCall) bool { return tc.ID == call.CallID })
				})
				if at < 0 {
					t.Fatalf("no assistant message with the call in %s", h.Mock.Requests()[1].Body)
				}
				if got := msgs[at].ReasoningContent + msgs[at].Reasoning; got != codexReasoning {
					t.Errorf("the assistant message's reasoning is %q, want %q: %s", got, codexReasoning, h.Mock.Requests()[1].Body)
				}
				requireToolRoundTrip(t, h, call.CallID, call.Name, call.Arguments, weatherResult)
			}

			// A blob altered by one bit, or sealed under another key, is a
			// 400 naming the item, and nothing goes upstream.
			other, _ := engine.NewSealer([]byte("another replica's key"))
			for name, blob := range map[string]string{
				"tampered": tamper(t, *rs.EncryptedContent),
				"foreign":  other.Seal(codexReasoning),
				"garbage":  "not a sealed blob",
			} {
				before := len(h.Mock.Requests())
				status, raw := postStream(t, h.BaseURL+"/responses", codexRequest(history(blob)), nil)
				var e struct {
					Error struct {
						Type    string  `json:"type"`
						Param   *string `json:"param"`
						Message string  `json:"message"`
					} `json:"error"`
				}
				if err := json.Unmarshal(raw, &e); err != nil {
					t.Errorf("%s blob: body is not a JSON error (%v): %s", name, err, raw)
				}
				if status != http.StatusBadRequest || e.Error.Param == nil || *e.Error.Param != "input[1].encrypted_content" || e.Error.Type != "invalid_request_error" {
					t.Errorf("%s blob: status %d, body %s; want 400 invalid_request_error with param input[1].encrypted_content", name, status, raw)
				}
				if strings.Contains(string(raw), codexReasoning) {
					t.Errorf("%s blob: the error shows the reasoning: %s", name, raw)
				}
				if after := len(h.Mock.Requests()); after != before {
					t.Errorf("%s blob: the upstream got %d more requests, want none", name, after-before)
				}
			}
			requireCaptured(t, h, 0, len(events))
		})
	}
}
