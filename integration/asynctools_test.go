package integration

import (
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
)

// asyncWeatherTool is weatherTool offered with async: true.
func asyncWeatherTool() responses.ToolUnionParam {
	fn := *weatherTool.OfFunction
	fn.Async = openai.Bool(true)
	return responses.ToolUnionParam{OfFunction: &fn}
}

// asyncScript calls get_weather, then, once the call is acknowledged,
// answers without its result.
const asyncScript = "#call get_weather {\"city\":\"Paris\"}\n#then\n#say Pack an umbrella anyway.\nWhat should I pack for Paris?"

// checkAcknowledged asserts the last prompt (the continuation's) gave
// the model the tool's async hint and the call's provisional output.
func checkAcknowledged(t *testing.T, h *harness) {
	t.Helper()
	prompt := lastPrompt(t, h)
	if !strings.Contains(prompt, "This tool runs asynchronously") || !strings.Contains(prompt, "its result is not available yet") {
		t.Errorf("the continuation's prompt lacks the hint or the acknowledgement:\n%s", prompt)
	}
}

// TestAsyncFunctionTool: a call of an async function tool carries
// async: true and does not end the response: the model reads a
// provisional output and goes on in the same response. A later request
// brings the real output by call_id, on the chain or with the history
// resent (without the async mark, as a client may resend it); an unknown
// call_id is a 400. A tool without async still ends the response at its
// call. With openai-go, streamed, on both upstreams.
func TestAsyncFunctionTool(t *testing.T) {
	forEachUpstream(t, func(t *testing.T, h *harness) {
		client := newOpenAIGo(h)
		before := len(h.Mock.Requests())
		stream := client.Responses.NewStreaming(t.Context(), responses.ResponseNewParams{Model: "mock-model",
			Tools: []responses.ToolUnionParam{asyncWeatherTool()}, Input: textInput(asyncScript)})
		var final responses.Response
		var addedAsync bool
		for stream.Next() {
			ev := stream.Current()
			if ev.Type == "response.output_item.added" && ev.Item.Type == "function_call" {
				addedAsync = ev.Item.Async
			}
			if ev.Type == "response.completed" {
				final = ev.Response
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatalf("stream: %v", err)
		}
		if final.Status != "completed" || len(final.Output) != 2 || final.Output[0].Type != "function_call" || final.OutputText() != "Pack an umbrella anyway." {
			t.Fatalf("response %s: want the async call, then the answer", final.RawJSON())
		}
		call := final.Output[0].AsFunctionCall()
		if !call.Async || !addedAsync || !strings.Contains(call.RawJSON(), `"async":true`) {
			t.Errorf("the call item %s (added with async %v): want async true", call.RawJSON(), addedAsync)
		}
		if got := len(h.Mock.Requests()) - before; got != 2 {
			t.Errorf("%d model turns, want the call's and the continuation's", got)
		}
		checkAcknowledged(t, h)

		// The result, later, on the chain.
		output := func(callID, text string) responses.ResponseInputItemUnionParam {
			return responses.ResponseInputItemUnionParam{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{
				CallID: openai.String(callID), Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: openai.String(text)}}}
		}
		later, err := client.Responses.New(t.Context(), responses.ResponseNewParams{Model: "mock-model", PreviousResponseID: openai.String(final.ID),
			Tools: []responses.ToolUnionParam{asyncWeatherTool()},
			Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{output(call.CallID, "sunny, 24C")}}})
		if err != nil {
			t.Fatalf("the later output: %v", err)
		}
		if later.Status != "completed" || !strings.Contains(later.OutputText(), "sunny, 24C") {
			t.Errorf("the later response %s: want the model to read the result", later.RawJSON())
		}
		if prompt := lastPrompt(t, h); !strings.Contains(prompt, "its result is not available yet") || !strings.Contains(prompt, "sunny, 24C") {
			t.Errorf("the later prompt lacks the acknowledgement or the result:\n%s", prompt)
		}

		// An output for a call that does not exist.
		_, err = client.Responses.New(t.Context(), responses.ResponseNewParams{Model: "mock-model", PreviousResponseID: openai.String(final.ID),
			Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{output("call_nope", "x")}}})
		openAIError(t, "unknown call_id", err, "input[0].call_id", "")

		// The history resent, the call without its async mark.
		resent, err := client.Responses.New(t.Context(), responses.ResponseNewParams{Model: "mock-model",
			Tools: []responses.ToolUnionParam{asyncWeatherTool()},
			Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
				responses.ResponseInputItemParamOfMessage(asyncScript, responses.EasyInputMessageRoleUser),
				responses.ResponseInputItemParamOfFunctionCall(call.Arguments, call.CallID, call.Name),
				responses.ResponseInputItemParamOfMessage("Pack an umbrella anyway.", responses.EasyInputMessageRoleAssistant),
				output(call.CallID, "rain, 12C"),
			}}})
		if err != nil || !strings.Contains(resent.OutputText(), "rain, 12C") {
			t.Fatalf("the history resent: %v", err)
		}
		if prompt := lastPrompt(t, h); !strings.Contains(prompt, "its result is not available yet") {
			t.Errorf("the resent history's prompt lacks the acknowledgement:\n%s", prompt)
		}

		// Without async the call ends the response.
		sync, err := client.Responses.New(t.Context(), responses.ResponseNewParams{Model: "mock-model",
			Tools: []responses.ToolUnionParam{weatherTool}, Input: textInput(asyncScript)})
		if err != nil || len(sync.Output) != 1 || sync.Output[0].Type != "function_call" || sync.Output[0].AsFunctionCall().Async {
			t.Errorf("a plain tool's call: %v %s", err, sync.RawJSON())
		}
	})
}

// TestAsyncCustomTool: a custom tool with async: true, called, gives a
// custom_tool_call with async: true, and the response goes on; its
// custom_tool_call_output comes later on the chain. On both upstreams.
func TestAsyncCustomTool(t *testing.T) {
	forEachUpstream(t, func(t *testing.T, h *harness) {
		client := newOpenAIGo(h)
		note := responses.ToolUnionParam{OfCustom: &responses.CustomToolParam{Name: "note", Description: openai.String("Keeps a note."), Async: openai.Bool(true)}}
		resp, err := client.Responses.New(t.Context(), responses.ResponseNewParams{Model: "mock-model", Tools: []responses.ToolUnionParam{note},
			Input: textInput("#call note {\"input\":\"buy milk\"}\n#then\n#say Noted; going on.\nRemember milk.")})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Output) != 2 || resp.Output[0].Type != "custom_tool_call" || resp.OutputText() != "Noted; going on." {
			t.Fatalf("response %s: want the async custom call, then the answer", resp.RawJSON())
		}
		call := resp.Output[0].AsCustomToolCall()
		if !call.Async || call.Input != "buy milk" {
			t.Errorf("the custom call %s: want async true and its input", call.RawJSON())
		}
		checkAcknowledged(t, h)
		later, err := client.Responses.New(t.Context(), responses.ResponseNewParams{Model: "mock-model", PreviousResponseID: openai.String(resp.ID),
			Tools: []responses.ToolUnionParam{note},
			Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{{OfCustomToolCallOutput: &responses.ResponseCustomToolCallOutputParam{
				CallID: call.CallID, Output: responses.ResponseCustomToolCallOutputOutputUnionParam{OfString: openai.String("note kept")}}}}}})
		if err != nil || !strings.Contains(later.OutputText(), "note kept") {
			t.Fatalf("the later custom output: %v", err)
		}
	})
}

// TestAsyncRefused: async where OpenAI refuses it -- on a namespace
// itself, client shell, tool_search, web_search -- is a 400
// unknown_parameter naming it, before anything runs.
func TestAsyncRefused(t *testing.T) {
	h := newHarness(t, nil)
	fn := map[string]any{"type": "function", "name": "f", "parameters": map[string]any{"type": "object"}}
	for _, tool := range []map[string]any{
		{"type": "namespace", "name": "crm", "description": "CRM", "async": true, "tools": []any{fn}},
		{"type": "shell", "environment": map[string]any{"type": "local"}, "async": true},
		{"type": "tool_search", "execution": "client", "async": true},
		{"type": "web_search", "async": true},
	} {
		status, b := postPath(t, h, "/responses", map[string]any{"model": "mock-model", "input": "hi", "tools": []any{tool}})
		if status != http.StatusBadRequest || !strings.Contains(string(b), `"param":"tools[0].async"`) || !strings.Contains(string(b), `"code":"unknown_parameter"`) {
			t.Errorf("%v: %d %s, want a 400 unknown_parameter naming tools[0].async", tool["type"], status, b)
		}
	}
	if n := len(h.Mock.Requests()); n != 0 {
		t.Errorf("the upstream got %d requests", n)
	}
}

// TestAsyncOutputAfterCompaction: an async call's output that comes after
// the conversation was compacted (compaction_trigger) is still taken and
// read: on harmony an output renders only after its call. On both
// upstreams, with openai-go.
func TestAsyncOutputAfterCompaction(t *testing.T) {
	forEachUpstream(t, func(t *testing.T, h *harness) {
		client := newOpenAIGo(h)
		tools := []responses.ToolUnionParam{asyncWeatherTool()}
		first, err := client.Responses.New(t.Context(), responses.ResponseNewParams{Model: "mock-model", Tools: tools, Input: textInput(asyncScript)})
		if err != nil {
			t.Fatal(err)
		}
		compacted, err := client.Responses.New(t.Context(), responses.ResponseNewParams{Model: "mock-model", Tools: tools, PreviousResponseID: openai.String(first.ID),
			Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{{OfCompactionTrigger: &responses.ResponseInputItemCompactionTriggerParam{}}}}})
		if err != nil || len(compacted.Output) != 1 || compacted.Output[0].Type != "compaction" {
			t.Fatalf("compaction: %v", err)
		}
		late, err := client.Responses.New(t.Context(), responses.ResponseNewParams{Model: "mock-model", Tools: tools, PreviousResponseID: openai.String(compacted.ID),
			Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{
				CallID: openai.String(first.Output[0].CallID), Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: openai.String("late sun")}}}}}})
		if err != nil {
			t.Fatalf("the late output: %v", err)
		}
		if late.Status != "completed" || !strings.Contains(late.OutputText(), "late sun") {
			t.Errorf("the late output's response: %s", late.RawJSON())
		}
	})
}

// TestAsyncNamespacedFunction: a namespace's function offered with
// async: true is called (crm.search on harmony), reported with its
// namespace and async: true, and the response goes on. On both upstreams.
func TestAsyncNamespacedFunction(t *testing.T) {
	for _, up := range upstreams {
		t.Run(up.name, func(t *testing.T) {
			h := up.harness(t, nil)
			call := "#call crm__search " + crmArgs
			if up.name == "completions" {
				call = "#callns crm.search " + crmArgs
			}
			ns := *crmNamespace.OfNamespace
			fn := *ns.Tools[0].OfFunction
			fn.Async = openai.Bool(true)
			ns.Tools = []responses.NamespaceToolToolUnionParam{{OfFunction: &fn}}
			client := newOpenAIGo(h)
			resp, err := client.Responses.New(t.Context(), responses.ResponseNewParams{Model: "mock-model",
				Tools: []responses.ToolUnionParam{{OfNamespace: &ns}}, Input: textInput(call + "\n#then\n#say Searching; meanwhile, hello.\nFind Ada.")})
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.Output) != 2 || resp.OutputText() != "Searching; meanwhile, hello." {
				t.Fatalf("response %s: want the async call, then the answer", resp.RawJSON())
			}
			got := resp.Output[0].AsFunctionCall()
			if !got.Async || got.Namespace != "crm" || got.Name != "search" {
				t.Errorf("the call %s: want crm.search, async", got.RawJSON())
			}
			checkAcknowledged(t, h)
		})
	}
}
