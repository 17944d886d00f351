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
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/loomgate/loom/model/mockllm"
)

// startMain runs loom over a scripted upstream and returns its address and
// a function that stops it and returns Run's error.
func startMain(t *testing.T, shutdown time.Duration) (string, *mockllm.Server, func() error) {
	t.Helper()
	m, mock, signal, wait := startMainWith(t, func(cfg *Config) { cfg.ShutdownTimeout = shutdown })
	return m.Addr(), mock, func() error {
		signal()
		return wait()
	}
}

// startMainWith runs loom over a scripted upstream with the configuration
// edit applies. signal stands for SIGTERM (it cancels Run's context); wait
// waits, bounded, for Run to return its error.
func startMainWith(t *testing.T, edit func(*Config)) (m *Main, mock *mockllm.Server, signal func(), wait func() error) {
	t.Helper()
	mock = mockllm.New(nil)
	up := httptest.NewServer(mock)
	t.Cleanup(up.Close)
	t.Cleanup(mock.Close)
	cfg := &Config{
		Addr: "127.0.0.1:0", UpstreamURL: up.URL + "/v1", UpstreamAPI: "chat",
		Store: filepath.Join(t.TempDir(), "loom.db"), EventDialect: "openai",
		ShutdownTimeout: 10 * time.Second, RequestTimeout: time.Minute, MaxBodyBytes: 1 << 20,
	}
	if edit != nil {
		edit(cfg)
	}
	m = NewMain(cfg, slog.New(slog.DiscardHandler))
	if err := m.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	return m, mock, cancel, func() error {
		select {
		case err := <-done:
			return err
		case <-time.After(30 * time.Second):
			t.Fatal("Run did not return after shutdown")
			return nil
		}
	}
}

// freshGet sends a GET on a new connection, as a balancer's health check
// or a newly routed client would.
func freshGet(url string) (int, error) {
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	res, err := c.Get(url)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode, nil
}

func TestDrainTurnsNotReadyAndKeepsServing(t *testing.T) {
	// An hour of drain: only EndDrain (the test's explicit signal) ends
	// it, so everything checked in between happens during the drain.
	m, mock, sigterm, wait := startMainWith(t, func(cfg *Config) { cfg.DrainDelay = time.Hour })
	addr := m.Addr()
	if code, err := freshGet("http://" + addr + "/readyz"); err != nil || code != http.StatusOK {
		t.Fatalf("/readyz before the signal: %d %v", code, err)
	}
	inFlight := streamBody(t, addr, "#latency 20ms\n#tokens 10")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := mock.WaitStarted(ctx, 1); err != nil {
		t.Fatal(err)
	}

	sigterm()
	select {
	case <-m.draining:
	case <-ctx.Done():
		t.Fatal("the drain did not begin after the signal")
	}
	if code, err := freshGet("http://" + addr + "/readyz"); err != nil || code != http.StatusServiceUnavailable {
		t.Errorf("/readyz during the drain: %d %v, want 503", code, err)
	}
	if code, err := freshGet("http://" + addr + "/healthz"); err != nil || code != http.StatusOK {
		t.Errorf("/healthz during the drain: %d %v, want 200 (the process is alive)", code, err)
	}
	// A request that arrives during the drain, on a new connection, is
	// served in full.
	late := <-postInBackground(addr, []byte(`{"model":"mock-model","input":"#say late but served"}`))
	if !strings.Contains(late, `"status":"completed"`) || !strings.Contains(late, "late but served") {
		t.Errorf("a request during the drain was not served: %s", late)
	}

	m.EndDrain()
	if err := wait(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if body := <-inFlight; !strings.Contains(body, "response.completed") {
		t.Errorf("the in-flight stream did not finish after the drain:\n%s", body)
	}
	if _, err := freshGet("http://" + addr + "/healthz"); err == nil {
		t.Error("the server still accepts connections after the drain and shutdown")
	}
}

func TestDrainDelayRunsOut(t *testing.T) {
	// The delay's own timer ends the drain: Run returns without EndDrain.
	m, _, sigterm, wait := startMainWith(t, func(cfg *Config) { cfg.DrainDelay = time.Millisecond })
	sigterm()
	if err := wait(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	select {
	case <-m.draining:
	default:
		t.Error("Run returned without draining")
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
	m, mock, sigterm, wait := startMainWith(t, func(cfg *Config) { cfg.ShutdownTimeout = 200 * time.Millisecond })
	stop := func() error { sigterm(); return wait() }
	got := streamBody(t, m.Addr(), "#stall 2")
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
	// ... and stored as cancelled, so a client that reconnects elsewhere
	// reads what happened.
	id := regexp.MustCompile(`"id":"(resp_[^"]+)"`).FindStringSubmatch(body)
	if id == nil {
		t.Fatalf("no response id in the stream:\n%s", body)
	}
	rec, err := m.store.GetResponse(ctx, id[1])
	if err != nil || rec.Status != "cancelled" {
		t.Errorf("stored response %s: %+v %v, want status cancelled", id[1], rec, err)
	}
	if err := mock.WaitCancelled(ctx, 1); err != nil {
		t.Fatalf("the upstream request was not cancelled: %v", err)
	}
}
