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
