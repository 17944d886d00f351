package upstreamtest

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loomgate/loom/model"
)

// The fleet's cases: several engines behind one backend, and the hints a
// router in front reads.
func fleetCases() []struct {
	name string
	test func(*testing.T, Wire)
} {
	return []struct {
		name string
		test func(*testing.T, Wire)
	}{
		{"Hints", testHints},
		{"SessionStaysOnItsEngine", testSessionStays},
		{"FailoverBeforeFirstByte", testFailover},
		{"NoFailoverAfterFirstByte", testNoFailoverAfterFirstByte},
		{"EjectAndProbe", testEjectAndProbe},
	}
}

// engineBehavior is what a test engine does with a turn.
type engineBehavior int32

const (
	answerOK      engineBehavior = iota
	answer500                    // 500 to every turn
	firstThenDrop                // First, then the connection is dropped
)

// testEngine is a loopback engine that counts the turns it got and the
// health probes, and answers as told.
type testEngine struct {
	srv      *httptest.Server
	turns    atomic.Int32
	probes   chan int // the status of each probe answered, if anyone listens
	behavior atomic.Int32
	healthy  atomic.Bool // what GET /v1/models answers: 200 or 503

	mu      sync.Mutex
	headers []http.Header
	bodies  []map[string]any
}

func newTestEngine(t *testing.T, wire Wire) *testEngine {
	e := &testEngine{probes: make(chan int, 16)}
	e.healthy.Store(true)
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Path == "/v1/models" {
			status := http.StatusServiceUnavailable
			if e.healthy.Load() {
				status = http.StatusOK
			}
			w.WriteHeader(status)
			_, _ = io.WriteString(w, `{"object":"list","data":[]}`)
			select {
			case e.probes <- status:
			default:
			}
			return
		}
		b, _ := io.ReadAll(r.Body)
		var body map[string]any
		_ = json.Unmarshal(b, &body)
		e.mu.Lock()
		e.headers = append(e.headers, r.Header.Clone())
		e.bodies = append(e.bodies, body)
		e.mu.Unlock()
		e.turns.Add(1)
		switch engineBehavior(e.behavior.Load()) {
		case answer500:
			http.Error(w, `{"error":{"message":"EngineCore died"}}`, http.StatusInternalServerError)
		case firstThenDrop:
			_, _ = io.WriteString(w, wire.First)
			w.(http.Flusher).Flush()
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				conn.Close()
			}
		default:
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, wire.OK)
		}
	}))
	t.Cleanup(e.srv.Close)
	return e
}

func (e *testEngine) url() string { return e.srv.URL + "/v1" }

func (e *testEngine) last() (http.Header, map[string]any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.headers) == 0 {
		return nil, nil
	}
	return e.headers[len(e.headers)-1], e.bodies[len(e.bodies)-1]
}

// healthEvents is an EngineObserver that passes on the health changes,
// the explicit signal the probe tests wait for.
type healthEvents struct {
	changes chan string // "host:port up" or "host:port out"
}

func (h *healthEvents) EngineRequest(string)          {}
func (h *healthEvents) EngineInFlight(string, int)    {}
func (h *healthEvents) EngineTokens(string, int, int) {}
func (h *healthEvents) EngineHealth(e string, up bool) {
	h.changes <- e + map[bool]string{true: " up", false: " out"}[up]
}

// next waits for the next health change (10 s at most: the bound of a
// test).
func (h *healthEvents) next(t *testing.T) string {
	t.Helper()
	select {
	case c := <-h.changes:
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("no health change")
		return ""
	}
}

// fleetOf returns n test engines and a backend over them, and the
// observer of their health (each engine reported up once already).
func fleetOf(t *testing.T, wire Wire, n int, o Options) ([]*testEngine, model.Backend, *healthEvents) {
	t.Helper()
	engines := make([]*testEngine, n)
	urls := make([]string, n)
	for i := range engines {
		engines[i] = newTestEngine(t, wire)
		urls[i] = engines[i].url()
	}
	h := &healthEvents{changes: make(chan string, 64)}
	o.Observer = h
	b := wire.NewFleet(urls, "", o)
	for range n {
		h.next(t)
	}
	return engines, b, h
}

// host is a test engine's host:port, as the backend names it.
func (e *testEngine) host() string { return e.srv.Listener.Addr().String() }

// turn runs one turn with route and returns its error.
func turn(b model.Backend, route model.Route) error {
	req := UserReq("hello")
	req.Route = route
	_, err := Collect(context.Background(), b, req)
	return err
}

// placedOn runs a turn with route and returns the index of the engine
// that got it (-1: none, or several).
func placedOn(t *testing.T, engines []*testEngine, b model.Backend, route model.Route) int {
	t.Helper()
	before := make([]int32, len(engines))
	for i, e := range engines {
		before[i] = e.turns.Load()
	}
	var served string
	route.Served = func(e string) { served = e }
	if err := turn(b, route); err != nil {
		t.Fatalf("turn: %v", err)
	}
	got := -1
	for i, e := range engines {
		if e.turns.Load() != before[i] {
			if got != -1 {
				return -1
			}
			got = i
		}
	}
	if got >= 0 && served != engines[got].host() {
		t.Errorf("Route.Served was told %q, the turn went to %s", served, engines[got].host())
	}
	return got
}

// testHints: the session key goes upstream in the session header
// (X-Session-ID by default, or the configured one), the client's
// prompt_cache_key in the body, and with a cache salt each tenant's
// cache_salt (HMAC-SHA256 of the tenant under the secret, hex): two
// tenants never share one. Without them nothing is added.
func testHints(t *testing.T, wire Wire) {
	hmacHex := func(secret, tenant string) string {
		m := hmac.New(sha256.New, []byte(secret))
		m.Write([]byte(tenant))
		return hex.EncodeToString(m.Sum(nil))
	}
	for _, tt := range []struct {
		name   string
		o      Options
		header string
	}{
		{"defaults", Options{}, "X-Session-Id"},
		{"renamed header and a salt", Options{SessionHeader: "X-SMG-Routing-Key", CacheSalt: "s3cret"}, "X-Smg-Routing-Key"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			engines, b, _ := fleetOf(t, wire, 1, tt.o)
			e := engines[0]
			if err := turn(b, model.Route{Session: "sess-1", Tenant: "acme", PromptCacheKey: "pck-1"}); err != nil {
				t.Fatal(err)
			}
			h, body := e.last()
			if got := h.Get(tt.header); got != "sess-1" {
				t.Errorf("%s: %q, want the session key", tt.header, got)
			}
			if tt.header != "X-Session-Id" && h.Get("X-Session-Id") != "" {
				t.Error("the session key went in the default header too")
			}
			if body["prompt_cache_key"] != "pck-1" {
				t.Errorf("prompt_cache_key in the body: %v", body["prompt_cache_key"])
			}
			salt, hasSalt := body["cache_salt"]
			switch {
			case tt.o.CacheSalt == "" && hasSalt:
				t.Errorf("a cache_salt without a secret: %v", salt)
			case tt.o.CacheSalt != "" && salt != hmacHex(tt.o.CacheSalt, "acme"):
				t.Errorf("cache_salt %v, want HMAC-SHA256(secret, tenant) in hex", salt)
			}
			if tt.o.CacheSalt != "" {
				if err := turn(b, model.Route{Session: "sess-2", Tenant: "globex"}); err != nil {
					t.Fatal(err)
				}
				_, other := e.last()
				if other["cache_salt"] == salt || other["cache_salt"] != hmacHex(tt.o.CacheSalt, "globex") {
					t.Errorf("the second tenant's cache_salt: %v (the first's %v)", other["cache_salt"], salt)
				}
			}
			// A turn without a route carries no hint.
			if err := turn(b, model.Route{}); err != nil {
				t.Fatal(err)
			}
			h, body = e.last()
			if h.Get(tt.header) != "" || body["prompt_cache_key"] != nil {
				t.Errorf("a turn without a route carried hints: %q, %v", h.Get(tt.header), body["prompt_cache_key"])
			}
		})
	}
}

// testSessionStays: every turn of a session goes to one engine, and
// sessions spread over the engines.
func testSessionStays(t *testing.T, wire Wire) {
	engines, b, _ := fleetOf(t, wire, 3, Options{})
	used := map[int]bool{}
	for s := range 12 {
		route := model.Route{Session: fmt.Sprintf("session-%d", s)}
		home := placedOn(t, engines, b, route)
		for range 3 {
			if got := placedOn(t, engines, b, route); got != home {
				t.Fatalf("session %d went to engine %d, then %d", s, home, got)
			}
		}
		used[home] = true
	}
	if len(used) < 2 {
		t.Errorf("12 sessions all went to one engine of 3: %v", used)
	}
}

// testFailover: a turn whose engine fails before the first byte (a 500)
// goes to the next healthy engine, once: with that one failing too it
// stays there for its last retry, and a third engine never sees it. The
// failing engines are taken out.
func testFailover(t *testing.T, wire Wire) {
	engines, b, h := fleetOf(t, wire, 3, Options{ProbeInterval: time.Hour})
	route := model.Route{Session: "s"}
	home := placedOn(t, engines, b, route)
	engines[home].behavior.Store(int32(answer500))
	var served string
	if err := turn(b, model.Route{Session: "s", Served: func(e string) { served = e }}); err != nil {
		t.Fatalf("the turn of a failing engine did not fail over: %v", err)
	}
	if n := engines[home].turns.Load(); n != 2 {
		t.Errorf("the failing engine got %d requests, want 2: the first turn and one attempt", n)
	}
	var others int32
	for i, e := range engines {
		if i != home {
			others += e.turns.Load()
			if e.turns.Load() == 1 && served != e.host() {
				t.Errorf("Route.Served was told %q, the turn was served by %s", served, e.host())
			}
		}
	}
	if others != 1 {
		t.Errorf("the other engines got %d requests, want 1", others)
	}
	// One 5xx does not take an engine out (testEjectAndProbe).
	select {
	case c := <-h.changes:
		t.Errorf("health change %q after one 5xx", c)
	default:
	}

	// Three fresh engines; the first two of a session's order fail.
	engines, b, h = fleetOf(t, wire, 3, Options{ProbeInterval: time.Hour})
	home = placedOn(t, engines, b, route)
	engines[home].behavior.Store(int32(answer500))
	for i := range engines {
		if i != home {
			engines[i].behavior.Store(int32(answer500))
		}
	}
	before := make([]int32, 3)
	for i, e := range engines {
		before[i] = e.turns.Load()
	}
	if err := turn(b, route); err == nil {
		t.Fatal("no error with every engine failing")
	}
	var got []int32
	for i, e := range engines {
		got = append(got, e.turns.Load()-before[i])
	}
	slices.Sort(got)
	// Retries 2: one attempt on its engine, two on the next, none on the
	// third.
	if !slices.Equal(got, []int32{0, 1, 2}) {
		t.Errorf("attempts per engine %v, want one on its engine, two on the next, none on the third", got)
	}
	// Neither answered three 5xx in a row: both stay in.
	select {
	case c := <-h.changes:
		t.Errorf("health change %q after fewer than three 5xx", c)
	default:
	}
}

// testNoFailoverAfterFirstByte: a stream its engine cuts after the first
// byte fails as with one engine: no other engine is asked.
func testNoFailoverAfterFirstByte(t *testing.T, wire Wire) {
	engines, b, _ := fleetOf(t, wire, 2, Options{ProbeInterval: time.Hour})
	route := model.Route{Session: "s"}
	home := placedOn(t, engines, b, route)
	engines[home].behavior.Store(int32(firstThenDrop))
	if err := turn(b, route); err == nil {
		t.Fatal("no error for a cut stream")
	}
	if n := engines[1-home].turns.Load(); n != 0 {
		t.Errorf("the other engine got %d requests after the stream was cut", n)
	}
	if n := engines[home].turns.Load(); n != 2 {
		t.Errorf("the engine got %d requests, want 2 (the first turn and the cut one, not sent again)", n)
	}
}

// testEjectAndProbe: an engine that answers 500 three times in a row is
// taken out (one 5xx may be one request's fault): no turn
// goes to it while it is out, it is probed (GET /v1/models) until it
// answers 200, and is then back and takes turns again.
func testEjectAndProbe(t *testing.T, wire Wire) {
	engines, b, h := fleetOf(t, wire, 2, Options{ProbeInterval: time.Millisecond})
	route := model.Route{Session: "s"}
	home := placedOn(t, engines, b, route)
	bad := engines[home]
	bad.healthy.Store(false)
	bad.behavior.Store(int32(answer500))
	for i := range 3 {
		if err := turn(b, route); err != nil {
			t.Fatalf("turn %d of the failing engine did not fail over: %v", i, err)
		}
		if i < 2 {
			select {
			case c := <-h.changes:
				t.Fatalf("health change %q after %d 5xx", c, i+1)
			default:
			}
		}
	}
	if c := h.next(t); c != bad.host()+" out" {
		t.Fatalf("health change %q, want %s out", c, bad.host())
	}
	turns := bad.turns.Load()
	// While it is out no turn goes to it, keyless or of another session.
	for s := range 6 {
		if err := turn(b, model.Route{Session: fmt.Sprintf("other-%d", s)}); err != nil {
			t.Fatal(err)
		}
		if err := turn(b, model.Route{}); err != nil {
			t.Fatal(err)
		}
	}
	if n := bad.turns.Load(); n != turns {
		t.Errorf("the engine out got %d turns", n-turns)
	}
	// It is probed and refuses; then it heals and the next probe takes
	// it back.
	select {
	case status := <-bad.probes:
		if status != http.StatusServiceUnavailable {
			t.Fatalf("probe answered %d", status)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the engine out was never probed")
	}
	bad.behavior.Store(int32(answerOK))
	bad.healthy.Store(true)
	if c := h.next(t); c != bad.host()+" up" {
		t.Fatalf("health change %q, want %s up", c, bad.host())
	}
	// Back: keyless turns go round the engines again.
	for range 2 {
		if err := turn(b, model.Route{}); err != nil {
			t.Fatal(err)
		}
	}
	if n := bad.turns.Load(); n == turns {
		t.Error("the engine back took no turn")
	}
}
