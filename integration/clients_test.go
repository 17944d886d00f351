package integration

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loomgate/loom/model/mockllm"
)

// Helpers shared by the real-client tests (openai-go, go-openai, node).

// clientTimeout bounds every client call: the scripted upstream answers at
// once, so anything slower is a hang, not a slow machine.
const clientTimeout = 20 * time.Second

// clientCtx is a context for client calls that ends with the test.
func clientCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), clientTimeout)
	t.Cleanup(cancel)
	return ctx
}

// requireCaptured fails unless the harness captured at least the given
// numbers of response bodies and streamed events, so that the schema
// validation run at cleanup cannot silently cover nothing.
func requireCaptured(t *testing.T, h *harness, minBodies, minEvents int) {
	t.Helper()
	if !h.WaitIdle(5 * time.Second) {
		t.Error("loom is still serving a request")
	}
	bodies, events := h.Captured()
	if bodies < minBodies || events < minEvents {
		t.Errorf("harness captured %d bodies and %d events, want at least %d and %d", bodies, events, minBodies, minEvents)
	}
}

// lastChatRequest returns the last chat-completions request the scripted
// upstream received.
func lastChatRequest(t *testing.T, h *harness) *mockllm.ChatRequest {
	t.Helper()
	reqs := h.Mock.Requests()
	if len(reqs) == 0 {
		t.Fatal("the upstream received no request")
	}
	last := reqs[len(reqs)-1]
	if last.Chat == nil {
		t.Fatalf("the upstream's last request is not a chat request: %s", last.Body)
	}
	return last.Chat
}

// lastCompletion returns the last harmony completions request the
// scripted upstream received, with its prompt decoded.
func lastCompletion(t *testing.T, h *harness) *mockllm.CompletionRequest {
	t.Helper()
	reqs := h.Mock.Requests()
	if len(reqs) == 0 {
		t.Fatal("the upstream received no request")
	}
	last := reqs[len(reqs)-1]
	if last.Completion == nil {
		t.Fatalf("the upstream's last request is not a completions request: %s", last.Body)
	}
	return last.Completion
}

// isCompletions reports whether the upstream's last request came over the
// harmony completions endpoint (else it was chat completions).
func isCompletions(t *testing.T, h *harness) bool {
	t.Helper()
	reqs := h.Mock.Requests()
	if len(reqs) == 0 {
		t.Fatal("the upstream received no request")
	}
	return reqs[len(reqs)-1].Completion != nil
}

// upstreamStreamed reports whether loom asked the upstream, in its last
// request, to stream (a client that asked for no stream gets one whole
// answer from the upstream).
func upstreamStreamed(t *testing.T, h *harness) bool {
	t.Helper()
	if isCompletions(t, h) {
		return lastCompletion(t, h).Stream
	}
	return lastChatRequest(t, h).Stream
}

// requireToolRoundTrip checks that the upstream's last request carried the
// function call back as an assistant tool call and its result as a tool
// message answering that call, in that order. Over the harmony upstream,
// which has no call ids, the call is an assistant message to
// functions.NAME and the result a tool message from functions.NAME.
func requireToolRoundTrip(t *testing.T, h *harness, callID, name, args, output string) {
	t.Helper()
	if isCompletions(t, h) {
		requireHarmonyRoundTrip(t, lastCompletion(t, h).PromptMessages, name, args, output)
		return
	}
	msgs := lastChatRequest(t, h).Messages
	called := slices.IndexFunc(msgs, func(m mockllm.Message) bool {
		return m.Role == "assistant" && slices.ContainsFunc(m.ToolCalls, func(tc mockllm.ToolCall) bool {
			return tc.ID == callID && tc.Function.Name == name && jsonEqual(tc.Function.Arguments, args)
		})
	})
	answered := slices.IndexFunc(msgs, func(m mockllm.Message) bool { return m.Role == "tool" && m.ToolCallID == callID })
	switch {
	case called < 0:
		t.Errorf("upstream got no assistant tool call %s %s(%s): %+v", callID, name, args, msgs)
	case answered < 0:
		t.Errorf("upstream got no tool message for %s: %+v", callID, msgs)
	case answered < called:
		t.Errorf("upstream got the tool result (message %d) before the call (message %d)", answered, called)
	case msgs[answered].Text() != output:
		t.Errorf("upstream tool message content = %q, want %q", msgs[answered].Text(), output)
	}
}

// jsonEqual reports whether two JSON texts hold the same value.
func jsonEqual(a, b string) bool {
	var va, vb any
	if json.Unmarshal([]byte(a), &va) != nil || json.Unmarshal([]byte(b), &vb) != nil {
		return false
	}
	ja, _ := json.Marshal(va)
	jb, _ := json.Marshal(vb)
	return string(ja) == string(jb)
}

// streamSummary is what checkEventStream learns from a stream.
type streamSummary struct {
	Types []string
	// Text is the concatenation of every output_text delta, in order.
	Text string
	// Reasoning is the concatenation of every reasoning text delta.
	Reasoning string
	// Arguments are the function-call argument deltas joined per item id.
	Arguments map[string]string
	// Final is the response carried by the terminal event.
	Final json.RawMessage
}

// checkEventStream checks the ordering rules a strict client (openai-node's
// stream helper) enforces, on the raw JSON of each event of one stream:
// sequence numbers 0..n-1; response.created, response.in_progress first;
// exactly one terminal event, last, with the same response id; every
// output index announced by output_item.added, in order and never reused,
// before any event for it; item ids, types and call ids stable; every item
// done before the terminal event. It returns what the stream said.
func checkEventStream(t *testing.T, raws []json.RawMessage) streamSummary {
	t.Helper()
	type itemHead struct {
		ID     string `json:"id"`
		Type   string `json:"type"`
		CallID string `json:"call_id"`
	}
	type open struct {
		item itemHead
		done bool
	}
	sum := streamSummary{Arguments: map[string]string{}}
	var (
		items  []*open
		respID string
		ended  bool
	)
	for i, raw := range raws {
		var ev struct {
			Type        string    `json:"type"`
			Seq         *int      `json:"sequence_number"`
			OutputIndex *int      `json:"output_index"`
			ItemID      string    `json:"item_id"`
			Delta       string    `json:"delta"`
			Item        *itemHead `json:"item"`
			Response    *struct {
				ID string `json:"id"`
			} `json:"response"`
		}
		if err := json.Unmarshal(raw, &ev); err != nil {
			t.Fatalf("event %d is not JSON: %v: %s", i, err, raw)
		}
		sum.Types = append(sum.Types, ev.Type)
		if ev.Seq == nil || *ev.Seq != i {
			t.Errorf("event %d (%s): sequence_number %v, want %d", i, ev.Type, ev.Seq, i)
		}
		if ended {
			t.Errorf("event %d (%s) after the terminal event", i, ev.Type)
		}
		if ev.Response != nil {
			if respID == "" {
				respID = ev.Response.ID
			} else if ev.Response.ID != respID {
				t.Errorf("event %d (%s): response id %q, want %q", i, ev.Type, ev.Response.ID, respID)
			}
		}
		switch {
		case i == 0 && ev.Type != "response.created":
			t.Errorf("first event is %s, want response.created", ev.Type)
		case i == 1 && ev.Type != "response.in_progress":
			t.Errorf("second event is %s, want response.in_progress", ev.Type)
		}
		switch ev.Type {
		case "response.completed", "response.incomplete", "response.failed":
			ended = true
			for k, it := range items {
				if !it.done {
					t.Errorf("%s before output item %d (%s) was done", ev.Type, k, it.item.ID)
				}
			}
			if ev.Response == nil {
				t.Fatalf("%s carries no response", ev.Type)
			}
			var whole struct {
				Response json.RawMessage `json:"response"`
			}
			json.Unmarshal(raw, &whole)
			sum.Final = whole.Response
			continue
		case "response.output_item.added":
			if ev.OutputIndex == nil || *ev.OutputIndex != len(items) || ev.Item == nil {
				t.Errorf("event %d: output_item.added at index %v, want %d with an item", i, ev.OutputIndex, len(items))
				continue
			}
			items = append(items, &open{item: *ev.Item})
			continue
		}
		if ev.OutputIndex == nil {
			continue
		}
		k := *ev.OutputIndex
		if k < 0 || k >= len(items) {
			t.Errorf("event %d (%s): output_index %d was never announced", i, ev.Type, k)
			continue
		}
		it := items[k]
		if it.done {
			t.Errorf("event %d (%s): output item %d is already done", i, ev.Type, k)
		}
		if ev.ItemID != "" && ev.ItemID != it.item.ID {
			t.Errorf("event %d (%s): item_id %q, want %q", i, ev.Type, ev.ItemID, it.item.ID)
		}
		switch {
		case ev.Type == "response.output_item.done":
			if ev.Item == nil || *ev.Item != it.item {
				t.Errorf("event %d: output_item.done item %+v, added as %+v", i, ev.Item, it.item)
			}
			it.done = true
		case ev.Type == "response.output_text.delta":
			sum.Text += ev.Delta
		case ev.Type == "response.function_call_arguments.delta":
			sum.Arguments[it.item.ID] += ev.Delta
		case strings.HasPrefix(ev.Type, "response.reasoning") && strings.HasSuffix(ev.Type, ".delta") && !strings.Contains(ev.Type, "summary"):
			// response.reasoning_text.delta (OpenAI) or
			// response.reasoning.delta (Open Responses).
			sum.Reasoning += ev.Delta
		}
	}
	if !ended {
		t.Errorf("the stream has no terminal event: %v", sum.Types)
	}
	return sum
}

// countTypes counts the events of each type.
func countTypes(types []string) map[string]int {
	n := map[string]int{}
	for _, typ := range types {
		n[typ]++
	}
	return n
}
