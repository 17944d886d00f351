package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
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
		"LOOM_LOG_RESPONSES":    "false",
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
	if cfg.LogResponses {
		t.Error("LOOM_LOG_RESPONSES not read")
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
		{[]string{"--upstream-url", "not a url"}, nil, "--upstream-url"},
		{[]string{"--upstream-url", "127.0.0.1:8000/v1"}, nil, "--upstream-url"},
		{[]string{"--upstream-url", "http:///v1"}, nil, "--upstream-url"},
		{[]string{"--upstream-url", "http://x/v1", "--log-level", "loud"}, nil, "--log-level"},
		{[]string{"--upstream-url", "http://x/v1", "--addr", "8080"}, nil, "--addr"},
		{[]string{"--upstream-url", "http://x/v1", "--no-such-flag"}, nil, "no-such-flag"},
		{[]string{"--upstream-url", "http://x/v1", "--drain-delay", "-1s"}, nil, "--drain-delay"},
		{[]string{"--upstream-url", "http://x/v1", "--console-addr", "127.0.0.1:8081"}, nil, "--console-token"},
		{[]string{"--upstream-url", "http://x/v1", "--console-addr", "8081", "--console-token", "a-long-enough-token"}, nil, "--console-addr"},
		{[]string{"--upstream-url", "http://x/v1", "--console-addr", "127.0.0.1:8081", "--console-token", "a-long-enough-token", "--console-trace-url", "http://jaeger/trace/"}, nil, "--console-trace-url"},
		{[]string{"--upstream-url", "http://x/v1", "--console-addr", "127.0.0.1:8081", "--console-token", "t"}, nil, "--console-token"},
		{[]string{"--upstream-url", "http://x/v1", "--console-addr", "127.0.0.1:8081"}, map[string]string{"LOOM_CONSOLE_TOKEN": "fifteen-chars.."}, "--console-token"},
	}
	// Every numeric flag refuses a value out of its range.
	for _, f := range []string{"max-body-bytes", "tool-cpu-seconds", "tool-memory-bytes", "tool-max-processes", "tool-max-output", "tool-disk-bytes",
		"shutdown-timeout", "request-timeout", "tool-timeout", "upstream-idle-timeout", "upstream-whole-timeout", "mcp-idle-timeout", "body-read-timeout", "write-timeout", "idle-timeout"} {
		v := "-1"
		if strings.HasSuffix(f, "timeout") {
			v = "-1s"
		}
		tests = append(tests, struct {
			args []string
			env  map[string]string
			want string
		}{[]string{"--upstream-url", "http://x/v1", "--" + f, v}, nil, "--" + f})
	}
	for _, tt := range tests {
		_, err := parseServeFlags(tt.args, env(tt.env))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v %v: error %v, want it to mention %q", tt.args, tt.env, err, tt.want)
		}
		if code := exitCode(err); code != 2 {
			t.Errorf("%v %v: exit code %d, want 2", tt.args, tt.env, code)
		}
	}
}

func TestUpstreamURLWithoutV1Warns(t *testing.T) {
	cfg, err := parseServeFlags([]string{"--upstream-url", "http://127.0.0.1:8000"}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Warnings) != 1 || !strings.Contains(cfg.Warnings[0], "/v1") {
		t.Errorf("warnings %q", cfg.Warnings)
	}
	cfg, _ = parseServeFlags([]string{"--upstream-url", "http://127.0.0.1:8000/v1/"}, env(nil))
	if len(cfg.Warnings) != 0 {
		t.Errorf("warnings for a /v1 URL: %q", cfg.Warnings)
	}
}

// TestServeHelpAndVersion runs the real binary: serve --help goes to
// stdout with status 0 and names each flag's variable; --version prints
// the version; a bad flag value exits 2 naming the flag.
func TestServeHelpAndVersion(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "loom")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, "serve", "--help")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("serve --help: %v\n%s", err, stderr.String())
	}
	fs := serveFlags(&Config{}, new(string), new(string))
	fs.VisitAll(func(f *flag.Flag) {
		if !strings.Contains(stdout.String(), "--"+f.Name+" ") || !strings.Contains(stdout.String(), "("+envName(f.Name)+")") {
			t.Errorf("serve --help does not list --%s with %s", f.Name, envName(f.Name))
		}
	})

	out, err := exec.Command(bin, "--version").Output()
	if err != nil || !strings.HasPrefix(string(out), "loom ") || !strings.Contains(string(out), "commit ") {
		t.Errorf("--version: %q %v", out, err)
	}

	cmd = exec.Command(bin, "serve", "--upstream-url", "http://127.0.0.1:1/v1", "--max-body-bytes", "-1")
	stderr.Reset()
	cmd.Stderr = &stderr
	err = cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(stderr.String(), "--max-body-bytes") {
		t.Errorf("bad flag: %v, stderr %q", err, stderr.String())
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
		// The request is shown as sent, directives included.
		"request body:",
		`#call get_weather {\"city\": \"Paris\"}`,
		// It does not promise what cannot work once it exits.
		"gone now",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("demo output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestDemoHelp: `loom demo --help` (and -h) explains the demo instead of
// running it, and an argument the demo does not take is refused with
// status 2 rather than ignored.
func TestDemoHelp(t *testing.T) {
	for _, arg := range []string{"--help", "-h"} {
		var stdout, stderr bytes.Buffer
		if err := run([]string{"demo", arg}, env(nil), &stdout, &stderr); err != nil {
			t.Fatalf("demo %s: %v", arg, err)
		}
		if !strings.HasPrefix(stdout.String(), "Usage: loom demo") || !strings.Contains(stdout.String(), "scripted model") {
			t.Errorf("demo %s printed %q, want the demo's usage", arg, stdout.String())
		}
		if strings.Contains(stdout.String(), "SCRIPTED model") || strings.Contains(stdout.String(), "POST /v1/responses") {
			t.Errorf("demo %s ran the demo:\n%s", arg, stdout.String())
		}
	}
	var stdout, stderr bytes.Buffer
	err := run([]string{"demo", "--fast"}, env(nil), &stdout, &stderr)
	if err == nil || exitCode(err) != 2 || !strings.Contains(err.Error(), "--fast") {
		t.Errorf("demo --fast: %v (exit %d), want a configuration error naming --fast", err, exitCode(err))
	}
	if stdout.Len() != 0 || !strings.Contains(stderr.String(), "Usage: loom demo") {
		t.Errorf("demo --fast: stdout %q, stderr %q: want the usage on stderr and no demo", stdout.String(), stderr.String())
	}
}
