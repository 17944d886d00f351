package upstream

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/loomgate/loom/model"
)

// BenchmarkPost is one non-streamed exchange over loopback with a small
// body and answer: what the client costs per request (headers, the
// request, the timers, the retry loop) with its default transport.
//
//	go test ./model/internal/upstream -run '^$' -bench Post -count 3
func BenchmarkPost(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"choices":[]}`)
	}))
	defer srv.Close()
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":false}`)
	read := func(r io.Reader, _ func(model.Delta) error) error {
		return ReadWhole(r, func([]byte) error { return nil })
	}
	emit := func(model.Delta) error { return nil }
	c := NewClient(srv.URL+"/v1/chat/completions", "sk-test", Config{Name: "bench",
		HTTPOptions: model.HTTPOptions{Logger: slog.New(slog.DiscardHandler)}})
	defer c.CloseIdleConnections()
	b.ReportAllocs()
	for b.Loop() {
		if err := c.Whole(context.Background(), body, emit, read); err != nil {
			b.Fatal(err)
		}
	}
}
