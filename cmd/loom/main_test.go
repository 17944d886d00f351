package main

import (
	"bytes"
	"context"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestFlagsAndEnvironment(t *testing.T) {
	cfg, err := parseServeFlags([]string{"--model", "a,b", "--addr", "127.0.0.1:9"}, env(map[string]string{
		"LOOM_UPSTREAM_URL":     "http://127.0.0.1:8000/v1",
		"LOOM_ADDR":             "127.0.0.1:1",
		"LOOM_SHUTDOWN_TIMEOUT": "3s",
		"LOOM_EVENT_DIALECT":    "openresponses",
		"LOOM_DRAIN_DELAY":      "7s",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.UpstreamURL != "http://127.0.0.1:8000/v1" || cfg.ShutdownTimeout != 3*time.Second || cfg.EventDialect != "openresponses" {
		t.Errorf("environment not read: %+v", cfg)
	}
	if cfg.DrainDelay != 7*time.Second {
		t.Errorf("LOOM_DRAIN_DELAY not read: %v", cfg.DrainDelay)
	}
	if cfg.Addr != "127.0.0.1:9" {
		t.Errorf("flag did not win over the environment: addr %q", cfg.Addr)
	}
	if !slices.Equal(cfg.Models, []string{"a", "b"}) {
		t.Errorf("models %v", cfg.Models)
	}
}

func TestBadConfiguration(t *testing.T) {
	tests := []struct {
		args []string
		env  map[string]string
		want string
	}{
		{nil, nil, "--upstream-url is required"},
		{[]string{"--upstream-url", "http://x/v1", "--upstream-api", "grpc"}, nil, "--upstream-api"},
		{[]string{"--upstream-url", "http://x/v1", "--log-format", "xml"}, nil, "--log-format"},
		{[]string{"--upstream-url", "http://x/v1"}, map[string]string{"LOOM_SHUTDOWN_TIMEOUT": "soon"}, "LOOM_SHUTDOWN_TIMEOUT"},
		{[]string{"--upstream-url", "http://x/v1", "--drain-delay", "-1s"}, nil, "--drain-delay"},
	}
	for _, tt := range tests {
		_, err := parseServeFlags(tt.args, env(tt.env))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v %v: error %v, want it to mention %q", tt.args, tt.env, err, tt.want)
		}
	}
}

func TestDefaultDrainDelay(t *testing.T) {
	cfg, err := parseServeFlags([]string{"--upstream-url", "http://x/v1"}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.DrainDelay <= 0 || cfg.DrainDelay > 30*time.Second {
		t.Errorf("default drain delay %v: want a few seconds, so balancers notice /readyz", cfg.DrainDelay)
	}
}

func TestSignals(t *testing.T) {
	// The first SIGTERM starts the shutdown, the second ends the drain.
	// Both are delivered to this process for real; onSignals has caught
	// them by the time it returns.
	first, second := make(chan struct{}), make(chan struct{})
	stop := onSignals(func() { close(first) }, func() { close(second) })
	defer stop()
	for i, ch := range []chan struct{}{first, second} {
		if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatalf("signal %d was not handled", i+1)
		}
	}
}

func TestDemo(t *testing.T) {
	// The demo is the newcomer's first look: it must show the whole
	// function-call round trip and say the model is scripted.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	if err := runDemo(ctx, &out, &errOut); err != nil {
		t.Fatalf("demo: %v\n%s\n%s", err, out.String(), errOut.String())
	}
	for _, want := range []string{
		"SCRIPTED model",
		"response.reasoning_text.delta",
		`function_call get_weather({"city": "Paris"})`,
		"previous_response_id",
		"response.output_text.delta",
		"response.completed",
		"[DONE]",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("demo output lacks %q:\n%s", want, out.String())
		}
	}
}
