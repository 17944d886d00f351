package integration

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loomgate/loom/engine"
	"github.com/loomgate/loom/internal/testutil"
	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/model/chat"
	"github.com/loomgate/loom/model/completions"
	"github.com/loomgate/loom/model/mockllm"
	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/server"
	"github.com/loomgate/loom/store"
)

// harness is loom served in-process over the scripted upstream and a real
// SQLite store, all on loopback. Every response body and every event loom
// sends through it is captured and, when the test ends, validated against
// the Open Responses schema.
type harness struct {
	t testing.TB
	// Mock is the harness's scripted upstream; nil when the options name
	// an upstream of their own (UpstreamURL).
	Mock    *mockllm.Server
	MockURL string // the upstream's base URL, ending in /v1
	// Upstream is the backend that carries loom's requests to the
	// scripted upstream, for closing its idle connections.
	Upstream interface{ CloseIdleConnections() }
	Store    *countingStore
	Engine   *engine.Engine
	Server   *server.Server
	Loom     *httptest.Server
	BaseURL  string // loom's base URL, ending in /v1

	dialect responses.Dialect // loom's default dialect
	// upstream names the backend loom runs over: chat or completions.
	upstream string

	inflight atomic.Int64 // requests whose capture has not finished

	mu       sync.Mutex
	bodies   []captured // response objects sent as JSON
	events   []captured // data of every streamed event
	noChecks bool
}

// captured is one body or event as loom sent it, with the dialect it was
// written in: traffic already in the Open Responses dialect must not be
// converted again before validation (that would vendor-prefix its
// response.reasoning.* events and so skip their schema check).
type captured struct {
	data    []byte
	dialect responses.Dialect
}

type harnessOptions struct {
	Mock *mockllm.Options
	// Dialect is loom's default event dialect.
	Dialect responses.Dialect
	// Deterministic fixes ids and clocks, for golden transcripts.
	Deterministic bool
	// SkipSchema turns off schema validation of captured traffic (for
	// tests that send deliberately broken traffic through).
	SkipSchema bool
	// MaxBodyBytes caps request bodies (0: the server's default).
	MaxBodyBytes int64
	// Chat configures the upstream backend (retries, timeouts); nil: defaults.
	Chat *chat.Options
	// Completions, when set, makes loom speak harmony token ids to the
	// mock's completions endpoint instead of chat completions.
	Completions *completions.Options
	// ToolProviders are passed to the engine (servers loom runs itself).
	ToolProviders []engine.ToolProvider
	// Sealer seals encrypted reasoning; nil: a fixed test key.
	Sealer *engine.Sealer
	// ImageURLPolicy lets loom fetch input_image URLs through it.
	ImageURLPolicy engine.URLPolicy
	// Tokenize points the chat backend at the scripted upstream's
	// tokenize endpoint, for exact input token counts.
	Tokenize bool
	// OpenStore, when set, opens the store loom runs on in place of an
	// in-memory SQLite database (storeKinds: each store there is).
	OpenStore func(testing.TB) engine.Store
	// UpstreamURL, when set, is the upstream loom calls (and MockURL)
	// instead of a scripted upstream of the harness's own, which then
	// does not run (Mock is nil): a benchmark's upstream in a process of
	// its own.
	UpstreamURL string
}

// upstream is a backend loom runs over: its name, and what it sets in a
// harness's options.
type upstream struct {
	name string
	opts func(*harnessOptions)
}

// upstreams are the two backends the tests run over: the same
// conversation context serves both.
var upstreams = []upstream{
	{"chat", func(*harnessOptions) {}},
	{"completions", func(o *harnessOptions) { o.Completions = &completions.Options{} }},
}

// harness is a harness over up, with opts (nil: the defaults) for the
// rest.
func (up upstream) harness(t *testing.T, opts *harnessOptions) *harness {
	t.Helper()
	if opts == nil {
		opts = &harnessOptions{}
	}
	up.opts(opts)
	return newHarness(t, opts)
}

// forEachUpstream runs test over each upstream, in a subtest named after
// it with a default harness of its own.
func forEachUpstream(t *testing.T, test func(*testing.T, *harness)) {
	for _, up := range upstreams {
		t.Run(up.name, func(t *testing.T) { test(t, up.harness(t, nil)) })
	}
}

// fixedTime is the clock of deterministic harnesses.
var fixedTime = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func newHarness(t testing.TB, opts *harnessOptions) *harness {
	t.Helper()
	if opts == nil {
		opts = &harnessOptions{}
	}
	h := &harness{t: t, noChecks: opts.SkipSchema, dialect: opts.Dialect, upstream: "chat"}
	if opts.Completions != nil {
		h.upstream = "completions"
	}
	mockOpts := mockllm.Options{}
	if opts.Mock != nil {
		mockOpts = *opts.Mock
	}
	engOpts := &engine.Options{Models: []string{mockllm.DefaultModel}, ToolProviders: opts.ToolProviders, Sealer: opts.Sealer,
		ImageURLPolicy: opts.ImageURLPolicy}
	if engOpts.Sealer == nil {
		engOpts.Sealer, _ = engine.NewSealer([]byte("integration test key"))
	}
	// A copy: the harness fills in fields of its own.
	var completionsOpts *completions.Options
	if opts.Completions != nil {
		o := *opts.Completions
		completionsOpts = &o
	}
	if opts.Deterministic {
		mockOpts.Now = func() time.Time { return fixedTime }
		engOpts.Now = func() time.Time { return fixedTime }
		engOpts.NewID = sequentialIDs()
		if completionsOpts != nil && completionsOpts.Now == nil {
			// The harmony prompt carries today's date: fix it too.
			completionsOpts.Now = func() time.Time { return fixedTime }
		}
	}
	// Cleanups run last-registered first: validation is registered first
	// so it runs after the servers have closed and every body is in.
	t.Cleanup(h.validateCaptured)

	h.MockURL = opts.UpstreamURL
	if h.MockURL == "" {
		h.Mock = mockllm.New(&mockOpts)
		mockSrv := httptest.NewServer(h.Mock)
		t.Cleanup(mockSrv.Close)
		t.Cleanup(h.Mock.Close)
		h.MockURL = mockSrv.URL + "/v1"
	}

	openStore := opts.OpenStore
	if openStore == nil {
		openStore = openSQLite
	}
	h.Store = &countingStore{Store: openStore(t)}

	// loom's connections to the upstream go through the backend's
	// default transport, what a deployment runs, unless the test gives
	// its own; the harness closes the idle ones for leak checks.
	chatOpts := chat.Options{}
	if opts.Chat != nil {
		chatOpts = *opts.Chat
	}
	if opts.Tokenize && chatOpts.TokenizeURL == "" {
		chatOpts.TokenizeURL = strings.TrimSuffix(h.MockURL, "/v1") + "/tokenize"
	}
	chatBackend := chat.New(h.MockURL, "test-key", &chatOpts)
	var backend model.Backend = chatBackend
	engOpts.Upstream = chatBackend.Capabilities()
	h.Upstream = chatBackend
	if completionsOpts != nil {
		b := completions.New(h.MockURL, "test-key", completionsOpts)
		backend, engOpts.Upstream, h.Upstream = b, b.Capabilities(), b
	}
	t.Cleanup(h.Upstream.CloseIdleConnections)
	h.Engine = engine.New(backend, h.Store, engOpts)
	srv := server.New(h.Engine, &server.Options{Dialect: opts.Dialect, MaxBodyBytes: opts.MaxBodyBytes})
	h.Server = srv
	h.Loom = httptest.NewServer(h.capture(srv))
	t.Cleanup(h.Loom.Close)
	h.BaseURL = h.Loom.URL + "/v1"
	return h
}

// sequentialIDs makes ids resp_0001, msg_0002, ... in creation order.
func sequentialIDs() func(string) string {
	var n atomic.Int64
	return func(prefix string) string { return fmt.Sprintf("%s_%04d", prefix, n.Add(1)) }
}

// countingStore is the real store, counting the responses saved, so a test
// can assert that a rejected request stored nothing.
type countingStore struct {
	engine.Store
	saves atomic.Int64
	mu    sync.Mutex
	ids   map[string]bool // the ids of the responses saved
}

func (s *countingStore) SaveResponse(ctx context.Context, rec *store.Record) error {
	s.saves.Add(1)
	s.mu.Lock()
	if s.ids == nil {
		s.ids = make(map[string]bool)
	}
	s.ids[rec.ID] = true
	s.mu.Unlock()
	return s.Store.SaveResponse(ctx, rec)
}

// savedIDs returns the ids of the responses saved so far.
func (s *countingStore) savedIDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(maps.Keys(s.ids))
}

// capture records what loom sends for later schema validation.
func (h *harness) capture(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.inflight.Add(1)
		defer h.inflight.Add(-1)
		rec := &teeWriter{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		dialect := h.dialect
		if v := r.Header.Get(server.DialectHeader); v != "" {
			if d, err := responses.ParseDialect(v); err == nil {
				dialect = d
			}
		}
		// A response object comes from POST /v1/responses and GET
		// /v1/responses/{id}; not from input_items, cancel or DELETE.
		rest, isItem := strings.CutPrefix(r.URL.Path, "/v1/responses/")
		isResponse := (r.Method == http.MethodPost && r.URL.Path == "/v1/responses") ||
			(r.Method == http.MethodGet && isItem && rest != "" && !strings.Contains(rest, "/"))
		h.mu.Lock()
		defer h.mu.Unlock()
		switch {
		case strings.HasPrefix(rec.Header().Get("Content-Type"), "text/event-stream"):
			sc := bufio.NewScanner(bytes.NewReader(rec.buf.Bytes()))
			sc.Buffer(nil, 16<<20)
			for sc.Scan() {
				if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok && data != "[DONE]" {
					h.events = append(h.events, captured{[]byte(data), dialect})
				}
			}
		case isResponse && rec.status == http.StatusOK:
			h.bodies = append(h.bodies, captured{bytes.Clone(rec.buf.Bytes()), dialect})
		}
	})
}

func (h *harness) validateCaptured() {
	if h.noChecks {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, b := range h.bodies {
		validateResponseIn(h.t, b.dialect, b.data)
	}
	for _, e := range h.events {
		validateEventIn(h.t, e.dialect, e.data)
	}
}

// WaitIdle waits, up to timeout, until no request is being served or
// captured, and reports whether that happened. A client can have read a
// whole stream before loom's handler has returned and been captured.
func (h *harness) WaitIdle(timeout time.Duration) bool {
	return testutil.Eventually(timeout, func() bool { return h.inflight.Load() == 0 })
}

// Captured returns how many bodies and events were captured so far.
func (h *harness) Captured() (bodies, events int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.bodies), len(h.events)
}

// teeWriter copies the body written through it.
type teeWriter struct {
	http.ResponseWriter
	buf    bytes.Buffer
	status int
}

func (w *teeWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *teeWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	w.buf.Write(b)
	return w.ResponseWriter.Write(b)
}

func (w *teeWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
