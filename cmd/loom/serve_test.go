package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loomgate/loom/model/mockllm"
)

// startMain runs loom over a scripted upstream and returns its address and
// a function that stops it and returns Run's error.
func startMain(t *testing.T, shutdown time.Duration) (string, *mockllm.Server, func() error) {
	t.Helper()
	mock := mockllm.New(nil)
	up := httptest.NewServer(mock)
	t.Cleanup(up.Close)
	t.Cleanup(mock.Close)
	cfg := &Config{
		Addr: "127.0.0.1:0", UpstreamURL: up.URL + "/v1", UpstreamAPI: "chat",
		Store: filepath.Join(t.TempDir(), "loom.db"), EventDialect: "openai",
		ShutdownTimeout: shutdown, RequestTimeout: time.Minute, MaxBodyBytes: 1 << 20,
	}
	m := NewMain(cfg, slog.New(slog.DiscardHandler))
	if err := m.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	return m.Addr(), mock, func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(30 * time.Second):
			t.Fatal("Run did not return after shutdown")
			return nil
		}
	}
}

func streamBody(t *testing.T, addr, input string) <-chan string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": "mock-model", "stream": true, "input": input})
	return postInBackground(addr, body)
}

// postInBackground creates a response and delivers the whole answer (or
// the error) on the channel once it ends.
func postInBackground(addr string, body []byte) <-chan string {
	out := make(chan string, 1)
	go func() {
		res, err := http.Post("http://"+addr+"/v1/responses", "application/json", bytes.NewReader(body))
		if err != nil {
			out <- "error: " + err.Error()
			return
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		out <- string(b)
	}()
	return out
}

func TestShutdownLetsInFlightResponsesFinish(t *testing.T) {
	addr, mock, stop := startMain(t, 10*time.Second)
	got := streamBody(t, addr, "#latency 50ms\n#tokens 10")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := mock.WaitStarted(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	body := <-got
	if !strings.Contains(body, "response.completed") || !strings.HasSuffix(body, "data: [DONE]\n\n") {
		t.Fatalf("in-flight stream did not finish during the grace period:\n%s", body)
	}
	if _, err := http.Get("http://" + addr + "/healthz"); err == nil {
		t.Error("the server still accepts connections after shutdown")
	}
}

func TestShutdownCancelsAfterDeadline(t *testing.T) {
	addr, mock, stop := startMain(t, 200*time.Millisecond)
	got := streamBody(t, addr, "#stall 2")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := mock.WaitStarted(ctx, 1); err != nil {
		t.Fatal(err)
	}
	stop()
	body := <-got
	if !strings.Contains(body, `"status":"cancelled"`) {
		t.Fatalf("stalled response was not cancelled at the shutdown deadline:\n%s", body)
	}
	if err := mock.WaitCancelled(ctx, 1); err != nil {
		t.Fatalf("the upstream request was not cancelled: %v", err)
	}
}
