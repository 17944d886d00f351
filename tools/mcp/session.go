package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loomgate/loom/tools"
)

// LoadShedRetries is how many times a call answered with only a
// requestState (the server shedding load, SEP-2322) is retried inside
// Call, with a short jittered backoff (50ms, 100ms, 200ms), before Call
// reports it as an InputRequired with no Requests, on which the engine
// gives up: this is the one layer that retries load shedding. The spec says to retry at once; a small backoff
// keeps loom from hammering a server that said it is busy, and the bound
// matches the go-sdk's own (3).
const LoadShedRetries = 3

// Session is one response's use of a Server: one SDK client session.
// For a stateless server it holds no server-side state; for a
// session-based one it is the server's session (Mcp-Session-Id), ended by
// Close with a DELETE.
type Session struct {
	s  *Server
	cs *mcpsdk.ClientSession

	// ctx is cancelled by Close: it is how Close stops calls still running
	// without waiting for them.
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	closed  bool
	primed  bool // the SDK session has listed tools (see prime)
	cleaned bool
}

var _ tools.Session = (*Session)(nil)

func newSession(s *Server, cs *mcpsdk.ClientSession) *Session {
	ctx, cancel := context.WithCancel(context.Background())
	return &Session{s: s, cs: cs, ctx: ctx, cancel: cancel}
}

// Legacy reports whether the server speaks only the session-based
// protocol (it may then elicit through ServerConfig.ElicitationHandler
// during a call, never through MRTR).
func (ss *Session) Legacy() bool { return isLegacy(ss.cs) }

// ID returns the server's session id (Mcp-Session-Id), empty for a
// stateless server.
func (ss *Session) ID() string { return ss.cs.ID() }

// Call calls a tool. A first call has no Input; an MRTR retry carries the
// answers under the keys of the InputRequired it answers and its State,
// which is sent back byte for byte.
//
// The outcomes:
//   - a complete result: Content (every block), Structured, IsError;
//   - input required: Result.InputRequired (Requests keyed as the server
//     keyed them, with raw params; State), for the engine to answer and
//     retry; Requests is empty if the server kept shedding load;
//   - the server answered with a JSON-RPC error (an unknown tool, bad
//     arguments, a tampered requestState): an IsError result carrying the
//     server's message, with Err the *jsonrpc.Error;
//   - the call could not be made (transport, policy, timeout, closed): an
//     error, a *ServerError or tools.ErrClosed.
func (ss *Session) Call(ctx context.Context, call tools.Call) (tools.Result, error) {
	s := ss.s
	if s.allowed != nil && !s.allowed[call.Name] {
		return tools.Result{}, fmt.Errorf("%w: %q is not among the allowed tools of %q", tools.ErrUnknownTool, call.Name, s.label)
	}
	args, err := arguments(call.Arguments)
	if err != nil {
		return tools.ErrorResult(call.CallID, err.Error(), err), nil
	}
	ctx, cancel, err := ss.callContext(ctx, s.timeouts.Call)
	if err != nil {
		return tools.Result{}, err
	}
	defer cancel()
	if err := ss.prime(ctx, call.Name); err != nil {
		return tools.Result{}, err
	}

	params := &mcpsdk.CallToolParams{Name: call.Name, Arguments: args}
	if in := call.Input; in != nil {
		params.InputResponses, err = inputResponses(in.Responses)
		if err != nil {
			return tools.Result{}, err
		}
		params.RequestState = in.State
	}
	for shed := 0; ; shed++ {
		res, err := ss.cs.CallTool(ctx, params)
		if err != nil {
			return ss.callError(ctx, call, err)
		}
		if !res.NeedsInput() || len(res.InputRequests) > 0 || shed == LoadShedRetries {
			return result(call.CallID, res)
		}
		// Load shedding: retry with the new state and no answers, which
		// belong to the round they answered.
		wait := time.Duration(50<<shed)*time.Millisecond + rand.N(25*time.Millisecond)
		select {
		case <-ctx.Done():
			return ss.callError(ctx, call, ctx.Err())
		case <-time.After(wait):
		}
		params = &mcpsdk.CallToolParams{Name: call.Name, Arguments: args, RequestState: res.RequestState}
	}
}

// codeRejected is the code of the SDK's internal "rejected by transport"
// error, which wraps transport failures (an HTTP 503 that outlived the
// retries, a refused dial): those are not the server's answer. A server's
// own JSON-RPC error comes first in the chain when both are present.
const codeRejected = -32005

// callContext returns the context for one operation: the caller's, with
// the server's credentials, a timeout, and cancelled by Close.
func (ss *Session) callContext(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc, error) {
	ss.mu.Lock()
	closed := ss.closed
	ss.mu.Unlock()
	if closed {
		return nil, nil, tools.ErrClosed
	}
	ctx, cancel := context.WithTimeout(ss.s.requestContext(ctx), timeout)
	stop := context.AfterFunc(ss.ctx, cancel)
	return ctx, func() { stop(); cancel() }, nil
}

func (ss *Session) callError(ctx context.Context, call tools.Call, err error) (tools.Result, error) {
	var rpc *jsonrpc.Error
	if errors.As(err, &rpc) && rpc.Code != codeRejected {
		// The server answered, with an error: that is the tool's answer,
		// and the model (or the client) should read it.
		msg := fmt.Sprintf("MCP error %d: %s", rpc.Code, rpc.Message)
		return tools.ErrorResult(call.CallID, msg, err), nil
	}
	ss.mu.Lock()
	closed := ss.closed
	ss.mu.Unlock()
	if closed {
		return tools.Result{}, tools.ErrClosed
	}
	if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
		err = fmt.Errorf("%w (%v)", ctx.Err(), err)
	}
	return tools.Result{}, ss.s.wrap(fmt.Sprintf("calling %q", call.Name), err)
}

// prime makes the SDK session list tools once before calling a tool whose
// schema has x-mcp-header annotations: the SDK mirrors those arguments
// into Mcp-Param-* headers only for tools its session has listed, and a
// session opened after a cache hit has listed nothing. Tools without
// annotations cost nothing here.
func (ss *Session) prime(ctx context.Context, name string) error {
	ss.mu.Lock()
	if ss.primed {
		ss.mu.Unlock()
		return nil
	}
	ss.mu.Unlock()
	if l := ss.s.last.Load(); l != nil {
		if info, ok := l.byName[name]; ok && !info.paramsHeaders {
			return nil
		}
	}
	for _, err := range ss.cs.Tools(ctx, nil) {
		if err != nil {
			return ss.s.wrap("listing tools", err)
		}
	}
	ss.mu.Lock()
	ss.primed = true
	ss.mu.Unlock()
	return nil
}

// Cleanup calls cleanup_session, once, if the server offers it (the
// convention of vLLM's and gpt-oss's tool servers); otherwise it does
// nothing. The conversation calls it only for sessions whose tools were
// called.
func (ss *Session) Cleanup(ctx context.Context) error {
	ss.mu.Lock()
	closed, done := ss.closed, ss.cleaned
	ss.cleaned = true
	ss.mu.Unlock()
	switch {
	case closed:
		return tools.ErrClosed
	case done:
		return nil
	}
	ctx, cancel, err := ss.callContext(ctx, ss.s.timeouts.Call)
	if err != nil {
		return err
	}
	defer cancel()
	offers, err := ss.offersCleanup(ctx)
	if err != nil || !offers {
		return err
	}
	res, err := ss.cs.CallTool(ctx, &mcpsdk.CallToolParams{Name: CleanupTool, Arguments: map[string]any{}})
	if err != nil {
		return ss.s.wrap("calling "+CleanupTool, err)
	}
	if res.IsError {
		r, _ := result("", res)
		return ss.s.wrap("calling "+CleanupTool, errors.New(r.Text()))
	}
	return nil
}

func (ss *Session) offersCleanup(ctx context.Context) (bool, error) {
	l := ss.s.last.Load()
	if l == nil {
		l, _ = ss.s.c.cache.get(ss.s.url, ss.s.auth)
	}
	if l != nil {
		_, ok := l.byName[CleanupTool]
		return ok, nil
	}
	for t, err := range ss.cs.Tools(ctx, nil) {
		if err != nil {
			return false, ss.s.wrap("listing tools", err)
		}
		if t.Name == CleanupTool {
			return true, nil
		}
	}
	return false, nil
}

// Close ends the session: it stops calls still running (it does not wait
// for them) and, for a session-based server, sends the DELETE that ends
// the server's session (bounded by the SDK at 5s).
func (ss *Session) Close() error {
	ss.mu.Lock()
	if ss.closed {
		ss.mu.Unlock()
		return nil
	}
	ss.closed = true
	ss.mu.Unlock()
	ss.cancel()
	if err := ss.cs.Close(); err != nil && !errors.Is(err, mcpsdk.ErrConnectionClosed) {
		return ss.s.wrap("closing", err)
	}
	return nil
}

// arguments checks the model's arguments: a JSON object, or nothing.
func arguments(s string) (json.RawMessage, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return json.RawMessage("{}"), nil
	}
	if !json.Valid([]byte(s)) || s[0] != '{' {
		return nil, errors.New("the tool arguments must be a JSON object")
	}
	return json.RawMessage(s), nil
}
