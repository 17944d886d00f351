package chat

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/model/internal/upstream/upstreamtest"
)

// testOptions keep retries fast and timeouts short enough for tests.
func testOptions() *Options {
	return &Options{
		HTTPOptions: model.HTTPOptions{
			Retries:          2,
			RetryWaitMin:     time.Millisecond,
			RetryWaitMax:     5 * time.Millisecond,
			FirstByteTimeout: 5 * time.Second,
		},
	}
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
	rec := &upstreamtest.Recorder{Stream: okStream}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	b := New(srv.URL+"/v1", "", testOptions())
	if _, err := collect(context.Background(), b, req); err != nil {
		t.Fatalf("Stream: %v", err)
	}
	reqs := rec.Requests()
	if len(reqs) != 1 {
		t.Fatalf("upstream got %d requests, want 1", len(reqs))
	}
	return reqs[0].Body
}

// Shared helpers, under the names these tests use.
var (
	collect   = upstreamtest.Collect
	userReq   = upstreamtest.UserReq
	userMsg   = upstreamtest.UserMsg
	sseServer = upstreamtest.SSEServer

	reasoningItem = upstreamtest.ReasoningItem
	callItem      = upstreamtest.CallItem
	outputItem    = upstreamtest.OutputItem
)

func ptr[T any](v T) *T { return &v }
