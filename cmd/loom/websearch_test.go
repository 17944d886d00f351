package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/loomgate/loom/internal/testutil"
	"github.com/loomgate/loom/model/mockllm"
)

// TestWebSearchFlags: the web search flags (and their LOOM_ variables)
// are read, with defaults; a search URL that is not http(s) or a bad
// allowlist stops loom at start, naming the flag.
func TestWebSearchFlags(t *testing.T) {
	cfg, err := parseServeFlags([]string{"--upstream-url", "http://127.0.0.1:1/v1", "--web-fetch-timeout", "3s"},
		env(map[string]string{"LOOM_WEB_SEARCH_URL": "http://127.0.0.1:9/search", "LOOM_WEB_FETCH_ALLOW": "10.0.0.0/8", "LOOM_WEB_FETCH_MAX_BYTES": "1000"}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.WebSearchURL != "http://127.0.0.1:9/search" || cfg.WebFetchAllow != "10.0.0.0/8" || cfg.WebFetchMaxBytes != 1000 || cfg.WebFetchTimeout != 3*time.Second {
		t.Errorf("web search flags not read: %+v", cfg)
	}
	if _, err := parseServeFlags([]string{"--upstream-url", "http://127.0.0.1:1/v1", "--web-fetch-max-bytes", "0"}, env(nil)); err == nil ||
		!strings.Contains(err.Error(), "--web-fetch-max-bytes") {
		t.Errorf("--web-fetch-max-bytes 0: %v", err)
	}
	for flag, value := range map[string]string{"--web-search-url": "ftp://x/search", "--web-fetch-allow": "not a host!"} {
		args := []string{"--web-search-url", "http://127.0.0.1:9/search"}
		if flag == "--web-search-url" {
			args = nil
		}
		m := NewMain(toolConfig(t, "http://127.0.0.1:1/v1", append(args, flag, value)...), newLogger(&testutil.LockedBuffer{}, "text", "info"))
		err := m.Open(context.Background())
		m.Close()
		if err == nil || !strings.Contains(err.Error(), flag) {
			t.Errorf("%s %q: Open = %v, want an error naming the flag", flag, value, err)
		}
	}
}

// TestWebSearchThroughMain: loom serve with --web-search-url runs a
// request's web_search against the SearXNG server; without it the tool is
// accepted and the call fails visibly.
func TestWebSearchThroughMain(t *testing.T) {
	searx := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"results":[{"title":"Result for %s","url":"https://example.com/1","content":"snippet"}]}`, r.URL.Query().Get("q"))
	}))
	defer searx.Close()
	mock := mockllm.New(nil)
	up := httptest.NewServer(mock)
	defer up.Close()
	defer mock.Close()
	for _, tc := range []struct {
		name   string
		flags  []string
		status string
		seen   string
	}{
		{"backend", []string{"--web-search-url", searx.URL + "/search"}, "completed", "Result for loom"},
		{"no backend", nil, "failed", "web search is not configured on this server"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := NewMain(toolConfig(t, up.URL+"/v1", append([]string{"--drain-delay", "0"}, tc.flags...)...), newLogger(&testutil.LockedBuffer{}, "text", "info"))
			if err := m.Open(context.Background()); err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- m.Run(ctx) }()
			defer func() { cancel(); <-done }()
			body, _ := json.Marshal(map[string]any{"model": "mock-model", "input": "#call web_search {\"query\":\"loom\"}\n#then\n#say ok",
				"tools": []any{map[string]any{"type": "web_search"}}})
			res, err := http.Post("http://"+m.Addr()+"/v1/responses", "application/json", bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			var resp struct {
				Status string `json:"status"`
				Output []struct {
					Type, Status string
				} `json:"output"`
			}
			json.NewDecoder(res.Body).Decode(&resp)
			if res.StatusCode != http.StatusOK || resp.Status != "completed" || len(resp.Output) != 2 || resp.Output[0].Type != "web_search_call" || resp.Output[0].Status != tc.status {
				t.Fatalf("HTTP %d: %+v", res.StatusCode, resp)
			}
			reqs := mock.Requests()
			if last := string(reqs[len(reqs)-1].Body); !strings.Contains(last, tc.seen) {
				t.Errorf("the model did not read %q: %s", tc.seen, last)
			}
		})
	}
}
