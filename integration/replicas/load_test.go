package replicas

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
)

// load is a run of requests from concurrent workers through the balancer.
// Every fourth request is a plain create, streamed or not; the others
// alternate with continuations of the worker's last response
// (previous_response_id), so chains cross replicas.
type load struct {
	total   int
	workers int
	// script is the input text's directives for the scripted upstream.
	script string
	// allStreamed streams every request (else every other one).
	allStreamed bool
	// onCompleted, if set, is called with the running count of completed
	// requests after each one: the explicit signal that decides when
	// "mid-run" is.
	onCompleted func(n int)
	// onOutcome, if set, is called with every outcome as it happens.
	onOutcome func(o outcome)
	// phase, if set, is read when a request starts and kept in its
	// outcome (for example, whether a restart has finished).
	phase func() int
}

// outcome is what one request of a load saw.
type outcome struct {
	id       string
	replica  string // the X-Loom-Replica header: who answered
	stream   bool
	previous string
	status   string // the final status the client saw ("" if none)
	err      error
	// events is what a streamed request saw: response.created's id
	// (so a failed stream still tells which response it was).
	created string
	phase   int
	// start and end are when the request was sent and when it ended.
	start, end time.Time
}

func (o outcome) ok() bool { return o.err == nil && o.status == "completed" }

func (o outcome) String() string {
	return fmt.Sprintf("%s (replica %q, stream %v, previous %q): status %q, err %v", o.id, o.replica, o.stream, o.previous, o.status, o.err)
}

// run sends the load to baseURL and returns every request's outcome, in
// order of completion.
func (l load) run(t *testing.T, baseURL string) []outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl := client(baseURL)
	var (
		next, completed atomic.Int64
		mu              sync.Mutex
		outcomes        []outcome
		wg              sync.WaitGroup
	)
	for w := range l.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var last string
			for {
				i := int(next.Add(1)) - 1
				if i >= l.total {
					return
				}
				previous := ""
				if i%4 >= 2 {
					previous = last
				}
				phase := 0
				if l.phase != nil {
					phase = l.phase()
				}
				start := time.Now()
				o := l.request(ctx, cl, fmt.Sprintf("load request %d of worker %d\n%s", i, w, l.script), l.allStreamed || i%2 == 1, previous)
				o.phase, o.start, o.end = phase, start, time.Now()
				if o.ok() {
					last = o.id
				}
				mu.Lock()
				outcomes = append(outcomes, o)
				mu.Unlock()
				if l.onOutcome != nil {
					l.onOutcome(o)
				}
				if o.ok() && l.onCompleted != nil {
					l.onCompleted(int(completed.Add(1)))
				}
			}
		}()
	}
	wg.Wait()
	return outcomes
}

// request creates one response, streamed or not, continuing previous if
// set.
func (l load) request(ctx context.Context, cl openai.Client, input string, stream bool, previous string) outcome {
	params := responses.ResponseNewParams{
		Model: "mock-model",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(input)},
	}
	if previous != "" {
		params.PreviousResponseID = openai.String(previous)
	}
	o := outcome{stream: stream, previous: previous}
	var res *http.Response
	if !stream {
		r, err := cl.Responses.New(ctx, params, option.WithResponseInto(&res))
		if res != nil {
			o.replica = res.Header.Get("X-Loom-Replica")
		}
		if err != nil {
			o.err = err
			return o
		}
		o.id, o.status = r.ID, string(r.Status)
		return o
	}
	s := cl.Responses.NewStreaming(ctx, params, option.WithResponseInto(&res))
	defer s.Close()
	for s.Next() {
		ev := s.Current()
		switch ev.Type {
		case "response.created":
			o.created = ev.Response.ID
		case "response.completed", "response.failed", "response.incomplete", "response.cancelled":
			o.id, o.status = ev.Response.ID, string(ev.Response.Status)
		}
	}
	if res != nil {
		o.replica = res.Header.Get("X-Loom-Replica")
	}
	o.err = s.Err()
	if o.id == "" {
		o.id = o.created
	}
	if o.err == nil && o.status == "" {
		o.err = fmt.Errorf("the stream ended without a final event")
	}
	return o
}

// byReplica counts outcomes by the replica that answered.
func byReplica(outcomes []outcome) map[string]int {
	n := map[string]int{}
	for _, o := range outcomes {
		n[o.replica]++
	}
	return n
}

// checkStored fails the test unless every response a client saw completed
// is in the store, completed.
func checkStored(t *testing.T, store *sharedStore, outcomes []outcome) {
	t.Helper()
	stored := store.statuses(t)
	var missing []string
	for _, o := range outcomes {
		if o.ok() && stored[o.id] != "completed" {
			missing = append(missing, fmt.Sprintf("%s: stored %q", o.id, stored[o.id]))
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("%d responses the clients saw completed are not stored completed: %v", len(missing), missing[:min(len(missing), 20)])
	}
}

// TestRollingRestartUnderLoad restarts a replica with SIGTERM in the
// middle of 1000 requests from 50 workers through HAProxy: no request
// fails, and every response a client saw completed is stored.
func TestRollingRestartUnderLoad(t *testing.T) {
	rollingRestart(t, true)
}

// TestRollingRestartHealthChecksOnly is the rolling restart behind a
// balancer that does not retry: the drain alone keeps every request off
// the stopping replica's closed listener. (With --drain-delay 0 the same
// run failed one request, an EOF, in 2 of 4 runs; with the drain none in
// 4.)
func TestRollingRestartHealthChecksOnly(t *testing.T) {
	rollingRestart(t, false)
}

// rollingRestart runs the load through HAProxy, with or without retries,
// restarting a replica with SIGTERM mid-run; extra are replica flags.
func rollingRestart(t *testing.T, retries bool, extra ...string) {
	c := newCluster(t, nil, 3, extra...)
	bal := startBalancerWith(t, retries, c.replicas...)
	victim := c.replicas[1]

	const total, restartAt = 1000, 300
	trigger := make(chan struct{})
	var triggerOnce sync.Once
	var atRestarted atomic.Int64 // completed requests when the victim was back
	var restarted atomic.Bool
	l := load{
		total: total, workers: 50,
		// About 18 chunks 20ms apart: each request takes ~0.4s, so the
		// run lasts several times the restart (drain 1s, the in-flight
		// responses, start) and the restart happens under load.
		script: "#latency 20ms\n#tokens 20",
		phase: func() int {
			if restarted.Load() {
				return 1
			}
			return 0
		},
	}
	var completed atomic.Int64
	l.onCompleted = func(n int) {
		completed.Store(int64(n))
		if n == restartAt {
			triggerOnce.Do(func() { close(trigger) })
		}
	}

	restartErr := make(chan error, 1)
	var stopped, back time.Duration
	go func() {
		// t.Fatal must not be called here; failures go to restartErr.
		restartErr <- func() error {
			select {
			case <-trigger:
			case <-time.After(2 * time.Minute):
				return fmt.Errorf("the load never reached %d completed requests", restartAt)
			}
			start := time.Now()
			if err := victim.signal(syscall.SIGTERM); err != nil {
				return err
			}
			state, err := victim.waitExit(time.Minute)
			if err != nil {
				return err
			}
			if !state.Success() {
				return fmt.Errorf("replica %s exited with %v after SIGTERM", victim.name, state)
			}
			stopped = time.Since(start)
			if err := victim.tryStart(); err != nil {
				return err
			}
			back = time.Since(start)
			atRestarted.Store(completed.Load())
			restarted.Store(true)
			return nil
		}()
	}()

	start := time.Now()
	outcomes := l.run(t, bal.url())
	elapsed := time.Since(start)
	if err := <-restartErr; err != nil {
		t.Fatal(err)
	}

	var failed []string
	for _, o := range outcomes {
		if !o.ok() {
			failed = append(failed, o.String())
		}
	}
	if len(failed) > 0 {
		t.Errorf("%d of %d requests failed: %v", len(failed), len(outcomes), failed[:min(len(failed), 20)])
	}
	if len(outcomes) != total {
		t.Errorf("%d outcomes, want %d", len(outcomes), total)
	}
	if n := atRestarted.Load(); n >= total {
		t.Errorf("the restarted replica was back only after the load ended (%d completed): tune the script's delays", n)
	}
	servedAfter := 0
	for _, o := range outcomes {
		if o.phase == 1 && o.replica == victim.name {
			servedAfter++
		}
	}
	if servedAfter == 0 {
		t.Errorf("the restarted replica served no request after its restart")
	}
	checkStored(t, c.store, outcomes)
	c.store.checkIntegrity(t)
	t.Logf("%d requests (50 workers) in %v, %d failed; SIGTERM at %d completed: replica stopped after %v, listening again after %v (at %d completed), then served %d; answered by %v",
		len(outcomes), elapsed.Round(time.Millisecond), len(failed), restartAt, stopped.Round(time.Millisecond), back.Round(time.Millisecond), atRestarted.Load(), servedAfter, byReplica(outcomes))
}
