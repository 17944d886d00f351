package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loomgate/loom/engine"
	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/store/sqlite"
	"github.com/loomgate/loom/tools"
)

// eventLog records what tool servers were asked to do, in order.
type eventLog struct {
	mu     sync.Mutex
	events []string
}

func (l *eventLog) add(e string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

func (l *eventLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.events)
}

func (l *eventLog) count(prefix string) int {
	n := 0
	for _, e := range l.all() {
		if strings.HasPrefix(e, prefix) {
			n++
		}
	}
	return n
}

// fakeServer is a tools.Server whose behaviour is set by function fields.
type fakeServer struct {
	label   string
	tools   []string
	log     *eventLog
	openErr error
	call    func(ctx context.Context, c tools.Call) (tools.Result, error)
}

func (s *fakeServer) Name() string { return s.label }

func (s *fakeServer) Tools(ctx context.Context) ([]tools.Definition, error) {
	s.log.add("list:" + s.label)
	var defs []tools.Definition
	for _, name := range s.tools {
		defs = append(defs, tools.Definition{Name: name, Description: "a tool of " + s.label, Parameters: json.RawMessage(`{"type":"object"}`)})
	}
	return defs, nil
}

func (s *fakeServer) Open(ctx context.Context) (tools.Session, error) {
	s.log.add("open:" + s.label)
	if s.openErr != nil {
		return nil, s.openErr
	}
	return &fakeSession{s: s}, nil
}

type fakeSession struct{ s *fakeServer }

func (f *fakeSession) Call(ctx context.Context, c tools.Call) (tools.Result, error) {
	f.s.log.add("call:" + f.s.label + ":" + c.Name)
	if f.s.call != nil {
		return f.s.call(ctx, c)
	}
	return tools.Result{CallID: c.CallID, Content: []tools.Content{tools.Text(c.Name + " ran with " + c.Arguments)}}, nil
}

func (f *fakeSession) Cleanup(ctx context.Context) error {
	f.s.log.add("cleanup:" + f.s.label)
	return nil
}

func (f *fakeSession) Close() error {
	f.s.log.add("close:" + f.s.label)
	return nil
}

// fakeProvider hands the engine its servers for tools of type "fake", and
// counts how often it was asked.
type fakeProvider struct {
	servers []tools.Server
	asked   int
}

func (p *fakeProvider) Handles(typ string) bool { return typ == "fake" }

func (p *fakeProvider) Servers(ctx context.Context, req *responses.Request) ([]tools.Server, error) {
	p.asked++
	return p.servers, nil
}

// scriptedTurns answers each model turn from a list of delta scripts; past
// the list it answers "done".
func scriptedTurns(turns ...[]model.Delta) *fakeBackend {
	n := 0
	var mu sync.Mutex
	return &fakeBackend{stream: func(req *model.Request, emit func(model.Delta) error) error {
		mu.Lock()
		i := n
		n++
		mu.Unlock()
		ds := []model.Delta{{Kind: model.DeltaText, Text: "done"}}
		if i < len(turns) {
			ds = turns[i]
		}
		for _, d := range ds {
			if err := emit(d); err != nil {
				return err
			}
		}
		return nil
	}}
}

func newToolEngine(t *testing.T, b model.Backend, p *fakeProvider) *engine.Engine {
	t.Helper()
	db, err := sqlite.Open(context.Background(), ":memory:", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return engine.New(b, db, &engine.Options{Models: []string{"m"}, ToolProviders: []engine.ToolProvider{p}})
}

func TestServerToolsLazyOpenOneCleanupReverseClose(t *testing.T) {
	log := &eventLog{}
	a := &fakeServer{label: "A", tools: []string{"a1", "a2"}, log: log}
	b := &fakeServer{label: "B", tools: []string{"b1"}, log: log}
	c := &fakeServer{label: "C", tools: []string{"c1"}, log: log}
	backend := scriptedTurns(
		[]model.Delta{call(0, "a1"), call(1, "c1")},
		[]model.Delta{call(0, "a2")},
	)
	e := newToolEngine(t, backend, &fakeProvider{servers: []tools.Server{a, b, c}})
	req := decodeRequest(t, `{"model":"m","input":"x","tools":[{"type":"fake"}]}`)
	resp, err := e.Run(context.Background(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != responses.ResponseCompleted {
		t.Fatalf("status %s", resp.Status)
	}
	ev := log.all()
	// B was offered (listed) but never called: never opened, cleaned or closed.
	for _, e := range ev {
		if strings.HasSuffix(e, ":B") && e != "list:B" {
			t.Errorf("uncalled server B saw %q", e)
		}
	}
	// A is opened once though called in two turns; each called server gets
	// exactly one cleanup, all cleanups come before any close, and closes
	// run in reverse order of opening.
	if n := log.count("open:A"); n != 1 {
		t.Errorf("A opened %d times", n)
	}
	for _, s := range []string{"A", "C"} {
		if n := log.count("cleanup:" + s); n != 1 {
			t.Errorf("%s cleaned up %d times", s, n)
		}
	}
	var opens, closes []string
	lastCleanup, firstClose := -1, len(ev)
	for i, e := range ev {
		switch {
		case strings.HasPrefix(e, "open:"):
			opens = append(opens, strings.TrimPrefix(e, "open:"))
		case strings.HasPrefix(e, "cleanup:"):
			lastCleanup = i
		case strings.HasPrefix(e, "close:"):
			closes = append(closes, strings.TrimPrefix(e, "close:"))
			firstClose = min(firstClose, i)
		}
	}
	if lastCleanup > firstClose {
		t.Errorf("a cleanup ran after a close: %v", ev)
	}
	slices.Reverse(opens)
	if !slices.Equal(closes, opens) {
		t.Errorf("closed %v, want reverse of opening %v", closes, opens)
	}
	// The client sees mcp_call items with outputs; the model saw the
	// results as tool outputs in the next turn.
	var calls []string
	for _, it := range resp.Output {
		if it.Type == responses.ItemMCPCall {
			calls = append(calls, it.ServerLabel+"/"+it.Name+"="+string(it.Output))
		}
	}
	want := []string{`A/a1="a1 ran with {}"`, `C/c1="c1 ran with {}"`, `A/a2="a2 ran with {}"`}
	if !slices.Equal(calls, want) {
		t.Errorf("server call items %v, want %v", calls, want)
	}
	second := backend.requests[1]
	var outputs []string
	for _, it := range second.Items {
		if it.Type == responses.ItemFunctionCallOutput {
			outputs = append(outputs, it.OutputString())
		}
	}
	if !slices.Equal(outputs, []string{"a1 ran with {}", "c1 ran with {}"}) {
		t.Errorf("second turn saw outputs %v", outputs)
	}
	if len(backend.requests) != 3 {
		t.Errorf("%d model turns, want 3", len(backend.requests))
	}
}

func TestServerToolOpenFailureReachesTheModel(t *testing.T) {
	log := &eventLog{}
	a := &fakeServer{label: "A", tools: []string{"a1"}, log: log}
	b := &fakeServer{label: "B", tools: []string{"b1"}, log: log, openErr: errors.New("connection refused by 10.1.2.3")}
	never := &fakeServer{label: "N", tools: []string{"n1"}, log: log}
	backend := scriptedTurns([]model.Delta{call(0, "a1")}, []model.Delta{call(0, "b1")})
	e := newToolEngine(t, backend, &fakeProvider{servers: []tools.Server{a, b, never}})
	resp, err := e.Run(context.Background(), decodeRequest(t, `{"model":"m","input":"x","tools":[{"type":"fake"}]}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if log.count("close:A") != 1 || log.count("cleanup:A") != 1 {
		t.Errorf("A not cleaned and closed once: %v", log.all())
	}
	if log.count("cleanup:B")+log.count("close:B")+log.count("open:N") != 0 {
		t.Errorf("a failed or uncalled server was touched: %v", log.all())
	}
	var failed *responses.Item
	for i := range resp.Output {
		if resp.Output[i].Name == "b1" {
			failed = &resp.Output[i]
		}
	}
	if failed == nil || failed.Error == nil || failed.Status != "failed" {
		t.Fatalf("the failed call is not reported as failed: %+v", failed)
	}
	if strings.Contains(*failed.Error, "10.1.2.3") {
		t.Errorf("the internal error leaked to the client: %q", *failed.Error)
	}
	third := backend.requests[2]
	last := third.Items[len(third.Items)-1]
	if last.Type != responses.ItemFunctionCallOutput || !strings.Contains(last.OutputString(), "b1") {
		t.Errorf("the model was not told the call failed: %+v", last)
	}
}

func TestNoToolsNoToolWork(t *testing.T) {
	log := &eventLog{}
	p := &fakeProvider{servers: []tools.Server{&fakeServer{label: "A", tools: []string{"a1"}, log: log}}}
	backend := scriptedTurns([]model.Delta{{Kind: model.DeltaText, Text: "hi"}})
	e := newToolEngine(t, backend, p)
	if _, err := e.Run(context.Background(), decodeRequest(t, `{"model":"m","input":"x"}`), nil); err != nil {
		t.Fatal(err)
	}
	if p.asked != 0 || len(log.all()) != 0 {
		t.Errorf("a request without tools did tool work: provider asked %d, log %v", p.asked, log.all())
	}
	if len(backend.requests[0].Tools) != 0 {
		t.Errorf("tools offered to the model: %v", backend.requests[0].Tools)
	}
}

func TestCancelDuringToolCallStillCleansUp(t *testing.T) {
	log := &eventLog{}
	started := make(chan struct{})
	a := &fakeServer{label: "A", tools: []string{"slow"}, log: log, call: func(ctx context.Context, c tools.Call) (tools.Result, error) {
		close(started)
		<-ctx.Done()
		return tools.Result{}, ctx.Err()
	}}
	e := newToolEngine(t, scriptedTurns([]model.Delta{call(0, "slow")}), &fakeProvider{servers: []tools.Server{a}})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-started:
		case <-time.After(10 * time.Second):
		}
		cancel()
	}()
	resp, err := e.Run(ctx, decodeRequest(t, `{"model":"m","input":"x","tools":[{"type":"fake"}]}`), nil)
	if !errors.Is(err, context.Canceled) || resp.Status != responses.ResponseCancelled {
		t.Fatalf("status %s err %v", resp.Status, err)
	}
	if log.count("cleanup:A") != 1 || log.count("close:A") != 1 {
		t.Errorf("after cancel: %v", log.all())
	}
}
