package toolstest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/loomgate/loom/internal/testutil"
	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/tools"
)

// Fixture is one server under test and what the suite needs to know to
// drive it.
type Fixture struct {
	Server tools.Server
	// Call is a call of a tool the server lists that succeeds.
	Call tools.Call
	// Check, if set, checks Call's result beyond what the suite checks
	// of every result (its text, its structured content).
	Check func(res tools.Result) error
	// Block, if set, returns a call of a listed tool that runs on s until
	// its context ends or s closes, and a condition that turns true once
	// the call has started (a file the sandboxed program creates, a
	// request the test's server received). Nil for a server whose calls
	// never wait (a tool search): the tests of cancellation are skipped.
	Block func(s tools.Session) (call tools.Call, started func() bool)
	// URL is the URL the server declares in its Capabilities: the MCP
	// server's, "" for a local server.
	URL string
}

// Run runs the suite. newFixture builds a new server for the test it is
// given; whatever the server needs is torn down when that test ends.
func Run(t *testing.T, newFixture func(t *testing.T) Fixture) {
	tests := []struct {
		name string
		fn   func(t *testing.T, f Fixture)
	}{
		{"Name", testName},
		{"Tools", testTools},
		{"Capabilities", testCapabilities},
		{"Call", testCall},
		{"KindReportsCall", testKindReportsCall},
		{"UnknownTool", testUnknownTool},
		{"SessionOutlivesOpenContext", testSessionOutlivesOpenContext},
		{"ConcurrentSessions", testConcurrentSessions},
		{"ConcurrentCalls", testConcurrentCalls},
		{"DoneContext", testDoneContext},
		{"CancelRunningCall", testCancelRunningCall},
		{"CloseStopsRunningCall", testCloseStopsRunningCall},
		{"CleanupThenClose", testCleanupThenClose},
		{"CleanupDoneContext", testCleanupDoneContext},
		{"CloseWithoutCall", testCloseWithoutCall},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, newFixture(t))
		})
	}
}

var ctx = context.Background()

// open opens a session, closed when the test ends (a second Close is
// harmless).
func open(t *testing.T, f Fixture) tools.Session {
	t.Helper()
	s, err := f.Server.Open(ctx)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// listed returns the names of the server's tools.
func listed(t *testing.T, srv tools.Server) []string {
	t.Helper()
	defs, err := srv.Tools(ctx)
	if err != nil {
		t.Fatalf("Tools: %v", err)
	}
	names := make([]string, len(defs))
	for i, d := range defs {
		names[i] = d.Name
	}
	return names
}

// checkResult checks what every result of a successful call promises, and
// the fixture's own check.
func checkResult(f Fixture, call tools.Call, res tools.Result, err error) error {
	if err != nil {
		return fmt.Errorf("Call(%s %s): %v", call.Name, call.Arguments, err)
	}
	if res.CallID != call.CallID {
		return fmt.Errorf("result CallID %q, want the call's %q", res.CallID, call.CallID)
	}
	if res.IsError || res.Err != nil || res.InputRequired != nil {
		return fmt.Errorf("Call(%s %s) failed: %s", call.Name, call.Arguments, describe(res))
	}
	for name, raw := range map[string]json.RawMessage{"Structured": res.Structured, "Report": res.Report} {
		if len(raw) > 0 && !json.Valid(raw) {
			return fmt.Errorf("result %s is not JSON: %s", name, raw)
		}
	}
	if f.Check != nil {
		return f.Check(res)
	}
	return nil
}

// describe is a result in a failure message.
func describe(res tools.Result) string {
	return fmt.Sprintf("IsError %v, Err %v, InputRequired %v, text %q", res.IsError, res.Err, res.InputRequired != nil, res.Text())
}

// await waits, bounded, for what a goroutine sends on c; what is a
// description of it for the failure.
func await[T any](t *testing.T, c <-chan T, what string) T {
	t.Helper()
	var v T
	var ok bool
	if !testutil.Eventually(testutil.Patience, func() bool {
		select {
		case v = <-c:
			ok = true
		default:
		}
		return ok
	}) {
		t.Fatalf("waited %v for %s", testutil.Patience, what)
	}
	return v
}

type callResult struct {
	res tools.Result
	err error
}

// startCall starts call on s in a goroutine; its result comes on the
// channel.
func startCall(ctx context.Context, s tools.Session, call tools.Call) <-chan callResult {
	done := make(chan callResult, 1)
	go func() {
		res, err := s.Call(ctx, call)
		done <- callResult{res, err}
	}()
	return done
}

// startBlocked starts the fixture's blocking call on s and waits until it
// runs.
func startBlocked(t *testing.T, f Fixture, ctx context.Context, s tools.Session) <-chan callResult {
	t.Helper()
	call, started := f.Block(s)
	done := startCall(ctx, s, call)
	var early *callResult
	testutil.WaitFor(t, "the blocking call to start", func() bool {
		select {
		case r := <-done:
			early = &r
			return true
		default:
			return started()
		}
	})
	if early != nil {
		t.Fatalf("the blocking call %s %s returned before it was stopped: %s, %v", call.Name, call.Arguments, describe(early.res), early.err)
	}
	return done
}

// stopped checks the outcome of a call that was stopped: not a success.
func stopped(t *testing.T, r callResult, how string) {
	t.Helper()
	if r.err == nil && !r.res.IsError {
		t.Errorf("the call %s succeeded: %s", how, describe(r.res))
	}
}

// testName: a label that is not empty and does not change.
func testName(t *testing.T, f Fixture) {
	name := f.Server.Name()
	if name == "" {
		t.Fatal("Name is empty")
	}
	if again := f.Server.Name(); again != name {
		t.Fatalf("Name changed from %q to %q", name, again)
	}
}

// testTools: at least one tool, each named once, parameters a JSON object
// schema, in the same order every time.
func testTools(t *testing.T, f Fixture) {
	defs, err := f.Server.Tools(ctx)
	if err != nil {
		t.Fatalf("Tools: %v", err)
	}
	if len(defs) == 0 {
		t.Fatal("Tools lists nothing")
	}
	seen := map[string]bool{}
	for _, d := range defs {
		if d.Name == "" {
			t.Errorf("a tool without a name: %+v", d)
		}
		if seen[d.Name] {
			t.Errorf("tool %q listed twice", d.Name)
		}
		seen[d.Name] = true
		if len(d.Parameters) > 0 {
			var schema map[string]any
			if err := json.Unmarshal(d.Parameters, &schema); err != nil {
				t.Errorf("tool %q: parameters are not a JSON object: %v (%s)", d.Name, err, d.Parameters)
			}
		}
	}
	if !seen[f.Call.Name] {
		t.Errorf("the fixture's call %q is not among the tools listed", f.Call.Name)
	}
	first := listed(t, f.Server)
	if again := listed(t, f.Server); !slices.Equal(first, again) {
		t.Errorf("Tools listed %v, then %v: the order must be stable", first, again)
	}
}

// testCapabilities: the declaration is the same at every read, its kind
// is a registered server kind, its policies are valid values, its URL is
// the server's, and every listed tool has an own name.
func testCapabilities(t *testing.T, f Fixture) {
	c, again := f.Server.Capabilities(), f.Server.Capabilities()
	if c.KindOf() != again.KindOf() || c.Elicitation != again.Elicitation || c.URL != again.URL ||
		c.Deferred != again.Deferred || string(c.Roots) != string(again.Roots) {
		t.Errorf("Capabilities changed between two reads: %+v, then %+v", c, again)
	}
	kind := c.KindOf()
	if kind.ItemType == "" {
		t.Errorf("the kind has no item type: %+v", kind)
	}
	if kind.Output == nil && kind.Items == nil {
		t.Errorf("kind %s can report no call (neither Output nor Items)", kind.ItemType)
	}
	switch c.Elicitation {
	case "", tools.ElicitClient, tools.ElicitModel, tools.ElicitDecline:
	default:
		t.Errorf("elicitation policy %q", c.Elicitation)
	}
	var roots struct {
		Roots []json.RawMessage `json:"roots"`
	}
	if err := json.Unmarshal(c.RootsResult(), &roots); err != nil || roots.Roots == nil {
		t.Errorf("roots result %s is not a ListRootsResult: %v", c.RootsResult(), err)
	}
	if c.URL != f.URL {
		t.Errorf("declared URL %q, want %q", c.URL, f.URL)
	}
	for _, name := range listed(t, f.Server) {
		if c.OwnName(name) == "" {
			t.Errorf("tool %q has an empty own name", name)
		}
		_ = c.Approval(name) // must not panic for a listed tool
	}
	if c.SetInputHandler != nil {
		c.SetInputHandler(func(context.Context, tools.InputRequest) (json.RawMessage, error) { return tools.Declined, nil })
	}
}

// testCall: a call of a listed tool succeeds, its result echoes the call
// id, and a second call on the same session does too.
func testCall(t *testing.T, f Fixture) {
	s := open(t, f)
	for i := range 2 {
		call := f.Call
		call.CallID = fmt.Sprintf("call_conformance_%d", i)
		res, err := s.Call(ctx, call)
		if err := checkResult(f, call, res, err); err != nil {
			t.Fatal(err)
		}
	}
}

// testKindReportsCall: the kind the server declares can report its
// result, and the items it builds are what a store keeps and reads back
// as history (they pass the read-back check, and the model's history can
// be made of them).
func testKindReportsCall(t *testing.T, f Fixture) {
	s := open(t, f)
	call := f.Call
	call.CallID = "call_conformance"
	res, err := s.Call(ctx, call)
	if err := checkResult(f, call, res, err); err != nil {
		t.Fatal(err)
	}
	caps := f.Server.Capabilities()
	kind := caps.KindOf()
	if kind.Output != nil {
		out, errMsg := kind.Output(res, res.Text())
		if errMsg != "" {
			t.Errorf("kind %s reports the successful call as failed: %s", kind.ItemType, errMsg)
		}
		if len(out) > 0 && !json.Valid(out) {
			t.Errorf("kind %s output is not JSON: %s", kind.ItemType, out)
		}
	}
	if kind.Items == nil {
		return
	}
	n := 0
	newID := func(prefix string) string { n++; return fmt.Sprintf("%s_conformance%d", prefix, n) }
	ran := tools.RanCall{Server: f.Server.Name(), Tool: caps.OwnName(call.Name), CallID: call.CallID, Arguments: call.Arguments}
	items := kind.Items(ran, res, res.Text(), newID)
	if len(items) == 0 || items[0].Type != kind.ItemType {
		t.Fatalf("kind %s reports the call as %d items, the first not of its item type: %+v", kind.ItemType, len(items), items)
	}
	for i, it := range items {
		if it.Status == responses.ResponseFailed {
			t.Errorf("item %d of the successful call has status failed: %+v", i, it)
		}
		raw, err := json.Marshal(it)
		if err != nil {
			t.Fatalf("item %d: %v", i, err)
		}
		var back responses.Item
		if err := json.Unmarshal(raw, &back); err != nil {
			t.Fatalf("item %d does not decode back: %v (%s)", i, err, raw)
		}
		if err := responses.ValidateStoredItem(&back, fmt.Sprintf("items[%d]", i)); err != nil {
			t.Errorf("item %d does not pass the read-back check: %v (%s)", i, err, raw)
		}
		items[i] = back
	}
	if len(tools.History(items)) == 0 {
		t.Errorf("kind %s leaves nothing of the call in the model's history", kind.ItemType)
	}
}

// testUnknownTool: a call of a tool the server does not list (with the
// arguments of a good call) runs nothing: an error wrapping
// tools.ErrUnknownTool, or, from a remote server that says so itself, an
// IsError result.
func testUnknownTool(t *testing.T, f Fixture) {
	s := open(t, f)
	call := f.Call
	call.CallID, call.Name = "call_unknown", "toolstest_not_listed"
	res, err := s.Call(ctx, call)
	switch {
	case err != nil && !errors.Is(err, tools.ErrUnknownTool):
		t.Errorf("a call of an unlisted tool failed with %v, want tools.ErrUnknownTool", err)
	case err == nil && !res.IsError:
		t.Errorf("a call of an unlisted tool succeeded: %s", describe(res))
	case err == nil && res.CallID != call.CallID:
		t.Errorf("result CallID %q, want %q", res.CallID, call.CallID)
	}
	// The session is still good for the tools it lists.
	good := f.Call
	good.CallID = "call_after_unknown"
	res, err = s.Call(ctx, good)
	if err := checkResult(f, good, res, err); err != nil {
		t.Fatal(err)
	}
}

// testSessionOutlivesOpenContext: the context of Open bounds opening only;
// the session works after it is cancelled.
func testSessionOutlivesOpenContext(t *testing.T, f Fixture) {
	openCtx, cancel := context.WithCancel(ctx)
	s, err := f.Server.Open(openCtx)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	cancel()
	call := f.Call
	call.CallID = "call_after_open"
	res, err := s.Call(ctx, call)
	if err := checkResult(f, call, res, err); err != nil {
		t.Fatal(err)
	}
}

// testConcurrentSessions: one server serves several responses at once,
// each with its session: listing, opening, calling, cleaning up and
// closing all at the same time.
func testConcurrentSessions(t *testing.T, f Fixture) {
	const n = 4
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			errs <- func() error {
				if _, err := f.Server.Tools(ctx); err != nil {
					return fmt.Errorf("Tools: %v", err)
				}
				s, err := f.Server.Open(ctx)
				if err != nil {
					return fmt.Errorf("Open: %v", err)
				}
				defer s.Close()
				call := f.Call
				call.CallID = fmt.Sprintf("call_session_%d", i)
				res, err := s.Call(ctx, call)
				if err := checkResult(f, call, res, err); err != nil {
					return err
				}
				if err := s.Cleanup(ctx); err != nil {
					return fmt.Errorf("Cleanup: %v", err)
				}
				return s.Close()
			}()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// testConcurrentCalls: calls on one session may run concurrently.
func testConcurrentCalls(t *testing.T, f Fixture) {
	s := open(t, f)
	const n = 3
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			call := f.Call
			call.CallID = fmt.Sprintf("call_concurrent_%d", i)
			res, err := s.Call(ctx, call)
			errs <- checkResult(f, call, res, err)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// testDoneContext: a call whose context is already done returns (with
// whatever outcome): it must return promptly once ctx is done.
func testDoneContext(t *testing.T, f Fixture) {
	s := open(t, f)
	done, cancel := context.WithCancel(ctx)
	cancel()
	call := f.Call
	call.CallID = "call_done_ctx"
	r := await(t, startCall(done, s, call), "a call with a done context to return")
	if r.err == nil && r.res.CallID != call.CallID {
		t.Errorf("result CallID %q, want %q", r.res.CallID, call.CallID)
	}
	if r.err == nil && r.res.Err != nil && !r.res.IsError {
		t.Errorf("a result with Err set is not IsError: %s", describe(r.res))
	}
}

// testCancelRunningCall: a running call returns once its context is
// cancelled, and not as a success; the session then closes.
func testCancelRunningCall(t *testing.T, f Fixture) {
	if f.Block == nil {
		t.Skip("the server's calls never wait: there is no running call to cancel")
	}
	s := open(t, f)
	callCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := startBlocked(t, f, callCtx, s)
	cancel()
	stopped(t, await(t, done, "the cancelled call to return"), "cancelled by its context")
	if err := s.Close(); err != nil {
		t.Errorf("Close after a cancelled call: %v", err)
	}
}

// testCloseStopsRunningCall: Close does not wait for a running call; it is
// how such a call is stopped. The call returns, not as a success, and the
// session refuses calls from then on.
func testCloseStopsRunningCall(t *testing.T, f Fixture) {
	if f.Block == nil {
		t.Skip("the server's calls never wait: there is no running call to stop")
	}
	s := open(t, f)
	// Cancelled only when the test ends: Close must stop the call.
	callCtx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	done := startBlocked(t, f, callCtx, s)
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	if err := await(t, closed, "Close while a call runs (it must not wait for the call)"); err != nil {
		t.Errorf("Close: %v", err)
	}
	stopped(t, await(t, done, "the running call to stop after Close"), "running when the session closed")
	if _, err := s.Call(ctx, f.Call); !errors.Is(err, tools.ErrClosed) {
		t.Errorf("Call after Close: %v, want tools.ErrClosed", err)
	}
}

// testCleanupThenClose: the lifecycle of a response's session: calls,
// Cleanup, Close; after Close, Call and Cleanup return ErrClosed, and a
// second Close is harmless.
func testCleanupThenClose(t *testing.T, f Fixture) {
	s := open(t, f)
	call := f.Call
	call.CallID = "call_before_cleanup"
	res, err := s.Call(ctx, call)
	if err := checkResult(f, call, res, err); err != nil {
		t.Fatal(err)
	}
	if err := s.Cleanup(ctx); err != nil {
		t.Fatalf("Cleanup: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := s.Call(ctx, call); !errors.Is(err, tools.ErrClosed) {
		t.Errorf("Call after Close: %v, want tools.ErrClosed", err)
	}
	if err := s.Cleanup(ctx); !errors.Is(err, tools.ErrClosed) {
		t.Errorf("Cleanup after Close: %v, want tools.ErrClosed", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
}

// testCleanupDoneContext: Cleanup returns once its context is done, and
// Close still works after it.
func testCleanupDoneContext(t *testing.T, f Fixture) {
	s := open(t, f)
	call := f.Call
	call.CallID = "call_before_cleanup"
	res, err := s.Call(ctx, call)
	if err := checkResult(f, call, res, err); err != nil {
		t.Fatal(err)
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	cleaned := make(chan error, 1)
	go func() { cleaned <- s.Cleanup(done) }()
	await(t, cleaned, "Cleanup with a done context to return")
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// testCloseWithoutCall: a session closed before any call (a response that
// ended first) closes cleanly and then refuses calls.
func testCloseWithoutCall(t *testing.T, f Fixture) {
	s := open(t, f)
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := s.Call(ctx, f.Call); !errors.Is(err, tools.ErrClosed) {
		t.Errorf("Call after Close: %v, want tools.ErrClosed", err)
	}
}
