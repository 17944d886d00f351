package mockllm

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// chunkJSON spells out one expected stream chunk byte for byte.
func chunkJSON(seq int, delta, finish string) string {
	f := "null"
	if finish != "" {
		f = `"` + finish + `"`
	}
	return fmt.Sprintf(`{"id":"chatcmpl-mock-%d","object":"chat.completion.chunk","created":1700000000,"model":"test-model","choices":[{"index":0,"delta":%s,"logprobs":null,"finish_reason":%s}]}`, seq, delta, f)
}

func TestStreamExactChunks(t *testing.T) {
	tests := []struct {
		name   string
		field  string
		script string
		usage  bool
		want   []string
	}{{
		name:   "reasoning_content then text with usage",
		field:  FieldReasoningContent,
		script: "#reason think hard\n#say Hi there",
		usage:  true,
		want: []string{
			chunkJSON(1, `{"role":"assistant","content":""}`, ""),
			chunkJSON(1, `{"reasoning_content":"thin"}`, ""),
			chunkJSON(1, `{"reasoning_content":"k ha"}`, ""),
			chunkJSON(1, `{"reasoning_content":"rd"}`, ""),
			chunkJSON(1, `{"content":"Hi t"}`, ""),
			chunkJSON(1, `{"content":"here"}`, ""),
			chunkJSON(1, `{}`, "stop"),
			`{"id":"chatcmpl-mock-1","object":"chat.completion.chunk","created":1700000000,"model":"test-model","choices":[],"usage":{"prompt_tokens":6,"completion_tokens":4,"total_tokens":10,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":2}}}`,
		},
	}, {
		name:   "reasoning field as vLLM 0.17 sends it, no usage",
		field:  FieldReasoning,
		script: "#reason why\n#say ok",
		want: []string{
			chunkJSON(1, `{"role":"assistant","content":""}`, ""),
			chunkJSON(1, `{"reasoning":"why"}`, ""),
			chunkJSON(1, `{"content":"ok"}`, ""),
			chunkJSON(1, `{}`, "stop"),
		},
	}, {
		name:   "parallel tool calls",
		field:  FieldReasoningContent,
		script: "#call get_weather {\"city\":\"Paris\"}\n#callid abc get_time",
		want: []string{
			chunkJSON(1, `{"role":"assistant","content":""}`, ""),
			chunkJSON(1, `{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]}`, ""),
			chunkJSON(1, `{"tool_calls":[{"index":0,"function":{"arguments":"{\"ci"}}]}`, ""),
			chunkJSON(1, `{"tool_calls":[{"index":0,"function":{"arguments":"ty\":"}}]}`, ""),
			chunkJSON(1, `{"tool_calls":[{"index":0,"function":{"arguments":"\"Par"}}]}`, ""),
			chunkJSON(1, `{"tool_calls":[{"index":0,"function":{"arguments":"is\"}"}}]}`, ""),
			chunkJSON(1, `{"tool_calls":[{"index":1,"id":"abc","type":"function","function":{"name":"get_time","arguments":""}}]}`, ""),
			chunkJSON(1, `{"tool_calls":[{"index":1,"function":{"arguments":"{}"}}]}`, ""),
			chunkJSON(1, `{}`, "tool_calls"),
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, hs := start(t, &Options{ReasoningField: tt.field})
			body := chatBody(true, tt.script)
			if tt.usage {
				body["stream_options"] = map[string]any{"include_usage": true}
			}
			got := readStream(t, post(testContext(t), t, hs, body))
			if len(got) != len(tt.want) {
				t.Fatalf("got %d chunks, want %d:\n%s", len(got), len(tt.want), strings.Join(got, "\n"))
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("chunk %d:\n got %s\nwant %s", i, got[i], tt.want[i])
				}
			}
		})
	}
}

func TestJSONCompletion(t *testing.T) {
	tests := []struct {
		name   string
		field  string
		script string
		want   string
	}{{
		name:   "text with reasoning_content",
		field:  FieldReasoningContent,
		script: "#reason a b\n#say Hello world",
		want:   `{"id":"chatcmpl-mock-1","object":"chat.completion","created":1700000000,"model":"test-model","choices":[{"index":0,"message":{"role":"assistant","content":"Hello world","reasoning_content":"a b"},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":6,"completion_tokens":4,"total_tokens":10,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":2}}}`,
	}, {
		name:   "text with reasoning",
		field:  FieldReasoning,
		script: "#reason a\n#say x",
		want:   `{"id":"chatcmpl-mock-1","object":"chat.completion","created":1700000000,"model":"test-model","choices":[{"index":0,"message":{"role":"assistant","content":"x","reasoning":"a"},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":4,"completion_tokens":2,"total_tokens":6,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":1}}}`,
	}, {
		name:   "only tool calls: content null",
		field:  FieldReasoningContent,
		script: "#call f {\"a\": 1}\n#call g",
		want:   `{"id":"chatcmpl-mock-1","object":"chat.completion","created":1700000000,"model":"test-model","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"a\": 1}"}},{"id":"call_2","type":"function","function":{"name":"g","arguments":"{}"}}]},"logprobs":null,"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":6,"completion_tokens":5,"total_tokens":11,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}}`,
	}, {
		name:   "no directive: default answer and cached tokens",
		field:  FieldReasoningContent,
		script: "hello there\n#cached 7",
		want:   `{"id":"chatcmpl-mock-1","object":"chat.completion","created":1700000000,"model":"test-model","choices":[{"index":0,"message":{"role":"assistant","content":"Hello from the scripted model."},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":7,"completion_tokens":5,"total_tokens":12,"prompt_tokens_details":{"cached_tokens":7},"completion_tokens_details":{"reasoning_tokens":0}}}`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, hs := start(t, &Options{ReasoningField: tt.field})
			resp := post(testContext(t), t, hs, chatBody(false, tt.script))
			got, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
				t.Fatalf("status %d, type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			if string(got) != tt.want {
				t.Errorf("\n got %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestUsageWithCachedTokens(t *testing.T) {
	_, hs := start(t, nil)
	body := chatBody(true, "#reason one two three\n#tokens 10\n#cached 50")
	body["stream_options"] = map[string]any{"include_usage": true}
	chunks := decodeAll(t, readStream(t, post(testContext(t), t, hs, body)))
	last := chunks[len(chunks)-1]
	if len(last.Choices) != 0 || last.Usage == nil {
		t.Fatalf("last chunk is not usage-only: %+v", last)
	}
	u := *last.Usage
	// The prompt has 7 words but 50 are cached, so prompt grows to 50.
	want := wireUsage{PromptTokens: 50, CompletionTokens: 13, TotalTokens: 63}
	want.PromptTokensDetails.CachedTokens = 50
	want.CompletionTokensDetails.ReasoningTokens = 3
	if u != want {
		t.Errorf("usage = %+v, want %+v", u, want)
	}
	for _, c := range chunks[:len(chunks)-1] {
		if c.Usage != nil {
			t.Errorf("usage on a content chunk: %+v", c)
		}
	}
}

func TestMaxTokensCutsToLength(t *testing.T) {
	tests := []struct {
		name      string
		script    string
		field     string // max_tokens or max_completion_tokens
		max       int
		content   string
		reasoning string
		calls     int
		finish    string
	}{
		{"content cut", "#tokens 10", "max_tokens", 3, "w1 w2 w3", "", 0, "length"},
		{"max_completion_tokens wins", "#tokens 10", "max_completion_tokens", 2, "w1 w2", "", 0, "length"},
		{"exact fit is not cut", "#tokens 3", "max_tokens", 3, "w1 w2 w3", "", 0, "stop"},
		{"reasoning eats the budget", "#reason a b c\n#say d e", "max_tokens", 2, "", "a b", 0, "length"},
		{"call dropped", "#say a b\n#call f {}", "max_tokens", 2, "a b", "", 0, "length"},
		{"call fits", "#say a\n#call f {}", "max_tokens", 3, "a", "", 1, "tool_calls"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, hs := start(t, nil)
			body := chatBody(true, tt.script)
			body[tt.field] = tt.max
			if tt.field == "max_completion_tokens" {
				body["max_tokens"] = 100
			}
			chunks := decodeAll(t, readStream(t, post(testContext(t), t, hs, body)))
			content, reasoning, finish := streamText(chunks)
			calls := 0
			for _, c := range chunks {
				for _, tc := range c.Choices[0].Delta.ToolCalls {
					if tc.ID != "" {
						calls++
					}
				}
			}
			if content != tt.content || reasoning != tt.reasoning || finish != tt.finish || calls != tt.calls {
				t.Errorf("got content %q reasoning %q finish %q calls %d; want %q %q %q %d",
					content, reasoning, finish, calls, tt.content, tt.reasoning, tt.finish, tt.calls)
			}
		})
	}
}

// TestTurns walks an agent loop: the same user message, then the model's
// call and the tool's result, then a second call.
func TestTurns(t *testing.T) {
	_, hs := start(t, nil)
	script := "#call lookup {\"q\":\"x\"}\n#then\n#call lookup {\"q\":\"y\"}"
	user := map[string]any{"role": "user", "content": script}
	call := func(id string) map[string]any {
		return map[string]any{"role": "assistant", "content": nil, "tool_calls": []map[string]any{{
			"id": id, "type": "function", "function": map[string]any{"name": "lookup", "arguments": "{}"}}}}
	}
	result := func(id, out string) map[string]any {
		return map[string]any{"role": "tool", "tool_call_id": id, "content": out}
	}
	tests := []struct {
		name     string
		messages []map[string]any
		wantCall string // expected call id, or "" for text
		wantText string
	}{
		{"turn 0 calls", []map[string]any{user}, "call_1", ""},
		{"turn 1 calls again with a fresh id", []map[string]any{user, call("call_1"), result("call_1", "X")}, "call_2", ""},
		{"script exhausted: tool output echoed", []map[string]any{
			user, call("call_1"), result("call_1", "X"),
			{"role": "assistant", "content": "looking again"}, call("call_2"), result("call_2", "Y"),
		}, "", "tool said: Y"},
		{"new user message restarts the script", []map[string]any{
			{"role": "system", "content": "be nice"}, user, call("call_1"), result("call_1", "X"),
			{"role": "assistant", "content": "done"}, {"role": "user", "content": "#say again"},
		}, "", "again"},
		{"parallel results all echoed", []map[string]any{
			{"role": "user", "content": "#call a\n#call b"},
			{"role": "assistant", "tool_calls": []map[string]any{
				{"id": "call_1", "type": "function", "function": map[string]any{"name": "a", "arguments": "{}"}},
				{"id": "call_2", "type": "function", "function": map[string]any{"name": "b", "arguments": "{}"}},
			}},
			result("call_1", "one"), result("call_2", "two"),
		}, "", "tool said: one\ntool said: two"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := post(testContext(t), t, hs, map[string]any{"model": "test-model", "messages": tt.messages})
			var got chatCompletion
			if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
				t.Fatal(err)
			}
			msg := got.Choices[0].Message
			if tt.wantCall != "" {
				if len(msg.ToolCalls) != 1 || msg.ToolCalls[0].ID != tt.wantCall {
					t.Fatalf("tool calls = %+v, want id %s", msg.ToolCalls, tt.wantCall)
				}
				return
			}
			if msg.Text() != tt.wantText || len(msg.ToolCalls) != 0 {
				t.Fatalf("message = %+v, want text %q", msg, tt.wantText)
			}
		})
	}
}

func TestContentParts(t *testing.T) {
	_, hs := start(t, nil)
	resp := post(testContext(t), t, hs, map[string]any{"model": "m", "messages": []map[string]any{{
		"role": "user",
		"content": []map[string]any{
			{"type": "text", "text": "preamble"},
			{"type": "image_url", "image_url": map[string]any{"url": "data:,"}},
			{"type": "text", "text": "#say from parts"},
		},
	}}})
	var got chatCompletion
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if c := got.Choices[0].Message.Text(); c != "from parts" {
		t.Fatalf("content = %q", c)
	}
	if got.Model != "m" {
		t.Errorf("model = %q, want it echoed", got.Model)
	}
}

func TestModels(t *testing.T) {
	_, hs := start(t, &Options{Models: []string{"a", "b"}})
	resp, err := hs.Client().Get(hs.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	want := `{"object":"list","data":[{"id":"a","object":"model","created":1700000000,"owned_by":"mockllm"},{"id":"b","object":"model","created":1700000000,"owned_by":"mockllm"}]}`
	if string(got) != want {
		t.Errorf("\n got %s\nwant %s", got, want)
	}
}

func TestBadRequests(t *testing.T) {
	s, hs := start(t, nil)
	tests := []struct {
		name   string
		body   string
		status int
		substr string
	}{
		{"not json", `{"messages":`, 400, "invalid JSON"},
		{"no messages", `{"model":"m","messages":[]}`, 400, "messages must not be empty"},
		{"unknown directive", `{"model":"m","messages":[{"role":"user","content":"ok\n#sya hi"}]}`, 400, "line 2: #sya: unknown directive"},
		{"bad argument", `{"model":"m","messages":[{"role":"user","content":"#tokens many"}]}`, 400, "non-negative integer"},
		{"say and tokens", `{"model":"m","messages":[{"role":"user","content":"#say a\n#tokens 2"}]}`, 400, "use one"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := hs.Client().Post(hs.URL+"/v1/chat/completions", "application/json", strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var e errorBody
			if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.status || e.Error.Type != "invalid_request_error" || !strings.Contains(e.Error.Message, tt.substr) {
				t.Errorf("status %d error %+v; want %d containing %q", resp.StatusCode, e.Error, tt.status, tt.substr)
			}
		})
	}
	if st := s.Stats(); st.Failed != len(tests) || st.Started != len(tests) {
		t.Errorf("stats = %+v", st)
	}
	resp, err := hs.Client().Get(hs.URL + "/v1/nowhere")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown path: status %d", resp.StatusCode)
	}
}
