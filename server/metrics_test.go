package server_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	conversation "github.com/loomgate/loom/context"
	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/server"
)

func TestMetrics(t *testing.T) {
	b := backendFunc(func(_ context.Context, _ *model.Request, emit func(model.Delta) error) error {
		return emit(model.Delta{Kind: model.DeltaText, Text: "hi"})
	})
	metrics := server.NewMetrics()
	srv := newServer(t, b, &server.Options{Metrics: metrics})
	post(t, srv.URL, `{"model":"m","input":"x"}`, nil)
	post(t, srv.URL, `{"model":"m","input":"x","temperature":7}`, nil)
	metrics.ConversationMetrics().Observe(conversation.OpCleanup, "srv", conversation.TimedOut)

	res, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	for _, want := range []string{
		`loom_responses_total{status="completed"} 1`,
		`loom_responses_total{status="rejected"} 1`,
		`loom_http_requests_total{code="200",route="POST /v1/responses"} 1`,
		`loom_http_requests_total{code="400",route="POST /v1/responses"} 1`,
		`loom_tool_session_operations_total{op="cleanup",outcome="timeout"} 1`,
		`go_goroutines`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// Issue 35, finding 11: /metrics on the API's listener answered without a
// key although the API needed one. It now needs the API's bearer token,
// whichever authenticator accepts it.
func TestMetricsNeedTheAPIKey(t *testing.T) {
	srv := newServer(t, answer("hi"), &server.Options{Metrics: server.NewMetrics(), APIKeys: []string{"secret"},
		Authenticators: []server.Authenticator{server.APIKeys{{Key: "key-a", Tenant: "a"}}}})
	scrape := func(token string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/metrics", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(body)
	}
	for _, token := range []string{"", "wrong"} {
		code, body := scrape(token)
		if code != http.StatusUnauthorized || !strings.Contains(body, `"code":"invalid_api_key"`) || strings.Contains(body, "go_goroutines") {
			t.Errorf("/metrics with token %q: %d %.200s; want an OpenAI-shaped 401", token, code, body)
		}
	}
	for _, token := range []string{"secret", "key-a"} {
		if code, body := scrape(token); code != http.StatusOK || !strings.Contains(body, "go_goroutines") {
			t.Errorf("/metrics with token %q: %d %.200s; want the metrics", token, code, body)
		}
	}
	// Without authentication, /metrics stays open like the API.
	open := newServer(t, answer("hi"), &server.Options{Metrics: server.NewMetrics()})
	res, err := http.Get(open.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Errorf("/metrics without authentication configured: %d", res.StatusCode)
	}
}
