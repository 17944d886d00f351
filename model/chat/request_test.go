package chat

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/responses"
)

var weatherTool = responses.Tool{
	Type:        responses.ToolFunction,
	Name:        "get_weather",
	Description: ptr("Current weather for a city."),
	Parameters:  json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`),
	Strict:      ptr(true),
}

// TestRequestBody checks the top-level keys of the body the upstream gets.
// want lists keys that must have exactly these values; absent lists keys
// that must not be there at all.
func TestRequestBody(t *testing.T) {
	tests := []struct {
		name   string
		mod    func(r *model.Request)
		want   map[string]string // key -> JSON value
		absent []string
	}{
		{
			name: "defaults: streaming with usage, nothing optional",
			mod:  func(*model.Request) {},
			want: map[string]string{
				"model":          `"openai/gpt-oss-20b"`,
				"stream":         `true`,
				"stream_options": `{"include_usage":true}`,
				"messages":       `[{"role":"user","content":"hi"}]`,
			},
			absent: []string{"tools", "tool_choice", "parallel_tool_calls", "max_tokens", "max_completion_tokens",
				"temperature", "top_p", "presence_penalty", "frequency_penalty", "reasoning_effort", "response_format", "user"},
		},
		{
			name: "no tools: no tools key and no tool_choice, whatever ToolChoice says",
			mod: func(r *model.Request) {
				r.Tools = []responses.Tool{}
				r.ToolChoice = responses.ToolChoiceRequired
				r.ToolChoiceFunction = "get_weather"
				r.ParallelToolCalls = false
			},
			absent: []string{"tools", "tool_choice", "parallel_tool_calls"},
		},
		{
			name: "function tool with schema, description, strict",
			mod: func(r *model.Request) {
				r.Tools = []responses.Tool{weatherTool}
				r.ParallelToolCalls = true
			},
			want: map[string]string{
				"tools": `[{"type":"function","function":{"name":"get_weather","description":"Current weather for a city.","strict":true,` +
					`"parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]`,
			},
			absent: []string{"tool_choice", "parallel_tool_calls"},
		},
		{
			name: "tool without parameters gets an empty object schema",
			mod: func(r *model.Request) {
				r.Tools = []responses.Tool{{Type: responses.ToolFunction, Name: "now"}}
				r.ParallelToolCalls = true
			},
			want: map[string]string{
				"tools": `[{"type":"function","function":{"name":"now","parameters":{"type":"object","properties":{}}}}]`,
			},
		},
		{
			name: "tool_choice none",
			mod: func(r *model.Request) {
				r.Tools = []responses.Tool{weatherTool}
				r.ToolChoice = "none"
				r.ParallelToolCalls = true
			},
			want: map[string]string{"tool_choice": `"none"`},
		},
		{
			name: "tool_choice auto",
			mod: func(r *model.Request) {
				r.Tools = []responses.Tool{weatherTool}
				r.ToolChoice = "auto"
				r.ParallelToolCalls = true
			},
			want: map[string]string{"tool_choice": `"auto"`},
		},
		{
			name: "tool_choice required",
			mod: func(r *model.Request) {
				r.Tools = []responses.Tool{weatherTool}
				r.ToolChoice = "required"
				r.ParallelToolCalls = true
			},
			want: map[string]string{"tool_choice": `"required"`},
		},
		{
			name: "tool_choice named function",
			mod: func(r *model.Request) {
				r.Tools = []responses.Tool{weatherTool}
				r.ToolChoice = "required"
				r.ToolChoiceFunction = "get_weather"
				r.ParallelToolCalls = true
			},
			want: map[string]string{"tool_choice": `{"type":"function","function":{"name":"get_weather"}}`},
		},
		{
			name: "parallel_tool_calls false with tools",
			mod:  func(r *model.Request) { r.Tools = []responses.Tool{weatherTool}; r.ParallelToolCalls = false },
			want: map[string]string{"parallel_tool_calls": `false`},
		},
		{
			name: "sampling: zero temperature is sent, values keep float64 precision",
			mod: func(r *model.Request) {
				r.Temperature = ptr(0.0)
				r.TopP = ptr(0.95)
				r.PresencePenalty = ptr(0.1)
				r.FrequencyPenalty = ptr(-0.3)
				r.MaxOutputTokens = 512
				r.ReasoningEffort = "high"
				r.User = "user-42"
			},
			want: map[string]string{
				"temperature":       `0`,
				"top_p":             `0.95`,
				"presence_penalty":  `0.1`,
				"frequency_penalty": `-0.3`,
				"max_tokens":        `512`,
				"reasoning_effort":  `"high"`,
				"user":              `"user-42"`,
			},
			absent: []string{"max_completion_tokens"},
		},
		{
			name: "response_format json_schema",
			mod: func(r *model.Request) {
				r.TextFormat = &responses.TextFormat{Type: responses.FormatJSONSchema, Name: "answer", Strict: ptr(true),
					Schema: json.RawMessage(`{"type":"object","properties":{"x":{"type":"integer"}},"required":["x"],"additionalProperties":false}`)}
			},
			want: map[string]string{
				"response_format": `{"type":"json_schema","json_schema":{"name":"answer","strict":true,` +
					`"schema":{"type":"object","properties":{"x":{"type":"integer"}},"required":["x"],"additionalProperties":false}}}`,
			},
		},
		{
			name: "response_format json_object",
			mod:  func(r *model.Request) { r.TextFormat = &responses.TextFormat{Type: responses.FormatJSONObject} },
			want: map[string]string{"response_format": `{"type":"json_object"}`},
		},
		{
			name:   "text format text sends no response_format",
			mod:    func(r *model.Request) { r.TextFormat = &responses.TextFormat{Type: responses.FormatText} },
			absent: []string{"response_format"},
		},
		{
			name: "extra fields merged; protected keys kept",
			mod: func(r *model.Request) {
				r.Temperature = ptr(0.7)
				r.Extra = map[string]json.RawMessage{
					"top_k":                json.RawMessage(`20`),
					"chat_template_kwargs": json.RawMessage(`{"enable_thinking":false}`),
					"temperature":          json.RawMessage(`0.2`),
					"stream":               json.RawMessage(`false`),
					"model":                json.RawMessage(`"other"`),
					"tools":                json.RawMessage(`[{"type":"function","function":{"name":"x"}}]`),
				}
			},
			want: map[string]string{
				"top_k":                `20`,
				"chat_template_kwargs": `{"enable_thinking":false}`,
				"temperature":          `0.2`,
				"stream":               `true`,
				"model":                `"openai/gpt-oss-20b"`,
				"stream_options":       `{"include_usage":true}`,
			},
			absent: []string{"tools"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := userReq("hi")
			req.ParallelToolCalls = true
			tt.mod(req)
			body := sentBody(t, req)
			for k, v := range tt.want {
				var want any
				if err := json.Unmarshal([]byte(v), &want); err != nil {
					t.Fatalf("bad want for %s: %v", k, err)
				}
				if got, ok := body[k]; !ok || !reflect.DeepEqual(got, want) {
					gotJSON, _ := json.Marshal(got)
					t.Errorf("%s = %s, want %s", k, gotJSON, v)
				}
			}
			for _, k := range tt.absent {
				if v, ok := body[k]; ok {
					t.Errorf("%s present (%v), want absent", k, v)
				}
			}
		})
	}
}
