package integration

import (
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/loomgate/loom/harmony"
	"github.com/loomgate/loom/model/mockllm"
)

// Tests with go-openai's Responses client (the library loom itself uses
// upstream, here on the other side).

func newGoOpenAI(h *harness) *goopenai.Client {
	cfg := goopenai.DefaultConfig("x")
	cfg.BaseURL = h.BaseURL
	return goopenai.NewClientWithConfig(cfg)
}

func TestGoOpenAICreate(t *testing.T) {
	forEachUpstream(t, testGoOpenAICreate)
}

func testGoOpenAICreate(t *testing.T, h *harness) {
	client := newGoOpenAI(h)
	temperature := float32(0.5)
	resp, err := client.CreateResponse(clientCtx(t), goopenai.CreateResponseRequest{
		Model:        mockllm.DefaultModel,
		Input:        "#reason Short answer.\n#say Created by go-openai.",
		Instructions: "Answer briefly.",
		Temperature:  &temperature,
		Reasoning:    &goopenai.ResponseReasoning{Effort: "low"},
	})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if resp.Status != "completed" || resp.GetOutputText() != "Created by go-openai." {
		t.Errorf("status %q, text %q", resp.Status, resp.GetOutputText())
	}
	if resp.Temperature == nil || *resp.Temperature != temperature || resp.Instructions != "Answer briefly." {
		t.Errorf("temperature %v and instructions %v not echoed", resp.Temperature, resp.Instructions)
	}
	if resp.Reasoning == nil || resp.Reasoning.Effort != "low" {
		t.Errorf("reasoning %+v not echoed", resp.Reasoning)
	}
	u := resp.Usage
	if u == nil || u.InputTokens <= 0 || u.OutputTokens <= 0 || u.TotalTokens != u.InputTokens+u.OutputTokens || u.OutputTokensDetails == nil {
		t.Fatalf("usage %+v: want non-zero, total = input + output", u)
	}
	if isCompletions(t, h) {
		// The knobs reached the model in harmony: the effort in the
		// system message, the instructions in the developer message, the
		// temperature in the completions body.
		up := lastCompletion(t, h)
		_, reasoning := harmonyOutputTokens(t, "Short answer.", "Created by go-openai.")
		if int64(u.OutputTokensDetails.ReasoningTokens) != reasoning || u.InputTokens != len(up.PromptIDs) {
			t.Errorf("usage %+v: want %d reasoning and %d input tokens", u, reasoning, len(up.PromptIDs))
		}
		if up.Temperature == nil || *up.Temperature != 0.5 {
			t.Errorf("upstream got temperature %v", up.Temperature)
		}
		if len(up.PromptMessages) < 3 || up.PromptMessages[0].Author.Role != harmony.RoleSystem || up.PromptMessages[1].Author.Role != harmony.RoleDeveloper ||
			!strings.Contains(up.PromptText, "Reasoning: low") || !strings.Contains(up.PromptText, "# Instructions\n\nAnswer briefly.") {
			t.Errorf("effort and instructions did not reach the prompt:\n%s", up.PromptText)
		}
	} else {
		if u.OutputTokensDetails.ReasoningTokens != 2 {
			t.Errorf("usage %+v: want 2 reasoning tokens", u)
		}
		// The knobs reached the upstream in chat-completions form.
		up := lastChatRequest(t, h)
		if up.ReasoningEffort != "low" || up.Temperature == nil || *up.Temperature != 0.5 {
			t.Errorf("upstream got reasoning_effort %q, temperature %v", up.ReasoningEffort, up.Temperature)
		}
		if len(up.Messages) == 0 || up.Messages[0].Text() != "Answer briefly." || up.Messages[0].Role == "user" {
			t.Errorf("instructions did not reach the upstream first: %s", h.Mock.Requests()[0].Body)
		}
	}
	requireCaptured(t, h, 1, 0)
}

func TestGoOpenAIStream(t *testing.T) {
	cases := []struct {
		name   string
		script string
		tools  []goopenai.ResponseTool
		// want* describe the final output.
		wantText, wantReasoning string
		wantCall                string // "name arguments", or ""
	}{
		{
			name:          "reasoning then text",
			script:        "#reason Two steps.\n#say Streamed by go-openai.",
			wantText:      "Streamed by go-openai.",
			wantReasoning: "Two steps.",
		},
		{
			name:   "function call",
			script: weatherScript,
			tools: []goopenai.ResponseTool{goopenai.NewResponseFunctionTool(goopenai.FunctionDefinition{
				Name:       "get_weather",
				Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`),
			})},
			wantCall: "get_weather " + weatherArgs,
		},
	}
	for _, up := range upstreams {
		for _, tc := range cases {
			t.Run(up.name+"/"+tc.name, func(t *testing.T) {
				h := up.harness(t, nil)
				client := newGoOpenAI(h)
				stream, err := client.CreateResponseStream(clientCtx(t), goopenai.CreateResponseRequest{
					Model: mockllm.DefaultModel,
					Input: tc.script,
					Tools: tc.tools,
				})
				if err != nil {
					t.Fatalf("create stream: %v", err)
				}
				defer stream.Close()
				var (
					raws  []json.RawMessage
					final *goopenai.CreateResponseResponse
					call  *goopenai.ResponseOutputItem
				)
				for range 1000 { // a bound; these streams have a few dozen events
					ev, err := stream.Recv()
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil {
						t.Fatalf("recv: %v", err)
					}
					raws = append(raws, ev.Raw)
					switch ev.Type {
					case goopenai.ResponseStreamEventCompleted:
						final = ev.Response
					case goopenai.ResponseStreamEventOutputItemDone:
						if ev.Item != nil && ev.Item.Type == "function_call" {
							call = ev.Item
						}
					}
				}
				sum := checkEventStream(t, raws)
				if final == nil {
					t.Fatalf("no response.completed in %v", sum.Types)
				}
				if sum.Text != tc.wantText || final.GetOutputText() != tc.wantText || sum.Reasoning != tc.wantReasoning {
					t.Errorf("streamed text %q, final text %q, reasoning %q; want %q and %q", sum.Text, final.GetOutputText(), sum.Reasoning, tc.wantText, tc.wantReasoning)
				}
				switch {
				case tc.wantCall == "" && call != nil:
					t.Errorf("unexpected call %+v", call)
				case tc.wantCall != "" && call == nil:
					t.Errorf("no function call in %v", sum.Types)
				case call != nil:
					if got := call.Name + " " + call.Arguments; got != tc.wantCall || call.CallID == "" || sum.Arguments[call.ID] != call.Arguments {
						t.Errorf("call %q (id %q, streamed arguments %q), want %q", got, call.CallID, sum.Arguments[call.ID], tc.wantCall)
					}
				}
				requireCaptured(t, h, 0, len(raws))
			})
		}
	}
}
