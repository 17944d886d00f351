package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/coder/websocket"
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

// madeKey names what the backend below keeps in an InputMemo.
type madeKey struct{}

// TestDecodeCacheMemoReachesTheBackend: the backend gets what the decode
// cache knows of a request's input, over HTTP and over a WebSocket alike:
// what it kept of one turn's input is there for the next turn (and for
// how many items), while a request that continues a stored response,
// whose model input does not start with what it sent, gets none.
func TestDecodeCacheMemoReachesTheBackend(t *testing.T) {
	var history []string
	for i := range 12 {
		history = append(history, fmt.Sprintf(`{"role":"user","content":"question %d: what is the weather like in the city today?"}`, i))
	}
	b := backendFunc(func(_ context.Context, req *model.Request, emit func(model.Delta) error) error {
		found, kept := req.InputMemo.Earlier(madeKey{})
		req.InputMemo.Keep(madeKey{}, fmt.Sprintf("made of %d items", len(req.Items)), 10)
		return emit(model.Delta{Kind: model.DeltaText, Text: fmt.Sprintf("memo %t, found %v, kept %d", req.InputMemo != nil, found, kept)})
	})
	srv := newServer(t, b, nil)
	for _, step := range []struct {
		body, want string
	}{
		{`{"model":"m","store":false,"input":[` + strings.Join(history[:10], ",") + `]}`, "memo true, found <nil>, kept 0"},
		{`{"model":"m","store":false,"input":[` + strings.Join(history[:12], ",") + `]}`, "memo true, found made of 10 items, kept 10"},
		{`{"model":"m","input":[` + strings.Join(history[:12], ",") + `]}`, "memo true, found made of 12 items, kept 12"},
	} {
		res := post(t, srv.URL, step.body, nil)
		got, _ := io.ReadAll(res.Body)
		if res.StatusCode != http.StatusOK || !strings.Contains(string(got), step.want) {
			t.Fatalf("status %d, %.300s; want %q", res.StatusCode, got, step.want)
		}
		if strings.Contains(step.body, `"store":false`) {
			continue
		}
		var stored struct{ ID string }
		if err := json.Unmarshal(got, &stored); err != nil {
			t.Fatal(err)
		}
		res = post(t, srv.URL, `{"model":"m","previous_response_id":"`+stored.ID+`","input":[`+strings.Join(history, ",")+`]}`, nil)
		got, _ = io.ReadAll(res.Body)
		if want := "memo false"; res.StatusCode != http.StatusOK || !strings.Contains(string(got), want) {
			t.Fatalf("a continuation: status %d, %.300s; want %q", res.StatusCode, got, want)
		}
	}

	// Over a WebSocket: the same input again finds what the last
	// request over HTTP kept of it.
	ctx, c := dialSocket(t, srv.URL)
	c.Write(ctx, websocket.MessageText, []byte(`{"type":"response.create","model":"m","store":false,"input":[`+strings.Join(history, ",")+`]}`))
	if data, want := readCompleted(t, ctx, c), "memo true, found made of 12 items, kept 12"; !strings.Contains(string(data), want) {
		t.Fatalf("over a WebSocket: %.300s; want %q", data, want)
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
