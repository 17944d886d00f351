package integration

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/loomgate/loom/model/mockllm"
)

// openAIError asserts err is a 400 from loom naming param (and code,
// when not empty), as openai-go reads it.
func openAIError(t *testing.T, what string, err error, param, code string) {
	t.Helper()
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Param != param || code != "" && apiErr.Code != code {
		t.Errorf("%s: got %v, want a 400 naming %s (code %q)", what, err, param, code)
	}
}

// chainTurns runs n turns on a previous_response_id chain, "question-i"
// answered "answer-i", and returns the last response's id.
func chainTurns(t *testing.T, client openai.Client, n int) string {
	t.Helper()
	prev := ""
	for i := 1; i <= n; i++ {
		params := responses.ResponseNewParams{Model: "mock-model", Input: textInput(fmt.Sprintf("#say answer-%d\nquestion-%d", i, i))}
		if prev != "" {
			params.PreviousResponseID = openai.String(prev)
		}
		resp, err := client.Responses.New(t.Context(), params)
		if err != nil {
			t.Fatalf("turn %d: %v", i, err)
		}
		prev = resp.ID
	}
	return prev
}

// checkCompactedPrompt asserts the last prompt holds the summary and the
// new question, and none of the compacted turns.
func checkCompactedPrompt(t *testing.T, h *harness, question string, compacted int) {
	t.Helper()
	prompt := lastPrompt(t, h)
	if !strings.Contains(prompt, "Summary of the earlier conversation") || !strings.Contains(prompt, mockllm.DefaultAnswer) || !strings.Contains(prompt, question) {
		t.Errorf("the prompt lacks the summary or %s:\n%s", question, prompt)
	}
	for i := 1; i <= compacted; i++ {
		if strings.Contains(prompt, fmt.Sprintf("question-%d\n", i)) || strings.Contains(prompt, fmt.Sprintf("answer-%d", i)) {
			t.Errorf("the prompt still holds compacted turn %d:\n%s", i, prompt)
		}
	}
}

// TestCompactionTrigger: a request whose input ends with a
// compaction_trigger (as Codex compacts) is answered, streamed, with
// exactly one compaction item and no model turn but the summary's; the
// conversation goes on from it on the chain and with the item resent.
// With openai-go, on both upstreams.
func TestCompactionTrigger(t *testing.T) {
	forEachUpstream(t, func(t *testing.T, h *harness) {
		client := newOpenAIGo(h)
		prev := chainTurns(t, client, 3)
		before := len(h.Mock.Requests())
		stream := client.Responses.NewStreaming(t.Context(), responses.ResponseNewParams{
			Model:              "mock-model",
			PreviousResponseID: openai.String(prev),
			Tools:              []responses.ToolUnionParam{weatherTool},
			Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
				{OfCompactionTrigger: &responses.ResponseInputItemCompactionTriggerParam{}},
			}},
		})
		var final responses.Response
		var types []string
		for stream.Next() {
			ev := stream.Current()
			types = append(types, ev.Type)
			if ev.Type == "response.completed" {
				final = ev.Response
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatalf("stream: %v", err)
		}
		if final.Status != "completed" || len(final.Output) != 1 || final.Output[0].Type != "compaction" || final.Output[0].EncryptedContent == "" {
			t.Fatalf("response %s: want one compaction item (events %v)", final.RawJSON(), types)
		}
		if final.Usage.InputTokens == 0 || final.Usage.TotalTokens != final.Usage.InputTokens+final.Usage.OutputTokens {
			t.Errorf("usage %+v", final.Usage)
		}
		if got := len(h.Mock.Requests()) - before; got != 1 {
			t.Errorf("%d upstream requests, want the summary's alone", got)
		}
		summarised := lastPrompt(t, h)
		for i := 1; i <= 3; i++ {
			if !strings.Contains(summarised, fmt.Sprintf("question-%d", i)) {
				t.Errorf("the summary's prompt lacks turn %d", i)
			}
		}

		// On the chain: the compaction stands in for the three turns.
		next, err := client.Responses.New(t.Context(), responses.ResponseNewParams{Model: "mock-model",
			PreviousResponseID: openai.String(final.ID), Input: textInput("#say went on\nquestion-4")})
		if err != nil || next.OutputText() != "went on" {
			t.Fatalf("continue on the chain: %v %s", err, next.RawJSON())
		}
		checkCompactedPrompt(t, h, "question-4", 3)

		// Stateless: the history resent with the compaction item after
		// it, as a client appends output to its input.
		history := responses.ResponseInputParam{}
		for i := 1; i <= 3; i++ {
			history = append(history,
				responses.ResponseInputItemParamOfMessage(fmt.Sprintf("question-%d\n", i), responses.EasyInputMessageRoleUser),
				responses.ResponseInputItemParamOfMessage(fmt.Sprintf("answer-%d", i), responses.EasyInputMessageRoleAssistant))
		}
		history = append(history,
			responses.ResponseInputItemUnionParam{OfCompaction: &responses.ResponseCompactionItemParam{EncryptedContent: final.Output[0].EncryptedContent}},
			responses.ResponseInputItemParamOfMessage("#say went on again\nquestion-5", responses.EasyInputMessageRoleUser))
		again, err := client.Responses.New(t.Context(), responses.ResponseNewParams{Model: "mock-model",
			Input: responses.ResponseNewParamsInputUnion{OfInputItemList: history}})
		if err != nil || again.OutputText() != "went on again" {
			t.Fatalf("continue with the history resent: %v", err)
		}
		checkCompactedPrompt(t, h, "question-5", 3)
	})
}

// TestCompactionTriggerNotLast: a compaction_trigger anywhere but last
// is a 400 naming it, and nothing runs.
func TestCompactionTriggerNotLast(t *testing.T) {
	h := newHarness(t, nil)
	client := newOpenAIGo(h)
	_, err := client.Responses.New(t.Context(), responses.ResponseNewParams{Model: "mock-model",
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			responses.ResponseInputItemParamOfMessage("hello", responses.EasyInputMessageRoleUser),
			{OfCompactionTrigger: &responses.ResponseInputItemCompactionTriggerParam{}},
			responses.ResponseInputItemParamOfMessage("more", responses.EasyInputMessageRoleUser),
		}}})
	openAIError(t, "trigger in the middle", err, "input[1]", "")
	if n := len(h.Mock.Requests()); n != 0 {
		t.Errorf("the upstream got %d requests", n)
	}
}

// TestCompactThreshold: context_management with compact_threshold
// compacts before the model's first turn when the rendered input passes
// the threshold: the compaction item comes first in the output, the model
// answers from the summary, and the next request on the chain reads the
// summary in place of the turns; under the threshold nothing changes.
// With openai-go, on both upstreams.
func TestCompactThreshold(t *testing.T) {
	forEachUpstream(t, func(t *testing.T, h *harness) {
		client := newOpenAIGo(h)
		prev := chainTurns(t, client, 3)
		compaction := []responses.ResponseNewParamsContextManagement{{Type: "compaction", CompactThreshold: openai.Int(100000)}}
		under, err := client.Responses.New(t.Context(), responses.ResponseNewParams{Model: "mock-model", ContextManagement: compaction,
			PreviousResponseID: openai.String(prev), Input: textInput("#say under\nquestion-4")})
		if err != nil {
			t.Fatal(err)
		}
		if len(under.Output) != 1 || under.Output[0].Type != "message" || under.OutputText() != "under" {
			t.Fatalf("under the threshold: %s", under.RawJSON())
		}
		if prompt := lastPrompt(t, h); !strings.Contains(prompt, "question-1") {
			t.Errorf("under the threshold the prompt lost the first turn:\n%s", prompt)
		}

		before := len(h.Mock.Requests())
		compaction[0].CompactThreshold = openai.Int(20)
		stream := client.Responses.NewStreaming(t.Context(), responses.ResponseNewParams{Model: "mock-model", ContextManagement: compaction,
			PreviousResponseID: openai.String(under.ID), Input: textInput("#say over\nquestion-5")})
		var over responses.Response
		for stream.Next() {
			if ev := stream.Current(); ev.Type == "response.completed" {
				over = ev.Response
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatalf("stream: %v", err)
		}
		if len(over.Output) != 2 || over.Output[0].Type != "compaction" || over.Output[0].EncryptedContent == "" || over.OutputText() != "over" {
			t.Fatalf("over the threshold: %s", over.RawJSON())
		}
		if got := len(h.Mock.Requests()) - before; got != 2 {
			t.Errorf("%d upstream requests, want the summary's and the answer's", got)
		}
		// The answer's turn read the summary and the question, verbatim.
		checkCompactedPrompt(t, h, "question-5", 4)

		_, err = client.Responses.New(t.Context(), responses.ResponseNewParams{Model: "mock-model",
			PreviousResponseID: openai.String(over.ID), Input: textInput("#say next\nquestion-6")})
		if err != nil {
			t.Fatal(err)
		}
		checkCompactedPrompt(t, h, "question-6", 5)
	})
}

// TestContextManagementBadRequests: a context_management entry that is
// not a compaction, or a threshold that is no positive integer, is a 400
// naming it.
func TestContextManagementBadRequests(t *testing.T) {
	h := newHarness(t, nil)
	for _, tc := range []struct {
		body  []any
		param string
	}{
		{[]any{map[string]any{"type": "truncation"}}, "context_management[0].type"},
		{[]any{map[string]any{"type": "compaction", "compact_threshold": -3}}, "context_management[0].compact_threshold"},
	} {
		status, b := postPath(t, h, "/responses", map[string]any{"model": "mock-model", "input": "hi", "context_management": tc.body})
		if status != http.StatusBadRequest || !strings.Contains(string(b), `"param":"`+tc.param+`"`) {
			t.Errorf("%v: %d %s, want a 400 naming %s", tc.body, status, b, tc.param)
		}
	}
}
