package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/loomgate/loom/engine"
	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/store/sqlite"
	"github.com/loomgate/loom/tools"
	"github.com/loomgate/loom/tools/toolstest"
)

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

func newToolEngine(t *testing.T, b model.Backend, p *toolstest.Provider) *engine.Engine {
	t.Helper()
	db, err := sqlite.Open(context.Background(), ":memory:", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return engine.New(b, db, &engine.Options{Models: []string{"m"}, ToolProviders: []engine.ToolProvider{p}})
}

func TestServerToolsLazyOpenOneCleanupReverseClose(t *testing.T) {
	log := &toolstest.Log{}
	a := &toolstest.Server{Label: "A", ToolNames: []string{"a1", "a2"}, Log: log}
	b := &toolstest.Server{Label: "B", ToolNames: []string{"b1"}, Log: log}
	c := &toolstest.Server{Label: "C", ToolNames: []string{"c1"}, Log: log}
	// A opens in the first turn and C in the second, so the order of
	// opening (and so of closing) is fixed; A's second call reuses its
	// session.
	backend := scriptedTurns(
		[]model.Delta{call(0, "a1")},
		[]model.Delta{call(0, "c1"), call(1, "a2")},
	)
	e := newToolEngine(t, backend, &toolstest.Provider{Type: "fake", List: []tools.Server{a, b, c}})
	req := decodeRequest(t, `{"model":"m","input":"x","tools":[{"type":"fake"}]}`)
	resp, err := e.Run(context.Background(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != responses.ResponseCompleted {
		t.Fatalf("status %s", resp.Status)
	}
	// A is called in two turns but opened once; B is offered, never called.
	for _, problem := range toolstest.CheckLifecycle(log, []string{"A", "C"}) {
		t.Error(problem)
	}
	// The client sees mcp_call items with outputs; the model saw the
	// results as tool outputs in the next turn.
	var calls []string
	for _, it := range resp.Output {
		if it.Type == responses.ItemMCPCall {
			calls = append(calls, it.ToolFields().ServerLabel+"/"+it.CallFields().Name+"="+string(it.CallFields().Output))
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
	if !slices.Equal(outputs, []string{"a1 ran with {}"}) {
		t.Errorf("second turn saw outputs %v", outputs)
	}
	if len(backend.requests) != 3 {
		t.Errorf("%d model turns, want 3", len(backend.requests))
	}
}

func TestServerToolOpenFailureReachesTheModel(t *testing.T) {
	log := &toolstest.Log{}
	a := &toolstest.Server{Label: "A", ToolNames: []string{"a1"}, Log: log}
	b := &toolstest.Server{Label: "B", ToolNames: []string{"b1"}, Log: log, OpenErr: errors.New("connection refused by 10.1.2.3")}
	never := &toolstest.Server{Label: "N", ToolNames: []string{"n1"}, Log: log}
	backend := scriptedTurns([]model.Delta{call(0, "a1")}, []model.Delta{call(0, "b1")})
	e := newToolEngine(t, backend, &toolstest.Provider{Type: "fake", List: []tools.Server{a, b, never}})
	resp, err := e.Run(context.Background(), decodeRequest(t, `{"model":"m","input":"x","tools":[{"type":"fake"}]}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if log.Count("close:A") != 1 || log.Count("cleanup:A") != 1 {
		t.Errorf("A not cleaned and closed once: %v", log.Events())
	}
	if log.Count("cleanup:B")+log.Count("close:B")+log.Count("open:N") != 0 {
		t.Errorf("a failed or uncalled server was touched: %v", log.Events())
	}
	var failed *responses.Item
	for i := range resp.Output {
		if resp.Output[i].CallFields().Name == "b1" {
			failed = &resp.Output[i]
		}
	}
	if failed == nil || failed.ToolFields().Error == nil || failed.Status != "failed" {
		t.Fatalf("the failed call is not reported as failed: %+v", failed)
	}
	if strings.Contains(*failed.ToolFields().Error, "10.1.2.3") {
		t.Errorf("the internal error leaked to the client: %q", *failed.ToolFields().Error)
	}
	third := backend.requests[2]
	last := third.Items[len(third.Items)-1]
	if last.Type != responses.ItemFunctionCallOutput || !strings.Contains(last.OutputString(), "b1") {
		t.Errorf("the model was not told the call failed: %+v", last)
	}
}

func TestNoToolsNoToolWork(t *testing.T) {
	log := &toolstest.Log{}
	p := &toolstest.Provider{Type: "fake", List: []tools.Server{&toolstest.Server{Label: "A", ToolNames: []string{"a1"}, Log: log}}}
	backend := scriptedTurns([]model.Delta{{Kind: model.DeltaText, Text: "hi"}})
	e := newToolEngine(t, backend, p)
	if _, err := e.Run(context.Background(), decodeRequest(t, `{"model":"m","input":"x"}`), nil); err != nil {
		t.Fatal(err)
	}
	if p.Asked() != 0 || len(log.Events()) != 0 {
		t.Errorf("a request without tools did tool work: provider asked %d, log %v", p.Asked(), log.Events())
	}
	if len(backend.requests[0].Tools) != 0 {
		t.Errorf("tools offered to the model: %v", backend.requests[0].Tools)
	}
}

func TestCancelDuringToolCallStillCleansUp(t *testing.T) {
	log := &toolstest.Log{}
	started := make(chan struct{})
	a := &toolstest.Server{Label: "A", ToolNames: []string{"slow"}, Log: log, CallFunc: func(ctx context.Context, c tools.Call) (tools.Result, error) {
		close(started)
		<-ctx.Done()
		return tools.Result{}, ctx.Err()
	}}
	e := newToolEngine(t, scriptedTurns([]model.Delta{call(0, "slow")}), &toolstest.Provider{Type: "fake", List: []tools.Server{a}})
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() {
		// Cancel once the call runs; a Run that ends without the call
		// (the test's failure) needs no cancel, and frees this goroutine.
		select {
		case <-started:
		case <-ran:
		}
		cancel()
	}()
	resp, err := e.Run(ctx, decodeRequest(t, `{"model":"m","input":"x","tools":[{"type":"fake"}]}`), nil)
	close(ran)
	if !errors.Is(err, context.Canceled) || resp.Status != responses.ResponseCancelled {
		t.Fatalf("status %s err %v", resp.Status, err)
	}
	if log.Count("cleanup:A") != 1 || log.Count("close:A") != 1 {
		t.Errorf("after cancel: %v", log.Events())
	}
}

func TestServerToolResultKeepsEveryBlock(t *testing.T) {
	log := &toolstest.Log{}
	a := &toolstest.Server{Label: "A", ToolNames: []string{"chart"}, Log: log, CallFunc: func(ctx context.Context, c tools.Call) (tools.Result, error) {
		return tools.Result{CallID: c.CallID, Content: []tools.Content{
			tools.Text("first"), tools.Text("second"),
			{Type: "image", Raw: json.RawMessage(`{"type":"image","data":"AAAA","mimeType":"image/png"}`)},
		}, Structured: json.RawMessage(`{"points":3}`)}, nil
	}}
	backend := scriptedTurns([]model.Delta{call(0, "chart")})
	e := newToolEngine(t, backend, &toolstest.Provider{Type: "fake", List: []tools.Server{a}})
	resp, err := e.Run(context.Background(), decodeRequest(t, `{"model":"m","input":"x","tools":[{"type":"fake"}]}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	var out string
	for _, it := range resp.Output {
		if it.Type == responses.ItemMCPCall {
			json.Unmarshal(it.CallFields().Output, &out)
		}
	}
	for _, want := range []string{`"first"`, `"second"`, `"image/png"`, `"structuredContent":{"points":3}`} {
		if !strings.Contains(out, want) {
			t.Errorf("mcp_call output lost %s: %s", want, out)
		}
	}
	seen := backend.requests[1].Items[len(backend.requests[1].Items)-1].OutputString()
	if seen != out {
		t.Errorf("the model saw %q, the client %q", seen, out)
	}
}
