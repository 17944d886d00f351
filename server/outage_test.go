package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/loomgate/loom/engine"
	"github.com/loomgate/loom/internal/testutil"
	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/server"
	"github.com/loomgate/loom/store"
	"github.com/loomgate/loom/store/sqlite"
	"github.com/loomgate/loom/telemetry"
)

// outageStore is a real SQLite store whose database can be made to fail:
// while down, every save, read and ping returns errDown, as a store whose
// database went away would; saveFailures fails only the final saves (not
// a stream's in-progress one).
type outageStore struct {
	engine.Store
	down atomic.Bool
	// saveFailures, when positive, is how many saves fail before the
	// store takes them again (a blip the one retry rides out).
	saveFailures atomic.Int32
	saves        atomic.Int32
}

var errDown = errors.New("connection refused")

func (s *outageStore) SaveResponse(ctx context.Context, rec *store.Record) error {
	s.saves.Add(1)
	if s.down.Load() {
		return errDown
	}
	if rec.Status != "in_progress" && s.saveFailures.Add(-1) >= 0 {
		return errDown
	}
	return s.Store.SaveResponse(ctx, rec)
}

func (s *outageStore) GetResponse(ctx context.Context, id string) (*store.Record, error) {
	if s.down.Load() {
		return nil, errDown
	}
	return s.Store.GetResponse(ctx, id)
}

func (s *outageStore) Chain(ctx context.Context, id string, limit int) ([]*store.Record, error) {
	if s.down.Load() {
		return nil, errDown
	}
	return s.Store.Chain(ctx, id, limit)
}

func (s *outageStore) Ping(ctx context.Context) error {
	if s.down.Load() {
		return errDown
	}
	return s.Store.Ping(ctx)
}

// outage is a server over an outageStore, its engine, and its log.
type outage struct {
	url   string
	store *outageStore
	eng   *engine.Engine
	log   *testutil.LockedBuffer
}

func newOutage(t *testing.T) *outage {
	t.Helper()
	db, err := sqlite.Open(context.Background(), ":memory:", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	st := &outageStore{Store: db}
	st.saveFailures.Store(-1 << 30)
	answer := backendFunc(func(ctx context.Context, req *model.Request, emit func(model.Delta) error) error {
		return emit(model.Delta{Kind: model.DeltaText, Text: "stored or not"})
	})
	logs := &testutil.LockedBuffer{}
	logger := slog.New(telemetry.LogHandler(slog.NewJSONHandler(logs, nil)))
	eng := engine.New(answer, st, &engine.Options{Models: []string{"m"}, Logger: logger})
	srv := httptest.NewServer(server.New(eng, &server.Options{Logger: logger}))
	t.Cleanup(srv.Close)
	return &outage{url: srv.URL, store: st, eng: eng, log: logs}
}

// TestNoSuccessForWhatWasNotStored: when the final save fails (twice: it
// is retried once), a JSON client gets a 503 with Retry-After, a stream
// ends in response.failed saying the store failed, and neither ever sees
// completed; the id is not readable afterwards. A save that fails once is
// retried and the client gets its answer.
func TestNoSuccessForWhatWasNotStored(t *testing.T) {
	o := newOutage(t)

	o.store.saveFailures.Store(2)
	res := post(t, o.url, `{"model":"m","input":"hi"}`, nil)
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("JSON with the save failing: status %d, body %s; want 503", res.StatusCode, body)
	}
	if res.Header.Get("Retry-After") == "" {
		t.Errorf("503 without Retry-After")
	}
	var e struct {
		Error struct{ Type, Code, Message string }
	}
	if err := json.Unmarshal(body, &e); err != nil || e.Error.Code != "store_unavailable" || e.Error.Type != "server_error" {
		t.Errorf("503 body %s: want server_error store_unavailable", body)
	}
	if strings.Contains(string(body), "completed") || strings.Contains(string(body), errDown.Error()) {
		t.Errorf("503 body claims completion or leaks the cause: %s", body)
	}

	o.store.saveFailures.Store(2)
	res = post(t, o.url, `{"model":"m","input":"hi","stream":true}`, nil)
	events := readEvents(t, res.Body)
	last := events[len(events)-1]
	if last.Type != "response.failed" || last.Response.Status != "failed" || last.Response.Error == nil || last.Response.Error.Code != "store_unavailable" {
		t.Fatalf("stream with the save failing ended with %+v, want response.failed store_unavailable", last)
	}
	for _, ev := range events {
		if ev.Type == "response.completed" {
			t.Fatalf("a stream whose save failed sent response.completed")
		}
	}
	// Its row is the in-progress one of its start, which the lease sweep
	// fails once this replica stops renewing it: never completed.
	res = getRes(t, o.url+"/v1/responses/"+last.Response.ID)
	var stored struct{ Status string }
	json.NewDecoder(res.Body).Decode(&stored)
	if res.StatusCode != http.StatusOK || stored.Status != "in_progress" {
		t.Errorf("GET of the unstored stream's id: %d %q, want its in-progress row", res.StatusCode, stored.Status)
	}

	// One failure: the retry stores it and the client gets its answer.
	o.store.saveFailures.Store(1)
	res = post(t, o.url, `{"model":"m","input":"hi"}`, nil)
	var resp struct{ ID, Status string }
	json.NewDecoder(res.Body).Decode(&resp)
	if res.StatusCode != http.StatusOK || resp.Status != "completed" {
		t.Fatalf("JSON with one failed save: %d %+v, want 200 completed", res.StatusCode, resp)
	}
	if res := get(t, o.url+"/v1/responses/"+resp.ID); res.StatusCode != http.StatusOK {
		t.Errorf("GET of the retried save's id: %d, want 200", res.StatusCode)
	}
}

// TestStoreOutageIs503AndNotReady: while the store is unreachable, routes
// that need it answer 503 (never 500) with Retry-After, each with one log
// line carrying the trace id and the cause; /readyz turns 503 at the
// first failed check and 200 again when the store answers.
func TestStoreOutageIs503AndNotReady(t *testing.T) {
	o := newOutage(t)
	res := post(t, o.url, `{"model":"m","input":"hi"}`, nil)
	var first struct{ ID string }
	json.NewDecoder(res.Body).Decode(&first)
	if res.StatusCode != http.StatusOK || first.ID == "" {
		t.Fatalf("create before the outage: %d", res.StatusCode)
	}
	if res := get(t, o.url+"/readyz"); res.StatusCode != http.StatusOK {
		t.Fatalf("/readyz before the outage: %d", res.StatusCode)
	}

	o.store.down.Store(true)
	if err := o.eng.CheckStore(context.Background()); err == nil {
		t.Fatal("CheckStore of a store that is down succeeded")
	}
	if res := get(t, o.url+"/readyz"); res.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("/readyz with the store down: %d, want 503", res.StatusCode)
	}
	for _, tc := range []struct{ name, method, path, body string }{
		{"get", http.MethodGet, "/v1/responses/" + first.ID, ""},
		{"continue", http.MethodPost, "/v1/responses", `{"model":"m","input":"more","previous_response_id":"` + first.ID + `"}`},
		{"create", http.MethodPost, "/v1/responses", `{"model":"m","input":"new"}`},
		{"stream", http.MethodPost, "/v1/responses", `{"model":"m","input":"new","stream":true}`},
	} {
		o.log.Reset()
		req, _ := http.NewRequest(tc.method, o.url+tc.path, strings.NewReader(tc.body))
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if tc.name == "stream" {
			// Stored in progress before its first event: refused whole.
			if res.StatusCode != http.StatusServiceUnavailable {
				t.Errorf("%s during the outage: %d %s, want 503", tc.name, res.StatusCode, body)
			}
		} else if res.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("%s during the outage: %d %s, want 503", tc.name, res.StatusCode, body)
		}
		if res.Header.Get("Retry-After") == "" {
			t.Errorf("%s: 503 without Retry-After", tc.name)
		}
		line := findLog(t, o.log, "request failed")
		if line == nil {
			t.Errorf("%s: no \"request failed\" log line for the 503; log:\n%s", tc.name, o.log)
			continue
		}
		if line["trace_id"] == nil || !strings.Contains(line["cause"].(string), errDown.Error()) {
			t.Errorf("%s: log line %v lacks the trace id or the cause", tc.name, line)
		}
	}

	o.store.down.Store(false)
	if err := o.eng.CheckStore(context.Background()); err != nil {
		t.Fatalf("CheckStore after the outage: %v", err)
	}
	if res := get(t, o.url+"/readyz"); res.StatusCode != http.StatusOK {
		t.Errorf("/readyz after the outage: %d, want 200", res.StatusCode)
	}
	if res := get(t, o.url+"/v1/responses/"+first.ID); res.StatusCode != http.StatusOK {
		t.Errorf("GET after the outage: %d, want 200", res.StatusCode)
	}
}

type streamEvent struct {
	Type     string
	Response struct {
		ID, Status string
		Error      *struct{ Code, Message string }
	}
}

// readEvents reads an SSE body to its end.
func readEvents(t *testing.T, r io.Reader) []streamEvent {
	t.Helper()
	var out []streamEvent
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var ev streamEvent
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("event %s: %v", data, err)
		}
		out = append(out, ev)
	}
	if len(out) == 0 {
		t.Fatal("the stream had no events")
	}
	return out
}

// get GETs url and reads its body away.
func get(t *testing.T, url string) *http.Response {
	t.Helper()
	res := getRes(t, url)
	io.Copy(io.Discard, res.Body)
	return res
}

// getRes GETs url; the body is closed when the test ends.
func getRes(t *testing.T, url string) *http.Response {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	return res
}

// findLog returns the first JSON log line with message msg.
func findLog(t *testing.T, logs *testutil.LockedBuffer, msg string) map[string]any {
	t.Helper()
	for _, l := range strings.Split(logs.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == msg {
			return m
		}
	}
	return nil
}
