package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loomgate/loom/internal/testutil"
)

// TestOperatorSeesWhy runs loom, configured from flags as an operator
// would, against an upstream address nobody listens on: the client gets a
// 502 and the log, at the default level, has the dial error; a refused
// request leaves one info line naming its param, without the body.
func TestOperatorSeesWhy(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	cfg, err := parseServeFlags([]string{"--addr", "127.0.0.1:0", "--upstream-url", "http://" + dead + "/v1",
		"--store", filepath.Join(t.TempDir(), "loom.db")}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	var logs testutil.LockedBuffer
	m := NewMain(cfg, newLogger(&logs, cfg.LogFormat, cfg.LogLevel))
	if err := m.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	client := &http.Client{Timeout: 30 * time.Second} // a bound, not an assertion

	res, err := client.Post("http://"+m.Addr()+"/v1/responses", "application/json", strings.NewReader(`{"model":"m","input":"hi"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusBadGateway {
		t.Errorf("status %d (%s), want 502", res.StatusCode, body)
	}
	if out := logs.String(); !strings.Contains(out, "upstream request failed") || !strings.Contains(out, "connection refused") {
		t.Errorf("the log does not say why:\n%s", out)
	}

	res, err = client.Post("http://"+m.Addr()+"/v1/responses", "application/json", strings.NewReader(`{"model":"m","input":"secret words","temperature":9}`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	var refused []string
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "request refused") {
			refused = append(refused, line)
		}
	}
	if len(refused) != 1 || !strings.Contains(refused[0], "INF") || !strings.Contains(refused[0], "param=temperature") || strings.Contains(refused[0], "secret words") {
		t.Errorf("refusal log lines %q", refused)
	}
}
