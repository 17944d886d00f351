package integration

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"

	"github.com/loomgate/loom/harmony"
	"github.com/loomgate/loom/model/mockllm"
	loomresponses "github.com/loomgate/loom/responses"
)

// Tests with the official Go SDK, github.com/openai/openai-go/v3.

// newOpenAIGo returns an openai-go client for h. Retries are off so that
// a failure shows instead of being retried away.
func newOpenAIGo(h *harness) openai.Client {
	return openai.NewClient(option.WithBaseURL(h.BaseURL+"/"), option.WithAPIKey("x"), option.WithMaxRetries(0))
}

// streamedEvents reads an openai-go stream to its end and returns the raw
// JSON of each event.
func streamedEvents(t *testing.T, stream *ssestream.Stream[responses.ResponseStreamEventUnion]) []json.RawMessage {
	t.Helper()
	var raws []json.RawMessage
	for stream.Next() {
		raws = append(raws, json.RawMessage(stream.Current().RawJSON()))
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	stream.Close()
	return raws
}

// textInput is a plain string input.
func textInput(s string) responses.ResponseNewParamsInputUnion {
	return responses.ResponseNewParamsInputUnion{OfString: openai.String(s)}
}

// weatherTool is the function tool the round-trip tests offer.
var weatherTool = responses.ToolUnionParam{OfFunction: &responses.FunctionToolParam{
	Name:        "get_weather",
	Description: openai.String("The weather in a city."),
	Parameters: map[string]any{
		"type":       "object",
		"properties": map[string]any{"city": map[string]any{"type": "string"}},
		"required":   []string{"city"},
	},
	Strict: openai.Bool(false),
}}

// words counts tokens the way the scripted upstream does.
func words(s string) int64 { return int64(len(strings.Fields(s))) }

// checkUsage asserts usage is reported and adds up. Over chat, the
// scripted upstream counts one token per word, so the output and reasoning
// counts are exact. Over harmony, input is the length of the prompt the
// upstream received, output the o200k tokens of what the model wrote
// (headers and stop tokens included) and reasoning those of the analysis
// message (see harmonyOutputTokens).
func checkUsage(t *testing.T, h *harness, u responses.ResponseUsage, reasoning, answer string) {
	t.Helper()
	if u.InputTokens <= 0 || u.OutputTokens <= 0 {
		t.Errorf("usage input %d, output %d: want both > 0", u.InputTokens, u.OutputTokens)
	}
	if u.TotalTokens != u.InputTokens+u.OutputTokens {
		t.Errorf("usage total %d != input %d + output %d", u.TotalTokens, u.InputTokens, u.OutputTokens)
	}
	wantOutput, wantReasoning := words(reasoning)+words(answer), words(reasoning)
	if isCompletions(t, h) {
		wantOutput, wantReasoning = harmonyOutputTokens(t, reasoning, answer)
		if want := int64(len(lastCompletion(t, h).PromptIDs)); u.InputTokens != want {
			t.Errorf("usage input %d, want %d (the prompt's token ids)", u.InputTokens, want)
		}
	}
	if u.OutputTokens != wantOutput {
		t.Errorf("usage output %d, want %d", u.OutputTokens, wantOutput)
	}
	if u.OutputTokensDetails.ReasoningTokens != wantReasoning {
		t.Errorf("usage reasoning tokens %d, want %d", u.OutputTokensDetails.ReasoningTokens, wantReasoning)
	}
}

// reasoningText returns the reasoning_text of the response's reasoning
// items, failing on any other content type.
func reasoningText(t *testing.T, r *responses.Response) string {
	t.Helper()
	var text strings.Builder
	for _, item := range r.Output {
		if item.Type != "reasoning" {
			continue
		}
		for _, c := range item.AsReasoning().Content {
			if c.Type != "reasoning_text" {
				t.Errorf("reasoning content of type %q, want reasoning_text", c.Type)
			}
			text.WriteString(c.Text)
		}
	}
	return text.String()
}

func TestOpenAIGoCreate(t *testing.T) {
	cases := []struct {
		name      string
		reasoning string
		answer    string
		cached    int64
	}{
		{name: "text", answer: "Hello from loom, in a few words."},
		{name: "reasoning", reasoning: "The user wants a greeting.", answer: "Hi there!"},
		{name: "cached", answer: "Cached prompt.", cached: 3},
	}
	for _, up := range upstreams {
		for _, tc := range cases {
			t.Run(up.name+"/"+tc.name, func(t *testing.T) {
				h := up.harness(t, nil)
				client := newOpenAIGo(h)
				script := "#say " + tc.answer
				if tc.reasoning != "" {
					script = "#reason " + tc.reasoning + "\n" + script
				}
				if tc.cached > 0 {
					script += fmt.Sprintf("\n#cached %d", tc.cached)
				}
				resp, err := client.Responses.New(clientCtx(t), responses.ResponseNewParams{
					Model:        mockllm.DefaultModel,
					Input:        textInput(script),
					Instructions: openai.String("Be brief."),
					Metadata:     map[string]string{"case": tc.name},
				})
				if err != nil {
					t.Fatalf("create: %v", err)
				}
				if !strings.HasPrefix(resp.ID, "resp_") || resp.Status != responses.ResponseStatusCompleted || resp.Model != mockllm.DefaultModel {
					t.Errorf("id %q, status %q, model %q", resp.ID, resp.Status, resp.Model)
				}
				if got := resp.OutputText(); got != tc.answer {
					t.Errorf("output text %q, want %q", got, tc.answer)
				}
				if got := resp.Instructions.OfString; got != "Be brief." {
					t.Errorf("instructions echoed as %q", got)
				}
				if resp.Metadata["case"] != tc.name {
					t.Errorf("metadata echoed as %v", resp.Metadata)
				}
				if got := reasoningText(t, resp); got != tc.reasoning {
					t.Errorf("reasoning text %q, want %q", got, tc.reasoning)
				}
				checkUsage(t, h, resp.Usage, tc.reasoning, tc.answer)
				if got := resp.Usage.InputTokensDetails.CachedTokens; got != tc.cached {
					t.Errorf("cached tokens %d, want %d", got, tc.cached)
				}
				if upstreamStreamed(t, h) {
					t.Error("a client that asked for no stream got a streamed upstream call")
				}
				requireCaptured(t, h, 1, 0)
			})
		}
	}
}

func TestOpenAIGoStream(t *testing.T) {
	const reasoning, answer = "Think about the greeting first.", "Streaming works, piece by piece."
	cases := []struct {
		name           string
		dialect        loomresponses.Dialect
		reasoningDelta string
	}{
		{"openai", loomresponses.DialectOpenAI, "response.reasoning_text.delta"},
		// openai-go tolerates event types it does not know, so it can read
		// the Open Responses dialect live, and the harness validates it.
		{"openresponses", loomresponses.DialectOpenResponses, "response.reasoning.delta"},
	}
	for _, up := range upstreams {
		for _, tc := range cases {
			t.Run(up.name+"/"+tc.name, func(t *testing.T) {
				h := up.harness(t, &harnessOptions{Dialect: tc.dialect})
				client := newOpenAIGo(h)
				raws := streamedEvents(t, client.Responses.NewStreaming(clientCtx(t), responses.ResponseNewParams{
					Model: mockllm.DefaultModel,
					Input: textInput("#reason " + reasoning + "\n#say " + answer),
				}))

				sum := checkEventStream(t, raws)
				if sum.Text != answer || sum.Reasoning != reasoning {
					t.Errorf("streamed text %q and reasoning %q, want %q and %q", sum.Text, sum.Reasoning, answer, reasoning)
				}
				n := countTypes(sum.Types)
				if n[tc.reasoningDelta] == 0 || n["response.output_text.delta"] < 2 || n["response.completed"] != 1 {
					t.Errorf("event types %v: want %s and several text deltas", sum.Types, tc.reasoningDelta)
				}
				var final responses.Response
				if err := json.Unmarshal(sum.Final, &final); err != nil {
					t.Fatal(err)
				}
				if final.Status != responses.ResponseStatusCompleted || final.OutputText() != sum.Text {
					t.Errorf("final response %s with text %q, want completed with the streamed text %q", final.Status, final.OutputText(), sum.Text)
				}
				if got := reasoningText(t, &final); got != reasoning {
					t.Errorf("final reasoning %q, want %q", got, reasoning)
				}
				checkUsage(t, h, final.Usage, reasoning, answer)
				if !upstreamStreamed(t, h) {
					t.Error("a streaming client got a non-streamed upstream call")
				}
				// The stored response is the one the stream ended with.
				got, err := client.Responses.Get(clientCtx(t), final.ID, responses.ResponseGetParams{})
				if err != nil {
					t.Fatalf("get: %v", err)
				}
				if got.OutputText() != answer || len(got.Output) != len(final.Output) {
					t.Errorf("stored response has text %q and %d items, want %q and %d", got.OutputText(), len(got.Output), answer, len(final.Output))
				}
				requireCaptured(t, h, 1, len(raws))
			})
		}
	}
}

// requireNotFound asserts err is the SDK's API error with status 404.
func requireNotFound(t *testing.T, err error, what string) {
	t.Helper()
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
		t.Errorf("%s: got %v, want an *openai.Error with status 404", what, err)
	}
}

func TestOpenAIGoGetDelete(t *testing.T) {
	h := newHarness(t, nil)
	client := newOpenAIGo(h)
	ctx := clientCtx(t)
	created, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Model: mockllm.DefaultModel,
		Input: textInput("#say Keep me."),
	})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	got, err := client.Responses.Get(ctx, created.ID, responses.ResponseGetParams{})
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	if got.ID != created.ID || got.OutputText() != "Keep me." || got.Status != created.Status || got.CreatedAt != created.CreatedAt {
		t.Errorf("get returned %s %q %s, want %s %q %s", got.ID, got.OutputText(), got.Status, created.ID, "Keep me.", created.Status)
	}
	if err := client.Responses.Delete(ctx, created.ID); err != nil {
		t.Fatalf("delete: %v", err)
	}
	_, err = client.Responses.Get(ctx, created.ID, responses.ResponseGetParams{})
	requireNotFound(t, err, "get after delete")
	requireNotFound(t, client.Responses.Delete(ctx, created.ID), "delete twice")

	// A response created with store false cannot be retrieved.
	unstored, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Model: mockllm.DefaultModel,
		Input: textInput("#say Forget me."),
		Store: openai.Bool(false),
	})
	if err != nil {
		t.Fatalf("create with store false: %v", err)
	}
	// openai-go's Response has no store field: read the raw body.
	var echoed struct {
		Store *bool `json:"store"`
	}
	json.Unmarshal([]byte(unstored.RawJSON()), &echoed)
	if unstored.OutputText() != "Forget me." || echoed.Store == nil || *echoed.Store {
		t.Errorf("store false response: text %q, store %v", unstored.OutputText(), echoed.Store)
	}
	_, err = client.Responses.Get(ctx, unstored.ID, responses.ResponseGetParams{})
	requireNotFound(t, err, "get of a store false response")
	requireCaptured(t, h, 3, 0)
}

func TestOpenAIGoInputItems(t *testing.T) {
	h := newHarness(t, nil)
	client := newOpenAIGo(h)
	ctx := clientCtx(t)
	texts := []string{"one", "two", "three", "four", "#say Counted."}
	var input responses.ResponseInputParam
	for _, s := range texts {
		input = append(input, responses.ResponseInputItemParamOfMessage(s, responses.EasyInputMessageRoleUser))
	}
	created, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Model: mockllm.DefaultModel,
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: input},
	})
	if err != nil {
		t.Fatalf("create: %v", err)
	}

	// itemText is the text of a listed user message.
	itemText := func(item responses.ResponseItemUnion) string {
		if item.Type != "message" || item.Role != "user" || len(item.Content.OfInputItemContentList) != 1 {
			t.Errorf("listed item %s", item.RawJSON())
			return ""
		}
		return item.Content.OfInputItemContentList[0].Text
	}
	// list pages through the items two at a time and returns their texts.
	list := func(order responses.InputItemListParamsOrder) []string {
		t.Helper()
		var got []string
		ids := map[string]bool{}
		params := responses.InputItemListParams{Limit: openai.Int(2), Order: order}
		for range len(texts) { // a bound: more pages than items is a loop
			page, err := client.Responses.InputItems.List(ctx, created.ID, params)
			if err != nil {
				t.Fatalf("list %s: %v", order, err)
			}
			if len(page.Data) == 0 || len(page.Data) > 2 {
				t.Fatalf("list %s: page of %d items", order, len(page.Data))
			}
			for _, item := range page.Data {
				if item.ID == "" || ids[item.ID] {
					t.Errorf("list %s: item id %q empty or repeated", order, item.ID)
				}
				ids[item.ID] = true
				got = append(got, itemText(item))
			}
			if !page.HasMore {
				return got
			}
			params.After = openai.String(page.Data[len(page.Data)-1].ID)
		}
		t.Fatalf("list %s: more pages than items", order)
		return nil
	}
	if got := list(responses.InputItemListParamsOrderAsc); strings.Join(got, "|") != strings.Join(texts, "|") {
		t.Errorf("ascending: %q, want %q", got, texts)
	}
	reversed := make([]string, len(texts))
	for i, s := range texts {
		reversed[len(texts)-1-i] = s
	}
	if got := list(responses.InputItemListParamsOrderDesc); strings.Join(got, "|") != strings.Join(reversed, "|") {
		t.Errorf("descending: %q, want %q", got, reversed)
	}
	// The default order is descending, and the default limit covers all.
	page, err := client.Responses.InputItems.List(ctx, created.ID, responses.InputItemListParams{})
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	if len(page.Data) != len(texts) || page.HasMore || itemText(page.Data[0]) != texts[len(texts)-1] {
		t.Errorf("default listing: %d items, has_more %v", len(page.Data), page.HasMore)
	}
	_, err = client.Responses.InputItems.List(ctx, "resp_missing", responses.InputItemListParams{})
	requireNotFound(t, err, "input items of an unknown response")
	requireCaptured(t, h, 1, 0)
}

// functionCall returns the response's only function_call item.
func functionCall(t *testing.T, r *responses.Response) responses.ResponseFunctionToolCall {
	t.Helper()
	var calls []responses.ResponseFunctionToolCall
	for _, item := range r.Output {
		if item.Type == "function_call" {
			calls = append(calls, item.AsFunctionCall())
		}
	}
	if len(calls) != 1 {
		t.Fatalf("response has %d function calls, want 1: %s", len(calls), r.RawJSON())
	}
	return calls[0]
}

// weatherScript makes the model call get_weather, then (by default) say
// what the tool said.
const (
	weatherArgs   = `{"city": "Paris"}`
	weatherScript = "What is the weather in Paris?\n#call get_weather " + weatherArgs + "\n#then"
	weatherResult = `{"sky": "sunny", "temperature_c": 21}`
)

func TestOpenAIGoFunctionCallByPreviousResponse(t *testing.T) {
	forEachUpstream(t, testOpenAIGoFunctionCallByPreviousResponse)
}

func testOpenAIGoFunctionCallByPreviousResponse(t *testing.T, h *harness) {
	client := newOpenAIGo(h)
	ctx := clientCtx(t)

	// The first leg streams, so that the argument deltas are checked too.
	raws := streamedEvents(t, client.Responses.NewStreaming(ctx, responses.ResponseNewParams{
		Model: mockllm.DefaultModel,
		Input: textInput(weatherScript),
		Tools: []responses.ToolUnionParam{weatherTool},
	}))
	sum := checkEventStream(t, raws)
	var first responses.Response
	if err := json.Unmarshal(sum.Final, &first); err != nil {
		t.Fatal(err)
	}
	call := functionCall(t, &first)
	if call.Name != "get_weather" || !jsonEqual(call.Arguments, weatherArgs) || call.CallID == "" {
		t.Fatalf("function call %s(%s) id %q", call.Name, call.Arguments, call.CallID)
	}
	if sum.Arguments[call.ID] != call.Arguments {
		t.Errorf("streamed arguments %q, final %q", sum.Arguments[call.ID], call.Arguments)
	}

	out := responses.ResponseInputItemParamOfFunctionCallOutput(weatherResult)
	out.OfFunctionCallOutput.CallID = openai.String(call.CallID)
	second, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Model:              mockllm.DefaultModel,
		PreviousResponseID: openai.String(first.ID),
		Input:              responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{out}},
		Tools:              []responses.ToolUnionParam{weatherTool},
	})
	if err != nil {
		t.Fatalf("second leg: %v", err)
	}
	if got, want := second.OutputText(), "tool said: "+weatherResult; got != want {
		t.Errorf("answer %q, want %q", got, want)
	}
	if second.PreviousResponseID != first.ID {
		t.Errorf("previous_response_id echoed as %q", second.PreviousResponseID)
	}
	requireToolRoundTrip(t, h, call.CallID, call.Name, call.Arguments, weatherResult)
	requireCaptured(t, h, 1, len(raws))
}

// TestOpenAIGoFunctionCallByFullHistory continues a function call the way
// the Agents SDK and Codex do: no previous_response_id and store false;
// the client resends the first input, every output item of the first
// response (here a reasoning item and the call) and the call's output.
func TestOpenAIGoFunctionCallByFullHistory(t *testing.T) {
	forEachUpstream(t, testOpenAIGoFunctionCallByFullHistory)
}

func testOpenAIGoFunctionCallByFullHistory(t *testing.T, h *harness) {
	client := newOpenAIGo(h)
	ctx := clientCtx(t)
	user := responses.ResponseInputItemParamOfMessage("#reason I need the weather tool.\n"+weatherScript, responses.EasyInputMessageRoleUser)
	first, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Model: mockllm.DefaultModel,
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{user}},
		Tools: []responses.ToolUnionParam{weatherTool},
		Store: openai.Bool(false),
	})
	if err != nil {
		t.Fatalf("first leg: %v", err)
	}
	call := functionCall(t, first)
	if len(first.Output) != 2 || first.Output[0].Type != "reasoning" {
		t.Fatalf("first leg output: %s", first.RawJSON())
	}

	history := responses.ResponseInputParam{user}
	for _, item := range first.Output {
		// Resend each item exactly as loom sent it, as the SDKs do.
		history = append(history, param.Override[responses.ResponseInputItemUnionParam](json.RawMessage(item.RawJSON())))
	}
	out := responses.ResponseInputItemParamOfFunctionCallOutput(weatherResult)
	out.OfFunctionCallOutput.CallID = openai.String(call.CallID)
	history = append(history, out)
	second, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Model: mockllm.DefaultModel,
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: history},
		Tools: []responses.ToolUnionParam{weatherTool},
		Store: openai.Bool(false),
	})
	if err != nil {
		t.Fatalf("second leg: %v", err)
	}
	if got, want := second.OutputText(), "tool said: "+weatherResult; got != want {
		t.Errorf("answer %q, want %q", got, want)
	}
	requireToolRoundTrip(t, h, call.CallID, call.Name, call.Arguments, weatherResult)
	// The resent reasoning reaches the upstream with the assistant turn:
	// over chat as the assistant message's reasoning, over harmony as an
	// analysis message before the call (the tool loop is still going).
	if isCompletions(t, h) {
		requireHarmonyAnalysisBeforeCall(t, lastCompletion(t, h), "I need the weather tool.", "get_weather")
	} else {
		var reasoningSent bool
		for _, m := range lastChatRequest(t, h).Messages {
			reasoningSent = reasoningSent || m.ReasoningContent+m.Reasoning == "I need the weather tool."
		}
		if !reasoningSent {
			t.Errorf("the resent reasoning item did not reach the upstream: %s", h.Mock.Requests()[1].Body)
		}
	}

	// A third turn resends the second's message too, as the next user
	// turn of an agent would: it must reach the upstream as assistant text.
	history = append(history, param.Override[responses.ResponseInputItemUnionParam](json.RawMessage(second.Output[0].RawJSON())),
		responses.ResponseInputItemParamOfMessage("#say Thanks.", responses.EasyInputMessageRoleUser))
	third, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Model: mockllm.DefaultModel,
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: history},
		Tools: []responses.ToolUnionParam{weatherTool},
		Store: openai.Bool(false),
	})
	if err != nil {
		t.Fatalf("third turn: %v", err)
	}
	if third.OutputText() != "Thanks." {
		t.Errorf("third turn: answer %q", third.OutputText())
	}
	if isCompletions(t, h) {
		// The answer went back as a final message, just before the new
		// user message.
		msgs := lastCompletion(t, h).PromptMessages
		if n := len(msgs); n < 2 || msgs[n-2].Author.Role != harmony.RoleAssistant || msgs[n-2].Channel != "final" || msgs[n-2].Text() != second.OutputText() {
			t.Errorf("third turn: upstream prompt\n%s", lastCompletion(t, h).PromptText)
		}
	} else {
		msgs := lastChatRequest(t, h).Messages
		if len(msgs) < 2 || msgs[len(msgs)-2].Role != "assistant" || msgs[len(msgs)-2].Text() != second.OutputText() {
			t.Errorf("third turn: upstream got %s", h.Mock.Requests()[2].Body)
		}
	}
	for _, id := range []string{first.ID, second.ID, third.ID} {
		_, err := client.Responses.Get(ctx, id, responses.ResponseGetParams{})
		requireNotFound(t, err, "get of a store false response")
	}
	requireCaptured(t, h, 3, 0)
}

// TestOpenAIGoGetStreamingReplay replays a stored stream with
// GetStreaming, as a client resuming a dropped stream does. openai-go asks
// for the stream with {"stream": true} in the body of the GET (not with
// ?stream=true), and sends starting_after as a query parameter.
func TestOpenAIGoGetStreamingReplay(t *testing.T) {
	h := newHarness(t, nil)
	client := newOpenAIGo(h)
	ctx := clientCtx(t)
	live := streamedEvents(t, client.Responses.NewStreaming(ctx, responses.ResponseNewParams{
		Model: mockllm.DefaultModel,
		Input: textInput("#reason Replay me.\n#say Replayed text."),
	}))
	var final responses.Response
	json.Unmarshal(checkEventStream(t, live).Final, &final)

	for _, after := range []int{-1, 0, 5} {
		params := responses.ResponseGetParams{}
		if after >= 0 {
			params.StartingAfter = openai.Int(int64(after))
		}
		replay := client.Responses.GetStreaming(ctx, final.ID, params)
		var got []json.RawMessage
		for replay.Next() {
			got = append(got, json.RawMessage(replay.Current().RawJSON()))
		}
		if err := replay.Err(); err != nil {
			t.Fatalf("replay after %d: %v", after, err)
		}
		replay.Close()
		want := live[after+1:]
		if len(got) != len(want) {
			t.Errorf("replay after %d: %d events, want the %d live events after it", after, len(got), len(want))
			continue
		}
		for i := range want {
			if !jsonEqual(string(got[i]), string(want[i])) {
				t.Errorf("replay after %d: event %d is\n%s\nwant\n%s", after, i, got[i], want[i])
				break
			}
		}
	}
	requireCaptured(t, h, 0, len(live))
}

// TestOpenAIGoChainAfterDeletedAncestor continues a chain whose first
// response was deleted. loom then starts the conversation after the
// deleted link; whatever it does, it must not send the upstream a tool
// result whose call is gone (chat-completions engines reject a tool
// message that answers no preceding assistant tool call).
func TestOpenAIGoChainAfterDeletedAncestor(t *testing.T) {
	h := newHarness(t, nil)
	client := newOpenAIGo(h)
	ctx := clientCtx(t)
	first, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Model: mockllm.DefaultModel,
		Input: textInput(weatherScript),
		Tools: []responses.ToolUnionParam{weatherTool},
	})
	if err != nil {
		t.Fatalf("first: %v", err)
	}
	out := responses.ResponseInputItemParamOfFunctionCallOutput(weatherResult)
	out.OfFunctionCallOutput.CallID = openai.String(functionCall(t, first).CallID)
	second, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Model:              mockllm.DefaultModel,
		PreviousResponseID: openai.String(first.ID),
		Input:              responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{out}},
		Tools:              []responses.ToolUnionParam{weatherTool},
	})
	if err != nil {
		t.Fatalf("second: %v", err)
	}
	if err := client.Responses.Delete(ctx, first.ID); err != nil {
		t.Fatalf("delete: %v", err)
	}
	upstreamBefore := len(h.Mock.Requests())
	_, err = client.Responses.New(ctx, responses.ResponseNewParams{
		Model:              mockllm.DefaultModel,
		PreviousResponseID: openai.String(second.ID),
		Input:              textInput("#say Still here."),
		Tools:              []responses.ToolUnionParam{weatherTool},
	})
	var apiErr *openai.Error
	switch {
	case errors.As(err, &apiErr) && apiErr.StatusCode >= 400 && apiErr.StatusCode < 500:
		// Refusing the broken chain is acceptable.
	case err != nil:
		t.Fatalf("third: %v", err)
	case len(h.Mock.Requests()) == upstreamBefore:
		t.Fatal("third: answered without asking the upstream")
	default:
		requireValidToolMessages(t, lastChatRequest(t, h).Messages)
	}
	requireCaptured(t, h, 2, 0)
}

// requireValidToolMessages checks that every tool message answers a tool
// call of an earlier assistant message, as chat-completions engines demand.
func requireValidToolMessages(t *testing.T, msgs []mockllm.Message) {
	t.Helper()
	called := map[string]bool{}
	for i, m := range msgs {
		for _, tc := range m.ToolCalls {
			called[tc.ID] = true
		}
		if m.Role == "tool" && !called[m.ToolCallID] {
			t.Errorf("upstream message %d is a tool result for %q, which no earlier assistant message called", i, m.ToolCallID)
		}
	}
}

// TestOpenAIGoCompact: openai-go's Responses.Compact reads loom's
// compaction object, and its compaction input item continues the
// conversation.
func TestOpenAIGoCompact(t *testing.T) {
	h := newHarness(t, nil)
	client := newOpenAIGo(h)
	ctx := clientCtx(t)
	first, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: mockllm.DefaultModel, Input: textInput("#say an old answer\nan old question")})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	c, err := client.Responses.Compact(ctx, responses.ResponseCompactParams{Model: mockllm.DefaultModel, PreviousResponseID: openai.String(first.ID)})
	if err != nil {
		t.Fatalf("compact: %v", err)
	}
	if c.Object != "response.compaction" || len(c.Output) != 1 || c.Output[0].Type != "compaction" {
		t.Fatalf("compaction %s", c.RawJSON())
	}
	blob := c.Output[0].AsCompaction().EncryptedContent
	next, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Model: mockllm.DefaultModel,
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			responses.ResponseInputItemParamOfCompaction(blob),
			responses.ResponseInputItemParamOfMessage("#say continued\na new question", responses.EasyInputMessageRoleUser),
		}},
	})
	if err != nil {
		t.Fatalf("continue: %v", err)
	}
	if next.Status != "completed" || next.OutputText() != "continued" {
		t.Errorf("continued response %s", next.RawJSON())
	}
	if p := lastPrompt(t, h); strings.Contains(p, "an old question") || !strings.Contains(p, mockllm.DefaultAnswer) {
		t.Errorf("the continued prompt holds the old turn or lacks the summary:\n%s", p)
	}
}
