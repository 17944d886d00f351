package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/loomgate/loom/harmony"
	"github.com/loomgate/loom/model/mockllm"
)

// Prefix stability: an engine skips the prefill of a prompt's prefix it
// still holds in its KV cache, and an agent's turns repeat a long one
// (instructions, tools, the history so far). So the upstream prompt of a
// continuation must begin with exactly the previous turn's prompt:
//
//   - chat: the continuation's messages array begins with the previous
//     request's messages, element by element byte for byte, and every
//     other key of the body (the tools above all) is byte-identical;
//   - harmony: the continuation's prompt token ids begin with the previous
//     prompt's ids, trailing "<|start|>assistant" included. The one thing
//     allowed to differ is harmony's own chain-of-thought rule (loom's
//     default, harmony.DropAnalysisServer): analysis messages before the
//     last final answer are not shown again. So when the continuation's
//     prompt holds more assistant final-channel messages than the previous
//     prompt (a turn ended with an answer in between), the previous
//     prompt's analysis-channel messages are taken out of it before it is
//     compared; otherwise nothing is taken out, so the analysis of a turn
//     still in its tool loop must be there, unchanged.
//
// The chains are 20 model turns of 5 tasks, each a user message and 4
// turns: a call with reasoning, two parallel calls with reasoning and a
// text (a preamble on harmony), a call with reasoning and a preamble
// (harmony only), a final answer with reasoning. They run in the two
// styles an agent uses: chained (previous_response_id, store true), in a
// conversation (store true), and resent (the whole history in every
// request, store false), the latter
// also with the reasoning sealed (include reasoning.encrypted_content, as
// Codex sends); each with JSON answers and streamed.

// prefixTasks and prefixStepsPerTask make the 20 model turns.
const (
	prefixTasks        = 5
	prefixStepsPerTask = 4
)

// prefixInstructions are the agent's instructions, the same every turn.
var prefixInstructions = strings.Repeat("You are a careful coding agent. Read before you write; run the tests after every change. ", 8)

// prefixTools are the agent's function tools, sent every turn. Their
// schemas keep a key order of their own (not sorted), which must reach the
// engine as written.
var prefixTools = []json.RawMessage{
	json.RawMessage(`{"type":"function","name":"search","description":"Search the repository.","parameters":{"type":"object","required":["query"],"properties":{"query":{"type":"string"},"limit":{"type":"integer"}}}}`),
	json.RawMessage(`{"type":"function","name":"read_file","description":"Read a file.","parameters":{"properties":{"path":{"type":"string","description":"Path from the root."}},"type":"object","required":["path"]}}`),
	json.RawMessage(`{"type":"function","name":"run_tests","description":"Run a package's tests.","parameters":{"type":"object","properties":{"package":{"type":"string"},"race":{"type":"boolean"}},"required":["package"]}}`),
}

// prefixTaskScript is the user message of task i: its script for the
// mock's 4 turns (see the file comment).
func prefixTaskScript(i int) string {
	return fmt.Sprintf(`Task %[1]d: fix the failing test in package p%[1]d.
#reason Task %[1]d: first find where the failing test lives.
#call search {"query":"TestP%[1]d","limit":5}
#then
#reason The search points at two files; read both of them.
#say Reading the two files now.
#call read_file {"path":"p%[1]d/a.go"}
#call read_file {"path":"p%[1]d/a_test.go"}
#then
#reason The fix is clear; run the tests to confirm it.
#preamble Running the tests of p%[1]d.
#call run_tests {"package":"./p%[1]d","race":true}
#then
#reason The tests pass; summarise for the user.
#say Task %[1]d is done: the test in p%[1]d passes again.`, i)
}

// prefixToolOutput is the output of a call, different for every call.
func prefixToolOutput(callID string) string {
	return "output of " + callID + ": " + strings.Repeat("line of tool output with some detail; ", 12)
}

// TestPrefixStability runs the chains on both backends in both styles
// and checks every consecutive pair of upstream requests.
func TestPrefixStability(t *testing.T) {
	for _, up := range upstreams {
		for _, style := range []chainStyle{chained, inConversation, resent, resentEncrypted} {
			for _, stream := range []bool{false, true} {
				name := up.name + "/" + string(style) + "/json"
				if stream {
					name = up.name + "/" + string(style) + "/streamed"
				}
				t.Run(name, func(t *testing.T) {
					h := up.harness(t, &harnessOptions{Deterministic: true})
					runPrefixChain(t, h, style, stream)
					reqs := h.Mock.Requests()
					if len(reqs) != prefixTasks*prefixStepsPerTask {
						t.Fatalf("the upstream got %d requests, want %d", len(reqs), prefixTasks*prefixStepsPerTask)
					}
					for i := 1; i < len(reqs); i++ {
						if up.name == "chat" {
							checkChatPrefix(t, i, &reqs[i-1], &reqs[i])
						} else {
							checkHarmonyPrefix(t, i, &reqs[i-1], &reqs[i])
						}
					}
				})
			}
		}
	}
}

// chainStyle is how a client carries a conversation from turn to turn.
type chainStyle string

const (
	// chained sends previous_response_id with store true.
	chained chainStyle = "chained"
	// resent sends the whole history as input with store false, the
	// output items as loom returned them.
	resent chainStyle = "resent"
	// inConversation names a conversation (store true): loom appends
	// each turn's input and output to it.
	inConversation chainStyle = "conversation"
	// resentEncrypted is resent with include
	// ["reasoning.encrypted_content"], as Codex sends: the reasoning
	// comes back sealed and loom opens it.
	resentEncrypted chainStyle = "resent-encrypted"
)

// runPrefixChain runs the 20 turns in style, streamed or not, answering
// every call with its output and starting the next task after each final
// answer.
func runPrefixChain(t *testing.T, h *harness, style chainStyle, stream bool) {
	t.Helper()
	var history []json.RawMessage // resent: every item so far
	previous := ""                // chained: the last response's id
	input := []json.RawMessage{userMessage(prefixTaskScript(1))}
	task := 1
	conversation := ""
	if style == inConversation {
		status, raw := doRaw(t, http.MethodPost, h.BaseURL+"/conversations", `{}`)
		var c struct {
			ID string `json:"id"`
		}
		if status != http.StatusOK || json.Unmarshal(raw, &c) != nil || c.ID == "" {
			t.Fatalf("create a conversation: %d %s", status, raw)
		}
		conversation = c.ID
	}
	for turn := 1; turn <= prefixTasks*prefixStepsPerTask; turn++ {
		body := map[string]any{
			"model":        mockllm.DefaultModel,
			"instructions": prefixInstructions,
			"tools":        prefixTools,
			"stream":       stream,
		}
		switch style {
		case chained:
			body["store"] = true
			body["input"] = input
			if previous != "" {
				body["previous_response_id"] = previous
			}
		case inConversation:
			body["store"] = true
			body["input"] = input
			body["conversation"] = conversation
		default:
			body["store"] = false
			if style == resentEncrypted {
				body["include"] = []string{"reasoning.encrypted_content"}
			}
			history = append(history, input...)
			body["input"] = history
		}
		resp := postResponse(t, h, body)
		previous = resp.ID
		if style == resent || style == resentEncrypted {
			history = append(history, resp.Output...)
		}
		input = nil
		for _, raw := range resp.Output {
			var it struct {
				Type   string `json:"type"`
				CallID string `json:"call_id"`
			}
			if err := json.Unmarshal(raw, &it); err != nil {
				t.Fatalf("turn %d: output item: %v", turn, err)
			}
			if it.Type == "function_call" {
				out, _ := json.Marshal(map[string]string{"type": "function_call_output", "call_id": it.CallID, "output": prefixToolOutput(it.CallID)})
				input = append(input, out)
			}
		}
		if len(input) == 0 {
			// A final answer: the next task.
			task++
			input = []json.RawMessage{userMessage(prefixTaskScript(task))}
		}
	}
	if task != prefixTasks+1 {
		t.Fatalf("the chain ended in task %d, want %d tasks done: the script did not run as planned", task, prefixTasks)
	}
}

func userMessage(text string) json.RawMessage {
	raw, _ := json.Marshal(map[string]string{"role": "user", "content": text})
	return raw
}

// chainResponse is what the chain reads of a response.
type chainResponse struct {
	ID     string            `json:"id"`
	Status string            `json:"status"`
	Output []json.RawMessage `json:"output"`
}

// postResponse creates a response and requires it completed; a streamed
// one is read from its final event.
func postResponse(t *testing.T, h *harness, body map[string]any) chainResponse {
	t.Helper()
	raw, _ := json.Marshal(body)
	var r chainResponse
	if body["stream"] == true {
		status, stream := postStream(t, h.BaseURL+"/responses", string(raw), nil)
		if status != http.StatusOK {
			t.Fatalf("POST /v1/responses: %d %s", status, stream)
		}
		var events []json.RawMessage
		for _, ev := range parseSSE(t, stream) {
			events = append(events, ev.Data)
		}
		final := checkEventStream(t, events).Final
		if json.Unmarshal(final, &r) != nil || r.Status != "completed" {
			t.Fatalf("final response: %s", final)
		}
		return r
	}
	resp, err := http.Post(h.BaseURL+"/responses", "application/json", bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &r) != nil || r.Status != "completed" {
		t.Fatalf("POST /v1/responses: %d %s", resp.StatusCode, b)
	}
	return r
}

// checkChatPrefix checks that chat request next begins with request prev:
// its messages, element by element byte for byte, and every other key of
// the body byte-identical.
func checkChatPrefix(t *testing.T, i int, prev, next *mockllm.Request) {
	t.Helper()
	pm, pRest := chatBodyParts(t, prev.Body)
	nm, nRest := chatBodyParts(t, next.Body)
	if len(nm) <= len(pm) {
		t.Errorf("request %d has %d messages, request %d %d: a continuation adds some", i+1, len(nm), i, len(pm))
		return
	}
	for j := range pm {
		if !bytes.Equal(pm[j], nm[j]) {
			t.Errorf("request %d: message %d differs from request %d's:\n was %s\n now %s", i+1, j, i, pm[j], nm[j])
			return
		}
	}
	for key, v := range pRest {
		if !bytes.Equal(v, nRest[key]) {
			t.Errorf("request %d: %q differs from request %d's:\n was %s\n now %s", i+1, key, i, v, nRest[key])
		}
	}
	for key := range nRest {
		if _, ok := pRest[key]; !ok {
			t.Errorf("request %d: %q appears, request %d had none", i+1, key, i)
		}
	}
	if _, ok := pRest["tools"]; !ok {
		t.Errorf("request %d has no tools", i)
	}
}

// chatBodyParts splits a chat body into its messages (raw, as sent) and
// its other keys (raw, as sent).
func chatBodyParts(t *testing.T, body []byte) ([]json.RawMessage, map[string]json.RawMessage) {
	t.Helper()
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(body, &keys); err != nil {
		t.Fatalf("chat body: %v", err)
	}
	var msgs []json.RawMessage
	if err := json.Unmarshal(keys["messages"], &msgs); err != nil {
		t.Fatalf("chat body's messages: %v", err)
	}
	delete(keys, "messages")
	return msgs, keys
}

// checkHarmonyPrefix checks that the prompt of completions request next
// begins with request prev's, with prev's analysis messages taken out
// when a final answer came in between (the rule in the file comment),
// and that everything else in the body is the same.
func checkHarmonyPrefix(t *testing.T, i int, prev, next *mockllm.Request) {
	t.Helper()
	p, n := prev.Completion, next.Completion
	if p == nil || n == nil {
		t.Fatalf("request %d or %d is not a completions request", i, i+1)
	}
	want := p.PromptIDs
	if finals(n.PromptMessages) > finals(p.PromptMessages) {
		want = withoutAnalysis(t, p.PromptIDs)
	}
	if len(n.PromptIDs) <= len(want) || !slices.Equal(n.PromptIDs[:len(want)], want) {
		at := 0
		for at < min(len(want), len(n.PromptIDs)) && want[at] == n.PromptIDs[at] {
			at++
		}
		wantText, _ := harmony.Decode(want[at:])
		nowText, _ := harmony.Decode(n.PromptIDs[at:])
		t.Errorf("request %d's prompt does not begin with request %d's: they part at token %d of %d:\n was ...%.300s\n now ...%.300s",
			i+1, i, at, len(want), wantText, nowText)
	}
	var pRest, nRest map[string]json.RawMessage
	json.Unmarshal(prev.Body, &pRest)
	json.Unmarshal(next.Body, &nRest)
	delete(pRest, "prompt")
	delete(nRest, "prompt")
	for key, v := range pRest {
		if !bytes.Equal(v, nRest[key]) {
			t.Errorf("request %d: %q differs from request %d's:\n was %s\n now %s", i+1, key, i, v, nRest[key])
		}
	}
	if len(nRest) != len(pRest) {
		t.Errorf("request %d has keys %v, request %d %v", i+1, slices.Sorted(maps.Keys(nRest)), i, slices.Sorted(maps.Keys(pRest)))
	}
}

// finals counts the assistant's final-channel messages.
func finals(msgs []harmony.Message) int {
	n := 0
	for _, m := range msgs {
		if m.Author.Role == harmony.RoleAssistant && m.Channel == "final" {
			n++
		}
	}
	return n
}

// withoutAnalysis is a prompt with its analysis-channel messages taken
// out: each message runs from its <|start|> to the next one's.
func withoutAnalysis(t *testing.T, ids []uint32) []uint32 {
	t.Helper()
	var out []uint32
	for start := 0; start < len(ids); {
		end := start + 1
		for end < len(ids) && ids[end] != harmony.TokenStart {
			end++
		}
		text, err := harmony.Decode(ids[start:end])
		if err != nil {
			t.Fatalf("decode prompt: %v", err)
		}
		if !strings.HasPrefix(text, "<|start|>assistant<|channel|>analysis<|message|>") {
			out = append(out, ids[start:end]...)
		}
		start = end
	}
	return out
}
