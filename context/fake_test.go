package conversation

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"

	"github.com/loomgate/loom/internal/testutil"
	"github.com/loomgate/loom/tools"
)

// event is one thing a fake did, in the global order of the test.
type event struct {
	kind   string // list, open, call, cleanup, close
	server string
}

func (e event) String() string { return e.kind + ":" + e.server }

// eventLog is the ordered record of everything every fake did.
type eventLog struct {
	mu     sync.Mutex
	events []event
}

func (l *eventLog) add(kind, server string) {
	l.mu.Lock()
	l.events = append(l.events, event{kind, server})
	l.mu.Unlock()
}

func (l *eventLog) all() []event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.events)
}

// servers returns, in order, the servers of the events of kind.
func (l *eventLog) servers(kind string) []string {
	var out []string
	for _, e := range l.all() {
		if e.kind == kind {
			out = append(out, e.server)
		}
	}
	return out
}

func (l *eventLog) count(kind, server string) int {
	n := 0
	for _, e := range l.all() {
		if e.kind == kind && e.server == server {
			n++
		}
	}
	return n
}

// fakeServer is a tools.Server whose behaviour is its function fields.
type fakeServer struct {
	name      string
	ToolsFunc func(ctx context.Context) ([]tools.Definition, error)
	OpenFunc  func(ctx context.Context) (tools.Session, error)
}

func (s *fakeServer) Name() string { return s.name }
func (s *fakeServer) Tools(ctx context.Context) ([]tools.Definition, error) {
	return s.ToolsFunc(ctx)
}
func (s *fakeServer) Open(ctx context.Context) (tools.Session, error) { return s.OpenFunc(ctx) }

func (s *fakeServer) Capabilities() tools.Capabilities { return tools.Capabilities{} }

// fakeSession is a tools.Session whose behaviour is its function fields.
type fakeSession struct {
	CallFunc    func(ctx context.Context, call tools.Call) (tools.Result, error)
	CleanupFunc func(ctx context.Context) error
	CloseFunc   func() error
}

func (s *fakeSession) Call(ctx context.Context, call tools.Call) (tools.Result, error) {
	return s.CallFunc(ctx, call)
}
func (s *fakeSession) Cleanup(ctx context.Context) error { return s.CleanupFunc(ctx) }
func (s *fakeSession) Close() error                      { return s.CloseFunc() }

// newFake returns a server offering toolNames whose every operation is
// recorded in log. Each Open returns a fresh session; tests replace fields
// of the server, or wrap OpenFunc, to inject faults.
func newFake(log *eventLog, name string, toolNames ...string) *fakeServer {
	s := &fakeServer{name: name}
	s.ToolsFunc = func(context.Context) ([]tools.Definition, error) {
		log.add("list", name)
		defs := make([]tools.Definition, len(toolNames))
		for i, t := range toolNames {
			defs[i] = tools.Definition{Name: t, Description: "tool " + t, Parameters: []byte(`{"type":"object"}`)}
		}
		return defs, nil
	}
	s.OpenFunc = func(context.Context) (tools.Session, error) {
		log.add("open", name)
		return newFakeSession(log, name), nil
	}
	return s
}

func newFakeSession(log *eventLog, name string) *fakeSession {
	var mu sync.Mutex
	closed := false
	live := func() error {
		mu.Lock()
		defer mu.Unlock()
		if closed {
			return tools.ErrClosed
		}
		return nil
	}
	return &fakeSession{
		CallFunc: func(_ context.Context, call tools.Call) (tools.Result, error) {
			log.add("call", name)
			if err := live(); err != nil {
				return tools.Result{}, err
			}
			return tools.Result{Content: []tools.Content{tools.Text(name + ":" + call.Name + ":" + call.Arguments)}}, nil
		},
		CleanupFunc: func(context.Context) error {
			log.add("cleanup", name)
			return live()
		},
		CloseFunc: func() error {
			log.add("close", name)
			mu.Lock()
			defer mu.Unlock()
			if closed {
				return tools.ErrClosed
			}
			closed = true
			return nil
		},
	}
}

// wrapSession changes what a fake server's sessions do.
func wrapSession(s *fakeServer, wrap func(*fakeSession)) {
	open := s.OpenFunc
	s.OpenFunc = func(ctx context.Context) (tools.Session, error) {
		sess, err := open(ctx)
		if err == nil {
			wrap(sess.(*fakeSession))
		}
		return sess, err
	}
}

func registry(t testing.TB, servers ...tools.Server) *tools.Registry {
	t.Helper()
	reg, err := tools.NewRegistry(servers...)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

func calls(names ...string) []tools.Call {
	out := make([]tools.Call, len(names))
	for i, n := range names {
		out[i] = tools.Call{CallID: fmt.Sprintf("call_%d", i), Name: n, Arguments: fmt.Sprintf(`{"i":%d}`, i)}
	}
	return out
}

func testLogger(buf *testutil.LockedBuffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// countingMetrics is a Metrics that counts observations.
type countingMetrics struct {
	mu sync.Mutex
	n  map[string]int // "op/server/outcome"
}

func (m *countingMetrics) Observe(op Op, server string, o Outcome) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.n == nil {
		m.n = map[string]int{}
	}
	m.n[op.String()+"/"+server+"/"+o.String()]++
}

func (m *countingMetrics) get(key string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.n[key]
}
