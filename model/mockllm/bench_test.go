package mockllm

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// BenchmarkStream measures the mock's own cost per streamed answer, so
// loom's benchmarks can tell it apart from loom's.
func BenchmarkStream(b *testing.B) {
	s := New(nil)
	raw, _ := json.Marshal(chatBody(true, "#tokens 200"))
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(raw))
		s.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			b.Fatal(w.Code)
		}
		s.Reset() // keep the recording from growing across iterations
	}
}

// BenchmarkStreamLoopback adds a real loopback connection and SSE reading.
func BenchmarkStreamLoopback(b *testing.B) {
	_, hs := start(b, nil)
	raw, _ := json.Marshal(chatBody(true, "#tokens 200"))
	b.ReportAllocs()
	for b.Loop() {
		resp, err := hs.Client().Post(hs.URL+"/v1/chat/completions", "application/json", bytes.NewReader(raw))
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}
