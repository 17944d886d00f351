package chat

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/loomgate/loom/responses"
)

func assistantMsg(text string) responses.Item {
	return responses.Item{Type: responses.ItemMessage, Role: "assistant", Content: []responses.ContentPart{responses.OutputText(text)}}
}

// TestMessages checks the messages array the upstream receives, as exact
// JSON, for each conversation shape.
func TestMessages(t *testing.T) {
	tests := []struct {
		name         string
		instructions string
		items        []responses.Item
		want         string
	}{
		{
			name:         "instructions first, then user",
			instructions: "Be brief.",
			items:        []responses.Item{userMsg("hi")},
			want:         `[{"content":"Be brief.","role":"system"},{"content":"hi","role":"user"}]`,
		},
		{
			name: "developer becomes system, system stays",
			items: []responses.Item{
				{Type: responses.ItemMessage, Role: "developer", Content: []responses.ContentPart{{Type: responses.PartInputText, Text: "rules"}}},
				{Type: responses.ItemMessage, Role: "system", Content: []responses.ContentPart{{Type: responses.PartInputText, Text: "more"}}},
				userMsg("q"),
			},
			want: `[{"content":"rules","role":"system"},{"content":"more","role":"system"},{"content":"q","role":"user"}]`,
		},
		{
			name:  "assistant text and several text parts joined",
			items: []responses.Item{{Type: responses.ItemMessage, Role: "user", Content: []responses.ContentPart{{Type: responses.PartInputText, Text: "a"}, {Type: responses.PartInputText, Text: "b"}}}, assistantMsg("answer")},
			want:  `[{"content":"ab","role":"user"},{"content":"answer","role":"assistant"}]`,
		},
		{
			name:  "reasoning goes on the next assistant message",
			items: []responses.Item{userMsg("q"), reasoningItem("think"), assistantMsg("answer")},
			want:  `[{"content":"q","role":"user"},{"content":"answer","reasoning_content":"think","role":"assistant"}]`,
		},
		{
			name: "reasoning, text and parallel calls share one assistant message",
			items: []responses.Item{
				userMsg("weather?"),
				reasoningItem("need tools"),
				assistantMsg("Checking."),
				callItem("call_1", "get_weather", `{"city":"Paris"}`),
				callItem("call_2", "get_weather", `{"city":"Rome"}`),
				outputItem("call_1", "18C"),
				outputItem("call_2", "25C"),
				assistantMsg("Paris 18C, Rome 25C."),
			},
			want: `[{"content":"weather?","role":"user"},` +
				`{"content":"Checking.","reasoning_content":"need tools","role":"assistant","tool_calls":[` +
				`{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},` +
				`{"id":"call_2","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Rome\"}"}}]},` +
				`{"content":"18C","role":"tool","tool_call_id":"call_1"},` +
				`{"content":"25C","role":"tool","tool_call_id":"call_2"},` +
				`{"content":"Paris 18C, Rome 25C.","role":"assistant"}]`,
		},
		{
			name:  "reasoning then calls without text",
			items: []responses.Item{userMsg("q"), reasoningItem("r"), callItem("c1", "f", `{}`), outputItem("c1", "")},
			want: `[{"content":"q","role":"user"},` +
				`{"reasoning_content":"r","role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},` +
				`{"content":"","role":"tool","tool_call_id":"c1"}]`,
		},
		{
			name: "reasoning between text and call starts a new message",
			items: []responses.Item{
				userMsg("q"), assistantMsg("first"), reasoningItem("then"), callItem("c1", "f", `{}`),
			},
			want: `[{"content":"q","role":"user"},{"content":"first","role":"assistant"},` +
				`{"reasoning_content":"then","role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]}]`,
		},
		{
			name: "a tool output ends the group: calls in two turns are two messages",
			items: []responses.Item{
				userMsg("q"), callItem("c1", "f", `{}`), outputItem("c1", "x"), callItem("c2", "g", `{}`), outputItem("c2", "y"),
			},
			want: `[{"content":"q","role":"user"},` +
				`{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},` +
				`{"content":"x","role":"tool","tool_call_id":"c1"},` +
				`{"role":"assistant","tool_calls":[{"id":"c2","type":"function","function":{"name":"g","arguments":"{}"}}]},` +
				`{"content":"y","role":"tool","tool_call_id":"c2"}]`,
		},
		{
			name:  "reasoning with no assistant message after it is dropped",
			items: []responses.Item{userMsg("q"), reasoningItem("lost"), userMsg("again")},
			want:  `[{"content":"q","role":"user"},{"content":"again","role":"user"}]`,
		},
		{
			name: "reasoning summary used when content is absent",
			items: []responses.Item{userMsg("q"), {Type: responses.ItemReasoning, Reasoning: &responses.ItemReasoningFields{Summary: []responses.ContentPart{
				{Type: responses.PartSummaryText, Text: "s1"}, {Type: responses.PartSummaryText, Text: "s2"}}}}, assistantMsg("a")},
			want: `[{"content":"q","role":"user"},{"content":"a","reasoning_content":"s1\n\ns2","role":"assistant"}]`,
		},
		{
			name: "function output given as content parts",
			items: []responses.Item{userMsg("q"), callItem("c1", "f", `{}`),
				{Type: responses.ItemFunctionCallOutput, Call: &responses.ItemCall{CallID: "c1", Output: json.RawMessage(`[{"type":"input_text","text":"part1"},{"type":"input_text","text":"part2"}]`)}}},
			want: `[{"content":"q","role":"user"},` +
				`{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},` +
				`{"content":"part1part2","role":"tool","tool_call_id":"c1"}]`,
		},
		{
			name: "image parts use the array form",
			items: []responses.Item{{Type: responses.ItemMessage, Role: "user", Content: []responses.ContentPart{
				{Type: responses.PartInputText, Text: "what is this?"},
				{Type: responses.PartInputImage, Media: &responses.PartMedia{ImageURL: "data:image/png;base64,AAAA", Detail: "low"}},
			}}},
			want: `[{"role":"user","content":[{"type":"text","text":"what is this?"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA","detail":"low"}}]}]`,
		},
		{
			name:  "empty user content is still sent",
			items: []responses.Item{{Type: responses.ItemMessage, Role: "user"}},
			want:  `[{"content":"","role":"user"}]`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := appendMessages(nil, tt.instructions, tt.items)
			if err != nil {
				t.Fatalf("appendMessages: %v", err)
			}
			if !jsonEqual(t, got, []byte(tt.want)) {
				t.Errorf("messages\n got %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestMessagesUnsupported(t *testing.T) {
	tests := []struct {
		name string
		item responses.Item
	}{
		{"item_reference", responses.Item{Type: responses.ItemReference, ID: "msg_1"}},
		{"input_file", responses.Item{Type: responses.ItemMessage, Role: "user", Content: []responses.ContentPart{{Type: responses.PartInputFile, Media: &responses.PartMedia{FileData: "x"}}}}},
		{"image by file id", responses.Item{Type: responses.ItemMessage, Role: "user", Content: []responses.ContentPart{{Type: responses.PartInputImage, Media: &responses.PartMedia{FileID: "file_1"}}}}},
		{"unknown role", responses.Item{Type: responses.ItemMessage, Role: "critic"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := appendMessages(nil, "", []responses.Item{tt.item})
			var merr *responses.APIError
			if !errors.As(err, &merr) || merr.Kind != responses.EInvalid {
				t.Fatalf("err = %v, want a 400 *responses.APIError", err)
			}
		})
	}
}

// jsonEqual compares two JSON documents by value (key order aside).
func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		t.Fatalf("invalid JSON %s: %v", a, err)
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		t.Fatalf("invalid JSON %s: %v", b, err)
	}
	return reflect.DeepEqual(va, vb)
}
