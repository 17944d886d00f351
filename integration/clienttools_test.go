package integration

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/loomgate/loom/harmony"
	"github.com/loomgate/loom/model/mockllm"
	loomresponses "github.com/loomgate/loom/responses"
)

// Issue 13: the tool types agent clients send besides function, through
// openai-go, on both upstreams: a namespace's function, a custom tool,
// apply_patch. The harness validates every event and body against the
// Open Responses schema.

// crmNamespace is a namespace tool with one function, search.
var crmNamespace = responses.ToolUnionParam{OfNamespace: &responses.NamespaceToolParam{
	Name:        "crm",
	Description: "The customer database.",
	Tools: []responses.NamespaceToolToolUnionParam{{OfFunction: &responses.NamespaceToolToolFunctionParam{
		Name:        "search",
		Description: openai.String("Finds a customer."),
		Parameters:  map[string]any{"type": "object", "properties": map[string]any{"q": map[string]any{"type": "string"}}},
	}}},
}}

const crmArgs = `{"q":"ada"}`

// harmonyPrompt is the harmony prompt of the upstream's last request, or
// nil over chat.
func harmonyPrompt(t *testing.T, h *harness) []harmony.Message {
	t.Helper()
	if !isCompletions(t, h) {
		return nil
	}
	return lastCompletion(t, h).PromptMessages
}

func TestOpenAIGoNamespacedCall(t *testing.T) {
	for _, up := range upstreams {
		t.Run(up.name, func(t *testing.T) {
			h := up.harness(t, nil)
			script := "Find Ada.\n#call crm__search " + crmArgs + "\n#then"
			if up.name == "completions" {
				script = "Find Ada.\n#callns crm.search " + crmArgs + "\n#then"
			}
			testOpenAIGoNamespacedCall(t, h, script)
		})
	}
}

func testOpenAIGoNamespacedCall(t *testing.T, h *harness, script string) {
	client := newOpenAIGo(h)
	ctx := clientCtx(t)
	tools := []responses.ToolUnionParam{weatherTool, crmNamespace}
	raws := streamedEvents(t, client.Responses.NewStreaming(ctx, responses.ResponseNewParams{
		Model: mockllm.DefaultModel, Input: textInput(script), Tools: tools, Store: openai.Bool(false),
	}))
	sum := checkEventStream(t, raws)
	var first responses.Response
	if err := json.Unmarshal(sum.Final, &first); err != nil {
		t.Fatal(err)
	}
	call := functionCall(t, &first)
	if call.Name != "search" || call.Namespace != "crm" || !jsonEqual(call.Arguments, crmArgs) {
		t.Fatalf("function call %s.%s(%s), want crm.search(%s)", call.Namespace, call.Name, call.Arguments, crmArgs)
	}
	added := 0
	for _, raw := range raws {
		var ev responses.ResponseStreamEventUnion
		json.Unmarshal(raw, &ev)
		if ev.Type == "response.output_item.added" && ev.Item.Type == "function_call" {
			added++
			if ev.Item.Namespace != "crm" || ev.Item.Name != "search" {
				t.Errorf("output_item.added carries %s.%s", ev.Item.Namespace, ev.Item.Name)
			}
		}
	}
	if added != 1 {
		t.Errorf("%d function_call items added", added)
	}
	if prompt := harmonyPrompt(t, h); prompt != nil {
		dev := slices.IndexFunc(prompt, func(m harmony.Message) bool {
			return m.Author.Role == harmony.RoleDeveloper && strings.Contains(m.Text(), "namespace crm {") && strings.Contains(m.Text(), "type search =")
		})
		if dev < 0 {
			t.Errorf("the harmony prompt declares no namespace crm in the developer message: %+v", prompt)
		}
	} else if tools := lastChatRequest(t, h).Tools; !slices.ContainsFunc(tools, func(tl mockllm.Tool) bool { return tl.Function.Name == "crm__search" }) {
		t.Errorf("the chat upstream was offered %+v, want crm__search among them", tools)
	}

	// Codex's way: no previous_response_id; the whole history resent,
	// the call with its namespace.
	const result = "Ada Lovelace, customer since 1843"
	callParam := call.ToParam()
	second, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Model: mockllm.DefaultModel,
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			responses.ResponseInputItemParamOfMessage(script, responses.EasyInputMessageRoleUser),
			{OfFunctionCall: &callParam},
			functionOutput(call.CallID, result),
		}},
		Tools: tools, Store: openai.Bool(false),
	})
	if err != nil {
		t.Fatalf("second leg: %v", err)
	}
	if got := second.OutputText(); got != "tool said: "+result {
		t.Errorf("answer %q, want the result read back", got)
	}
	if prompt := harmonyPrompt(t, h); prompt != nil {
		requireRecipientRoundTrip(t, prompt, "crm.search", crmArgs, result)
	} else {
		requireToolRoundTrip(t, h, call.CallID, "crm__search", call.Arguments, result)
	}
	requireCaptured(t, h, 1, len(raws))
}

// functionOutput is a function_call_output input item.
func functionOutput(callID, output string) responses.ResponseInputItemUnionParam {
	out := responses.ResponseInputItemParamOfFunctionCallOutput(output)
	out.OfFunctionCallOutput.CallID = openai.String(callID)
	return out
}

// noteTool is a custom tool whose input must match a regex.
var noteTool = responses.ToolUnionParam{OfCustom: &responses.CustomToolParam{
	Name:        "note",
	Description: openai.String("Writes a note."),
	Format: shared.CustomToolInputFormatUnionParam{OfGrammar: &shared.CustomToolInputFormatGrammarParam{
		Syntax: "regex", Definition: "^[a-z ]+$",
	}},
}}

func TestOpenAIGoCustomToolCall(t *testing.T) { forEachUpstream(t, testOpenAIGoCustomToolCall) }

func testOpenAIGoCustomToolCall(t *testing.T, h *harness) {
	client := newOpenAIGo(h)
	ctx := clientCtx(t)
	const input = `buy milk "and" eggs`
	args, _ := json.Marshal(map[string]string{"input": input})
	script := "Remember the shopping.\n#call note " + string(args) + "\n#then"
	tools := []responses.ToolUnionParam{noteTool}
	raws := streamedEvents(t, client.Responses.NewStreaming(ctx, responses.ResponseNewParams{
		Model: mockllm.DefaultModel, Input: textInput(script), Tools: tools,
	}))
	sum := checkEventStream(t, raws)
	var first responses.Response
	if err := json.Unmarshal(sum.Final, &first); err != nil {
		t.Fatal(err)
	}
	var calls []responses.ResponseCustomToolCall
	for _, it := range first.Output {
		if it.Type == "custom_tool_call" {
			calls = append(calls, it.AsCustomToolCall())
		}
	}
	if len(calls) != 1 || calls[0].Name != "note" || calls[0].Input != input || calls[0].CallID == "" {
		t.Fatalf("custom tool calls %+v, want one note with input %q: %s", calls, input, first.RawJSON())
	}
	call := calls[0]
	var deltas, done string
	var doneSeen int
	for _, raw := range raws {
		var ev responses.ResponseStreamEventUnion
		json.Unmarshal(raw, &ev)
		switch ev.Type {
		case "response.custom_tool_call_input.delta":
			deltas += ev.AsResponseCustomToolCallInputDelta().Delta
		case "response.custom_tool_call_input.done":
			done = ev.AsResponseCustomToolCallInputDone().Input
			doneSeen++
		}
	}
	if deltas != input || done != input || doneSeen != 1 {
		t.Errorf("input streamed as %q, done %q (%d times), want %q", deltas, done, doneSeen, input)
	}
	if !isCompletions(t, h) {
		var schema struct {
			Properties map[string]struct {
				Pattern string `json:"pattern"`
			} `json:"properties"`
		}
		tools := lastChatRequest(t, h).Tools
		if len(tools) != 1 || json.Unmarshal(tools[0].Function.Parameters, &schema) != nil || schema.Properties["input"].Pattern != "^[a-z ]+$" {
			t.Errorf("the chat upstream was offered %+v, want note taking an input string with the format's pattern", tools)
		}
	}

	const result = "noted"
	second, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Model:              mockllm.DefaultModel,
		PreviousResponseID: openai.String(first.ID),
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			responses.ResponseInputItemParamOfCustomToolCallOutput(call.CallID, result),
		}},
		Tools: tools,
	})
	if err != nil {
		t.Fatalf("second leg: %v", err)
	}
	if got := second.OutputText(); got != "tool said: "+result {
		t.Errorf("answer %q, want the result read back", got)
	}
	requireToolRoundTrip(t, h, call.CallID, "note", string(args), result)
	requireCaptured(t, h, 1, len(raws))
}

func TestOpenAIGoApplyPatchRoundTrip(t *testing.T) {
	forEachUpstream(t, testOpenAIGoApplyPatchRoundTrip)
}

func testOpenAIGoApplyPatchRoundTrip(t *testing.T, h *harness) {
	client := newOpenAIGo(h)
	ctx := clientCtx(t)
	const args = `{"type":"update_file","path":"hello.py","diff":"@@ def hi():\n-    pass\n+    print(\"hi\")"}`
	script := "Make hi print.\n#call apply_patch " + args + "\n#then"
	tools := []responses.ToolUnionParam{{OfApplyPatch: &responses.ApplyPatchToolParam{}}}
	first, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Model: mockllm.DefaultModel, Input: textInput(script), Tools: tools, Store: openai.Bool(false),
	})
	if err != nil {
		t.Fatal(err)
	}
	var calls []responses.ResponseApplyPatchToolCall
	for _, it := range first.Output {
		if it.Type == "apply_patch_call" {
			calls = append(calls, it.AsApplyPatchCall())
		}
	}
	if len(calls) != 1 {
		t.Fatalf("%d apply_patch calls: %s", len(calls), first.RawJSON())
	}
	call := calls[0]
	if op := call.Operation; op.Type != "update_file" || op.Path != "hello.py" || op.Diff != "@@ def hi():\n-    pass\n+    print(\"hi\")" || call.Status != "completed" || call.ID == "" {
		t.Fatalf("apply_patch_call %+v", call)
	}

	// The client applied it and resends the history with its answer.
	const result = "Updated hello.py"
	out := responses.ResponseInputItemParamOfApplyPatchCallOutput(call.CallID, "completed")
	out.OfApplyPatchCallOutput.Output = openai.String(result)
	second, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Model: mockllm.DefaultModel,
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			responses.ResponseInputItemParamOfMessage(script, responses.EasyInputMessageRoleUser),
			{OfApplyPatchCall: &responses.ResponseInputItemApplyPatchCallParam{
				CallID: call.CallID, Status: "completed", ID: openai.String(call.ID),
				Operation: responses.ResponseInputItemApplyPatchCallOperationUnionParam{OfUpdateFile: &responses.ResponseInputItemApplyPatchCallOperationUpdateFileParam{
					Path: call.Operation.Path, Diff: call.Operation.Diff,
				}},
			}},
			out,
		}},
		Tools: tools, Store: openai.Bool(false),
	})
	if err != nil {
		t.Fatalf("second leg: %v", err)
	}
	if got := second.OutputText(); got != "tool said: "+result {
		t.Errorf("answer %q, want the client's result read back", got)
	}
	requireToolRoundTrip(t, h, call.CallID, "apply_patch", args, result)
	requireCaptured(t, h, 2, 0)
}

// A custom tool inside a namespace comes back as a custom_tool_call with
// the namespace, and its output continues.
func TestOpenAIGoNamespacedCustomTool(t *testing.T) {
	for _, up := range upstreams {
		t.Run(up.name, func(t *testing.T) {
			h := up.harness(t, nil)
			client := newOpenAIGo(h)
			ctx := clientCtx(t)
			script := "Note it.\n#call crm__note {\"input\":\"call back monday\"}\n#then"
			if up.name == "completions" {
				script = "Note it.\n#callns crm.note {\"input\":\"call back monday\"}\n#then"
			}
			tools := []responses.ToolUnionParam{{OfNamespace: &responses.NamespaceToolParam{
				Name: "crm", Description: "The customer database.",
				Tools: []responses.NamespaceToolToolUnionParam{{OfCustom: &responses.CustomToolParam{Name: "note", Description: openai.String("Adds a note.")}}},
			}}}
			first, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: mockllm.DefaultModel, Input: textInput(script), Tools: tools})
			if err != nil {
				t.Fatal(err)
			}
			if len(first.Output) != 1 || first.Output[0].Type != "custom_tool_call" {
				t.Fatalf("output %s, want one custom_tool_call", first.RawJSON())
			}
			call := first.Output[0].AsCustomToolCall()
			if call.Namespace != "crm" || call.Name != "note" || call.Input != "call back monday" {
				t.Fatalf("custom_tool_call %s.%s(%q)", call.Namespace, call.Name, call.Input)
			}
			if prompt := harmonyPrompt(t, h); prompt != nil && !slices.ContainsFunc(prompt, func(m harmony.Message) bool {
				return m.Author.Role == harmony.RoleDeveloper && strings.Contains(m.Text(), "// The customer database.\nnamespace crm {")
			}) {
				t.Errorf("the developer message does not declare crm with its description: %+v", prompt)
			}
			second, err := client.Responses.New(ctx, responses.ResponseNewParams{
				Model: mockllm.DefaultModel, PreviousResponseID: openai.String(first.ID), Tools: tools,
				Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
					responses.ResponseInputItemParamOfCustomToolCallOutput(call.CallID, "saved"),
				}},
			})
			if err != nil {
				t.Fatal(err)
			}
			if got := second.OutputText(); got != "tool said: saved" {
				t.Errorf("answer %q", got)
			}
			requireCaptured(t, h, 2, 0)
		})
	}
}

// In the Open Responses dialect a custom tool call and its input events
// carry the vendor prefix (they are not in the core schema), a namespaced
// function_call is a core item, and the client's prefixed answer
// continues the conversation. The harness validates every event.
func TestOpenResponsesDialectClientTools(t *testing.T) {
	h := newHarness(t, &harnessOptions{Dialect: loomresponses.DialectOpenResponses})
	body, _ := json.Marshal(map[string]any{
		"model": mockllm.DefaultModel, "stream": true,
		"input": "#call note {\"input\":\"x\"}\n#call crm__search {\"q\":\"y\"}\n#then",
		"tools": []any{
			map[string]any{"type": "custom", "name": "note"},
			map[string]any{"type": "namespace", "name": "crm", "description": "CRM", "tools": []any{
				map[string]any{"type": "function", "name": "search", "parameters": map[string]any{"type": "object"}}}},
		},
	})
	status, raw := postStream(t, h.BaseURL+"/responses", string(body), nil)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, raw)
	}
	var types []string
	var final struct {
		ID     string `json:"id"`
		Output []struct {
			Type, Name, Namespace, Input string
			CallID                       string `json:"call_id"`
		} `json:"output"`
	}
	for _, ev := range parseSSE(t, raw) {
		types = append(types, ev.Type)
		if ev.Type == "response.completed" {
			var c struct {
				Response json.RawMessage `json:"response"`
			}
			json.Unmarshal(ev.Data, &c)
			json.Unmarshal(c.Response, &final)
		}
	}
	for _, want := range []string{"loom:response.custom_tool_call_input.delta", "loom:response.custom_tool_call_input.done", "response.function_call_arguments.done"} {
		if !slices.Contains(types, want) {
			t.Errorf("events %v lack %s", types, want)
		}
	}
	if len(final.Output) != 2 || final.Output[0].Type != "loom:custom_tool_call" || final.Output[0].Input != "x" ||
		final.Output[1].Type != "function_call" || final.Output[1].Namespace != "crm" || final.Output[1].Name != "search" {
		t.Fatalf("output %+v", final.Output)
	}
	next, _ := json.Marshal(map[string]any{
		"model": mockllm.DefaultModel, "previous_response_id": final.ID,
		"input": []any{
			map[string]any{"type": "loom:custom_tool_call_output", "call_id": final.Output[0].CallID, "output": "noted"},
			map[string]any{"type": "function_call_output", "call_id": final.Output[1].CallID, "output": "found"},
		},
	})
	status, raw = doRaw(t, http.MethodPost, h.BaseURL+"/responses", string(next))
	if status != http.StatusOK || !strings.Contains(string(raw), "tool said: noted") || !strings.Contains(string(raw), "tool said: found") {
		t.Errorf("follow-up %d: %s", status, raw)
	}
	requireCaptured(t, h, 1, len(types))
}
