package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"testing"

	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/model/internal/upstream"
	"github.com/loomgate/loom/responses"
)

// refEncode is the body as go-openai's types and encoding/json wrote it.
func refEncode(req *model.Request) ([]byte, error) {
	wire, err := refBuildRequest(req)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := refMarshal(&buf, wire, req.Extra); err != nil {
		return nil, &responses.APIError{Kind: responses.EInvalid, Message: "cannot encode the request for the upstream model server", Cause: err}
	}
	return buf.Bytes(), nil
}

// decodeExact decodes JSON keeping numbers as written, so that a number
// formatted differently is a difference.
func decodeExact(t *testing.T, b []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("invalid JSON: %v\n%s", err, b)
	}
	if d.More() {
		t.Fatalf("more than one JSON value:\n%s", b)
	}
	return v
}

// TestBodyMatchesGoOpenAI holds the hand-written body to the one
// go-openai's types and encoding/json write, as decoded JSON (the
// hand-written one does not HTML-escape), for every kind of message,
// tool, tool_choice, sampling value and format, and the same refusals.
func TestBodyMatchesGoOpenAI(t *testing.T) {
	desc, empty := "Looks <things> up & more \u2028 \"q\"", ""
	yes, no := true, false
	zero, topP, pres, tiny, huge := 0.0, 0.95, -1.5, 1e-7, 1e21
	image := responses.Item{Type: responses.ItemMessage, Role: "user", Content: []responses.ContentPart{
		{Type: responses.PartInputText, Text: "what is this?"},
		{Type: responses.PartInputImage, Media: &responses.PartMedia{ImageURL: "data:image/png;base64,AAAA", Detail: "low"}},
		{Type: responses.PartInputImage, Media: &responses.PartMedia{ImageURL: "https://example.com/a.png"}},
		{Type: responses.PartInputText},
		{Type: responses.PartRefusal, Refusal: "no"},
	}}
	assistant := func(text string) responses.Item {
		return responses.Item{Type: responses.ItemMessage, Role: "assistant", Content: []responses.ContentPart{responses.OutputText(text)}}
	}
	summary := responses.Item{Type: responses.ItemReasoning, Reasoning: &responses.ItemReasoningFields{Summary: []responses.ContentPart{
		{Type: responses.PartSummaryText, Text: "s1"}, {Type: responses.PartSummaryText, Text: "s2"}}}}
	parts := responses.Item{Type: responses.ItemFunctionCallOutput, Call: &responses.ItemCall{CallID: "c9", Output: json.RawMessage(`[{"type":"input_text","text":"p1"},{"type":"input_text","text":"p2"}]`)}}
	allItems := []responses.Item{
		{Type: responses.ItemMessage, Role: "developer", Content: []responses.ContentPart{{Type: responses.PartInputText, Text: "dev"}}},
		{Type: responses.ItemMessage, Role: "system", Content: []responses.ContentPart{{Type: responses.PartInputText, Text: "sys"}}},
		userMsg("q <1> & \x01 é \xff"),
		reasoningItem("think"), assistant("a1"),
		callItem("c1", "f", `{"x":1}`), callItem("c2", "g", `{}`), outputItem("c1", "r1"), outputItem("c2", ""),
		reasoningItem("r-a"), reasoningItem(""), reasoningItem("r-b"), callItem("c3", "h", ""),
		outputItem("c3", "r3"), parts,
		summary, assistant(""), callItem("", "", "{}"),
		assistant(""),
		reasoningItem("lost"), userMsg("again"),
		image,
		{Type: responses.ItemMessage, Role: "user"},
		assistant("x"), reasoningItem("between"), callItem("c4", "k", "{}"),
		{Type: responses.ItemMessage, Role: "assistant", Content: []responses.ContentPart{{Type: responses.PartRefusal, Refusal: "I can't"}}},
		reasoningItem("trailing"),
	}
	tools := []responses.Tool{
		weatherTool,
		{Type: responses.ToolFunction, Name: "now"},
		{Type: responses.ToolFunction, Name: "null_params", Parameters: json.RawMessage(" null "), Description: &empty, Strict: &no},
		{Type: responses.ToolFunction, Name: "spaced", Description: &desc, Parameters: json.RawMessage("{\n  \"type\": \"object\",\n  \"properties\": {\"a\": {\"type\": \"string\"}}\n}")},
	}
	tests := []struct {
		name string
		req  model.Request
	}{
		{"one user message, streamed", model.Request{Items: []responses.Item{userMsg("hi")}}},
		{"whole answer", model.Request{Items: []responses.Item{userMsg("hi")}, Whole: true}},
		{"every message kind", model.Request{Instructions: "be brief", Items: allItems}},
		{"tools, auto, parallel", model.Request{Items: []responses.Item{userMsg("hi")}, Tools: tools, ToolChoice: "auto", ParallelToolCalls: true}},
		{"tools, none, no parallel", model.Request{Items: []responses.Item{userMsg("hi")}, Tools: tools, ToolChoice: "none"}},
		{"tools, required", model.Request{Items: []responses.Item{userMsg("hi")}, Tools: tools[:1], ToolChoice: "required", ParallelToolCalls: true}},
		{"tools, one function", model.Request{Items: []responses.Item{userMsg("hi")}, Tools: tools, ToolChoice: "required", ToolChoiceFunction: "get_<weather>"}},
		{"no tools, a tool_choice", model.Request{Items: []responses.Item{userMsg("hi")}, Tools: []responses.Tool{}, ToolChoice: "required", ToolChoiceFunction: "f"}},
		{"namespaces are the harmony backend's", model.Request{Items: []responses.Item{userMsg("hi")}, Tools: tools[:2], ParallelToolCalls: true,
			Namespaces: map[string]model.ToolRef{"get_weather": {Namespace: "srv", Name: "weather"}}, Builtins: []string{"now"}}},
		{"sampling and limits", model.Request{Items: []responses.Item{userMsg("hi")}, MaxOutputTokens: 512, ReasoningEffort: "high", User: "u-1",
			Sampling: model.Sampling{Temperature: &zero, TopP: &topP, PresencePenalty: &pres, FrequencyPenalty: &tiny}}},
		{"a huge penalty", model.Request{Items: []responses.Item{userMsg("hi")}, Sampling: model.Sampling{FrequencyPenalty: &huge}}},
		{"json_schema format", model.Request{Items: []responses.Item{userMsg("hi")}, TextFormat: &responses.TextFormat{Type: responses.FormatJSONSchema,
			Name: "out", Description: &desc, Strict: &yes, Schema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`)}}},
		{"json_schema format, defaults", model.Request{Items: []responses.Item{userMsg("hi")}, TextFormat: &responses.TextFormat{Type: responses.FormatJSONSchema}}},
		{"json_object format", model.Request{Items: []responses.Item{userMsg("hi")}, TextFormat: &responses.TextFormat{Type: responses.FormatJSONObject}}},
		{"text format", model.Request{Items: []responses.Item{userMsg("hi")}, TextFormat: &responses.TextFormat{Type: responses.FormatText}}},
		{"extra fields", model.Request{Items: []responses.Item{userMsg("hi")}, Tools: tools[:1], Sampling: model.Sampling{Temperature: &topP},
			Extra: map[string]json.RawMessage{
				"top_k": json.RawMessage(`20`), "temperature": json.RawMessage(`0.1`), "parallel_tool_calls": json.RawMessage(`true`),
				"chat_template_kwargs": json.RawMessage(`{"enable_thinking": false}`), "empty": nil,
				"stream": json.RawMessage(`false`), "messages": json.RawMessage(`[]`), "tool_choice": json.RawMessage(`"none"`),
			}}},
		{"custom tool", model.Request{Items: []responses.Item{userMsg("hi")}, Tools: []responses.Tool{weatherTool, {Type: responses.ToolCustom, Name: "apply_patch"}}}},
		{"namespace tool", model.Request{Items: []responses.Item{userMsg("hi")}, Tools: []responses.Tool{{Type: responses.ToolNamespace, Name: "ns"}}}},
		{"item_reference", model.Request{Items: []responses.Item{userMsg("hi"), {Type: responses.ItemReference, ID: "msg_1"}}}},
		{"input_file", model.Request{Items: []responses.Item{{Type: responses.ItemMessage, Role: "user", Content: []responses.ContentPart{{Type: responses.PartInputFile, Media: &responses.PartMedia{FileData: "x"}}}}}}},
		{"image by file id", model.Request{Items: []responses.Item{{Type: responses.ItemMessage, Role: "user", Content: []responses.ContentPart{{Type: responses.PartInputImage, Media: &responses.PartMedia{FileID: "file_1"}}}}}}},
		{"unknown role", model.Request{Items: []responses.Item{{Type: responses.ItemMessage, Role: "critic"}}}},
		{"extra not JSON", model.Request{Items: []responses.Item{userMsg("hi")}, Extra: map[string]json.RawMessage{"top_k": json.RawMessage(`{`)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.req.Model = "openai/gpt-oss-20b"
			want, wantErr := refEncode(&tt.req)
			got, err := encodeRequest(&tt.req)
			if wantErr != nil {
				var gerr, werr *responses.APIError
				if !errors.As(err, &gerr) || !errors.As(wantErr, &werr) || gerr.Kind != werr.Kind || gerr.Message != werr.Message {
					t.Fatalf("err = %v, want %v", err, wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("encodeRequest: %v", err)
			}
			if g, w := decodeExact(t, got), decodeExact(t, want); !reflect.DeepEqual(g, w) {
				t.Errorf("body\n got %s\nwant %s", got, want)
			}
			// The body is written into the buffer bodySize sized,
			// without growing it.
			if size := bodySize(&tt.req); len(got) > size {
				t.Errorf("body is %d bytes, bodySize guessed %d", len(got), size)
			}
		})
	}
}

// TestBodySizeOfALongInput: for a long input of short messages, the
// buffer bodySize asks for holds the body and not much more (it is, after
// the decoded items, the largest thing such a request holds).
func TestBodySizeOfALongInput(t *testing.T) {
	req := &model.Request{Model: "m"}
	for i := range 1000 {
		req.Items = append(req.Items, userMsg(fmt.Sprintf("q%d", i)),
			responses.Item{Type: responses.ItemMessage, Role: "assistant", Content: []responses.ContentPart{responses.OutputText(fmt.Sprintf("a%d", i))}})
	}
	body, err := encodeRequest(req)
	if err != nil {
		t.Fatal(err)
	}
	if size := bodySize(req); size < len(body) || size > len(body)*5/4 {
		t.Errorf("bodySize = %d for a body of %d bytes, want between 1x and 1.25x", size, len(body))
	}
}

// A sampling value that is not a number is refused, as encoding/json
// refused it, before anything is sent.
func TestBodyRefusesNaN(t *testing.T) {
	for _, f := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		req := userReq("hi")
		req.Sampling.TopP = &f
		_, err := encodeRequest(req)
		var merr *responses.APIError
		if !errors.As(err, &merr) || merr.Kind != responses.EInvalid {
			t.Errorf("top_p %v: err = %v, want an EInvalid *responses.APIError", f, err)
		}
		if _, err := refEncode(req); err == nil {
			t.Errorf("top_p %v: encoding/json took it", f)
		}
	}
}

// encodeRequest is the body Client.Send sends for req, finished.
func encodeRequest(req *model.Request) ([]byte, error) {
	w := upstream.NewBody(bodySize(req), req.Extra, protectedKeys)
	writeRequest(w, req)
	return w.Finish()
}
