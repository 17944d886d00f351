package responses

import (
	"bytes"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"
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
// The tools again as the server decodes them, with a DecodeCache: "cached"
// when an agent sends the same list with every turn, "missed" when every
// request's list is one the cache no longer holds (16 lists in turn, the
// cache room for 8: each one is decoded and kept, pushing out another).
// The history again: "cached" the same input each time, "turns" the
// turns of conversations, each the one before and two more items (the
// 64th starts another conversation).
func BenchmarkDecodeRequest(b *testing.B) {
	missed := make([][]byte, 16)
	for i := range missed {
		missed[i] = bytes.Replace(toolsBody(100), []byte(`"tool_0"`), fmt.Appendf(nil, `"first_%d"`, i), 1)
	}
	one := toolsBody(100)
	// The turns of one conversation: each request resends the one before
	// and two more items (the model's answer, the next question).
	turns := make([][]byte, 64)
	history := historyItems(1000 + 2*len(turns))
	for i := range turns {
		turns[i] = []byte(`{"model":"m","input":[` + strings.Join(history[:1000+2*i], ",") + `]}`)
	}
	for _, bc := range []struct {
		name   string
		bodies [][]byte // sent in turn
		cache  *DecodeCache
	}{
		{"messages=1000", [][]byte{historyBody(1000)}, nil},
		{"messages=1000,cached", [][]byte{historyBody(1000)}, NewDecodeCache(DecodeCacheOptions{MaxBytes: 16 << 20})},
		{"messages=1000,turns", turns, nil},
		{"tools=100", [][]byte{one}, nil},
		{"tools=100,cached", [][]byte{one}, NewDecodeCache(DecodeCacheOptions{MaxBytes: 16 << 20})},
		{"tools=100,missed", missed, NewDecodeCache(DecodeCacheOptions{MaxBytes: 8 * (3*len(missed[15]) + 100*int(unsafe.Sizeof(Tool{})))})},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.bodies[0])))
			cpu := processCPU()
			cache := bc.cache
			for i := 0; b.Loop(); i++ {
				if bc.name == "messages=1000,turns" && i%len(turns) == 0 {
					cache = NewDecodeCache(DecodeCacheOptions{MaxBytes: 16 << 20}) // another conversation
				}
				req, err := DecodeRequestWith(bc.bodies[i%len(bc.bodies)], DecodeOptions{Cache: cache})
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
