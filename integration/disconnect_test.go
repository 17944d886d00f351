package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/loomgate/loom/store"
)

// TestClientDisconnect checks what happens when a client goes away in the
// middle of a response: loom cancels the upstream request at once (the
// scripted upstream sees its request's context end), every goroutine the
// request started ends, and a streamed response is stored as cancelled.
//
// Not parallel: the leak check looks at every goroutine in the process.
func TestClientDisconnect(t *testing.T) {
	cases := []struct {
		name   string
		stream bool
		script string
	}{
		// The upstream stops after three chunks and waits: only a
		// cancelled request ends it.
		{"stream, stalled upstream", true, "#say This sentence is long enough for several chunks.\n#stall 3"},
		// The upstream keeps sending slowly: loom must stop it, not just
		// stop reading it.
		{"stream, slow upstream", true, "#tokens 500\n#latency 20ms"},
		// Without a stream there is no event to wait for: the client
		// leaves once the upstream has the request.
		{"json, stalled upstream", false, "#stall"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil)
			// The harness's servers and store live as long as the test;
			// what the request starts must end with it.
			baseline := goleak.IgnoreCurrent()

			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			// A client of its own, so that its connections can be closed
			// before the leak check.
			transport := &http.Transport{}
			client := &http.Client{Transport: transport}

			reqCtx, disconnect := context.WithCancel(ctx)
			body, _ := json.Marshal(map[string]any{"model": "mock-model", "input": tc.script, "stream": tc.stream})
			req, err := http.NewRequestWithContext(reqCtx, http.MethodPost, h.BaseURL+"/responses", strings.NewReader(string(body)))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")

			var id string
			if tc.stream {
				resp, err := client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				id = readUntilDelta(t, resp)
				disconnect()
				resp.Body.Close()
			} else {
				done := make(chan error, 1)
				go func() {
					resp, err := client.Do(req)
					if err == nil {
						resp.Body.Close()
					}
					done <- err
				}()
				if err := h.Mock.WaitStarted(ctx, 1); err != nil {
					t.Fatalf("the upstream never got the request: %v", err)
				}
				disconnect()
				if err := <-done; !errors.Is(err, context.Canceled) {
					t.Fatalf("client request ended with %v, want it cancelled", err)
				}
			}

			if err := h.Mock.WaitCancelled(ctx, 1); err != nil {
				t.Fatalf("the upstream request was not cancelled: %v (stats %+v)", err, h.Mock.Stats())
			}
			if id != "" {
				if status := waitStored(ctx, t, h, id); status != "cancelled" {
					t.Errorf("stored response %s has status %q, want cancelled", id, status)
				}
			}
			transport.CloseIdleConnections()
			goleak.VerifyNone(t, baseline)
		})
	}
}

// readUntilDelta reads a stream until its first text delta and returns the
// response id announced by response.created.
func readUntilDelta(t *testing.T, resp *http.Response) string {
	t.Helper()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	r := bufio.NewReader(resp.Body)
	var id string
	for range 1000 {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("stream ended before a text delta: %v", err)
		}
		data, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Type     string
			Response struct{ ID string }
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("event is not JSON: %s", data)
		}
		switch ev.Type {
		case "response.created":
			id = ev.Response.ID
		case "response.output_text.delta":
			return id
		}
	}
	t.Fatal("no text delta in the first 1000 lines")
	return ""
}

// waitStored waits, within ctx, for the response to be stored and returns
// its status. The engine saves after the request's context ended, so the
// record appears shortly after the disconnect.
func waitStored(ctx context.Context, t *testing.T, h *harness, id string) string {
	t.Helper()
	for range 500 {
		// A streamed response is stored in progress from its start;
		// wait for its final save.
		rec, err := h.Store.GetResponse(ctx, id)
		switch {
		case err == nil && rec.Status != "in_progress":
			return rec.Status
		case err == nil:
		case !errors.Is(err, store.ErrNotFound):
			t.Fatalf("get %s: %v", id, err)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("response %s was not stored: %v", id, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Fatalf("response %s was not stored", id)
	return ""
}
