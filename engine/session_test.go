package engine_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/loomgate/loom/engine"
	"github.com/loomgate/loom/internal/testutil"
	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/store/sqlite"
	"github.com/loomgate/loom/tenant"
)

// keyed runs requests on one engine and returns the session key each
// turn was routed by.
type keyed struct {
	t    *testing.T
	e    *engine.Engine
	b    *fakeBackend
	logs *testutil.LockedBuffer
}

func newKeyed(t *testing.T) *keyed {
	b := &fakeBackend{stream: func(req *model.Request, emit func(model.Delta) error) error {
		if req.Route.Served != nil {
			req.Route.Served("10.0.0.7:8000")
		}
		return emit(model.Delta{Kind: model.DeltaText, Text: "ok"})
	}}
	db, err := sqlite.Open(context.Background(), ":memory:", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	logs := &testutil.LockedBuffer{}
	e := engine.New(b, db, &engine.Options{Models: []string{"m"}, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	return &keyed{t: t, e: e, b: b, logs: logs}
}

// run runs body for tenant with the session header sessionID and
// returns the response id and the key its turn carried.
func (k *keyed) run(tenantID, body, sessionID string) (string, string) {
	k.t.Helper()
	ctx := tenant.With(context.Background(), tenantID)
	resp, err := k.e.RunWith(ctx, decodeRequest(k.t, body), nil, &engine.RunOptions{SessionID: sessionID})
	if err != nil {
		k.t.Fatalf("%s: %v", body, err)
	}
	k.b.mu.Lock()
	defer k.b.mu.Unlock()
	last := k.b.requests[len(k.b.requests)-1]
	if last.Route.Tenant != tenantID {
		k.t.Errorf("the turn's route names tenant %q, want %q", last.Route.Tenant, tenantID)
	}
	return resp.ID, last.Route.Session
}

func (k *keyed) key(tenantID, body, sessionID string) string {
	k.t.Helper()
	_, key := k.run(tenantID, body, sessionID)
	if len(key) != 32 {
		k.t.Errorf("session key %q is not 128 bits in hex", key)
	}
	return key
}

// TestSessionKeyOrder: each source of the session key wins over the
// ones after it (the conversation; the previous response's stored key;
// prompt_cache_key; the session header; the instructions and first
// input item): requests that share a source and differ in every later
// one share a key, and requests that differ in it do not.
func TestSessionKeyOrder(t *testing.T) {
	k := newKeyed(t)
	ctx := tenant.With(context.Background(), "acme")
	c1, err := k.e.CreateConversation(ctx, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := k.e.CreateConversation(ctx, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	same := func(what, a, b string) {
		t.Helper()
		if a != b {
			t.Errorf("%s: two keys (%s, %s), want one", what, a, b)
		}
	}
	differ := func(what, a, b string) {
		t.Helper()
		if a == b {
			t.Errorf("%s: one key %s, want two", what, a)
		}
	}

	// 1. The conversation wins over everything after it.
	conv := func(id, pck, instructions, input string) string {
		return `{"model":"m","conversation":"` + id + `","prompt_cache_key":"` + pck + `","instructions":"` + instructions + `","input":"` + input + `"}`
	}
	a := k.key("acme", conv(c1.ID, "p1", "i1", "x"), "h1")
	same("one conversation, all else different", a, k.key("acme", conv(c1.ID, "p2", "i2", "y"), "h2"))
	differ("two conversations, all else alike", a, k.key("acme", `{"model":"m","conversation":"`+c2.ID+`","prompt_cache_key":"p1","instructions":"i1","input":"x"}`, "h1"))

	// 2. A continuation inherits its previous response's key, whatever
	// it sends; the whole chain keeps the first response's.
	first, firstKey := k.run("acme", `{"model":"m","prompt_cache_key":"p1","input":"x"}`, "")
	second, secondKey := k.run("acme", `{"model":"m","previous_response_id":"`+first+`","prompt_cache_key":"p2","instructions":"other","input":"y"}`, "h9")
	same("a continuation", firstKey, secondKey)
	_, thirdKey := k.run("acme", `{"model":"m","previous_response_id":"`+second+`","input":"z"}`, "h8")
	same("the continuation of a continuation", firstKey, thirdKey)
	differ("prompt_cache_key p2 alone", secondKey, k.key("acme", `{"model":"m","prompt_cache_key":"p2","input":"y"}`, ""))
	rec, err := k.e.Store().GetResponse(ctx, second)
	if err != nil || rec.SessionKey != firstKey {
		t.Errorf("the continuation was stored with key %q (%v), want its chain's %s", rec.SessionKey, err, firstKey)
	}

	// 3. prompt_cache_key wins over the session header and the start.
	p := k.key("acme", `{"model":"m","prompt_cache_key":"p1","instructions":"i1","input":"x"}`, "h1")
	same("one prompt_cache_key", p, k.key("acme", `{"model":"m","prompt_cache_key":"p1","instructions":"i2","input":"y"}`, "h2"))
	differ("two prompt_cache_keys", p, k.key("acme", `{"model":"m","prompt_cache_key":"p2","instructions":"i1","input":"x"}`, "h1"))

	// 4. The session header wins over the start.
	h := k.key("acme", `{"model":"m","instructions":"i1","input":"x"}`, "h1")
	same("one session header", h, k.key("acme", `{"model":"m","instructions":"i2","input":"y"}`, "h1"))
	differ("two session headers", h, k.key("acme", `{"model":"m","instructions":"i1","input":"x"}`, "h2"))
	differ("a session header and a prompt_cache_key of the same value", h, k.key("acme", `{"model":"m","prompt_cache_key":"h1","input":"x"}`, ""))

	// 5. Else the instructions and the first input item: a client that
	// resends the history starts each request alike.
	s := k.key("acme", `{"model":"m","instructions":"i1","input":[{"role":"user","content":"x"}]}`, "")
	same("one start, a longer history", s, k.key("acme", `{"model":"m","instructions":"i1","input":[{"role":"user","content":"x"},{"role":"assistant","content":"ok"},{"role":"user","content":"more"}]}`, ""))
	differ("other instructions", s, k.key("acme", `{"model":"m","instructions":"i2","input":[{"role":"user","content":"x"}]}`, ""))
	differ("another first item", s, k.key("acme", `{"model":"m","instructions":"i1","input":[{"role":"user","content":"y"}]}`, ""))
}

// TestSessionKeyScopedByTenant: the same conversation source of two
// tenants gives two keys, for every source a client names.
func TestSessionKeyScopedByTenant(t *testing.T) {
	k := newKeyed(t)
	for _, tt := range []struct{ name, body, header string }{
		{"prompt_cache_key", `{"model":"m","prompt_cache_key":"p1","input":"x"}`, ""},
		{"session header", `{"model":"m","input":"x"}`, "h1"},
		{"start", `{"model":"m","instructions":"i1","input":"x"}`, ""},
	} {
		if a, b := k.key("acme", tt.body, tt.header), k.key("globex", tt.body, tt.header); a == b {
			t.Errorf("%s: tenants acme and globex share the key %s", tt.name, a)
		}
		if a, b := k.key("acme", tt.body, tt.header), k.key("acme", tt.body, tt.header); a != b {
			t.Errorf("%s: one tenant, two keys", tt.name)
		}
	}
}

// TestSessionKeyInMemoryContinuation: a continuation held in memory (a
// WebSocket connection, store false) inherits its key too.
func TestSessionKeyInMemoryContinuation(t *testing.T) {
	k := newKeyed(t)
	var kept *engine.Continuation
	ctx := tenant.With(context.Background(), "acme")
	_, err := k.e.RunWith(ctx, decodeRequest(t, `{"model":"m","store":false,"prompt_cache_key":"p1","input":"x"}`), nil,
		&engine.RunOptions{Keep: func(c *engine.Continuation) { kept = c }})
	if err != nil || kept == nil {
		t.Fatalf("first: %v, kept %v", err, kept)
	}
	first := k.b.requests[0].Route.Session
	if kept.SessionKey != first {
		t.Errorf("kept key %q, the turn's %q", kept.SessionKey, first)
	}
	_, err = k.e.RunWith(ctx, decodeRequest(t, `{"model":"m","store":false,"previous_response_id":"`+kept.ResponseID+`","input":"y"}`), nil,
		&engine.RunOptions{Previous: kept})
	if err != nil {
		t.Fatal(err)
	}
	if got := k.b.requests[1].Route.Session; got != first {
		t.Errorf("the continuation in memory was routed by %q, want %q", got, first)
	}
}

// TestResponseLogNamesEngine: the response's log line names the engine
// that served it; the turn carries the client's prompt_cache_key.
func TestResponseLogNamesEngine(t *testing.T) {
	k := newKeyed(t)
	k.run("acme", `{"model":"m","prompt_cache_key":"p1","input":"x"}`, "")
	if !strings.Contains(k.logs.String(), "engine=10.0.0.7:8000") {
		t.Errorf("the response's line does not name its engine:\n%s", k.logs.String())
	}
	if got := k.b.requests[0].Route.PromptCacheKey; got != "p1" {
		t.Errorf("the turn's prompt_cache_key %q", got)
	}
}

// TestUpstreamReady: the engine's upstream readiness is what the backend
// declares, and true when it declares nothing.
func TestUpstreamReady(t *testing.T) {
	db, err := sqlite.Open(context.Background(), ":memory:", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	b := &fakeBackend{}
	if !engine.New(b, db, nil).UpstreamReady() {
		t.Error("not ready without a declared readiness")
	}
	ready := false
	e := engine.New(b, db, &engine.Options{Upstream: model.Capabilities{Ready: func() bool { return ready }}})
	if e.UpstreamReady() {
		t.Error("ready while the backend says no engine is")
	}
	ready = true
	if !e.UpstreamReady() {
		t.Error("not ready while the backend is")
	}
}
