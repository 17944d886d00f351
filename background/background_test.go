package background_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loomgate/loom/background"
	"github.com/loomgate/loom/engine"
	"github.com/loomgate/loom/internal/testutil"
	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/server"
	"github.com/loomgate/loom/store"
	"github.com/loomgate/loom/store/postgres"
	"github.com/loomgate/loom/store/postgres/pgtest"
	"github.com/loomgate/loom/store/sqlite"
	"github.com/loomgate/loom/tools"
	"github.com/loomgate/loom/tools/toolstest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// Jobs is the queue the engine consumes; the package itself does not import
// the engine, so the check is here.
var _ engine.Queue = (*background.Jobs)(nil)

// upstream is the fake model every replica of a test talks to: stream
// answers each turn; it records which replica sent each request.
type upstream struct {
	mu     sync.Mutex
	turns  int
	seenBy []string
	stream func(ctx context.Context, turn int, emit func(model.Delta) error) error
	// echo, when set, answers each request with its last item's text
	// instead (stream is not called).
	echo bool
}

// replicaBackend is one replica's connection to the upstream.
type replicaBackend struct {
	name string
	u    *upstream
}

func (b *replicaBackend) Stream(ctx context.Context, req *model.Request, emit func(model.Delta) error) error {
	b.u.mu.Lock()
	turn := b.u.turns
	b.u.turns++
	b.u.seenBy = append(b.u.seenBy, b.name)
	b.u.mu.Unlock()
	if b.u.echo {
		last := req.Items[len(req.Items)-1]
		return emit(text("re: " + last.Content[0].Text))
	}
	return b.u.stream(ctx, turn, emit)
}

func (u *upstream) replicas() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.seenBy...)
}

// replica is one loom replica: an engine with its job engine, served over
// loopback HTTP.
type replica struct {
	name   string
	engine *engine.Engine
	jobs   *background.Jobs
	url    string
}

// sharedStore is how a test opens the shared store once per replica, as
// separate processes would.
type sharedStore struct {
	open func(t testing.TB, opts *background.Options) (engine.Store, *background.Jobs, engine.EventNotifier)
}

func postgresStore(t testing.TB) sharedStore {
	url := pgtest.URL(t)
	return sharedStore{open: func(t testing.TB, opts *background.Options) (engine.Store, *background.Jobs, engine.EventNotifier) {
		db, err := postgres.Open(t.Context(), url, &postgres.Options{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		jobs, err := background.NewPostgres(t.Context(), db.Pool(), opts)
		if err != nil {
			t.Fatal(err)
		}
		n, err := db.NewNotifier(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(n.Close)
		return db, jobs, n
	}}
}

func sqliteStore(t testing.TB) sharedStore {
	path := t.TempDir() + "/loom.db"
	return sharedStore{open: func(t testing.TB, opts *background.Options) (engine.Store, *background.Jobs, engine.EventNotifier) {
		db, err := sqlite.Open(t.Context(), path, &sqlite.Options{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		jobs, err := background.NewSQLite(t.Context(), db.SQL(), opts)
		if err != nil {
			t.Fatal(err)
		}
		return db, jobs, nil
	}}
}

// newReplica starts a replica on st. With work set it claims and runs
// background jobs; without, it only takes requests.
func newReplica(t testing.TB, name string, st sharedStore, u *upstream, work bool, providers ...engine.ToolProvider) *replica {
	t.Helper()
	db, jobs, notifier := st.open(t, nil)
	opts := &engine.Options{
		Models:        []string{"m"},
		Owner:         name,
		Queue:         jobs,
		CancelPoll:    20 * time.Millisecond,
		ToolProviders: providers,
	}
	if notifier != nil {
		// Followers move on notifications alone: a poll would hide a
		// notification that never came.
		opts.Notifier, opts.FollowPoll = notifier, time.Hour
	}
	e := engine.New(&replicaBackend{name: name, u: u}, db, opts)
	if work {
		ctx, cancel := context.WithCancel(context.Background())
		if err := jobs.Start(ctx, e); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer scancel()
			jobs.Stop(sctx)
			cancel()
		})
	}
	srv := httptest.NewServer(server.New(e, &server.Options{KeepAlive: 50 * time.Millisecond}))
	t.Cleanup(srv.Close)
	return &replica{name: name, engine: e, jobs: jobs, url: srv.URL}
}

// object is the part of a response object the tests read.
type object struct {
	ID         string `json:"id"`
	Status     string `json:"status"`
	Background bool   `json:"background"`
	Output     []struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	} `json:"output"`
}

func do(t *testing.T, method, url, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func decode(t *testing.T, b []byte) object {
	t.Helper()
	var o object
	if err := json.Unmarshal(b, &o); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return o
}

// pollUntil GETs the response on r until it reaches a final status.
func pollUntil(t *testing.T, r *replica, id string) object {
	t.Helper()
	var o object
	testutil.WaitFor(t, "response "+id+" to finish", func() bool {
		code, b := do(t, "GET", r.url+"/v1/responses/"+id, "")
		if code != http.StatusOK {
			t.Fatalf("GET %s on %s: %d %s", id, r.name, code, b)
		}
		o = decode(t, b)
		return o.Status != responses.ResponseQueued && o.Status != responses.ResponseInProgress
	})
	return o
}

func text(s string) model.Delta { return model.Delta{Kind: model.DeltaText, Text: s} }

func stores(t *testing.T) map[string]func(t testing.TB) sharedStore {
	return map[string]func(t testing.TB) sharedStore{"postgres": postgresStore, "sqlite": sqliteStore}
}

// TestBackgroundRunsOnAnotherReplica: a background response created on A,
// which runs no jobs, answers queued at once and is run by B, where it is
// polled to completion.
func TestBackgroundRunsOnAnotherReplica(t *testing.T) {
	for name, st := range stores(t) {
		t.Run(name, func(t *testing.T) {
			release := make(chan struct{})
			u := &upstream{stream: func(ctx context.Context, _ int, emit func(model.Delta) error) error {
				// The upstream is slow: it answers once the test has
				// seen the queued response.
				select {
				case <-release:
				case <-ctx.Done():
					return ctx.Err()
				}
				return emit(text("hello from the background"))
			}}
			s := st(t)
			a := newReplica(t, "A", s, u, false)
			b := newReplica(t, "B", s, u, true)

			code, body := do(t, "POST", a.url+"/v1/responses", `{"model":"m","input":"hi","background":true}`)
			if code != http.StatusOK {
				t.Fatalf("POST: %d %s", code, body)
			}
			created := decode(t, body)
			if created.Status != responses.ResponseQueued || !created.Background {
				t.Fatalf("POST answered %s (background %v), want queued", created.Status, created.Background)
			}
			close(release)
			done := pollUntil(t, b, created.ID)
			if done.Status != responses.ResponseCompleted || len(done.Output) != 1 || done.Output[0].Content[0].Text != "hello from the background" {
				t.Fatalf("on B: %+v", done)
			}
			if got := u.replicas(); len(got) != 1 || got[0] != "B" {
				t.Errorf("the upstream was called by %v, want once by B", got)
			}
			// A sees the same.
			if o := pollUntil(t, a, created.ID); o.Status != responses.ResponseCompleted {
				t.Errorf("on A: %s", o.Status)
			}
		})
	}
}

// TestBackgroundCancelFromAnotherReplica: a background response running on
// A, blocked in the upstream after a tool call, is cancelled from B: it
// ends cancelled, the upstream saw its request cancelled, and the tool
// was cleaned up and closed once.
func TestBackgroundCancelFromAnotherReplica(t *testing.T) {
	for name, st := range stores(t) {
		t.Run(name, func(t *testing.T) {
			blocked := make(chan struct{})
			sawCancel := make(chan struct{})
			u := &upstream{stream: func(ctx context.Context, turn int, emit func(model.Delta) error) error {
				if turn == 0 {
					return emit(model.Delta{Kind: model.DeltaToolCall, ToolCallID: "c1", ToolName: "a1", ToolArguments: "{}"})
				}
				emit(text("thinking slowly"))
				close(blocked)
				<-ctx.Done()
				close(sawCancel)
				return ctx.Err()
			}}
			log := &toolstest.Log{}
			provider := &toolstest.Provider{Type: "fake", List: []tools.Server{&toolstest.Server{Label: "A", ToolNames: []string{"a1"}, Log: log}}}
			s := st(t)
			a := newReplica(t, "A", s, u, true, provider)
			b := newReplica(t, "B", s, u, false, provider)

			code, body := do(t, "POST", a.url+"/v1/responses", `{"model":"m","input":"hi","background":true,"tools":[{"type":"fake"}]}`)
			if code != http.StatusOK {
				t.Fatalf("POST: %d %s", code, body)
			}
			id := decode(t, body).ID
			<-blocked
			code, body = do(t, "POST", b.url+"/v1/responses/"+id+"/cancel", "")
			if code != http.StatusOK {
				t.Fatalf("cancel on B: %d %s", code, body)
			}
			if o := decode(t, body); o.Status != responses.ResponseCancelled {
				t.Errorf("cancel on B answered %s, want cancelled", o.Status)
			}
			select {
			case <-sawCancel:
			default:
				t.Error("the upstream request was not cancelled")
			}
			if o := pollUntil(t, b, id); o.Status != responses.ResponseCancelled {
				t.Errorf("GET on B: %s, want cancelled", o.Status)
			}
			// The run's cleanup has run by the time it stored the
			// response; wait for the job to be over on A to read it.
			sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			a.jobs.Stop(sctx)
			if log.Count("cleanup:A") != 1 || log.Count("close:A") != 1 {
				t.Errorf("tool A not cleaned and closed once: %v", log.Events())
			}
			// Cancelling again returns it unchanged.
			code, body = do(t, "POST", b.url+"/v1/responses/"+id+"/cancel", "")
			if code != http.StatusOK || decode(t, body).Status != responses.ResponseCancelled {
				t.Errorf("second cancel: %d %s", code, body)
			}
		})
	}
}

// TestCancelRules: a finished background response is returned unchanged; a
// response that is not a background one is a 400; a queued one is
// cancelled before it runs and never reaches the upstream.
func TestCancelRules(t *testing.T) {
	u := &upstream{stream: func(ctx context.Context, _ int, emit func(model.Delta) error) error { return emit(text("done")) }}
	s := sqliteStore(t)
	idle := newReplica(t, "idle", s, u, false)

	code, body := do(t, "POST", idle.url+"/v1/responses", `{"model":"m","input":"hi"}`)
	if code != http.StatusOK {
		t.Fatal(code, string(body))
	}
	fg := decode(t, body).ID
	code, body = do(t, "POST", idle.url+"/v1/responses/"+fg+"/cancel", "")
	if code != http.StatusBadRequest || !strings.Contains(string(body), "background") {
		t.Errorf("cancel of a foreground response: %d %s, want a 400", code, body)
	}

	code, body = do(t, "POST", idle.url+"/v1/responses", `{"model":"m","input":"hi","background":true}`)
	if code != http.StatusOK {
		t.Fatal(code, string(body))
	}
	queued := decode(t, body).ID
	code, body = do(t, "POST", idle.url+"/v1/responses/"+queued+"/cancel", "")
	if code != http.StatusOK || decode(t, body).Status != responses.ResponseCancelled {
		t.Fatalf("cancel of a queued response: %d %s", code, body)
	}
	// A replica that claims the job now finds it cancelled and leaves it.
	worker := newReplica(t, "worker", s, u, true)
	code, body = do(t, "POST", worker.url+"/v1/responses", `{"model":"m","input":"hi","background":true}`)
	if code != http.StatusOK {
		t.Fatal(code, string(body))
	}
	done := pollUntil(t, worker, decode(t, body).ID)
	if done.Status != responses.ResponseCompleted {
		t.Fatalf("a later background response: %s", done.Status)
	}
	if o := pollUntil(t, worker, queued); o.Status != responses.ResponseCancelled {
		t.Errorf("the cancelled one: %s", o.Status)
	}
	if got := u.replicas(); len(got) != 2 {
		t.Errorf("upstream called %d times, want twice: the foreground and the later background response; the cancelled one never runs", len(got))
	}
	code, body = do(t, "POST", worker.url+"/v1/responses/"+queued+"/cancel", "")
	if code != http.StatusOK || decode(t, body).Status != responses.ResponseCancelled {
		t.Errorf("cancel of a cancelled response: %d %s", code, body)
	}

	code, body = do(t, "POST", idle.url+"/v1/responses", `{"model":"m","input":"hi","background":true,"store":false}`)
	if code != http.StatusBadRequest || !strings.Contains(string(body), `"param":"background"`) {
		t.Errorf("background without store: %d %s, want a 400 on background", code, body)
	}
}

// sseEvent is one event of a stream.
type sseEvent struct {
	Type     string `json:"type"`
	Sequence int    `json:"sequence_number"`
	raw      string
}

// readEvents reads events from an SSE body, at most n (0: to the end).
func readEvents(t *testing.T, body io.Reader, n int) []sseEvent {
	t.Helper()
	var out []sseEvent
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 0, 1<<16), 1<<22)
	for sc.Scan() {
		line := sc.Text()
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var ev sseEvent
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("%v: %s", err, data)
		}
		ev.raw = data
		out = append(out, ev)
		if n > 0 && len(out) == n {
			break
		}
	}
	return out
}

// TestBackgroundStreamResumesOnAnotherReplica: a background stream read
// for 20 events on A and dropped continues on B from starting_after=19
// with the next sequence number, through the live events, to
// response.completed; no gap, no repeat.
func TestBackgroundStreamResumesOnAnotherReplica(t *testing.T) {
	for name, st := range stores(t) {
		t.Run(name, func(t *testing.T) {
			release := make(chan struct{})
			u := &upstream{stream: func(ctx context.Context, _ int, emit func(model.Delta) error) error {
				for i := range 60 {
					if i == 30 {
						// The rest comes once the client has resumed.
						<-release
					}
					if err := emit(text(fmt.Sprintf("w%d ", i))); err != nil {
						return err
					}
				}
				return nil
			}}
			s := st(t)
			a := newReplica(t, "A", s, u, false)
			b := newReplica(t, "B", s, u, false)

			req, _ := http.NewRequestWithContext(t.Context(), "POST", a.url+"/v1/responses",
				strings.NewReader(`{"model":"m","input":"hi","background":true,"stream":true}`))
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			first := readEvents(t, resp.Body, 20)
			resp.Body.Close() // the client drops
			if len(first) != 20 || first[0].Type != "response.created" {
				t.Fatalf("first read: %d events", len(first))
			}
			var created struct {
				Response object `json:"response"`
			}
			json.Unmarshal([]byte(first[0].raw), &created)
			id := created.Response.ID

			rctx, rcancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer rcancel()
			req, _ = http.NewRequestWithContext(rctx, "GET", b.url+"/v1/responses/"+id+"?stream=true&starting_after=19", nil)
			resp, err = http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b, _ := io.ReadAll(resp.Body)
				t.Fatalf("resume on B: %d %s", resp.StatusCode, b)
			}
			close(release)
			rest := readEvents(t, resp.Body, 0)
			if len(rest) == 0 || rest[0].Sequence != 20 {
				t.Fatalf("resume started at %+v, want sequence 20", rest)
			}
			for i, ev := range rest {
				if ev.Sequence != 20+i {
					t.Fatalf("event %d has sequence %d, want %d (gap or repeat)", i, ev.Sequence, 20+i)
				}
			}
			if last := rest[len(rest)-1]; last.Type != "response.completed" {
				t.Errorf("resumed stream ends with %s", last.Type)
			}
			// What the client pieced together is what is stored.
			stored, err := b.engine.Store().Events(t.Context(), id, -1)
			if err != nil {
				t.Fatal(err)
			}
			all := append(first, rest...)
			if len(stored) != len(all) {
				t.Fatalf("stored %d events, the client read %d", len(stored), len(all))
			}
			for i := range stored {
				if string(stored[i]) != all[i].raw {
					t.Errorf("event %d differs:\nstored %s\nread   %s", i, stored[i], all[i].raw)
					break
				}
			}
			// Without starting_after the replay starts at response.created.
			req, _ = http.NewRequestWithContext(t.Context(), "GET", a.url+"/v1/responses/"+id+"?stream=true", nil)
			resp2, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp2.Body.Close()
			if again := readEvents(t, resp2.Body, 0); len(again) != len(all) || again[0].Type != "response.created" {
				t.Errorf("full replay: %d events", len(again))
			}
		})
	}
}

// TestConversationsAcrossReplicas: 20 clients each add turns to their own
// conversation, alternating between replicas A and B, while 5 race on one
// shared conversation through both. Checked against the store: each own
// conversation holds every turn once, in order; the shared one holds
// exactly the turns that were accepted, each whole, and every refusal was
// a 409 on conversation.
func TestConversationsAcrossReplicas(t *testing.T) {
	u := &upstream{echo: true}
	s := postgresStore(t)
	reps := []*replica{newReplica(t, "A", s, u, false), newReplica(t, "B", s, u, false)}
	newConv := func() string {
		code, body := do(t, "POST", reps[0].url+"/v1/conversations", `{}`)
		if code != http.StatusOK {
			t.Fatal(code, string(body))
		}
		return decode(t, body).ID
	}
	say := func(r *replica, conv, text string) (int, []byte) {
		return do(t, "POST", r.url+"/v1/responses", fmt.Sprintf(`{"model":"m","input":%q,"conversation":%q}`, text, conv))
	}
	const own, racers, turns = 20, 5, 3
	owns := make([]string, own)
	for i := range owns {
		owns[i] = newConv()
	}
	shared := newConv()
	var wg sync.WaitGroup
	var mu sync.Mutex
	accepted := map[string]bool{}
	refused := 0
	for i := range own {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range turns {
				if code, body := say(reps[(i+n)%2], owns[i], fmt.Sprintf("c%d t%d", i, n)); code != http.StatusOK {
					t.Errorf("own conversation %d turn %d: %d %s", i, n, code, body)
				}
			}
		}()
	}
	for i := range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range turns {
				text := fmt.Sprintf("r%d t%d", i, n)
				code, body := say(reps[(i+n)%2], shared, text)
				mu.Lock()
				switch {
				case code == http.StatusOK:
					accepted[text] = true
				case code == http.StatusConflict && strings.Contains(string(body), `"param":"conversation"`):
					refused++
				default:
					t.Errorf("racer %d turn %d: %d %s", i, n, code, body)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()

	st := reps[1].engine.Store()
	texts := func(id string) []string {
		items, _, err := st.ConversationItems(context.Background(), id, store.Page{})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, it := range items {
			out = append(out, it.Content[0].Text)
		}
		return out
	}
	for i, id := range owns {
		var want []string
		for n := range turns {
			q := fmt.Sprintf("c%d t%d", i, n)
			want = append(want, q, "re: "+q)
		}
		if got := texts(id); strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("own conversation %d: %q, want %q", i, got, want)
		}
	}
	got := texts(shared)
	if len(got) != 2*len(accepted) {
		t.Fatalf("shared conversation: %d items for %d accepted turns: %q", len(got), len(accepted), got)
	}
	for k := 0; k+1 < len(got); k += 2 {
		if !accepted[got[k]] || got[k+1] != "re: "+got[k] {
			t.Errorf("shared conversation turn %d is %q, %q: not an accepted turn whole", k/2, got[k], got[k+1])
		}
		delete(accepted, got[k])
	}
	if len(accepted) != 0 {
		t.Errorf("accepted turns missing from the shared conversation: %v", accepted)
	}
	t.Logf("shared conversation: %d turns accepted, %d refused with 409, through two replicas", len(got)/2, refused)
}

// TestFollowQueuedKeepsAlive: a stream that follows a background response
// still queued (no replica runs jobs) gets keep-alive comments while
// nothing happens, and ends when the response is cancelled.
func TestFollowQueuedKeepsAlive(t *testing.T) {
	u := &upstream{stream: func(ctx context.Context, _ int, emit func(model.Delta) error) error { return emit(text("never")) }}
	idle := newReplica(t, "idle", sqliteStore(t), u, false)
	code, body := do(t, "POST", idle.url+"/v1/responses", `{"model":"m","input":"hi","background":true}`)
	if code != http.StatusOK {
		t.Fatal(code, string(body))
	}
	id := decode(t, body).ID
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", idle.url+"/v1/responses/"+id+"?stream=true", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	if !sc.Scan() || sc.Text() != ": keep-alive" {
		t.Fatalf("first line %q, want a keep-alive comment", sc.Text())
	}
	if code, body := do(t, "POST", idle.url+"/v1/responses/"+id+"/cancel", ""); code != http.StatusOK {
		t.Fatal(code, string(body))
	}
	var last string
	for sc.Scan() {
		if line := sc.Text(); line != "" && line != ": keep-alive" {
			last = line
		}
	}
	if last != "data: [DONE]" {
		t.Errorf("the stream of a cancelled queued response ends with %q, want [DONE]", last)
	}
}
