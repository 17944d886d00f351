package mockllm_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/loomgate/loom/model/mockllm"
)

// A test scripts the upstream through the user message and then inspects
// what the mock was sent.
func Example() {
	s := mockllm.New(nil)
	hs := httptest.NewServer(s)
	defer hs.Close()
	defer s.Close()

	body := `{"model":"mock-model","messages":[{"role":"user","content":"What is the weather?\n#say Sunny."}]}`
	resp, err := http.Post(hs.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	var out struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(out.Choices[0].Message.Content, out.Choices[0].FinishReason)
	fmt.Println(len(s.Requests()), s.Requests()[0].Chat.Messages[0].Role)
	// Output:
	// Sunny. stop
	// 1 user
}

// A stream with a tool call, read as raw server-sent events.
func Example_stream() {
	s := mockllm.New(&mockllm.Options{ChunkSize: 16, Now: fixedTime})
	hs := httptest.NewServer(s)
	defer hs.Close()
	defer s.Close()

	body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"#call add {\"a\":1,\"b\":2}"}]}`
	resp, err := http.Post(hs.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	fmt.Print(string(raw))
	// Output:
	// data: {"id":"chatcmpl-mock-1","object":"chat.completion.chunk","created":0,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}
	//
	// data: {"id":"chatcmpl-mock-1","object":"chat.completion.chunk","created":0,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"add","arguments":""}}]},"logprobs":null,"finish_reason":null}]}
	//
	// data: {"id":"chatcmpl-mock-1","object":"chat.completion.chunk","created":0,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"a\":1,\"b\":2}"}}]},"logprobs":null,"finish_reason":null}]}
	//
	// data: {"id":"chatcmpl-mock-1","object":"chat.completion.chunk","created":0,"model":"m","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}]}
	//
	// data: [DONE]
}
