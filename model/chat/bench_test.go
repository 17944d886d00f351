package chat

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/responses"
)

// textStream is a vLLM-style turn of n one-token text chunks.
func textStream(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`data: {"id":"chatcmpl-9b1e","object":"chat.completion.chunk","created":1767225600,"model":"openai/gpt-oss-20b","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"usage":null}` + "\n\n")
	for i := range n {
		field := "content"
		if i < n/2 {
			field = "reasoning"
		}
		fmt.Fprintf(&b, `data: {"id":"chatcmpl-9b1e","object":"chat.completion.chunk","created":1767225600,"model":"openai/gpt-oss-20b","choices":[{"index":0,"delta":{"%s":" tok%d"},"logprobs":null,"finish_reason":null}],"usage":null}`+"\n\n", field, i)
	}
	b.WriteString(`data: {"id":"chatcmpl-9b1e","object":"chat.completion.chunk","created":1767225600,"model":"openai/gpt-oss-20b","choices":[{"index":0,"delta":{"content":""},"logprobs":null,"finish_reason":"stop","stop_reason":null}],"usage":null}` + "\n\n")
	b.WriteString(`data: {"id":"chatcmpl-9b1e","object":"chat.completion.chunk","created":1767225600,"model":"openai/gpt-oss-20b","choices":[],"usage":{"prompt_tokens":84,"total_tokens":99,"completion_tokens":15,"prompt_tokens_details":{"cached_tokens":64}}}` + "\n\n")
	b.WriteString("data: [DONE]\n\n")
	return b.Bytes()
}

// toolStream is a turn streaming one tool call's arguments in n pieces.
func toolStream(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`data: {"id":"chatcmpl-7","object":"chat.completion.chunk","created":1767225600,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"id":"chatcmpl-tool-aa1","type":"function","index":0,"function":{"name":"get_weather","arguments":""}}]},"logprobs":null,"finish_reason":null}],"usage":null}` + "\n\n")
	for i := range n {
		fmt.Fprintf(&b, `data: {"id":"chatcmpl-7","object":"chat.completion.chunk","created":1767225600,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"k%d\": 1, "}}]},"logprobs":null,"finish_reason":null}],"usage":null}`+"\n\n", i)
	}
	b.WriteString(`data: {"id":"chatcmpl-7","object":"chat.completion.chunk","created":1767225600,"model":"m","choices":[{"index":0,"delta":{"content":""},"logprobs":null,"finish_reason":"tool_calls"}],"usage":null}` + "\n\n")
	b.WriteString("data: [DONE]\n\n")
	return b.Bytes()
}

func benchParse(b *testing.B, body []byte, chunks int) {
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	r := bytes.NewReader(body)
	deltas := 0
	emit := func(model.Delta) error { deltas++; return nil }
	for b.Loop() {
		r.Reset(body)
		if err := readStream(r, emit); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(chunks)*float64(b.N)/b.Elapsed().Seconds(), "chunks/s")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(chunks)/float64(b.N), "ns/chunk")
}

// BenchmarkParseText measures SSE framing plus chunk decoding for text and
// reasoning deltas, the hot path of every streamed turn.
func BenchmarkParseText(b *testing.B) {
	const n = 1000
	benchParse(b, textStream(n), n+3)
}

// BenchmarkParseToolArguments is the same for tool-call argument pieces.
func BenchmarkParseToolArguments(b *testing.B) {
	const n = 1000
	benchParse(b, toolStream(n), n+2)
}

// BenchmarkStreamLoopback is a whole turn over HTTP on loopback: request
// encoding, the exchange, and parsing 200 chunks.
func BenchmarkStreamLoopback(b *testing.B) {
	body := textStream(200)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write(body)
	}))
	defer srv.Close()
	be := New(srv.URL+"/v1", "", nil)
	req := userReq(strings.Repeat("word ", 200))
	emit := func(model.Delta) error { return nil }
	b.ReportAllocs()
	for b.Loop() {
		if err := be.Stream(context.Background(), req, emit); err != nil {
			b.Fatal(err)
		}
	}
}

// largeRequest is a turn with n earlier messages (alternating user text
// and assistant output_text, as a long history has them) and tools
// function tools with a small object schema: BenchmarkLargeRequest's
// payloads in model terms.
func largeRequest(n, tools int) *model.Request {
	req := &model.Request{Model: "openai/gpt-oss-20b", Instructions: "Be brief.", ParallelToolCalls: true}
	for i := range n {
		if i%2 == 0 {
			req.Items = append(req.Items, userMsg(fmt.Sprintf("question %d: what is the weather like in the city today?", i)))
			continue
		}
		req.Items = append(req.Items, responses.Item{Type: responses.ItemMessage, Role: "assistant",
			Content: []responses.ContentPart{{Type: responses.PartOutputText, Text: fmt.Sprintf("answer %d: it is sunny and warm, about twenty degrees.", i)}}})
	}
	req.Items = append(req.Items, userMsg("#say ok"))
	for i := range tools {
		req.Tools = append(req.Tools, responses.Tool{Type: responses.ToolFunction, Name: fmt.Sprintf("tool_%d", i),
			Description: ptr(fmt.Sprintf("Looks up thing %d.", i)), Strict: ptr(false),
			Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string","description":"the city"},"days":{"type":"integer","minimum":1}},"required":["city"]}`)})
	}
	return req
}

// BenchmarkEncodeRequest is the upstream body alone, for a long history
// and for many tools (the request side of issue 14).
//
//	go test ./model/chat -run '^$' -bench EncodeRequest -count 3
func BenchmarkEncodeRequest(b *testing.B) {
	for _, c := range []struct {
		name            string
		messages, tools int
	}{{"messages=1000", 1000, 0}, {"tools=100", 0, 100}} {
		b.Run(c.name, func(b *testing.B) {
			req := largeRequest(c.messages, c.tools)
			b.ReportAllocs()
			for b.Loop() {
				body, err := encodeRequest(req)
				if err != nil {
					b.Fatal(err)
				}
				b.SetBytes(int64(len(body)))
			}
		})
	}
}
