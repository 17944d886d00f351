package mockllm_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/loomgate/loom/model/mockllm"
)

// The mock is only useful if real clients accept what it sends; go-openai
// is the client loom's chat backend uses.

func newSDKClient(t *testing.T) (*mockllm.Server, *openai.Client) {
	t.Helper()
	s := mockllm.New(nil)
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	t.Cleanup(s.Close)
	cfg := openai.DefaultConfig("test-key")
	cfg.BaseURL = hs.URL + "/v1"
	cfg.HTTPClient = hs.Client()
	return s, openai.NewClientWithConfig(cfg)
}

func sdkContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

var weatherTools = []openai.Tool{{
	Type: openai.ToolTypeFunction,
	Function: &openai.FunctionDefinition{
		Name:       "get_weather",
		Parameters: map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}},
	},
}}

func TestSDKStreamWithParallelToolCalls(t *testing.T) {
	s, client := newSDKClient(t)
	stream, err := client.CreateChatCompletionStream(sdkContext(t), openai.ChatCompletionRequest{
		Model: "mock-model",
		Messages: []openai.ChatCompletionMessage{{
			Role:    openai.ChatMessageRoleUser,
			Content: "#reason need weather twice\n#say Checking.\n#call get_weather {\"city\":\"Paris\"}\n#call get_weather {\"city\":\"Oslo\"}",
		}},
		Tools:         weatherTools,
		StreamOptions: &openai.StreamOptions{IncludeUsage: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()

	var content, reasoning, finish string
	var calls []openai.ToolCall
	var usage *openai.Usage
	for {
		chunk, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if chunk.Usage != nil {
			usage = chunk.Usage
		}
		for _, ch := range chunk.Choices {
			content += ch.Delta.Content
			reasoning += ch.Delta.ReasoningContent
			if ch.FinishReason != "" {
				finish = string(ch.FinishReason)
			}
			for _, tc := range ch.Delta.ToolCalls {
				idx := *tc.Index
				for len(calls) <= idx {
					calls = append(calls, openai.ToolCall{})
				}
				if tc.ID != "" {
					calls[idx].ID, calls[idx].Type = tc.ID, tc.Type
				}
				calls[idx].Function.Name += tc.Function.Name
				calls[idx].Function.Arguments += tc.Function.Arguments
			}
		}
	}
	if content != "Checking." || reasoning != "need weather twice" || finish != "tool_calls" {
		t.Errorf("content %q reasoning %q finish %q", content, reasoning, finish)
	}
	want := []openai.ToolCall{
		{ID: "call_1", Type: openai.ToolTypeFunction, Function: openai.FunctionCall{Name: "get_weather", Arguments: `{"city":"Paris"}`}},
		{ID: "call_2", Type: openai.ToolTypeFunction, Function: openai.FunctionCall{Name: "get_weather", Arguments: `{"city":"Oslo"}`}},
	}
	if len(calls) != len(want) {
		t.Fatalf("calls = %+v", calls)
	}
	for i := range want {
		if calls[i].ID != want[i].ID || calls[i].Type != want[i].Type || calls[i].Function != want[i].Function {
			t.Errorf("call %d = %+v, want %+v", i, calls[i], want[i])
		}
	}
	if usage == nil || usage.CompletionTokens != 8 || usage.CompletionTokensDetails == nil || usage.CompletionTokensDetails.ReasoningTokens != 3 {
		t.Errorf("usage = %+v", usage)
	}
	if got := s.Requests()[0].Chat.Tools; len(got) != 1 || got[0].Function.Name != "get_weather" {
		t.Errorf("recorded tools = %+v", got)
	}
}

func TestSDKToolRoundTrip(t *testing.T) {
	_, client := newSDKClient(t)
	ctx := sdkContext(t)
	messages := []openai.ChatCompletionMessage{{
		Role:    openai.ChatMessageRoleUser,
		Content: "#call get_weather {\"city\":\"Paris\"}\n#cached 3",
	}}
	resp, err := client.CreateChatCompletion(ctx, openai.ChatCompletionRequest{Model: "mock-model", Messages: messages, Tools: weatherTools})
	if err != nil {
		t.Fatal(err)
	}
	msg := resp.Choices[0].Message
	if resp.Choices[0].FinishReason != openai.FinishReasonToolCalls || len(msg.ToolCalls) != 1 ||
		msg.ToolCalls[0].ID != "call_1" || msg.ToolCalls[0].Function.Arguments != `{"city":"Paris"}` {
		t.Fatalf("first turn = %+v", resp.Choices[0])
	}
	if resp.Usage.PromptTokensDetails == nil || resp.Usage.PromptTokensDetails.CachedTokens != 3 || resp.Object != "chat.completion" {
		t.Errorf("usage %+v object %q", resp.Usage, resp.Object)
	}

	messages = append(messages, msg, openai.ChatCompletionMessage{
		Role: openai.ChatMessageRoleTool, ToolCallID: "call_1", Content: "18C and sunny",
	})
	resp, err = client.CreateChatCompletion(ctx, openai.ChatCompletionRequest{Model: "mock-model", Messages: messages, Tools: weatherTools})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Choices[0].Message.Content; got != "tool said: 18C and sunny" || resp.Choices[0].FinishReason != openai.FinishReasonStop {
		t.Errorf("second turn = %+v", resp.Choices[0])
	}
}

func TestSDKSeesScriptedErrors(t *testing.T) {
	_, client := newSDKClient(t)
	_, err := client.CreateChatCompletion(sdkContext(t), openai.ChatCompletionRequest{
		Model:    "mock-model",
		Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: "#fail 429 slow down"}},
	})
	var apiErr *openai.APIError
	if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != http.StatusTooManyRequests || apiErr.Message != "slow down" || apiErr.Type != "rate_limit_error" {
		t.Fatalf("err = %#v", err)
	}
}

func fixedTime() time.Time { return time.Unix(0, 0) }
