package server_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loomgate/loom/engine"
	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/model/chat"
	"github.com/loomgate/loom/model/mockllm"
	"github.com/loomgate/loom/server"
	"github.com/loomgate/loom/store/sqlite"
)

// healthSignal is an EngineObserver that passes on health changes, and
// the rest to next.
type healthSignal struct {
	model.EngineObserver
	changes chan bool
}

func (h healthSignal) EngineHealth(engine string, up bool) {
	if h.EngineObserver != nil {
		h.EngineObserver.EngineHealth(engine, up)
	}
	h.changes <- up
}

func (h healthSignal) wait(t *testing.T, want bool) {
	t.Helper()
	select {
	case got := <-h.changes:
		if got != want {
			t.Fatalf("health changed to %v, want %v", got, want)
		}
	case <-time.After(10 * time.Second): // the bound of the test
		t.Fatalf("no health change to %v", want)
	}
}

// serverOver is a server over b, whose engine takes caps.
func serverOver(t *testing.T, b model.Backend, caps model.Capabilities, opts *server.Options) *httptest.Server {
	t.Helper()
	db, err := sqlite.Open(context.Background(), ":memory:", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	srv := httptest.NewServer(server.New(engine.New(b, db, &engine.Options{Models: []string{"m"}, Upstream: caps}), opts))
	t.Cleanup(srv.Close)
	return srv
}

func readyz(t *testing.T, url string) (int, string) {
	t.Helper()
	res, err := http.Get(url + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(body)
}

// TestReadyzFollowsTheEngines: /readyz answers 503 while no upstream
// engine is healthy (here the only one does not answer its health check)
// and 200 once a probe finds it back.
func TestReadyzFollowsTheEngines(t *testing.T) {
	var healthy atomic.Bool
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !healthy.Load() {
			http.Error(w, "loading", http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, `{"object":"list","data":[]}`)
	}))
	defer up.Close()
	signal := healthSignal{changes: make(chan bool, 16)}
	b := chat.New(up.URL+"/v1", "", &chat.Options{HTTPOptions: model.HTTPOptions{
		Logger: slog.New(slog.DiscardHandler), ProbeInterval: time.Millisecond, Observer: signal}})
	defer b.Close()
	signal.wait(t, true) // reported up when made
	srv := serverOver(t, b, b.Capabilities(), nil)
	if code, _ := readyz(t, srv.URL); code != http.StatusOK {
		t.Fatalf("/readyz %d before any check", code)
	}
	if down := b.Check(context.Background()); len(down) != 1 {
		t.Fatalf("Check: %v, want the one engine down", down)
	}
	signal.wait(t, false)
	if code, body := readyz(t, srv.URL); code != http.StatusServiceUnavailable || !strings.Contains(body, "no upstream engine is healthy") {
		t.Errorf("/readyz with no engine healthy: %d %q", code, body)
	}
	healthy.Store(true)
	signal.wait(t, true)
	if code, body := readyz(t, srv.URL); code != http.StatusOK {
		t.Errorf("/readyz once the engine is back: %d %q", code, body)
	}
}

// TestEngineMetrics: /metrics counts each engine's requests, prompt and
// cached tokens, and shows its in-flight count and health, labelled by
// its host:port.
func TestEngineMetrics(t *testing.T) {
	metrics := server.NewMetrics()
	var urls, hosts []string
	for range 2 {
		m := httptest.NewServer(mockllm.New(nil))
		defer m.Close()
		urls = append(urls, m.URL+"/v1")
		hosts = append(hosts, m.Listener.Addr().String())
	}
	b := chat.NewFleet(urls, "", &chat.Options{HTTPOptions: model.HTTPOptions{Logger: slog.New(slog.DiscardHandler), Observer: metrics.EngineObserver()}})
	defer b.Close()
	srv := serverOver(t, b, b.Capabilities(), &server.Options{Metrics: metrics})
	if res := post(t, srv.URL, `{"model":"m","input":"hello\n#cached 5"}`, nil); res.StatusCode != http.StatusOK {
		t.Fatalf("status %d", res.StatusCode)
	}
	res, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	body := string(raw)
	served := ""
	for _, h := range hosts {
		if strings.Contains(body, `loom_upstream_requests_total{engine="`+h+`"} 1`) {
			served = h
		}
		for _, want := range []string{`loom_upstream_healthy{engine="` + h + `"} 1`} {
			if !strings.Contains(body, want) {
				t.Errorf("/metrics lacks %s", want)
			}
		}
	}
	if served == "" {
		t.Fatalf("no engine counted the request:\n%s", body)
	}
	for _, want := range []string{
		`loom_upstream_in_flight{engine="` + served + `"} 0`,
		`loom_upstream_cached_tokens_total{engine="` + served + `"} 5`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if !regexp.MustCompile(`loom_upstream_prompt_tokens_total\{engine="` + regexp.QuoteMeta(served) + `"\} [1-9]`).MatchString(body) {
		t.Errorf("/metrics lacks the prompt tokens of %s", served)
	}
}

// TestSessionHeaderKeysTheResponse: the client's session_id header
// (Codex's; session-id alike) keys the response's turns when nothing
// else does: one header, one key; two headers, two keys.
func TestSessionHeaderKeysTheResponse(t *testing.T) {
	var keys []string
	b := backendFunc(func(_ context.Context, req *model.Request, emit func(model.Delta) error) error {
		keys = append(keys, req.Route.Session)
		return emit(model.Delta{Kind: model.DeltaText, Text: "hi"})
	})
	srv := newServer(t, b, nil)
	for _, h := range []map[string]string{
		{"session_id": "s1"},
		{"Session-Id": "s1"},
		{"session_id": "s2"},
		{"session_id": "s1"},
	} {
		// Every request starts alike: only the header tells them apart.
		post(t, srv.URL, `{"model":"m","input":"x"}`, h)
	}
	if len(keys) != 4 || keys[0] != keys[1] || keys[0] == keys[2] || keys[0] != keys[3] {
		t.Errorf("keys %q: want the first, second and fourth alike and the third apart", keys)
	}
}
