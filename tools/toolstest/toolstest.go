package toolstest

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/tools"
)

// Log records what servers were asked to do, as "list:A", "open:A",
// "call:A:tool", "cleanup:A", "close:A", in the order it happened. Several
// servers may share one Log to record the order across them.
type Log struct {
	mu     sync.Mutex
	events []string
}

// Add records an event.
func (l *Log) Add(e string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

// Events returns the events so far.
func (l *Log) Events() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.events)
}

// Count returns how many events start with prefix.
func (l *Log) Count(prefix string) int {
	n := 0
	for _, e := range l.Events() {
		if strings.HasPrefix(e, prefix) {
			n++
		}
	}
	return n
}

// Server is a tools.Server for tests. The zero value of each function
// field means: succeed.
type Server struct {
	Label string
	// ToolNames are the tools it offers, each taking any object.
	ToolNames []string
	Log       *Log
	// OpenErr, if set, makes Open fail.
	OpenErr error
	// CallFunc, if set, answers calls; by default a call answers
	// "NAME ran with ARGS".
	CallFunc func(ctx context.Context, c tools.Call) (tools.Result, error)
	// CleanupFunc, if set, runs as the session's cleanup.
	CleanupFunc func(ctx context.Context) error
	// Elicitation is the server's elicitation policy (as an MCP server's
	// ElicitationPolicy): "client", "model", "decline", or "" for the
	// default.
	Elicitation string
	// RootsResult answers roots/list (a ListRootsResult); nil: none.
	RootsResult json.RawMessage

	callsMu sync.Mutex
	calls   []tools.Call
}

var _ tools.Server = (*Server)(nil)

// Capabilities implements tools.Server: its elicitation policy and roots.
func (s *Server) Capabilities() tools.Capabilities {
	return tools.Capabilities{Elicitation: s.Elicitation, Roots: s.RootsResult}
}

// Calls returns the calls the server received, in order, with their
// Input (the answers of an MRTR retry).
func (s *Server) Calls() []tools.Call {
	s.callsMu.Lock()
	defer s.callsMu.Unlock()
	return slices.Clone(s.calls)
}

// Name implements tools.Server.
func (s *Server) Name() string { return s.Label }

// Tools implements tools.Server.
func (s *Server) Tools(ctx context.Context) ([]tools.Definition, error) {
	s.Log.Add("list:" + s.Label)
	var defs []tools.Definition
	for _, name := range s.ToolNames {
		defs = append(defs, tools.Definition{Name: name, Description: "a tool of " + s.Label, Parameters: json.RawMessage(`{"type":"object"}`)})
	}
	return defs, nil
}

// Open implements tools.Server.
func (s *Server) Open(ctx context.Context) (tools.Session, error) {
	s.Log.Add("open:" + s.Label)
	if s.OpenErr != nil {
		return nil, s.OpenErr
	}
	return &session{s: s}, nil
}

type session struct{ s *Server }

func (f *session) Call(ctx context.Context, c tools.Call) (tools.Result, error) {
	f.s.Log.Add("call:" + f.s.Label + ":" + c.Name)
	f.s.callsMu.Lock()
	f.s.calls = append(f.s.calls, c)
	f.s.callsMu.Unlock()
	if f.s.CallFunc != nil {
		return f.s.CallFunc(ctx, c)
	}
	return tools.Result{CallID: c.CallID, Content: []tools.Content{tools.Text(c.Name + " ran with " + c.Arguments)}}, nil
}

func (f *session) Cleanup(ctx context.Context) error {
	f.s.Log.Add("cleanup:" + f.s.Label)
	if f.s.CleanupFunc != nil {
		return f.s.CleanupFunc(ctx)
	}
	return nil
}

func (f *session) Close() error {
	f.s.Log.Add("close:" + f.s.Label)
	return nil
}

// CheckLifecycle returns the ways the log breaks the lifecycle rules of a
// response's tool sessions, given the servers whose tools were called:
// each called server opened once, cleaned up once and closed once; every
// cleanup before any close; closes in reverse order of opening; a server
// not called never opened, cleaned up or closed. The open order is the
// order in which Open was entered, so tests that check close order should
// not open two sessions concurrently.
func CheckLifecycle(l *Log, called []string) []string {
	var problems []string
	ev := l.Events()
	isCalled := func(label string) bool { return slices.Contains(called, label) }
	var opens, closes []string
	lastCleanup, firstClose := -1, len(ev)
	for i, e := range ev {
		op, label, _ := strings.Cut(e, ":")
		label, _, _ = strings.Cut(label, ":")
		switch op {
		case "open":
			opens = append(opens, label)
		case "cleanup":
			lastCleanup = i
		case "close":
			closes = append(closes, label)
			firstClose = min(firstClose, i)
		}
		if op != "list" && !isCalled(label) {
			problems = append(problems, "uncalled server "+label+" saw "+e)
		}
	}
	for _, label := range called {
		for _, op := range []string{"open", "cleanup", "close"} {
			if n := l.Count(op + ":" + label); n != 1 {
				problems = append(problems, op+" of "+label+" happened "+strconv.Itoa(n)+" times, want once")
			}
		}
	}
	if lastCleanup > firstClose {
		problems = append(problems, "a cleanup ran after a close: "+strings.Join(ev, " "))
	}
	slices.Reverse(opens)
	if !slices.Equal(closes, opens) {
		problems = append(problems, "closed "+strings.Join(closes, ",")+", want the reverse of opening "+strings.Join(opens, ","))
	}
	return problems
}

// Provider is an engine tool provider for tests: it handles tools of type
// Type and hands out Servers, counting how often it was asked.
type Provider struct {
	Type string
	List []tools.Server

	mu    sync.Mutex
	asked int
}

// Handles reports whether typ is the provider's type.
func (p *Provider) Handles(typ string) bool { return typ == p.Type }

// Asked returns how many requests asked the provider for servers.
func (p *Provider) Asked() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.asked
}

// Servers returns the provider's servers for any request.
func (p *Provider) Servers(ctx context.Context, req *responses.Request) ([]tools.Server, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.asked++
	return p.List, nil
}
