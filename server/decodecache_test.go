package server_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/server"
)

// TestDecodeCache: a tenant's second request with the same tools and the
// same input finds both decoded, the next turn finds its input's first
// items, and another tenant finds nothing of the first one's; the
// metrics say so, and every answer is the one without the cache.
func TestDecodeCache(t *testing.T) {
	var tools, history []string
	for i := range 12 {
		tools = append(tools, fmt.Sprintf(`{"type":"function","name":"tool_%d","description":"Looks up thing %d.","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}`, i, i))
	}
	for i := range 20 {
		history = append(history, fmt.Sprintf(`{"role":"user","content":"question %d: what is the weather like in the city today?"}`, i))
	}
	body := func(items int) string {
		return `{"model":"m","store":false,"input":[` + strings.Join(history[:items], ",") + `],"tools":[` + strings.Join(tools, ",") + `]}`
	}
	b := backendFunc(func(_ context.Context, req *model.Request, emit func(model.Delta) error) error {
		// The model says what it was given: the cache must not change it.
		last := req.Items[len(req.Items)-1].Text()
		return emit(model.Delta{Kind: model.DeltaText, Text: fmt.Sprintf("%d items, %d tools, last %s", len(req.Items), len(req.Tools), last[:11])})
	})
	metrics := server.NewMetrics()
	srv := newServer(t, b, &server.Options{Metrics: metrics, Authenticators: []server.Authenticator{
		server.APIKeys{{Key: "key-a", Tenant: "a"}, {Key: "key-b", Tenant: "b"}},
	}})
	for _, step := range []struct {
		key   string
		items int
	}{{"key-a", 10}, {"key-a", 10}, {"key-a", 12}, {"key-b", 10}} {
		res := post(t, srv.URL, body(step.items), map[string]string{"Authorization": "Bearer " + step.key})
		got, _ := io.ReadAll(res.Body)
		if want := fmt.Sprintf(`%d items, 12 tools, last question %d`, step.items, step.items-1); res.StatusCode != http.StatusOK || !strings.Contains(string(got), want) {
			t.Fatalf("%s, %d items: status %d, %.300s; want %q", step.key, step.items, res.StatusCode, got, want)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer key-a") // the API's auth guards its /metrics
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	text, _ := io.ReadAll(res.Body)
	for _, want := range []string{
		// a's first request and b's, which does not find a's lists.
		`loom_decode_cache_lists_total{found="miss",list="tools"} 2`,
		`loom_decode_cache_lists_total{found="miss",list="input"} 2`,
		`loom_decode_cache_lists_total{found="hit",list="tools"} 2`,
		`loom_decode_cache_lists_total{found="hit",list="input"} 1`,
		`loom_decode_cache_lists_total{found="partial",list="input"} 1`,
	} {
		if !strings.Contains(string(text), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", text)
	}
}

// TestDecodeCacheKeptListStaysAsKept: a request that sends a kept input
// list again reads the cache's items (responses.Input.Shared), and the
// run gives its items their ids in a copy: were they written in the
// kept list, the next request sending it would find them there and
// reuse the ids of the one before. Each request's items get ids of their
// own, with store true (every item) and false (a function call's).
func TestDecodeCacheKeptListStaysAsKept(t *testing.T) {
	var history []string
	for i := range 12 {
		history = append(history, fmt.Sprintf(`{"role":"user","content":"question %d: what is the weather like in the city today?"}`, i))
	}
	call := `{"type":"function_call","call_id":"call_1","name":"weather","arguments":"{}"},{"type":"function_call_output","call_id":"call_1","output":"sunny"}`
	for _, tt := range []struct {
		name, body string
		item       int // the input item whose id each request must have anew
	}{
		{"store true, a message", `{"model":"m","input":[` + strings.Join(history, ",") + `]}`, 0},
		{"store false, a function call", `{"model":"m","store":false,"input":[` + strings.Join(history, ",") + `,` + call + `]}`, len(history)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var ids []string
			b := backendFunc(func(_ context.Context, req *model.Request, emit func(model.Delta) error) error {
				ids = append(ids, req.Items[tt.item].ID)
				return emit(model.Delta{Kind: model.DeltaText, Text: "ok"})
			})
			srv := newServer(t, b, nil)
			for i := range 3 {
				if res := post(t, srv.URL, tt.body, nil); res.StatusCode != http.StatusOK {
					got, _ := io.ReadAll(res.Body)
					t.Fatalf("request %d: status %d, %.300s", i+1, res.StatusCode, got)
				}
			}
			if len(ids) != 3 || ids[0] == "" || ids[0] == ids[1] || ids[1] == ids[2] || ids[0] == ids[2] {
				t.Fatalf("input item %d's ids over three requests: %q; want three different ones", tt.item, ids)
			}
		})
	}
}
