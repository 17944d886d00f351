package replicas

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
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
// (previous_response_id), so chains cross replicas. With backgroundEvery,
// some requests are background ones instead (never streamed, chained or
// not like the others), polled until they end.
type load struct {
	total   int
	workers int
	// script is the input text's directives for the scripted upstream.
	script string
	// allStreamed streams every request (else every other one).
	allStreamed bool
	// backgroundEvery, if not 0, makes request i a background response
	// when i%backgroundEvery == backgroundEvery-1.
	backgroundEvery int
	// pollFor bounds how long a background response is polled until it
	// ends (default 30s).
	pollFor time.Duration
	// backoff, if not 0, is the longest a worker waits after a 503 or a
	// 429 before its next request, or its next poll: what Retry-After
	// says, or backoff when it says nothing, as a client that honours
	// Retry-After does.
	backoff time.Duration
	// admit, if set, is called before request i is sent and may block:
	// a test holds requests back until a fault is over.
	admit func(i int)
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

// pollEvery is how often a background response is read until it ends.
const pollEvery = 20 * time.Millisecond

// outcome is what one request of a load saw.
type outcome struct {
	i          int // the request's number in the load
	id         string
	replica    string // the X-Loom-Replica header: who answered
	stream     bool
	background bool
	previous   string
	status     string // the final status the client saw ("" if none)
	// code is the error code of a response that ended failed, or of
	// an HTTP error's body.
	code string
	err  error
	// httpStatus is the status of an HTTP error answer (0: none), and
	// errorBody whether its body had the OpenAI error shape (loom's
	// answer, not the balancer's). retryAfter is its Retry-After.
	httpStatus int
	errorBody  bool
	retryAfter string
	// pollErr says that err came from polling a background response,
	// not from creating it; pollFaults counts the polls that were
	// answered with an error and tried again, by kind.
	pollErr    bool
	pollFaults map[string]int
	// events is what a streamed request saw: response.created's id
	// (so a failed stream still tells which response it was).
	created string
	phase   int
	// start and end are when the request was sent and when it ended.
	start, end time.Time
}

func (o outcome) ok() bool { return o.err == nil && o.status == "completed" }

func (o outcome) String() string {
	s := fmt.Sprintf("%s (request %d, replica %q, stream %v, background %v, previous %q): %s, status %q, err %v",
		o.id, o.i, o.replica, o.stream, o.background, o.previous, o.kind(), o.status, o.err)
	if o.httpStatus != 0 {
		s += fmt.Sprintf(", HTTP %d code %q Retry-After %q", o.httpStatus, o.code, o.retryAfter)
	}
	if len(o.pollFaults) > 0 {
		s += fmt.Sprintf(", polls answered with errors %v", o.pollFaults)
	}
	return s
}

// errStillRunning is the error of a background request whose response
// was still queued or in progress when polling it gave up.
var errStillRunning = errors.New("the background response did not end while it was polled")

// kind names what a request saw, for counting and for the failure
// messages: "completed"; another final status with the response's error
// code ("failed server_error"); an HTTP error by status and by who
// answered it ("503 loom" with loom's OpenAI error body, "503 balancer"
// without: HAProxy's own answer); "stream cut" (a stream that ended
// without its final event, after response.created); "no answer" (a
// connection that ended before any); "still queued" (a background
// response polling gave up on). When a background response's poll
// failed, the kind is the poll's, prefixed with "poll ".
func (o outcome) kind() string {
	var k string
	switch {
	case o.ok():
		return "completed"
	case errors.Is(o.err, errStillRunning):
		k = "still " + o.status
	case o.httpStatus != 0:
		who := "balancer"
		if o.errorBody {
			who = "loom"
		}
		k = fmt.Sprintf("%d %s", o.httpStatus, who)
	case o.err == nil:
		k = strings.TrimSpace(o.status + " " + o.code)
	case o.stream && o.created != "":
		k = "stream cut"
	default:
		k = "no answer"
	}
	if o.pollErr {
		k = "poll " + k
	}
	return k
}

// setErr records err and, when the answer was an HTTP error (res, if
// set, is the answer), its status, whether its body had the OpenAI error
// shape, its code and its Retry-After.
func (o *outcome) setErr(err error, res *http.Response) {
	o.err = err
	if res != nil && res.StatusCode >= 400 {
		o.httpStatus, o.retryAfter = res.StatusCode, res.Header.Get("Retry-After")
	}
	var apiErr *openai.Error
	if errors.As(err, &apiErr) {
		o.httpStatus = apiErr.StatusCode
		o.errorBody = apiErr.JSON.Message.Valid() && apiErr.JSON.Type.Valid()
		o.code = apiErr.Code
	}
}

// retryable is whether a client would try again after o, an error
// answer: a 503 or a 429, the balancer's 502 or 504 (its replica died
// under the request), or a connection that ended with no answer.
func (o outcome) retryable() bool {
	switch {
	case o.httpStatus == http.StatusServiceUnavailable || o.httpStatus == http.StatusTooManyRequests:
		return true
	case o.httpStatus != 0:
		return !o.errorBody && (o.httpStatus == http.StatusBadGateway || o.httpStatus == http.StatusGatewayTimeout)
	}
	return o.err != nil && !errors.Is(o.err, context.DeadlineExceeded) && !errors.Is(o.err, context.Canceled)
}

// pause is how long a client waits after o before trying again: what
// Retry-After says, at most l.backoff, or l.backoff when it says nothing;
// 0 after anything but a 503 or a 429, or without l.backoff.
func (l load) pause(o outcome) time.Duration {
	if l.backoff == 0 || (o.httpStatus != http.StatusServiceUnavailable && o.httpStatus != http.StatusTooManyRequests) {
		return 0
	}
	if s, err := strconv.Atoi(o.retryAfter); err == nil && s >= 0 {
		return min(time.Duration(s)*time.Second, l.backoff)
	}
	return l.backoff
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
				if l.admit != nil {
					l.admit(i)
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
				input := fmt.Sprintf("load request %d of worker %d\n%s", i, w, l.script)
				var o outcome
				if l.backgroundEvery > 0 && i%l.backgroundEvery == l.backgroundEvery-1 {
					o = l.background(ctx, cl, input, previous)
				} else {
					o = l.request(ctx, cl, input, l.allStreamed || i%2 == 1, previous)
				}
				o.i, o.phase, o.start, o.end = i, phase, start, time.Now()
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
				time.Sleep(l.pause(o))
			}
		}()
	}
	wg.Wait()
	return outcomes
}

// params are the parameters of a create, continuing previous if set.
func params(input, previous string) responses.ResponseNewParams {
	p := responses.ResponseNewParams{
		Model: "mock-model",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(input)},
	}
	if previous != "" {
		p.PreviousResponseID = openai.String(previous)
	}
	return p
}

// request creates one response, streamed or not, continuing previous if
// set.
func (l load) request(ctx context.Context, cl openai.Client, input string, stream bool, previous string) outcome {
	o := outcome{stream: stream, previous: previous}
	var res *http.Response
	if !stream {
		r, err := cl.Responses.New(ctx, params(input, previous), option.WithResponseInto(&res))
		if res != nil {
			o.replica = res.Header.Get("X-Loom-Replica")
		}
		if err != nil {
			o.setErr(err, res)
			return o
		}
		o.id, o.status = r.ID, string(r.Status)
		return o
	}
	s := cl.Responses.NewStreaming(ctx, params(input, previous), option.WithResponseInto(&res))
	defer s.Close()
	for s.Next() {
		ev := s.Current()
		switch ev.Type {
		case "response.created":
			o.created = ev.Response.ID
		case "response.completed", "response.failed", "response.incomplete", "response.cancelled":
			o.id, o.status, o.code = ev.Response.ID, string(ev.Response.Status), string(ev.Response.Error.Code)
		}
	}
	if res != nil {
		o.replica = res.Header.Get("X-Loom-Replica")
	}
	if err := s.Err(); err != nil {
		o.setErr(err, res)
	}
	if o.id == "" {
		o.id = o.created
	}
	if o.err == nil && o.status == "" {
		o.err = fmt.Errorf("the stream ended without a final event")
	}
	return o
}

// background creates one background response, continuing previous if
// set, and reads it until it is neither queued nor in progress, or for
// l.pollFor at most. A poll answered with an error a client would try
// again after (retryable) is tried again, after the pause the answer
// asks for; any other error ends the request.
func (l load) background(ctx context.Context, cl openai.Client, input, previous string) outcome {
	o := outcome{background: true, previous: previous}
	p := params(input, previous)
	p.Background = openai.Bool(true)
	var res *http.Response
	r, err := cl.Responses.New(ctx, p, option.WithResponseInto(&res))
	if res != nil {
		o.replica = res.Header.Get("X-Loom-Replica")
	}
	if err != nil {
		o.setErr(err, res)
		return o
	}
	o.id, o.status = r.ID, string(r.Status)
	pollFor := l.pollFor
	if pollFor == 0 {
		pollFor = 30 * time.Second
	}
	deadline := time.Now().Add(pollFor)
	// Each poll waits at least pollEvery: the count bounds the loop too.
	for polls := 0; o.status == "queued" || o.status == "in_progress"; polls++ {
		if time.Now().After(deadline) || polls > int(pollFor/pollEvery) {
			o.err = fmt.Errorf("%w: still %s after %d polls over %v", errStillRunning, o.status, polls, pollFor)
			return o
		}
		time.Sleep(pollEvery)
		var res *http.Response
		r, err := cl.Responses.Get(ctx, o.id, responses.ResponseGetParams{}, option.WithResponseInto(&res))
		if err != nil {
			var poll outcome
			poll.setErr(err, res)
			if !poll.retryable() || ctx.Err() != nil {
				o.pollErr = true
				o.setErr(err, res)
				return o
			}
			if o.pollFaults == nil {
				o.pollFaults = map[string]int{}
			}
			o.pollFaults[poll.kind()]++
			time.Sleep(l.pause(poll))
			continue
		}
		o.status, o.code = string(r.Status), string(r.Error.Code)
	}
	return o
}

// kinds counts outcomes by kind.
func kinds(outcomes []outcome) map[string]int {
	n := map[string]int{}
	for _, o := range outcomes {
		n[o.kind()]++
	}
	return n
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
