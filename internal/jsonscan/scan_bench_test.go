package jsonscan

import (
	"bytes"
	"fmt"
	"testing"
)

// BenchmarkSkip checks a long input and a list of tool schemas: the
// shapes of the request side of the hot path.
func BenchmarkSkip(b *testing.B) {
	var history, tools bytes.Buffer
	history.WriteByte('[')
	tools.WriteByte('[')
	for i := range 1000 {
		if i > 0 {
			history.WriteByte(',')
			tools.WriteByte(',')
		}
		fmt.Fprintf(&history, `{"type":"message","role":"assistant","content":[{"type":"output_text","text":"answer %d: it is sunny and warm, about twenty degrees.","annotations":[]}]}`, i)
		fmt.Fprintf(&tools, `{"type":"object","properties":{"city":{"type":"string","description":"the city"},"days":{"type":"integer","minimum":1}},"required":["city"]}`)
	}
	history.WriteByte(']')
	tools.WriteByte(']')
	for _, bc := range []struct {
		name string
		body []byte
	}{{"history", history.Bytes()}, {"schemas", tools.Bytes()}} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.body)))
			var s Scanner
			for b.Loop() {
				s.Reset(bc.body)
				if err := s.Skip(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
