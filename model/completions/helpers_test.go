package completions

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/loomgate/loom/harmony"
	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/model/internal/upstream/upstreamtest"
	"github.com/loomgate/loom/responses"
)

// testDay is the date every test prompt is rendered on.
var testDay = time.Date(2026, 3, 14, 23, 30, 0, 0, time.UTC)

// testOptions fix the date and keep retries fast and timeouts short.
func testOptions() *Options {
	return &Options{
		Now: func() time.Time { return testDay },
		HTTPOptions: model.HTTPOptions{
			Retries:          2,
			RetryWaitMin:     time.Millisecond,
			RetryWaitMax:     5 * time.Millisecond,
			FirstByteTimeout: 5 * time.Second,
		},
	}
}

// Shared helpers, under the names these tests use.
var (
	collect   = upstreamtest.Collect
	userReq   = upstreamtest.UserReq
	userMsg   = upstreamtest.UserMsg
	sseServer = upstreamtest.SSEServer

	reasoningItem = upstreamtest.ReasoningItem
	callItem      = upstreamtest.CallItem
	outputItem    = upstreamtest.OutputItem
)

func assistantMsg(text, phase string) responses.Item {
	return responses.Item{Type: responses.ItemMessage, Role: "assistant", Tool: &responses.ItemTool{Phase: phase}, Content: []responses.ContentPart{responses.OutputText(text)}}
}

func weatherTool() responses.Tool {
	desc := "Gets the weather."
	return responses.Tool{Type: responses.ToolFunction, Name: "get_weather", Description: &desc,
		Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)}
}

// completion is what an engine writes after the prompt, in harmony text
// with special tokens spelled out.
type completion struct {
	text   string
	ids    bool   // send token_ids (vLLM with return_token_ids)
	finish string // finish_reason of the last chunk; "" means stop
	usage  string // the usage chunk's JSON object; "" for none
}

// stream renders c as a vLLM-style SSE body: one token per chunk, the
// finish reason on the last, then usage and [DONE].
func (c completion) stream(t testing.TB) string {
	t.Helper()
	ids, err := harmony.EncodeWithSpecial(c.text)
	if err != nil {
		t.Fatal(err)
	}
	finish := c.finish
	if finish == "" {
		finish = "stop"
	}
	var b strings.Builder
	var pending string
	for i, id := range ids {
		piece, err := harmony.Decode([]uint32{id})
		if err != nil {
			t.Fatal(err)
		}
		// Like a detokenizer, hold back a character split across tokens
		// until it is complete (JSON cannot carry half of one).
		pending += piece
		piece = ""
		if utf8.ValidString(pending) || i == len(ids)-1 {
			piece, pending = pending, ""
		}
		fr := "null"
		if i == len(ids)-1 {
			fr = `"` + finish + `"`
		}
		text, _ := json.Marshal(piece)
		tokens := ""
		if c.ids {
			tokens = fmt.Sprintf(`,"token_ids":[%d]`, id)
		}
		fmt.Fprintf(&b, "data: {\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"text\":%s,\"logprobs\":null,\"finish_reason\":%s%s}]}\n\n", text, fr, tokens)
	}
	if c.usage != "" {
		fmt.Fprintf(&b, "data: {\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"created\":1,\"model\":\"m\",\"choices\":[],\"usage\":%s}\n\n", c.usage)
	}
	b.WriteString("data: [DONE]\n\n")
	return b.String()
}

// okStream is a minimal final answer.
const okStream = "data: {\"choices\":[{\"index\":0,\"text\":\"<|channel|>final<|message|>ok<|return|>\",\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"

// sentBody runs req through a Backend with opts and returns the decoded
// JSON body the upstream received.
func sentBody(t *testing.T, req *model.Request, opts *Options) map[string]any {
	t.Helper()
	rec := &upstreamtest.Recorder{Stream: okStream}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	if _, err := collect(context.Background(), New(srv.URL+"/v1", "", opts), req); err != nil {
		t.Fatalf("Stream: %v", err)
	}
	reqs := rec.Requests()
	if len(reqs) != 1 {
		t.Fatalf("upstream got %d requests, want 1", len(reqs))
	}
	var m map[string]any
	if err := json.Unmarshal(reqs[0].Body, &m); err != nil {
		t.Fatalf("invalid JSON body: %v", err)
	}
	return m
}

// summary flattens deltas into a readable transcript: consecutive
// pieces of one kind (or of one call's arguments) join into one line.
func summary(deltas []model.Delta) []string {
	var out []string
	last := ""
	add := func(kind, line, text string) {
		if kind == last && kind != "" {
			out[len(out)-1] += text
			return
		}
		out = append(out, line+text)
		last = kind
	}
	for _, d := range deltas {
		switch d.Kind {
		case model.DeltaText:
			add("text", "text:", d.Text)
		case model.DeltaReasoning:
			add("reasoning", "reasoning:", d.Text)
		case model.DeltaPreamble:
			add("preamble", "preamble:", d.Text)
		case model.DeltaToolCall:
			kind := fmt.Sprintf("call %d", d.ToolIndex)
			if d.ToolName != "" {
				last = ""
				add(kind, fmt.Sprintf("%s %s:", kind, d.ToolName), d.ToolArguments)
				continue
			}
			add(kind, kind+":", d.ToolArguments)
		case model.DeltaUsage:
			u := d.Usage
			add("", fmt.Sprintf("usage in=%d out=%d reasoning=%d cached=%d total=%d", u.InputTokens, u.OutputTokens,
				u.OutputTokensDetails.ReasoningTokens, u.InputTokensDetails.CachedTokens, u.TotalTokens), "")
		case model.DeltaFinish:
			add("", "finish:"+d.FinishReason, "")
		}
	}
	return out
}
