package responses

import (
	"bytes"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"
)

// historyBody is a create request whose input holds n earlier messages,
// alternating user and assistant, as a client resending its history does.
func historyBody(n int) []byte {
	return []byte(`{"model":"m","input":[` + strings.Join(historyItems(n), ",") + `,{"role":"user","content":"#say ok"}]}`)
}

// historyItems are historyBody's n earlier messages.
func historyItems(n int) []string {
	items := make([]string, n)
	for i := range items {
		if i%2 == 0 {
			items[i] = fmt.Sprintf(`{"role":"user","content":"question %d: what is the weather like in the city today?"}`, i)
		} else {
			items[i] = fmt.Sprintf(`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"answer %d: it is sunny and warm, about twenty degrees.","annotations":[]}]}`, i)
		}
	}
	return items
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
		name string
		body []byte
	}{
		{"messages=1000", historyBody(1000)},
		{"tools=100", toolsBody(100)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.body)))
			cpu := processCPU()
			for b.Loop() {
				req, err := DecodeRequest(bc.body)
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
