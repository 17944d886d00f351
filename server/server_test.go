package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/loomgate/loom/engine"
	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/server"
	"github.com/loomgate/loom/store/sqlite"
)

// backendFunc adapts a function to model.Backend.
type backendFunc func(ctx context.Context, req *model.Request, emit func(model.Delta) error) error

func (f backendFunc) Stream(ctx context.Context, req *model.Request, emit func(model.Delta) error) error {
	return f(ctx, req, emit)
}

func newServer(t *testing.T, b model.Backend, opts *server.Options) *httptest.Server {
	t.Helper()
	return newServerB(t, b, opts)
}

// newServerB is newServer for tests and benchmarks alike.
func newServerB(t testing.TB, b model.Backend, opts *server.Options) *httptest.Server {
	t.Helper()
	db, err := sqlite.Open(context.Background(), ":memory:", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	srv := httptest.NewServer(server.New(engine.New(b, db, &engine.Options{Models: []string{"m"}}), opts))
	t.Cleanup(srv.Close)
	return srv
}

func post(t *testing.T, url, body string, header map[string]string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/responses", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	return res
}

func TestKeepAliveDuringSilence(t *testing.T) {
	// The model is silent for a while before answering: the stream must
	// carry keep-alive comments meanwhile.
	b := backendFunc(func(ctx context.Context, _ *model.Request, emit func(model.Delta) error) error {
		select {
		case <-time.After(300 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
		return emit(model.Delta{Kind: model.DeltaText, Text: "late"})
	})
	srv := newServer(t, b, &server.Options{KeepAlive: 40 * time.Millisecond})
	res := post(t, srv.URL, `{"model":"m","input":"x","stream":true}`, nil)
	body, _ := io.ReadAll(res.Body)
	if !strings.Contains(string(body), ": keep-alive\n\n") {
		t.Fatalf("no keep-alive comment in a stream with 300ms of silence:\n%s", body)
	}
	if !strings.HasSuffix(string(body), "data: [DONE]\n\n") {
		t.Fatalf("stream does not end with [DONE]")
	}
}

func TestStreamRejectedBeforeStartIsJSON(t *testing.T) {
	b := backendFunc(func(context.Context, *model.Request, func(model.Delta) error) error {
		t.Error("the upstream was called for a rejected request")
		return nil
	})
	srv := newServer(t, b, nil)
	res := post(t, srv.URL, `{"model":"m","input":"x","stream":true,"temperature":9}`, nil)
	if res.StatusCode != http.StatusBadRequest || !strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("status %d content-type %q", res.StatusCode, res.Header.Get("Content-Type"))
	}
	var body struct {
		Error struct{ Param string }
	}
	json.NewDecoder(res.Body).Decode(&body)
	if body.Error.Param != "temperature" {
		t.Errorf("param %q", body.Error.Param)
	}
}

func TestDialectHeader(t *testing.T) {
	b := backendFunc(func(_ context.Context, _ *model.Request, emit func(model.Delta) error) error {
		if err := emit(model.Delta{Kind: model.DeltaReasoning, Text: "hmm"}); err != nil {
			return err
		}
		return emit(model.Delta{Kind: model.DeltaText, Text: "hi"})
	})
	srv := newServer(t, b, nil)
	tests := []struct {
		header, want, notWant string
	}{
		{"", "event: response.reasoning_text.delta", "response.reasoning.delta"},
		{"openai", "event: response.reasoning_text.delta", "response.reasoning.delta"},
		{"openresponses", "event: response.reasoning.delta", "reasoning_text.delta"},
	}
	for _, tt := range tests {
		res := post(t, srv.URL, `{"model":"m","input":"x","stream":true}`, map[string]string{server.DialectHeader: tt.header})
		body, _ := io.ReadAll(res.Body)
		if !strings.Contains(string(body), tt.want) || strings.Contains(string(body), tt.notWant) {
			t.Errorf("dialect %q: want %q and not %q in\n%s", tt.header, tt.want, tt.notWant, body)
		}
	}
	res := post(t, srv.URL, `{"model":"m","input":"x"}`, map[string]string{server.DialectHeader: "klingon"})
	if res.StatusCode != http.StatusBadRequest {
		t.Errorf("unknown dialect: status %d", res.StatusCode)
	}
}

func TestAPIKeys(t *testing.T) {
	b := backendFunc(func(_ context.Context, _ *model.Request, emit func(model.Delta) error) error {
		return emit(model.Delta{Kind: model.DeltaText, Text: "hi"})
	})
	srv := newServer(t, b, &server.Options{APIKeys: []string{"sekret"}})
	if res := post(t, srv.URL, `{"model":"m","input":"x"}`, nil); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("no key: status %d", res.StatusCode)
	}
	if res := post(t, srv.URL, `{"model":"m","input":"x"}`, map[string]string{"Authorization": "Bearer wrong"}); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("wrong key: status %d", res.StatusCode)
	}
	// The scheme is case-insensitive (RFC 9110 11.1).
	for _, h := range []string{"Bearer sekret", "bearer sekret", "BEARER sekret"} {
		if res := post(t, srv.URL, `{"model":"m","input":"x"}`, map[string]string{"Authorization": h}); res.StatusCode != http.StatusOK {
			t.Errorf("Authorization %q: status %d", h, res.StatusCode)
		}
	}
	if res := post(t, srv.URL, `{"model":"m","input":"x"}`, map[string]string{"Authorization": "Basic sekret"}); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("Basic scheme: status %d", res.StatusCode)
	}
	// Probes stay open to the orchestrator.
	if res, err := http.Get(srv.URL + "/healthz"); err != nil || res.StatusCode != http.StatusOK {
		t.Errorf("healthz behind auth: %v %v", res, err)
	}
}

func TestReplayStoredEvents(t *testing.T) {
	b := backendFunc(func(_ context.Context, _ *model.Request, emit func(model.Delta) error) error {
		return emit(model.Delta{Kind: model.DeltaText, Text: "hi"})
	})
	srv := newServer(t, b, nil)
	res := post(t, srv.URL, `{"model":"m","input":"x","stream":true}`, nil)
	live, _ := io.ReadAll(res.Body)
	var first struct {
		Response responses.Response `json:"response"`
	}
	line := strings.SplitN(strings.SplitN(string(live), "data: ", 2)[1], "\n", 2)[0]
	json.Unmarshal([]byte(line), &first)

	get, err := http.Get(srv.URL + "/v1/responses/" + first.Response.ID + "?stream=true")
	if err != nil {
		t.Fatal(err)
	}
	defer get.Body.Close()
	replayed, _ := io.ReadAll(get.Body)
	if string(replayed) != string(live) {
		t.Errorf("replay differs from the live stream:\nlive:\n%s\nreplay:\n%s", live, replayed)
	}
	after, err := http.Get(srv.URL + "/v1/responses/" + first.Response.ID + "?stream=true&starting_after=5")
	if err != nil {
		t.Fatal(err)
	}
	defer after.Body.Close()
	tail, _ := io.ReadAll(after.Body)
	if strings.Contains(string(tail), `"sequence_number":5,`) || !strings.Contains(string(tail), `"sequence_number":6,`) {
		t.Errorf("starting_after=5 replay:\n%s", tail)
	}
}

// TestReplayInProgress: a response still running (not a background one, so
// its events are stored when it ends) is followed: GET ?stream=true opens
// the stream at once and, once the response has ended, replays all of it
// to response.completed, rather than an empty stream that would look
// finished; a plain GET answers in_progress meanwhile.
func TestReplayInProgress(t *testing.T) {
	release := make(chan struct{})
	b := backendFunc(func(ctx context.Context, _ *model.Request, emit func(model.Delta) error) error {
		if err := emit(model.Delta{Kind: model.DeltaText, Text: "so far"}); err != nil {
			return err
		}
		select {
		case <-release:
		case <-ctx.Done():
			return ctx.Err()
		}
		return emit(model.Delta{Kind: model.DeltaText, Text: " done"})
	})
	srv := newServer(t, b, nil)
	res := post(t, srv.URL, `{"model":"m","input":"x","stream":true}`, nil)
	// The first data line is response.created, with the id.
	r := bufio.NewReader(res.Body)
	var id string
	for id == "" {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			var ev struct{ Response struct{ ID string } }
			json.Unmarshal([]byte(data), &ev)
			id = ev.Response.ID
		}
	}
	get, err := http.Get(srv.URL + "/v1/responses/" + id)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(get.Body)
	get.Body.Close()
	if get.StatusCode != http.StatusOK || !strings.Contains(string(body), `"status":"in_progress"`) {
		t.Errorf("GET while running: %d %s", get.StatusCode, body)
	}
	follow, err := http.Get(srv.URL + "/v1/responses/" + id + "?stream=true")
	if err != nil {
		t.Fatal(err)
	}
	if follow.StatusCode != http.StatusOK {
		t.Errorf("follow while running: %d", follow.StatusCode)
	}
	close(release)
	io.ReadAll(r)
	body, _ = io.ReadAll(follow.Body)
	follow.Body.Close()
	if !strings.Contains(string(body), "response.created") || !strings.Contains(string(body), "response.completed") {
		t.Errorf("follow of a running response: %s", body)
	}
	replay, err := http.Get(srv.URL + "/v1/responses/" + id + "?stream=true")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(replay.Body)
	replay.Body.Close()
	if replay.StatusCode != http.StatusOK || !strings.Contains(string(body), "response.completed") {
		t.Errorf("replay after the end: %d %s", replay.StatusCode, body)
	}
}
