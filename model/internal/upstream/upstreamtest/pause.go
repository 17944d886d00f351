package upstreamtest

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/loomgate/loom/model"
)

// testPauseWhenUpstreamWaits: the backend emits a DeltaPause when the
// upstream has sent everything it had, and not between the events of a
// burst. The upstream sends one event and waits until the backend has
// paused after it (the test hangs to its bound otherwise); then it sends
// a burst of events in one write, which must come with far fewer pauses
// than events.
func testPauseWhenUpstreamWaits(t *testing.T, w Wire) {
	const burst = 64
	paused := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		rw.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(rw, w.First)
		rw.(http.Flusher).Flush()
		select {
		case <-paused:
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(rw, strings.Repeat(w.First, burst)+w.Finished("stop"))
	}))
	defer srv.Close()
	// The bound of the test, not an assertion on time.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	texts, pauses, closed := 0, 0, false
	err := w.New(srv.URL+"/v1", "", Options{}).Stream(ctx, UserReq("hi"), func(d model.Delta) error {
		switch d.Kind {
		case model.DeltaText:
			texts++
		case model.DeltaPause:
			if texts > 0 {
				pauses++
				if !closed {
					close(paused)
					closed = true
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Stream: %v (paused after the first event: %t)", err, closed)
	}
	if texts < burst {
		t.Fatalf("%d text deltas, want at least %d", texts, burst)
	}
	t.Logf("%d text deltas, %d pauses", texts, pauses)
	if pauses > burst/4 {
		t.Errorf("%d pauses for a burst of %d events written at once: the backend pauses between buffered events", pauses, burst)
	}
}
