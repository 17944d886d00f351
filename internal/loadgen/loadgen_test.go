package loadgen

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// endpoints serves /json and /json... (a JSON answer), /sse (a stream of three events,
// the second carrying "tok"), /fail (a 500) and notes the paths in the
// order they were asked for.
type endpoints struct {
	mu    sync.Mutex
	paths []string
}

func (e *endpoints) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	e.mu.Lock()
	e.paths = append(e.paths, r.URL.Path)
	e.mu.Unlock()
	switch {
	case strings.HasPrefix(r.URL.Path, "/json"):
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true}`)
	case r.URL.Path == "/sse":
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, ": a comment\n\nevent: a\ndata: {\"n\":1}\n\ndata: {\"n\":2,\"tok\":1}\n\ndata: [DONE]\n\n")
	default:
		http.Error(w, "no such thing", http.StatusInternalServerError)
	}
}

func (e *endpoints) seen() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.paths...)
}

func newEndpoints(t *testing.T) (*endpoints, string) {
	e := &endpoints{}
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	return e, srv.URL
}

func TestRunTimesEveryTarget(t *testing.T) {
	e, url := newEndpoints(t)
	targets := []Target{
		{Name: "json", URL: url + "/json", Body: []byte(`{}`)},
		{Name: "sse", URL: url + "/sse", Body: []byte(`{}`), Token: `"tok"`},
	}
	measuring := 0
	res, err := Run(t.Context(), targets, Options{Rounds: 5, Measuring: func() { measuring = len(e.seen()) }})
	if err != nil {
		t.Fatal(err)
	}
	if measuring != len(targets) {
		t.Errorf("measuring began after %d requests, want the %d of the warm-up", measuring, len(targets))
	}
	if len(res) != 2 || len(res[0]) != 5 || len(res[1]) != 5 {
		t.Fatalf("timings per target: %d targets, want 2 with 5 each", len(res))
	}
	for _, tm := range res[0] {
		if tm.Total <= 0 || tm.FirstLine != 0 || tm.FirstToken != 0 || tm.Lines != 0 {
			t.Errorf("json: %+v, want a total only", tm)
		}
	}
	for _, tm := range res[1] {
		if tm.Lines != 3 || tm.FirstLine <= 0 || tm.FirstToken < tm.FirstLine || tm.Total < tm.FirstToken {
			t.Errorf("sse: %+v, want 3 lines, 0 < first line <= first token <= total", tm)
		}
	}
	// One client: the warm-up in the targets' order, then each round
	// every target once.
	seen := e.seen()
	if strings.Join(seen[:2], " ") != "/json /sse" {
		t.Errorf("warm-up: %v, want /json /sse", seen[:2])
	}
	for r := range 5 {
		round := seen[2+2*r : 4+2*r]
		if round[0] == round[1] {
			t.Errorf("round %d: %v, want each target once", r, round)
		}
	}
}

// TestRunShufflesEachRound: over enough rounds every target is measured
// right after every other one, which an order that only rotates does in
// few rounds (there each target mostly follows the one before it in the
// list).
func TestRunShufflesEachRound(t *testing.T) {
	e, url := newEndpoints(t)
	var targets []Target
	for _, p := range []string{"/json", "/sse", "/json2", "/json3"} {
		targets = append(targets, Target{Name: p, URL: url + p})
	}
	const rounds = 200
	if _, err := Run(t.Context(), targets, Options{Rounds: rounds}); err != nil {
		t.Fatal(err)
	}
	seen := e.seen()[len(targets):] // past the warm-up
	if len(seen) != rounds*len(targets) {
		t.Fatalf("%d measured requests, want %d", len(seen), rounds*len(targets))
	}
	// after[a][b]: how often b came right after a within a round.
	after := map[string]map[string]int{}
	for r := range rounds {
		round := seen[r*len(targets) : (r+1)*len(targets)]
		for i := 1; i < len(round); i++ {
			if after[round[i-1]] == nil {
				after[round[i-1]] = map[string]int{}
			}
			after[round[i-1]][round[i]]++
		}
	}
	// 200 rounds of 3 adjacent pairs among 12 ordered pairs: 50 each on
	// average; a rotation would give some pairs ~150 and others 0.
	for _, a := range []string{"/json", "/sse", "/json2", "/json3"} {
		for _, b := range []string{"/json", "/sse", "/json2", "/json3"} {
			if a != b && (after[a][b] < 20 || after[a][b] > 100) {
				t.Errorf("%s right after %s in %d rounds of %d, want about a quarter", b, a, after[a][b], rounds)
			}
		}
	}
}

func TestRunSharesRoundsAmongClients(t *testing.T) {
	e, url := newEndpoints(t)
	targets := []Target{{Name: "json", URL: url + "/json"}}
	res, err := Run(t.Context(), targets, Options{Clients: 4, Rounds: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(res[0]) != 10 {
		t.Errorf("%d timings, want 10", len(res[0]))
	}
	if n := len(e.seen()); n != 4+10 {
		t.Errorf("%d requests, want 4 to warm up and 10 measured", n)
	}
}

func TestRunFails(t *testing.T) {
	_, url := newEndpoints(t)
	for _, tc := range []struct {
		name   string
		target Target
		want   string
	}{
		{"status", Target{Name: "broken", URL: url + "/fail"}, "broken: status 500"},
		{"no token", Target{Name: "quiet", URL: url + "/sse", Token: "never"}, `quiet: no line of the stream contains "never"`},
		{"no server", Target{Name: "gone", URL: "http://127.0.0.1:1/x"}, "gone:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			targets := []Target{{Name: "json", URL: url + "/json"}, tc.target}
			_, err := Run(t.Context(), targets, Options{Clients: 2, Rounds: 100})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Run: %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// TestRunStopsAtTheDeadline: past the deadline no round starts, and the
// connections are still opened (the warm-up is not a round).
func TestRunStopsAtTheDeadline(t *testing.T) {
	e, url := newEndpoints(t)
	targets := []Target{{Name: "json", URL: url + "/json"}, {Name: "sse", URL: url + "/sse"}}
	res, err := Run(t.Context(), targets, Options{Clients: 2, Rounds: 100, Deadline: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 || len(res[0]) != 0 || len(res[1]) != 0 {
		t.Errorf("timings %v, want none for either target", res)
	}
	if n := len(e.seen()); n != 2*2 {
		t.Errorf("%d requests, want the 4 of the warm-up", n)
	}
}
