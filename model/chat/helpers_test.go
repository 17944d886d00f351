package chat

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/responses"
)

// testOptions keep retries fast and timeouts short enough for tests.
func testOptions() *Options {
	return &Options{
		Retries:          2,
		RetryWaitMin:     time.Millisecond,
		RetryWaitMax:     5 * time.Millisecond,
		FirstByteTimeout: 5 * time.Second,
	}
}

// sseServer answers every request with body as an SSE stream, written in
// one go as an engine under no load would.
func sseServer(t *testing.T, body string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// bodyRecorder is an upstream that keeps the request bodies it got and
// answers with a minimal complete stream.
type bodyRecorder struct {
	mu     sync.Mutex
	bodies [][]byte
	paths  []string
	auth   []string
}

func (rec *bodyRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	rec.mu.Lock()
	rec.bodies = append(rec.bodies, b)
	rec.paths = append(rec.paths, r.URL.Path)
	rec.auth = append(rec.auth, r.Header.Get("Authorization"))
	rec.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	_, _ = io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
}

// sentBody runs req through a Backend and returns the JSON body the
// upstream received, decoded into a generic map.
func sentBody(t *testing.T, req *model.Request) map[string]any {
	t.Helper()
	raw := sentRaw(t, req)
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("upstream got invalid JSON: %v\n%s", err, raw)
	}
	return m
}

func sentRaw(t *testing.T, req *model.Request) []byte {
	t.Helper()
	rec := &bodyRecorder{}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	b := New(srv.URL+"/v1", "", testOptions())
	if _, err := collect(context.Background(), b, req); err != nil {
		t.Fatalf("Stream: %v", err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.bodies) != 1 {
		t.Fatalf("upstream got %d requests, want 1", len(rec.bodies))
	}
	return rec.bodies[0]
}

// collect runs one turn and returns every delta emitted, also on error.
func collect(ctx context.Context, b *Backend, req *model.Request) ([]model.Delta, error) {
	var out []model.Delta
	err := b.Stream(ctx, req, func(d model.Delta) error {
		out = append(out, d)
		return nil
	})
	return out, err
}

func userReq(text string) *model.Request {
	return &model.Request{
		Model: "openai/gpt-oss-20b",
		Items: []responses.Item{userMsg(text)},
	}
}

func userMsg(text string) responses.Item {
	return responses.Item{Type: responses.ItemMessage, Role: "user", Content: []responses.ContentPart{{Type: responses.PartInputText, Text: text}}}
}

func ptr[T any](v T) *T { return &v }
