package responses

import (
	"bytes"
	"fmt"
	"syscall"
	"testing"
	"time"
)

// historyBody is a create request whose input holds n earlier messages,
// alternating user and assistant, as a client resending its history does.
func historyBody(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"model":"m","input":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		if i%2 == 0 {
			fmt.Fprintf(&b, `{"role":"user","content":"question %d: what is the weather like in the city today?"}`, i)
		} else {
			fmt.Fprintf(&b, `{"type":"message","role":"assistant","content":[{"type":"output_text","text":"answer %d: it is sunny and warm, about twenty degrees.","annotations":[]}]}`, i)
		}
	}
	b.WriteString(`,{"role":"user","content":"#say ok"}]}`)
	return b.Bytes()
}

// toolsBody is a create request offering n function tools.
func toolsBody(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"model":"m","input":"#say ok","tools":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"type":"function","name":"tool_%d","description":"Looks up thing %d.","parameters":{"type":"object","properties":{"city":{"type":"string","description":"the city"},"days":{"type":"integer","minimum":1}},"required":["city"]},"strict":false}`, i, i)
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// BenchmarkDecodeRequest measures decoding and validating a create request
// with a long history or many tools: the request side of the hot path.
func BenchmarkDecodeRequest(b *testing.B) {
	for _, bc := range []struct {
		name  string
		body  []byte
		fresh bool // each request's tools differ from every earlier one's
	}{
		{"messages=1000", historyBody(1000), false},
		{"tools=100", toolsBody(100), false},
		{"tools=100,fresh", toolsBody(100), true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.body)))
			// A fresh list's first tool is named by a count of the
			// requests, written over its digits: no list is one that was
			// decoded before.
			body := bytes.Replace(bc.body, []byte(`"tool_0"`), []byte(`"tool_00000000"`), 1)
			digits := body[bytes.Index(body, []byte(`"tool_0`))+len(`"tool_`):][:8]
			cpu := processCPU()
			for i := 0; b.Loop(); i++ {
				if bc.fresh {
					_ = fmt.Appendf(digits[:0], "%08d", i%100000000)
				}
				req, err := DecodeRequest(body)
				if err != nil {
					b.Fatal(err)
				}
				if err := req.Validate(nil); err != nil {
					b.Fatal(err)
				}
			}
			// The process's CPU time (garbage collection included) is
			// what a shared machine's load does not stretch.
			b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}

// processCPU returns the CPU time the process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
