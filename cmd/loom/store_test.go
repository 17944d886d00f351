package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/loomgate/loom/internal/testutil"
	"github.com/loomgate/loom/model/mockllm"
	"github.com/loomgate/loom/store/postgres/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// serveOn runs loom on store with upstream, logging into logs, until the
// test ends, and returns its base URL. extra are more loom serve flags.
func serveOn(t *testing.T, store, upstream string, logs io.Writer, extra ...string) string {
	t.Helper()
	args := append([]string{"--addr", "127.0.0.1:0", "--upstream-url", upstream, "--store", store}, extra...)
	cfg, err := parseServeFlags(args, env(map[string]string{
		"LOOM_STORE_LEASE":     "3s",
		"LOOM_STORE_POOL_SIZE": "4",
	}))
	if err != nil {
		t.Fatal(err)
	}
	m := NewMain(cfg, slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err := m.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		m.Close()
	})
	return "http://" + m.Addr() + "/v1"
}

func do(t *testing.T, method, url, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b
}

// TestServeOnPostgres runs two loom servers on one PostgreSQL database, as
// two replicas: a response streamed on A is read on B, continued on B with
// the upstream seeing the first turn, its input items listed on A, deleted
// on B and then gone on A. The URL's password is in no log line.
func TestServeOnPostgres(t *testing.T) {
	u, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	// The test cluster trusts loopback connections, so any password
	// works; what matters is that it is never logged.
	const password = "pw-never-logged-7f3a"
	u.User = url.UserPassword("postgres", password)
	mock := mockllm.New(nil)
	up := httptest.NewServer(mock)
	t.Cleanup(up.Close)
	t.Cleanup(mock.Close)
	var logsA, logsB testutil.LockedBuffer
	a := serveOn(t, u.String(), up.URL+"/v1", &logsA)
	b := serveOn(t, u.String(), up.URL+"/v1", &logsB)

	status, body := do(t, http.MethodPost, a+"/responses", `{"model":"mock-model","input":"turn one","stream":true}`)
	if status != http.StatusOK || !strings.Contains(string(body), "response.completed") {
		t.Fatalf("stream on A: %d %s", status, body)
	}
	var id string
	for _, line := range strings.Split(string(body), "\n") {
		if data, ok := strings.CutPrefix(line, "data: "); ok && strings.Contains(data, `"response.created"`) {
			var ev struct{ Response struct{ ID string } }
			json.Unmarshal([]byte(data), &ev)
			id = ev.Response.ID
		}
	}
	if id == "" {
		t.Fatalf("no response.created in %s", body)
	}

	status, body = do(t, http.MethodGet, b+"/responses/"+id, "")
	if status != http.StatusOK || !strings.Contains(string(body), `"status":"completed"`) {
		t.Fatalf("GET on B: %d %s", status, body)
	}
	status, body = do(t, http.MethodPost, b+"/responses", `{"model":"mock-model","input":"turn two","previous_response_id":"`+id+`"}`)
	if status != http.StatusOK {
		t.Fatalf("continue on B: %d %s", status, body)
	}
	reqs := mock.Requests()
	if last := string(reqs[len(reqs)-1].Body); !strings.Contains(last, "turn one") || !strings.Contains(last, "turn two") {
		t.Errorf("the upstream did not see turn one when B continued: %s", last)
	}
	status, body = do(t, http.MethodGet, a+"/responses/"+id+"/input_items", "")
	if status != http.StatusOK || !strings.Contains(string(body), "turn one") {
		t.Errorf("input_items on A: %d %s", status, body)
	}
	status, body = do(t, http.MethodGet, a+"/responses/"+id+"/input_items?after=msg_nope", "")
	if status != http.StatusBadRequest || !strings.Contains(string(body), `"param":"after"`) {
		t.Errorf("input_items with an unknown cursor on A: %d %s", status, body)
	}
	if status, body = do(t, http.MethodDelete, b+"/responses/"+id, ""); status != http.StatusOK {
		t.Errorf("DELETE on B: %d %s", status, body)
	}
	if status, body = do(t, http.MethodGet, a+"/responses/"+id, ""); status != http.StatusNotFound {
		t.Errorf("GET on A after the delete: %d %s", status, body)
	}

	for name, logs := range map[string]*testutil.LockedBuffer{"A": &logsA, "B": &logsB} {
		if strings.Contains(logs.String(), password) {
			t.Errorf("replica %s logged the store password:\n%s", name, logs.String())
		}
		if !strings.Contains(logs.String(), "xxxxx@127.0.0.1") {
			t.Errorf("replica %s did not log the store's redacted URL:\n%s", name, logs.String())
		}
	}
}

func TestStoreFlags(t *testing.T) {
	cfg, err := parseServeFlags([]string{"--upstream-url", "http://127.0.0.1:8000/v1"}, env(map[string]string{
		"LOOM_STORE":                   "postgres://loom@127.0.0.1/loom",
		"LOOM_STORE_LEASE":             "5s",
		"LOOM_STORE_TTL":               "720h",
		"LOOM_STORE_POOL_SIZE":         "32",
		"LOOM_STORE_STATEMENT_TIMEOUT": "2s",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Store != "postgres://loom@127.0.0.1/loom" || cfg.StoreLease != 5*time.Second || cfg.StoreTTL != 720*time.Hour ||
		cfg.StorePoolSize != 32 || cfg.StoreStatementTimeout != 2*time.Second {
		t.Errorf("store settings from the environment: %+v", cfg)
	}
	def, err := parseServeFlags([]string{"--upstream-url", "http://127.0.0.1:8000/v1"}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	// The default lease keeps the documented bound: a dead replica's
	// responses fail within 1.5 leases, at most 60s.
	if def.StoreLease*3/2 > time.Minute || def.StoreTTL != 0 {
		t.Errorf("defaults: lease %v, ttl %v", def.StoreLease, def.StoreTTL)
	}
	for _, bad := range []map[string]string{
		{"LOOM_STORE_LEASE": "100ms"}, {"LOOM_STORE_TTL": "-1h"}, {"LOOM_STORE_POOL_SIZE": "0"},
	} {
		if _, err := parseServeFlags([]string{"--upstream-url", "http://x/v1"}, env(bad)); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

// TestOpenUnreachablePostgres: a store that cannot be reached fails Open
// with an error that names the URL without its password.
func TestOpenUnreachablePostgres(t *testing.T) {
	cfg, err := parseServeFlags([]string{"--addr", "127.0.0.1:0", "--upstream-url", "http://127.0.0.1:1/v1",
		"--store", "postgres://loom:pw-not-in-errors@127.0.0.1:1/loom?connect_timeout=2"}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	err = NewMain(cfg, slog.New(slog.DiscardHandler)).Open(context.Background())
	if err == nil {
		t.Fatal("Open succeeded on an unreachable database")
	}
	if strings.Contains(err.Error(), "pw-not-in-errors") || !strings.Contains(err.Error(), "xxxxx") {
		t.Errorf("error %q: want the URL redacted", err)
	}
}
