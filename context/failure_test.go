package conversation

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/loomgate/loom/internal/testutil"
	"github.com/loomgate/loom/tools"
)

var errRefused = errors.New("connection refused")

// The seed's partial-initialisation case (vLLM's
// test_mcp_partial_initialization_closes_opened_session), for lazy
// sessions: the second session's open fails. The first is still cleaned up
// (it was called) and closed; the failed one gets neither; a server never
// called is never touched; the model gets a clear error; the failure is
// remembered for the response, not retried on every call.
func TestPartialOpenFailure(t *testing.T) {
	for _, concurrent := range []bool{false, true} {
		name := "sequential"
		if concurrent {
			name = "same turn"
		}
		t.Run(name, func(t *testing.T) {
			log := &eventLog{}
			var logs testutil.LockedBuffer
			a, b, c := newFake(log, "a", "ta"), newFake(log, "b", "tb"), newFake(log, "c", "tc")
			b.OpenFunc = func(context.Context) (tools.Session, error) {
				log.add("open", "b")
				return nil, errRefused
			}
			cc := New(registry(t, a, b, c), nil, &Options{ResponseID: "resp_partial", Logger: testLogger(&logs)})
			ctx := context.Background()

			var res []tools.Result
			if concurrent {
				res = cc.Call(ctx, calls("ta", "tb"))
			} else {
				res = append(cc.Call(ctx, calls("ta")), cc.Call(ctx, calls("tb"))...)
			}
			if res[0].IsError {
				t.Fatalf("ta failed: %v", res[0].Err)
			}
			r := res[1]
			var se *SessionError
			if !r.IsError || !errors.As(r.Err, &se) || se.Op != OpOpen || se.Server != "b" || !errors.Is(r.Err, errRefused) {
				t.Fatalf("tb result = %+v, want an open error for b", r)
			}
			if txt := r.Text(); !strings.Contains(txt, `"tb"`) || !strings.Contains(txt, `"b"`) || strings.Contains(txt, "refused") {
				t.Errorf("model text %q should name tool and server, not quote internals", txt)
			}
			// Later calls get the same error without another attempt.
			if r2 := cc.Call(ctx, calls("tb"))[0]; !r2.IsError || log.count("open", "b") != 1 {
				t.Errorf("failed open retried: %d opens", log.count("open", "b"))
			}
			if got := cc.Called(); !slices.Equal(got, []string{"ta"}) {
				t.Errorf("Called() = %v, want [ta]: a tool whose session never opened was not called", got)
			}

			if err := cc.Close(ctx); err != nil {
				t.Fatalf("Close: %v", err)
			}
			want := []event{{"open", "a"}, {"call", "a"}, {"cleanup", "a"}, {"close", "a"}}
			var got []event
			for _, e := range log.all() {
				if e.kind != "list" && (e.server != "b" || e.kind != "open") {
					got = append(got, e)
				}
			}
			if !slices.Equal(got, want) {
				t.Errorf("events %v, want %v", got, want)
			}
			if n := log.count("cleanup", "b") + log.count("close", "b") + log.count("open", "c"); n != 0 {
				t.Errorf("b cleaned/closed or c opened: %v", log.all())
			}
			st := cc.Stats()
			if st.Open.Failed != 1 || st.Open.OK != 1 || st.Cleanup.OK != 1 || st.Close.OK != 1 {
				t.Errorf("stats %+v", st)
			}
			if l := logs.String(); !strings.Contains(l, "op=open") || !strings.Contains(l, "server=b") || !strings.Contains(l, "response_id=resp_partial") || !strings.Contains(l, "refused") {
				t.Errorf("open failure not logged:\n%s", l)
			}
		})
	}
}

// Faults during Close: each is logged (response, server, tools, error),
// counted, and named in Close's error; none stops the others; every opened
// session is closed, in reverse order, after every cleanup has started.
//
// The test runs in a synctest bubble: the timeouts are on its fake clock,
// so a healthy session is never cut short by a loaded machine, and a hung
// operation costs exactly its timeout.
func TestCloseFaults(t *testing.T) {
	const (
		timeout  = 50 * time.Millisecond
		deadline = 300 * time.Millisecond
	)

	tests := []struct {
		name     string
		faulty   func(s *fakeSession, release <-chan struct{})
		outcome  Outcome
		op       Op
		errText  string // in Close's error
		logText  string // in the log
		maxClose time.Duration
	}{
		{
			name: "cleanup hangs, honours ctx",
			faulty: func(s *fakeSession, _ <-chan struct{}) {
				s.CleanupFunc = func(ctx context.Context) error {
					<-ctx.Done()
					return ctx.Err()
				}
			},
			outcome: TimedOut, op: OpCleanup,
			errText: `cleanup of server "bad" (tools bad_tool) hung past 50ms`,
			logText: "outcome=timeout",
		},
		{
			name: "cleanup hangs, ignores ctx",
			faulty: func(s *fakeSession, release <-chan struct{}) {
				s.CleanupFunc = func(context.Context) error {
					<-release
					return nil
				}
			},
			outcome: TimedOut, op: OpCleanup,
			errText: `cleanup of server "bad" (tools bad_tool) hung past 50ms`,
			logText: "outcome=timeout",
		},
		{
			name:    "cleanup panics",
			faulty:  func(s *fakeSession, _ <-chan struct{}) { s.CleanupFunc = func(context.Context) error { panic("boom") } },
			outcome: Panicked, op: OpCleanup,
			errText: `cleanup of server "bad" (tools bad_tool) panicked: panic: boom`,
			logText: "stack=",
		},
		{
			name: "cleanup fails",
			faulty: func(s *fakeSession, _ <-chan struct{}) {
				s.CleanupFunc = func(context.Context) error { return errors.New("no such session") }
			},
			outcome: Failed, op: OpCleanup,
			errText: `cleanup of server "bad" (tools bad_tool) failed: no such session`,
			logText: `error="no such session"`,
		},
		{
			name: "close fails",
			faulty: func(s *fakeSession, _ <-chan struct{}) {
				s.CloseFunc = func() error { return errors.New("broken pipe") }
			},
			outcome: Failed, op: OpClose,
			errText: `close of server "bad" (tools bad_tool) failed: broken pipe`,
			logText: `error="broken pipe"`,
		},
		{
			name: "close panics",
			faulty: func(s *fakeSession, _ <-chan struct{}) {
				s.CloseFunc = func() error { panic(errors.New("nil transport")) }
			},
			outcome: Panicked, op: OpClose,
			errText: `close of server "bad" (tools bad_tool) panicked`,
			logText: "nil transport",
		},
		{
			name: "close hangs",
			faulty: func(s *fakeSession, release <-chan struct{}) {
				s.CloseFunc = func() error {
					<-release
					return nil
				}
			},
			outcome: TimedOut, op: OpClose,
			errText: `close of server "bad" (tools bad_tool) hung past 50ms`,
			logText: "outcome=timeout",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				release := make(chan struct{}) // frees the operation that ignores its ctx
				defer close(release)
				log := &eventLog{}
				var logs testutil.LockedBuffer
				metrics := &countingMetrics{}
				bad := newFake(log, "bad", "bad_tool")
				wrapSession(bad, func(s *fakeSession) {
					// Record the start of the faulty operation like any other.
					cleanup, closeFn := s.CleanupFunc, s.CloseFunc
					tt.faulty(s, release)
					faultyCleanup, faultyClose := s.CleanupFunc, s.CloseFunc
					if tt.op == OpCleanup {
						s.CleanupFunc = func(ctx context.Context) error { log.add("cleanup", "bad"); return faultyCleanup(ctx) }
						s.CloseFunc = closeFn
					} else {
						s.CleanupFunc = cleanup
						s.CloseFunc = func() error { log.add("close", "bad"); return faultyClose() }
					}
				})
				servers := []tools.Server{newFake(log, "s1", "t1"), bad, newFake(log, "s2", "t2"), newFake(log, "s3", "t3")}
				c := New(registry(t, servers...), nil, &Options{
					ResponseID: "resp_faults", Logger: testLogger(&logs), Metrics: metrics,
					CleanupTimeout: timeout, CleanupDeadline: deadline, CloseTimeout: timeout,
				})
				ctx := context.Background()
				// One call per turn, so the order of opening is known.
				for _, name := range []string{"t2", "bad_tool", "t1", "t3"} {
					if r := c.Call(ctx, calls(name))[0]; r.IsError {
						t.Fatal(r.Err)
					}
				}
				start := time.Now()
				err := closeWithin(t, c, 10*time.Second)
				// On the bubble's clock: nothing hung costs no time at all; a
				// hung operation is given its timeout, and Close stays within
				// the cleanup deadline plus the close timeout.
				switch elapsed := time.Since(start); {
				case tt.outcome == TimedOut && elapsed < timeout:
					t.Errorf("Close took %v: the hung %v was not given its %v", elapsed, tt.op, timeout)
				case tt.outcome != TimedOut && elapsed != 0:
					t.Errorf("Close took %v with nothing hung", elapsed)
				case elapsed > deadline+timeout:
					t.Errorf("Close took %v, past the cleanup deadline %v and the close timeout %v", elapsed, deadline, timeout)
				}
				var se *SessionError
				if !errors.As(err, &se) || se.Op != tt.op || se.Server != "bad" || se.Outcome != tt.outcome {
					t.Fatalf("Close = %v, want a %v %v of bad", err, tt.op, tt.outcome)
				}
				if !strings.Contains(err.Error(), tt.errText) {
					t.Errorf("Close error %q does not contain %q", err, tt.errText)
				}
				l := logs.String()
				for _, want := range []string{"response_id=resp_faults", "server=bad", "tools=[bad_tool]", "op=" + tt.op.String(), tt.logText} {
					if !strings.Contains(l, want) {
						t.Errorf("log lacks %q:\n%s", want, l)
					}
				}
				st := c.Stats()
				if got := st.counts(tt.op); got.Failures() != 1 || *got != countsOf(tt.outcome, 3) {
					t.Errorf("%v counts %+v, want 3 ok and one %v", tt.op, *got, tt.outcome)
				}
				if metrics.get(tt.op.String()+"/bad/"+tt.outcome.String()) != 1 {
					t.Errorf("metrics %v", metrics.n)
				}

				// The others were unaffected: one cleanup and one close each,
				// all cleanups before any close, closes in reverse opening.
				for _, s := range []string{"s1", "bad", "s2", "s3"} {
					if log.count("cleanup", s) != 1 || log.count("close", s) != 1 {
						t.Errorf("%s: %d cleanups, %d closes", s, log.count("cleanup", s), log.count("close", s))
					}
				}
				assertCleanupsBeforeCloses(t, log)
				if got, want := log.servers("close"), []string{"s3", "s1", "bad", "s2"}; !slices.Equal(got, want) {
					t.Errorf("closed %v, want %v", got, want)
				}
			})
		})
	}
}

func countsOf(o Outcome, ok int) Counts {
	c := Counts{OK: ok}
	c.add(o)
	return c
}

func assertCleanupsBeforeCloses(t *testing.T, log *eventLog) {
	t.Helper()
	seenClose := false
	for _, e := range log.all() {
		switch e.kind {
		case "close":
			seenClose = true
		case "cleanup":
			if seenClose {
				t.Errorf("cleanup of %s after a close: %v", e.server, log.all())
			}
		}
	}
}

// The cleanup pass honours its deadline however many sessions hang: with a
// bound of 2 and five hanging cleanups, the ones that never got a slot are
// reported as not started, not silently dropped.
func TestCleanupDeadlineAndBound(t *testing.T) { synctest.Test(t, testCleanupDeadlineAndBound) }

// testCleanupDeadlineAndBound runs in a synctest bubble, so the deadline is
// on a fake clock and Close's time is exact.
func testCleanupDeadlineAndBound(t *testing.T) {
	log := &eventLog{}
	var logs testutil.LockedBuffer
	var running, peak atomic.Int32
	var servers []tools.Server
	var toolNames []string
	for _, n := range []string{"h1", "h2", "h3", "h4", "h5"} {
		s := newFake(log, n, n+"_tool")
		wrapSession(s, func(fs *fakeSession) {
			fs.CleanupFunc = func(ctx context.Context) error {
				p := running.Add(1)
				defer running.Add(-1)
				for {
					old := peak.Load()
					if p <= old || peak.CompareAndSwap(old, p) {
						break
					}
				}
				<-ctx.Done()
				return ctx.Err()
			}
		})
		servers = append(servers, s)
		toolNames = append(toolNames, n+"_tool")
	}
	c := New(registry(t, servers...), nil, &Options{
		Logger: testLogger(&logs), CleanupConcurrency: 2,
		CleanupTimeout: time.Hour, CleanupDeadline: 100 * time.Millisecond,
	})
	c.Call(context.Background(), calls(toolNames...))
	start := time.Now()
	err := closeWithin(t, c, 10*time.Second)
	if d := time.Since(start); d != 100*time.Millisecond {
		t.Errorf("Close took %v with a 100ms deadline", d)
	}
	if err == nil {
		t.Fatal("Close reported no failure")
	}
	if p := peak.Load(); p > 2 {
		t.Errorf("%d cleanups ran at once, bound 2", p)
	}
	st := c.Stats()
	if st.Cleanup.TimedOut != 5 || st.Close.OK != 5 {
		t.Errorf("stats %+v, want 5 cleanups timed out and 5 closes", st)
	}
	for _, n := range []string{"h1", "h2", "h3", "h4", "h5"} {
		if !strings.Contains(err.Error(), `server "`+n+`"`) || !strings.Contains(logs.String(), "server="+n) {
			t.Errorf("%s not reported: %v", n, err)
		}
	}
	if !strings.Contains(err.Error(), "hung past 100ms") {
		t.Errorf("error does not say the deadline passed: %v", err)
	}
	if !strings.Contains(err.Error(), "not started before the cleanup deadline") {
		t.Errorf("with a bound of 2, some cleanups should never have started: %v", err)
	}
}

// Calls of one turn run concurrently, bounded, and come back in call order
// whatever order they finish in. A panicking tool is an error result, and
// the other calls of its turn are unaffected.
//
// It runs in a synctest bubble: were the slow calls never released, the
// bubble would deadlock and the test fail at once rather than hang.
func TestCallConcurrency(t *testing.T) { synctest.Test(t, testCallConcurrency) }

func testCallConcurrency(t *testing.T) {
	log := &eventLog{}
	var running, peak, fastDone atomic.Int32
	names := []string{"slow", "fast", "crash", "slow", "fast", "fast", "fast"}
	fasts := int32(strings.Count(strings.Join(names, " "), "fast"))
	// The slow calls wait until every fast call has finished: two of them
	// hold two of the three slots meanwhile, so the fast ones (and the
	// crash) go through the third. Released by the last fast call, not by
	// one that happens to see three calls running, the gate opens however
	// the calls are scheduled.
	gate := make(chan struct{})
	s := newFake(log, "s", "slow", "fast", "crash")
	wrapSession(s, func(fs *fakeSession) {
		call := fs.CallFunc
		fs.CallFunc = func(ctx context.Context, c tools.Call) (tools.Result, error) {
			p := running.Add(1)
			defer running.Add(-1)
			for {
				old := peak.Load()
				if p <= old || peak.CompareAndSwap(old, p) {
					break
				}
			}
			switch c.Name {
			case "crash":
				panic("index out of range")
			case "slow":
				<-gate // finishes after every fast call
			case "fast":
				defer func() {
					if fastDone.Add(1) == fasts {
						close(gate)
					}
				}()
			}
			return call(ctx, c)
		}
	})
	c := New(registry(t, s), nil, &Options{CallConcurrency: 3, Logger: testLogger(&testutil.LockedBuffer{})})
	defer c.Close(context.Background())
	res := c.Call(context.Background(), calls(names...))
	for i, r := range res {
		if r.CallID != calls(names...)[i].CallID {
			t.Errorf("result %d has call id %s", i, r.CallID)
		}
		if names[i] == "crash" {
			var pe *PanicError
			if !r.IsError || !errors.As(r.Err, &pe) || strings.Contains(r.Text(), "index out of range") {
				t.Errorf("panic result %+v: want an error result that does not leak the panic", r)
			}
			continue
		}
		if r.IsError || !strings.HasPrefix(r.Text(), "s:"+names[i]+":") {
			t.Errorf("result %d = %q", i, r.Text())
		}
	}
	if p := peak.Load(); p > 3 {
		t.Errorf("%d calls at once, bound 3", p)
	}
	if log.count("open", "s") != 1 {
		t.Errorf("%d opens for one server, want 1", log.count("open", "s"))
	}
	if st := c.Stats(); st.Call.Panicked != 1 || st.Call.OK != 6 {
		t.Errorf("stats %+v", st)
	}
}

// After Close, nothing opens and nothing is called.
func TestCallAfterClose(t *testing.T) {
	log := &eventLog{}
	c := New(registry(t, newFake(log, "s", "t")), nil, nil)
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	r := c.Call(context.Background(), calls("t"))[0]
	if !r.IsError || !errors.Is(r.Err, tools.ErrClosed) {
		t.Errorf("call after Close = %+v", r)
	}
	if n := len(log.servers("open")); n != 0 {
		t.Errorf("%d opens after Close", n)
	}
}

// closeWithin closes c, failing the test rather than hanging it if Close
// does not return within limit.
func closeWithin(t *testing.T, c *Context, limit time.Duration) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- c.Close(context.Background()) }()
	select {
	case err := <-done:
		return err
	case <-time.After(limit):
		t.Fatalf("Close did not return within %v", limit)
		return nil
	}
}

// A session that finishes opening after Close has begun is closed at once,
// without a cleanup (it was never called), rather than leaked.
func TestOpenRacingClose(t *testing.T) {
	log := &eventLog{}
	s := newFake(log, "s", "t")
	opening, release := make(chan struct{}), make(chan struct{})
	open := s.OpenFunc
	s.OpenFunc = func(ctx context.Context) (tools.Session, error) {
		close(opening)
		<-release
		return open(ctx)
	}
	c := New(registry(t, s), nil, &Options{Logger: testLogger(&testutil.LockedBuffer{})})
	done := make(chan tools.Result, 1)
	go func() { done <- c.Call(context.Background(), calls("t"))[0] }()
	<-opening
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	close(release)
	r := <-done
	if !r.IsError || !errors.Is(r.Err, tools.ErrClosed) {
		t.Errorf("call racing Close = %+v", r)
	}
	if got := log.all(); !slices.Equal(got, []event{{"list", "s"}, {"open", "s"}, {"close", "s"}}) {
		t.Errorf("events %v, want the late session closed, never called or cleaned", got)
	}
}
