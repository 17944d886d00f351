package chat

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/responses"
)

// Upstream transcripts, byte for byte as the engines send them.

// vLLM >= 0.17: reasoning under "reasoning", usage in a last chunk with
// no choices.
const vllmReasoning = `data: {"id":"chatcmpl-9b1e","object":"chat.completion.chunk","created":1767225600,"model":"openai/gpt-oss-20b","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-9b1e","object":"chat.completion.chunk","created":1767225600,"model":"openai/gpt-oss-20b","choices":[{"index":0,"delta":{"reasoning":"The user greets."},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-9b1e","object":"chat.completion.chunk","created":1767225600,"model":"openai/gpt-oss-20b","choices":[{"index":0,"delta":{"reasoning":" Reply."},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-9b1e","object":"chat.completion.chunk","created":1767225600,"model":"openai/gpt-oss-20b","choices":[{"index":0,"delta":{"content":"Hello"},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-9b1e","object":"chat.completion.chunk","created":1767225600,"model":"openai/gpt-oss-20b","choices":[{"index":0,"delta":{"content":"!"},"logprobs":null,"finish_reason":"stop","stop_reason":null}],"usage":null}

data: {"id":"chatcmpl-9b1e","object":"chat.completion.chunk","created":1767225600,"model":"openai/gpt-oss-20b","choices":[],"usage":{"prompt_tokens":84,"total_tokens":99,"completion_tokens":15,"prompt_tokens_details":{"cached_tokens":64},"completion_tokens_details":{"reasoning_tokens":9}}}

data: [DONE]

`

// llama.cpp: reasoning under "reasoning_content", keys in its order,
// usage and timings on the finishing chunk.
const llamacppReasoning = `data: {"choices":[{"finish_reason":null,"index":0,"delta":{"role":"assistant","content":null}}],"created":1767225600,"id":"chatcmpl-Qx7","model":"gpt-oss-20b","system_fingerprint":"b6490-a1b2c3d","object":"chat.completion.chunk"}

data: {"choices":[{"finish_reason":null,"index":0,"delta":{"reasoning_content":"The user greets."}}],"created":1767225600,"id":"chatcmpl-Qx7","model":"gpt-oss-20b","system_fingerprint":"b6490-a1b2c3d","object":"chat.completion.chunk"}

data: {"choices":[{"finish_reason":null,"index":0,"delta":{"reasoning_content":" Reply."}}],"created":1767225600,"id":"chatcmpl-Qx7","model":"gpt-oss-20b","system_fingerprint":"b6490-a1b2c3d","object":"chat.completion.chunk"}

data: {"choices":[{"finish_reason":null,"index":0,"delta":{"content":"Hello"}}],"created":1767225600,"id":"chatcmpl-Qx7","model":"gpt-oss-20b","system_fingerprint":"b6490-a1b2c3d","object":"chat.completion.chunk"}

data: {"choices":[{"finish_reason":null,"index":0,"delta":{"content":"!"}}],"created":1767225600,"id":"chatcmpl-Qx7","model":"gpt-oss-20b","system_fingerprint":"b6490-a1b2c3d","object":"chat.completion.chunk"}

data: {"choices":[{"finish_reason":"stop","index":0,"delta":{}}],"created":1767225600,"id":"chatcmpl-Qx7","model":"gpt-oss-20b","system_fingerprint":"b6490-a1b2c3d","object":"chat.completion.chunk","usage":{"completion_tokens":15,"prompt_tokens":84,"total_tokens":99,"prompt_tokens_details":{"cached_tokens":64}},"timings":{"prompt_n":20,"prompt_ms":12.5,"predicted_n":15,"predicted_ms":80.1}}

data: [DONE]

`

// A vLLM version in between sends both spellings with the same text.
const vllmBothFields = `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1767225600,"model":"m","choices":[{"index":0,"delta":{"reasoning":"The user greets.","reasoning_content":"The user greets."},"logprobs":null,"finish_reason":null}]}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1767225600,"model":"m","choices":[{"index":0,"delta":{"reasoning":" Reply.","reasoning_content":" Reply."},"logprobs":null,"finish_reason":null}]}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1767225600,"model":"m","choices":[{"index":0,"delta":{"content":"Hello!"},"logprobs":null,"finish_reason":"stop"}]}

data: [DONE]

`

// vLLM parallel tool calls: two calls whose argument pieces interleave.
const vllmParallelCalls = `data: {"id":"chatcmpl-7","object":"chat.completion.chunk","created":1767225600,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-7","object":"chat.completion.chunk","created":1767225600,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"id":"chatcmpl-tool-aa1","type":"function","index":0,"function":{"name":"get_weather","arguments":""}}]},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-7","object":"chat.completion.chunk","created":1767225600,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\": "}}]},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-7","object":"chat.completion.chunk","created":1767225600,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"id":"chatcmpl-tool-bb2","type":"function","index":1,"function":{"name":"get_time","arguments":""}}]},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-7","object":"chat.completion.chunk","created":1767225600,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"{\"tz\": \"CET\"}"}}]},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-7","object":"chat.completion.chunk","created":1767225600,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-7","object":"chat.completion.chunk","created":1767225600,"model":"m","choices":[{"index":0,"delta":{"content":""},"logprobs":null,"finish_reason":"tool_calls","stop_reason":200012}],"usage":null}

data: {"id":"chatcmpl-7","object":"chat.completion.chunk","created":1767225600,"model":"m","choices":[],"usage":{"prompt_tokens":310,"total_tokens":352,"completion_tokens":42,"prompt_tokens_details":null}}

data: [DONE]

`

func TestStreamDeltas(t *testing.T) {
	reasoningTurn := []model.Delta{
		{Kind: model.DeltaReasoning, Text: "The user greets."},
		{Kind: model.DeltaReasoning, Text: " Reply."},
		{Kind: model.DeltaText, Text: "Hello"},
		{Kind: model.DeltaText, Text: "!"},
		{Kind: model.DeltaUsage, Usage: responses.Usage{
			InputTokens: 84, OutputTokens: 15, TotalTokens: 99,
			InputTokensDetails:  responses.InputTokensDetails{CachedTokens: 64},
			OutputTokensDetails: responses.OutputTokensDetails{ReasoningTokens: 9},
		}},
		{Kind: model.DeltaFinish, FinishReason: model.FinishStop},
	}
	llamaTurn := append([]model.Delta(nil), reasoningTurn...)
	llamaTurn[4].Usage.OutputTokensDetails.ReasoningTokens = 0

	tests := []struct {
		name string
		body string
		want []model.Delta
	}{
		{"vLLM reasoning field", vllmReasoning, reasoningTurn},
		{"llama.cpp reasoning_content field", llamacppReasoning, llamaTurn},
		{"both fields are not doubled", vllmBothFields, []model.Delta{
			{Kind: model.DeltaReasoning, Text: "The user greets."},
			{Kind: model.DeltaReasoning, Text: " Reply."},
			{Kind: model.DeltaText, Text: "Hello!"},
			{Kind: model.DeltaFinish, FinishReason: model.FinishStop},
		}},
		{"parallel tool calls interleaved", vllmParallelCalls, []model.Delta{
			{Kind: model.DeltaToolCall, ToolIndex: 0, ToolCallID: "chatcmpl-tool-aa1", ToolName: "get_weather"},
			{Kind: model.DeltaToolCall, ToolIndex: 0, ToolArguments: `{"city": `},
			{Kind: model.DeltaToolCall, ToolIndex: 1, ToolCallID: "chatcmpl-tool-bb2", ToolName: "get_time"},
			{Kind: model.DeltaToolCall, ToolIndex: 1, ToolArguments: `{"tz": "CET"}`},
			{Kind: model.DeltaToolCall, ToolIndex: 0, ToolArguments: `"Paris"}`},
			{Kind: model.DeltaUsage, Usage: responses.Usage{InputTokens: 310, OutputTokens: 42, TotalTokens: 352}},
			{Kind: model.DeltaFinish, FinishReason: model.FinishToolCalls},
		}},
		{"whole tool call in one chunk, upstream index 3 numbered 0", `data: {"choices":[{"index":0,"delta":{"tool_calls":[{"id":"call_x","type":"function","index":3,"function":{"name":"f","arguments":"{\"a\":1}"}}]},"finish_reason":"tool_calls"}]}

data: [DONE]

`, []model.Delta{
			{Kind: model.DeltaToolCall, ToolIndex: 0, ToolCallID: "call_x", ToolName: "f", ToolArguments: `{"a":1}`},
			{Kind: model.DeltaFinish, FinishReason: model.FinishToolCalls},
		}},
		{"calls without index: a new id starts a call", `data: {"choices":[{"index":0,"delta":{"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{"tool_calls":[{"id":"c2","type":"function","function":{"name":"g","arguments":"{"}}]},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{"tool_calls":[{"function":{"arguments":"}"}}]},"finish_reason":"stop"}]}

data: [DONE]

`, []model.Delta{
			{Kind: model.DeltaToolCall, ToolIndex: 0, ToolCallID: "c1", ToolName: "f", ToolArguments: "{}"},
			{Kind: model.DeltaToolCall, ToolIndex: 1, ToolCallID: "c2", ToolName: "g", ToolArguments: "{"},
			{Kind: model.DeltaToolCall, ToolIndex: 1, ToolArguments: "}"},
			// stop with tool calls is reported as tool_calls.
			{Kind: model.DeltaFinish, FinishReason: model.FinishToolCalls},
		}},
		{"length", `data: {"choices":[{"index":0,"delta":{"content":"abc"},"finish_reason":"length"}]}

data: [DONE]

`, []model.Delta{
			{Kind: model.DeltaText, Text: "abc"},
			{Kind: model.DeltaFinish, FinishReason: model.FinishLength},
		}},
		{"content_filter", `data: {"choices":[{"index":0,"delta":{},"finish_reason":"content_filter"}]}

data: [DONE]

`, []model.Delta{{Kind: model.DeltaFinish, FinishReason: model.FinishFilter}}},
		{"missing finish reason at [DONE] is stop", `data: {"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":null}]}

data: [DONE]

`, []model.Delta{
			{Kind: model.DeltaText, Text: "x"},
			{Kind: model.DeltaFinish, FinishReason: model.FinishStop},
		}},
		{"SSE details: comments, CRLF, no space after data:, no final newline",
			": keep-alive\r\n\r\nevent: message\r\ndata:{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"},\"finish_reason\":\"stop\"}]}\r\n\r\ndata: [DONE]",
			[]model.Delta{
				{Kind: model.DeltaText, Text: "x"},
				{Kind: model.DeltaFinish, FinishReason: model.FinishStop},
			}},
		{"continuous usage: the last one counts, reported once", `data: {"choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}

data: {"choices":[{"index":0,"delta":{"content":"b"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}

data: [DONE]

`, []model.Delta{
			{Kind: model.DeltaText, Text: "a"},
			{Kind: model.DeltaText, Text: "b"},
			{Kind: model.DeltaUsage, Usage: responses.Usage{InputTokens: 5, OutputTokens: 2, TotalTokens: 7}},
			{Kind: model.DeltaFinish, FinishReason: model.FinishStop},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := sseServer(t, tt.body)
			b := New(srv.URL+"/v1", "", testOptions())
			got, err := collect(context.Background(), b, userReq("hi"))
			if err != nil {
				t.Fatalf("Stream: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("deltas\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// TestStreamGeneratedCallID covers engines that send no tool-call id.
func TestStreamGeneratedCallID(t *testing.T) {
	srv := sseServer(t, `data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"f","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}

data: [DONE]

`)
	got, err := collect(context.Background(), New(srv.URL+"/v1", "", testOptions()), userReq("hi"))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Kind != model.DeltaToolCall || !strings.HasPrefix(got[0].ToolCallID, "call_") || len(got[0].ToolCallID) < 20 {
		t.Fatalf("deltas %+v, want a tool call with a generated call_ id", got)
	}
}

// TestStreamLongLine feeds a tool call whose arguments exceed the read
// buffer many times over.
func TestStreamLongLine(t *testing.T) {
	args := strings.Repeat("x", 200_000)
	srv := sseServer(t, `data: {"choices":[{"index":0,"delta":{"tool_calls":[{"id":"c","index":0,"function":{"name":"write","arguments":"`+args+`"}}]},"finish_reason":"tool_calls"}]}

data: [DONE]

`)
	got, err := collect(context.Background(), New(srv.URL+"/v1", "", testOptions()), userReq("hi"))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ToolArguments != args {
		t.Fatalf("got %d deltas; arguments intact: %v", len(got), len(got) > 0 && got[0].ToolArguments == args)
	}
}
