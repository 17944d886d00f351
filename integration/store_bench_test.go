package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loomgate/loom/engine"
	"github.com/loomgate/loom/internal/loadgen"
	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/model/chat"
	"github.com/loomgate/loom/model/mockllm"
	"github.com/loomgate/loom/server"
	"github.com/loomgate/loom/store/postgres"
	"github.com/loomgate/loom/store/postgres/pgtest"
	"github.com/loomgate/loom/store/sqlite"
)

// The cost of a continuation as its chain grows, on both stores, side by
// side with the upstream called directly with the same conversation, in
// one loop so all targets see the same load (internal/loadgen). Run with:
//
//	go test ./integration -run '^$' -bench ChainLink -benchtime 3000x

// storedLoom is a loom server over upstream (base URL ending in /v1) on
// store.
func storedLoom(b *testing.B, upstream string, store engine.Store) string {
	b.Helper()
	backend := chat.New(upstream, "test-key", &chat.Options{HTTPOptions: model.HTTPOptions{Transport: loadgen.PooledTransport(64)}})
	srv := httptest.NewServer(server.New(engine.New(backend, store, &engine.Options{Models: []string{mockllm.DefaultModel}}), nil))
	b.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

// benchStores opens the two stores a stored benchmark compares.
func benchStores(b *testing.B) (sqliteStore, pgStore engine.Store) {
	b.Helper()
	quiet := slog.New(slog.DiscardHandler)
	s, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "loom.db"), &sqlite.Options{Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	p, err := postgres.Open(context.Background(), pgtest.URL(b), &postgres.Options{Logger: quiet, PoolSize: 40})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { p.Close() })
	return s, p
}

// BenchmarkChainLink: a request continuing a chain of 1, 10 or 50 stored
// turns (previous_response_id; store false, so the chain stays as long),
// on each store, side by side with the upstream called directly with the
// same conversation (direct-Nturns), so that the longer prompt's cost to
// the upstream is not counted as loom's. added-<store>-Nturns is loom's
// percentile minus direct-Nturns'; the difference between the 50-turn and
// the 1-turn added figure is what 49 more links cost loom: loading them
// (one query) and translating the longer history.
func BenchmarkChainLink(b *testing.B) {
	mock := mockllm.New(nil)
	up := httptest.NewServer(mock)
	b.Cleanup(up.Close)
	b.Cleanup(mock.Close)
	sq, pg := benchStores(b)
	client := &http.Client{Transport: loadgen.PooledTransport(64)}
	b.Cleanup(client.CloseIdleConnections)
	turnCounts := []int{1, 10, 50}
	var targets []loadgen.Target
	for _, turns := range turnCounts {
		targets = append(targets, loadgen.Target{
			Name: fmt.Sprintf("direct-%dturns", turns), URL: up.URL + "/v1/chat/completions",
			Body: chainChatBody(turns),
		})
	}
	for _, st := range []struct {
		name  string
		store engine.Store
	}{{"sqlite", sq}, {"postgres", pg}} {
		base := storedLoom(b, up.URL+"/v1", st.store)
		for _, turns := range turnCounts {
			last := buildChain(b, client, base, turns)
			targets = append(targets, loadgen.Target{
				Name: fmt.Sprintf("%s-%dturns", st.name, turns),
				URL:  base + "/responses",
				Body: fmt.Appendf(nil, `{"model":"mock-model","store":false,"input":"#say ok","previous_response_id":%q}`, last),
			})
		}
	}
	b.ReportAllocs()
	res, err := loadgen.Run(context.Background(), targets, loadgen.Options{Rounds: b.N, Client: client, Measuring: b.ResetTimer})
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	pct := make([][2]float64, len(targets))
	for ti, ts := range res {
		d := make([]time.Duration, len(ts))
		for i, t := range ts {
			d[i] = t.Total
		}
		slices.Sort(d)
		pct[ti] = [2]float64{us(d[len(d)*50/100]), us(d[min(len(d)-1, len(d)*99/100)])}
	}
	for ti, t := range targets {
		b.ReportMetric(pct[ti][0], "p50-"+t.Name+"-us")
		b.ReportMetric(pct[ti][1], "p99-"+t.Name+"-us")
		if ti >= len(turnCounts) {
			direct := pct[ti%len(turnCounts)]
			b.ReportMetric(pct[ti][0]-direct[0], "p50-added-"+t.Name+"-us")
			b.ReportMetric(pct[ti][1]-direct[1], "p99-added-"+t.Name+"-us")
		}
	}
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// chainChatBody is the chat request a chain of turns becomes upstream:
// each stored turn's question and answer, then the new question.
func chainChatBody(turns int) []byte {
	type message struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	var msgs []message
	for i := range turns {
		msgs = append(msgs, message{"user", fmt.Sprintf("#say turn %d answered", i)}, message{"assistant", fmt.Sprintf("turn %d answered", i)})
	}
	msgs = append(msgs, message{"user", "#say ok"})
	body, _ := json.Marshal(map[string]any{"model": "mock-model", "messages": msgs})
	return body
}

// buildChain stores turns linked responses on loom at base and returns
// the id of the last.
func buildChain(b *testing.B, client *http.Client, base string, turns int) string {
	b.Helper()
	prev := ""
	for i := range turns {
		body := fmt.Sprintf(`{"model":"mock-model","input":"#say turn %d answered"`, i)
		if prev != "" {
			body += fmt.Sprintf(`,"previous_response_id":%q`, prev)
		}
		body += "}"
		resp, err := client.Post(base+"/responses", "application/json", strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		var r struct{ ID string }
		err = json.NewDecoder(resp.Body).Decode(&r)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || r.ID == "" {
			b.Fatalf("turn %d: status %d, %v", i, resp.StatusCode, err)
		}
		prev = r.ID
	}
	return prev
}
