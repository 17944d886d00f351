package completions

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/model/mockllm"
	"github.com/loomgate/loom/responses"
)

// benchTurn is a typical turn: reasoning, then a final answer, n words
// each.
func benchTurn(n int) string {
	words := strings.Repeat(" word", n)
	return "<|channel|>analysis<|message|>Thinking" + words + ".<|end|>" +
		"<|start|>assistant<|channel|>final<|message|>Answer" + words + ".<|return|>"
}

func benchRoute(b *testing.B, c completion) {
	body := []byte(c.stream(b))
	tokens := strings.Count(string(body), "\"index\":0")
	emit := func(model.Delta) error { return nil }
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if err := readStream(strings.NewReader(string(body)), newRouter(100, emit)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(tokens)/float64(b.N), "ns/token")
}

// BenchmarkRouteTokenIDs is SSE framing, chunk decoding, harmony parsing
// and routing of a 1000-token turn read by token ids (vLLM).
func BenchmarkRouteTokenIDs(b *testing.B) { benchRoute(b, completion{text: benchTurn(500), ids: true}) }

// BenchmarkRouteText is the same read from text (SGLang, llama.cpp),
// including the per-message re-encoding that counts tokens.
func BenchmarkRouteText(b *testing.B) { benchRoute(b, completion{text: benchTurn(500)}) }

// BenchmarkRouteToolCall routes a call whose arguments stream as deltas.
func BenchmarkRouteToolCall(b *testing.B) {
	args := `{"items":[` + strings.Repeat(`"x",`, 300) + `"y"]}`
	benchRoute(b, completion{text: "<|channel|>commentary to=functions.f <|constrain|>json<|message|>" + args + "<|call|>", ids: true})
}

// BenchmarkRender renders a conversation with tools and a tool loop.
func BenchmarkRender(b *testing.B) {
	req := userReq(strings.Repeat("A long question. ", 50))
	req.Instructions = "Be helpful."
	req.Tools = []responses.Tool{weatherTool()}
	req.Items = append(req.Items, reasoningItem("Need the weather."), callItem("c1", "get_weather", `{"city":"Paris"}`), outputItem("c1", "sunny"))
	opts := testOptions()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Render(req, opts); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStreamMockLoopback is a whole turn over loopback HTTP against
// the scripted upstream: render, request, 200-word answer.
func BenchmarkStreamMockLoopback(b *testing.B) {
	s := mockllm.New(nil)
	hs := httptest.NewServer(s)
	defer hs.Close()
	defer s.Close()
	be := New(hs.URL+"/v1", "", testOptions())
	req := userReq("#tokens 200")
	emit := func(model.Delta) error { return nil }
	b.ReportAllocs()
	for b.Loop() {
		if err := be.Stream(context.Background(), req, emit); err != nil {
			b.Fatal(err)
		}
		s.Reset()
	}
}

// BenchmarkEncodeRequest is the upstream body alone for a prompt of 30k
// token ids (a long conversation rendered).
//
//	go test ./model/completions -run '^$' -bench EncodeRequest -count 3
func BenchmarkEncodeRequest(b *testing.B) {
	prompt := make([]uint32, 30000)
	for i := range prompt {
		prompt[i] = uint32(i*7919) % 201088
	}
	req := &model.Request{Model: "openai/gpt-oss-20b"}
	o := (&Options{}).resolved()
	b.ReportAllocs()
	for b.Loop() {
		body, err := encodeRequest(req, prompt, &o)
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(len(body)))
	}
}
