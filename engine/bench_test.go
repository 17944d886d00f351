package engine_test

import (
	"bytes"
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/loomgate/loom/engine"
	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/responses"
)

// largeBody is a store:false request with n earlier messages (user text
// and assistant output_text, as a long history has them) or tools
// function tools: BenchmarkLargeRequest's payloads in the integration
// tests.
func largeBody(n, tools int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"model":"m","store":false,"input":[`)
	for i := range n {
		if i%2 == 0 {
			fmt.Fprintf(&b, `{"role":"user","content":"question %d: what is the weather like in the city today?"},`, i)
		} else {
			fmt.Fprintf(&b, `{"type":"message","role":"assistant","content":[{"type":"output_text","text":"answer %d: it is sunny and warm, about twenty degrees.","annotations":[]}]},`, i)
		}
	}
	b.WriteString(`{"role":"user","content":"say ok"}]`)
	if tools > 0 {
		b.WriteString(`,"tools":[`)
		for i := range tools {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"type":"function","name":"tool_%d","description":"Looks up thing %d.","parameters":{"type":"object","properties":{"city":{"type":"string","description":"the city"},"days":{"type":"integer","minimum":1}},"required":["city"]},"strict":false}`, i, i)
		}
		b.WriteByte(']')
	}
	b.WriteByte('}')
	return b.Bytes()
}

// BenchmarkRunLargeRequest is the engine's own work for a long input and
// for many tools (issue 14): validation, the items' ids and checks, the
// registry and the conversation, one turn of a backend that answers "ok"
// at once, the response; the request is decoded once, outside the loop,
// and given to the run as the server gives it.
//
//	go test ./engine -run '^$' -bench RunLargeRequest -benchmem
func BenchmarkRunLargeRequest(b *testing.B) {
	for _, c := range []struct {
		name            string
		messages, tools int
	}{{"messages=1000", 1000, 0}, {"tools=100", 0, 100}} {
		b.Run(c.name, func(b *testing.B) {
			req, err := responses.DecodeRequest(largeBody(c.messages, c.tools))
			if err != nil {
				b.Fatal(err)
			}
			be := &fakeBackend{stream: deltas(model.Delta{Kind: model.DeltaText, Text: "ok"}, model.Delta{Kind: model.DeltaFinish, FinishReason: model.FinishStop})}
			e := newEngine(b, be)
			b.ReportAllocs()
			before := processCPU()
			for b.Loop() {
				// The server gives the run its input, which gets its ids:
				// each round starts from the input as decoded.
				for i := range req.Input.Items {
					req.Input.Items[i].ID = ""
				}
				be.requests = be.requests[:0]
				if _, err := e.RunWith(context.Background(), req, nil, &engine.RunOptions{GiveInput: true}); err != nil {
					b.Fatal(err)
				}
			}
			// The process's CPU time is what a loaded machine disturbs
			// least: the run's goroutine hand-offs wait for a core.
			b.ReportMetric(float64(processCPU()-before)/float64(time.Microsecond)/float64(b.N), "cpu-us/op")
		})
	}
}

// processCPU is the user and system CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
