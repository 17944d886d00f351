package responses

import (
	"fmt"
	"testing"
)

// BenchmarkEncodeResponseEvents measures encoding one response's events
// as a streamed, stored response does (each event encoded for the store,
// the same bytes copied for the client): the lifecycle events carry the
// response with the echo of the request's tools, which is what grows with
// the tools; a short answer's deltas and items in between.
func BenchmarkEncodeResponseEvents(b *testing.B) {
	for _, bc := range []struct {
		name string
		body []byte
	}{
		{"tools=0", toolsBody(0)},
		{"tools=100", toolsBody(100)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			req, err := DecodeRequest(bc.body)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			out := make([]byte, 0, 64<<10)
			sink := func(ev *Event) error {
				enc, err := ev.EncodeJSON(DialectOpenAI)
				if err != nil {
					return err
				}
				out, err = ev.AppendEncodedJSON(out[:0], DialectOpenAI)
				_ = enc
				return err
			}
			for b.Loop() {
				resp := benchResponse(req)
				bl := NewBuilder(resp, func(p string) string { return p + "_1" }, sink)
				if err := bl.Start(); err != nil {
					b.Fatal(err)
				}
				for range 5 {
					bl.TextDelta("some words ")
				}
				if err := bl.Complete(&Usage{InputTokens: 10, OutputTokens: 5, TotalTokens: 15}, 1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEncodeResponseBody measures encoding a response once, as the
// body of a response that is neither streamed nor stored is.
func BenchmarkEncodeResponseBody(b *testing.B) {
	for _, n := range []int{0, 100} {
		b.Run(fmt.Sprintf("tools=%d", n), func(b *testing.B) {
			req, err := DecodeRequest(toolsBody(n))
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			out := make([]byte, 0, 64<<10)
			for b.Loop() {
				resp := benchResponse(req)
				bl := NewBuilder(resp, func(p string) string { return p + "_1" }, nil)
				bl.TextDelta("some words")
				if err := bl.Complete(&Usage{InputTokens: 10, OutputTokens: 5, TotalTokens: 15}, 1); err != nil {
					b.Fatal(err)
				}
				out = bl.Response().AppendJSON(out[:0], DialectOpenAI)
			}
		})
	}
}

// benchResponse is the response the engine starts for req.
func benchResponse(req *Request) *Response {
	return &Response{ID: "resp_1", Object: "response", Model: req.Model, Tools: req.Tools,
		ToolChoice: ToolChoice{Mode: ToolChoiceAuto}, Truncation: "disabled", ParallelToolCalls: true,
		Text: TextConfig{Format: &TextFormat{Type: FormatText}}, TopP: 1, Temperature: 1,
		Reasoning: &ReasoningParam{}, ServiceTier: "default", Metadata: map[string]any{}}
}
