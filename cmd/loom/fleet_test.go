package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loomgate/loom/internal/testutil"
	"github.com/loomgate/loom/model/mockllm"
)

// TestUpstreamURLList: --upstream-url takes a comma-separated list; a
// list with a bad URL or one URL twice is refused naming the flag, as is
// a session header that is no header name.
func TestUpstreamURLList(t *testing.T) {
	cfg, err := parseServeFlags([]string{"--upstream-url", "http://10.0.0.1:8000/v1, http://10.0.0.2:8000/v1"}, env(map[string]string{
		"LOOM_UPSTREAM_CACHE_SALT":     "s3cret",
		"LOOM_UPSTREAM_SESSION_HEADER": "X-SMG-Routing-Key",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.UpstreamURLs(); !slices.Equal(got, []string{"http://10.0.0.1:8000/v1", "http://10.0.0.2:8000/v1"}) {
		t.Errorf("URLs %q", got)
	}
	if cfg.UpstreamCacheSalt != "s3cret" || cfg.UpstreamSessionHeader != "X-SMG-Routing-Key" {
		t.Errorf("salt %q, header %q", cfg.UpstreamCacheSalt, cfg.UpstreamSessionHeader)
	}
	def, err := parseServeFlags([]string{"--upstream-url", "http://10.0.0.1:8000/v1"}, env(nil))
	if err != nil || def.UpstreamSessionHeader != "X-Session-ID" || def.UpstreamCacheSalt != "" {
		t.Errorf("defaults: %v, header %q, salt %q", err, def.UpstreamSessionHeader, def.UpstreamCacheSalt)
	}
	for _, args := range [][]string{
		{"--upstream-url", "http://10.0.0.1:8000/v1,not a url"},
		{"--upstream-url", "http://10.0.0.1:8000/v1,http://10.0.0.1:8000/v1/"},
		{"--upstream-url", " , "},
		{"--upstream-url", "http://10.0.0.1:8000/v1", "--upstream-session-header", "X Session"},
	} {
		_, err := parseServeFlags(args, env(nil))
		if err == nil || !strings.Contains(err.Error(), "--upstream-") {
			t.Errorf("%q: %v, want an error naming the flag", args, err)
		}
	}
}

// deadAddr is an address nobody listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// openFleet opens loom over urls with extra flags and runs it until the
// test ends; it returns the Main and its log.
func openFleet(t *testing.T, urls []string, extra ...string) (*Main, *testutil.LockedBuffer) {
	t.Helper()
	args := append([]string{"--addr", "127.0.0.1:0", "--upstream-url", strings.Join(urls, ","),
		"--store", filepath.Join(t.TempDir(), "loom.db"), "--drain-delay", "0"}, extra...)
	cfg, err := parseServeFlags(args, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	logs := &testutil.LockedBuffer{}
	m := NewMain(cfg, newLogger(logs, "json", "info"))
	if err := m.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
		m.Close()
	})
	return m, logs
}

// TestEnginesCheckedAtStart: loom asks each engine for its models before
// it starts, warns naming each that does not answer, and starts all the
// same; /readyz is 200 while one engine is healthy and 503 while none is.
func TestEnginesCheckedAtStart(t *testing.T) {
	mock := httptest.NewServer(mockllm.New(nil))
	defer mock.Close()
	dead := deadAddr(t)
	m, logs := openFleet(t, []string{mock.URL + "/v1", "http://" + dead + "/v1"})
	var warned []string
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "upstream engine unreachable at start") {
			warned = append(warned, line)
		}
	}
	if len(warned) != 1 || !strings.Contains(warned[0], `"engine":"`+dead+`"`) || !strings.Contains(warned[0], `"level":"WARN"`) {
		t.Errorf("start-up warnings %q, want one naming %s", warned, dead)
	}
	if code, err := freshGet("http://" + m.Addr() + "/readyz"); err != nil || code != http.StatusOK {
		t.Errorf("/readyz with one engine of two healthy: %d %v", code, err)
	}

	m, logs = openFleet(t, []string{"http://" + deadAddr(t) + "/v1"})
	if !strings.Contains(logs.String(), "upstream engine unreachable at start") {
		t.Errorf("no warning for the one engine, unreachable:\n%s", logs.String())
	}
	if code, err := freshGet("http://" + m.Addr() + "/readyz"); err != nil || code != http.StatusServiceUnavailable {
		t.Errorf("/readyz with no engine healthy: %d %v, want 503", code, err)
	}
}

// TestFleetKeepsSessions runs loom given four engines: each chain of
// previous_response_id has all its turns on one engine, the chains spread
// over the engines, every turn carries its session key in the configured
// header and its tenant's cache_salt, and each response's log line names
// its engine.
func TestFleetKeepsSessions(t *testing.T) {
	var mocks []*mockllm.Server
	var urls []string
	for range 4 {
		mock := mockllm.New(nil)
		srv := httptest.NewServer(mock)
		defer srv.Close()
		mocks = append(mocks, mock)
		urls = append(urls, srv.URL+"/v1")
	}
	m, logs := openFleet(t, urls, "--upstream-session-header", "X-SMG-Routing-Key", "--upstream-cache-salt", "s3cret")
	client := &http.Client{Timeout: 30 * time.Second} // a bound, not an assertion
	post := func(body string) string {
		t.Helper()
		res, err := client.Post("http://"+m.Addr()+"/v1/responses", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var resp struct {
			ID string `json:"id"`
		}
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode != http.StatusOK || json.Unmarshal(b, &resp) != nil {
			t.Fatalf("status %d: %s", res.StatusCode, b)
		}
		return resp.ID
	}
	const sessions, turns = 12, 4
	for s := range sessions {
		prev := post(fmt.Sprintf(`{"model":"m","instructions":"session %d","input":"turn 0"}`, s))
		for i := 1; i < turns; i++ {
			prev = post(fmt.Sprintf(`{"model":"m","previous_response_id":%q,"input":"turn %d"}`, prev, i))
		}
	}
	// Each key on one engine, with its turns; the keys spread.
	engineOf := map[string]int{}
	turnsOf := map[string]int{}
	used := map[int]bool{}
	for i, mock := range mocks {
		for _, r := range mock.Requests() {
			key := r.Header.Get("X-SMG-Routing-Key")
			if key == "" {
				t.Fatalf("engine %d got a turn without the session header", i)
			}
			if e, ok := engineOf[key]; ok && e != i {
				t.Errorf("session %s went to engines %d and %d", key, e, i)
			}
			engineOf[key] = i
			turnsOf[key]++
			used[i] = true
			var body map[string]any
			if json.Unmarshal(r.Body, &body) != nil || body["cache_salt"] == nil || body["cache_salt"] == "" {
				t.Errorf("a turn without cache_salt: %s", r.Body)
			}
		}
	}
	if len(engineOf) != sessions {
		t.Errorf("%d session keys for %d chains", len(engineOf), sessions)
	}
	for key, n := range turnsOf {
		if n != turns {
			t.Errorf("session %s: %d turns, want %d", key, n, turns)
		}
	}
	if len(used) < 3 {
		t.Errorf("12 sessions on %d engines of 4", len(used))
	}
	if n := strings.Count(logs.String(), `"engine":"127.0.0.1:`); n < sessions*turns {
		t.Errorf("%d response lines name their engine, want %d", n, sessions*turns)
	}
}
