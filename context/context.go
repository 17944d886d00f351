package conversation

import (
	"github.com/loomgate/loom/telemetry"
	"go.opentelemetry.io/otel/trace"

	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"

	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/tools"
	"github.com/sourcegraph/conc/pool"
)

// Context is one response's conversation: its history, the tools it offers
// the model, the tool sessions it opened and the tools it called. The
// Engine creates one per response, for every backend, and must Close it on
// every exit.
//
// Its methods are safe for concurrent use, but Close is meant to follow the
// last Call: the Engine calls it in a defer.
type Context struct {
	reg    *tools.Registry
	opts   Options
	tracer trace.Tracer

	// initMu serialises Init; offered and servers are written once under
	// it and only read afterwards.
	initMu  sync.Mutex
	inited  bool
	initErr error
	offered []tools.Definition
	servers map[string]*serverState // server tool name -> its server

	mu      sync.Mutex // guards the fields below
	history []responses.Item
	closed  bool
	opened  []*serverState // sessions in the order they opened
	called  []string       // tool names in the order first called

	closeOnce sync.Once
	closeErr  error
	// running counts the goroutines guarded started (calls, opens,
	// listings, cleanups, closes); Close waits for them.
	running running

	statsMu sync.Mutex
	stats   Stats
}

// serverState is one server's session within a response.
type serverState struct {
	server tools.Server
	label  string

	// openMu makes concurrent first calls to a server's tools share one
	// Open. A failed Open is remembered for the rest of the response: a
	// server that just failed would most likely fail again, and the model
	// should get the same clear error at once rather than another wait.
	openMu  sync.Mutex
	tried   bool
	session tools.Session
	openErr error

	// called lists the server's tools called on the session, guarded by
	// Context.mu. Cleanup is sent only to sessions where it is non-empty.
	called []string
}

// New returns the Context of one response. reg is what the request may use
// (nil: no tools); history is the conversation so far, which the Context
// now owns: it appends to it in place while it has spare capacity, so a
// long history given with room for the response's output is not copied
// on the first append. New does no I/O.
func New(reg *tools.Registry, history []responses.Item, opts *Options) *Context {
	c := &Context{reg: reg, history: history, opts: opts.resolved()}
	c.tracer = telemetry.Tracer(c.opts.TracerProvider, "github.com/loomgate/loom/context")
	return c
}

// Init lists the tools of the registry's servers and fixes what is offered
// to the model: the function tools, then each server's tools in
// registration order. It opens no session. With no servers it lists
// nothing; with no tools at all it does nothing.
//
// Init is idempotent: only the first call does anything, later ones return
// its error. The error joins a *SessionError per server that could not be
// listed (its tools are not offered; the others are) and a
// *tools.DuplicateError per tool name offered twice (the first one wins).
func (c *Context) Init(ctx context.Context) error {
	c.initMu.Lock()
	defer c.initMu.Unlock()
	if c.inited {
		return c.initErr
	}
	c.inited = true
	if c.reg.Empty() {
		return nil
	}
	c.initErr = c.init(ctx)
	return c.initErr
}

func (c *Context) init(ctx context.Context) error {
	functions, servers := c.reg.Functions(), c.reg.Servers()
	lists := make([][]tools.Definition, len(servers))
	errs := make([]error, len(servers))
	if len(servers) > 0 {
		p := pool.New().WithMaxGoroutines(c.opts.CallConcurrency)
		for i, s := range servers {
			p.Go(func() {
				lists[i], errs[i] = guarded(&c.running, ctx, s.Tools, nil)
				outcome := outcomeOf(errs[i])
				c.observe(OpList, s.Name(), outcome)
				if errs[i] != nil {
					errs[i] = &SessionError{Op: OpList, Server: s.Name(), Outcome: outcome, Err: errs[i]}
					c.logFailure(ctx, errs[i].(*SessionError))
				}
			})
		}
		p.Wait()
	}

	if len(servers) == 0 {
		// Functions only: the registry's list is the offer as it is
		// (AddFunction cleared their Server, and their names are
		// unique), not a copy of it with an index of names.
		c.offered = functions
		return nil
	}
	n := len(functions)
	for _, l := range lists {
		n += len(l)
	}
	c.offered = make([]tools.Definition, 0, n)
	owner := make(map[string]string, n) // tool name -> server label ("" for functions)
	for _, f := range functions {
		f.Server = ""
		owner[f.Name] = ""
		c.offered = append(c.offered, f)
	}
	c.servers = make(map[string]*serverState, n-len(functions))
	for i, s := range servers {
		st := &serverState{server: s, label: s.Name()}
		for _, d := range lists[i] {
			if prev, dup := owner[d.Name]; dup {
				errs = append(errs, &tools.DuplicateError{Kind: "tool", Name: d.Name, Sources: [2]string{prev, st.label}})
				continue
			}
			d.Server = st.label
			owner[d.Name] = st.label
			c.servers[d.Name] = st
			c.offered = append(c.offered, d)
		}
	}
	return errors.Join(errs...)
}

// Offered returns the tools offered to the model, once Init has run: nil
// for a request with no tools. The slice must not be modified.
func (c *Context) Offered() []tools.Definition {
	c.initMu.Lock()
	defer c.initMu.Unlock()
	return c.offered
}

// IsServerTool reports whether loom executes the named tool (through Call)
// rather than the client (a function tool, which ends the response).
func (c *Context) IsServerTool(name string) bool {
	return c.serverFor(name) != nil
}

func (c *Context) serverFor(name string) *serverState {
	c.initMu.Lock()
	defer c.initMu.Unlock()
	return c.servers[name]
}

// Called returns the server tools called so far, each once, in the order
// of their first call.
func (c *Context) Called() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.called)
}

// Items returns the history. Appending to the returned slice never
// changes the Context's history.
func (c *Context) Items() []responses.Item {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clip(c.history)
}

// Append adds items (the model's output, tool results) to the history.
func (c *Context) Append(items ...responses.Item) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.history = append(c.history, items...)
}

// Replace puts items in place of the history: the conversation as it
// goes on after a compaction.
func (c *Context) Replace(items []responses.Item) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.history = items
}

// Stats returns the counts of the response's session operations so far.
func (c *Context) Stats() Stats {
	c.statsMu.Lock()
	defer c.statsMu.Unlock()
	return c.stats
}

func (c *Context) observe(op Op, server string, o Outcome) {
	c.statsMu.Lock()
	c.stats.counts(op).add(o)
	c.statsMu.Unlock()
	if c.opts.Metrics != nil {
		c.opts.Metrics.Observe(op, server, o)
	}
}

// logFailure logs a failed session operation with everything needed to
// find it: response, server, tools, outcome, error.
func (c *Context) logFailure(ctx context.Context, e *SessionError) {
	attrs := []slog.Attr{
		slog.String("response_id", c.opts.ResponseID),
		slog.String("server", e.Server),
		slog.Any("tools", e.Tools),
		slog.String("op", e.Op.String()),
		slog.String("outcome", e.Outcome.String()),
		slog.Any("error", e.Err),
	}
	var pe *PanicError
	if errors.As(e.Err, &pe) {
		attrs = append(attrs, slog.String("stack", string(pe.Stack)))
	}
	// A call that failed or was cancelled is the model's business more than
	// the operator's; anything else (a panic, a hang, a cleanup or close
	// that failed) is an error in loom's lifecycle.
	level := slog.LevelError
	if e.Op == OpCall && (e.Outcome == Failed || e.Outcome == Canceled) {
		level = slog.LevelWarn
	}
	c.opts.Logger.LogAttrs(ctx, level, "tool session "+e.Op.String()+" failed", attrs...)
}
