package conversation

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/tools"
)

// countingServer counts what is asked of it.
func countingServer(lists, opens *atomic.Int32) *fakeServer {
	return &fakeServer{
		name: "counted",
		ToolsFunc: func(context.Context) ([]tools.Definition, error) {
			lists.Add(1)
			return []tools.Definition{{Name: "t"}}, nil
		},
		OpenFunc: func(context.Context) (tools.Session, error) {
			opens.Add(1)
			return newFakeSession(&eventLog{}, "counted"), nil
		},
	}
}

// A request with no tools does no tool work; a request with tools lists
// them when offered and opens nothing until a call.
func TestNoToolsNoToolWork(t *testing.T) {
	desc := "d"
	functionsOnly := new(tools.Registry)
	if err := functionsOnly.AddFunction(tools.FunctionDefinition(responsesTool("f", &desc))); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		reg       func(s tools.Server) *tools.Registry
		init      bool
		call      bool
		wantOffer []string
		wantLists int32
		wantOpens int32
	}{
		{name: "nil registry", reg: func(tools.Server) *tools.Registry { return nil }, init: true, call: true},
		{name: "empty registry", reg: func(tools.Server) *tools.Registry { return new(tools.Registry) }, init: true, call: true},
		{name: "function tools only", reg: func(tools.Server) *tools.Registry { return functionsOnly }, init: true, call: true, wantOffer: []string{"f"}},
		{name: "server never offered", reg: func(s tools.Server) *tools.Registry { return registry(t, s) }},
		{name: "offered, not called", reg: func(s tools.Server) *tools.Registry { return registry(t, s) }, init: true, wantOffer: []string{"t"}, wantLists: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var lists, opens atomic.Int32
			s := countingServer(&lists, &opens)
			c := New(tt.reg(s), nil, nil)
			ctx := context.Background()
			if tt.init {
				if err := c.Init(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if got := names(c.Offered()); !slices.Equal(got, tt.wantOffer) {
				t.Errorf("offered %v, want %v", got, tt.wantOffer)
			}
			if c.IsServerTool("f") || (tt.wantLists == 0 && c.IsServerTool("t")) {
				t.Error("a tool loom does not execute is reported as a server tool")
			}
			if tt.call {
				if res := c.Call(ctx, nil); res != nil {
					t.Errorf("Call(nil) = %v", res)
				}
			}
			if err := c.Close(ctx); err != nil {
				t.Fatal(err)
			}
			if lists.Load() != tt.wantLists || opens.Load() != tt.wantOpens {
				t.Errorf("%d listings, %d opens; want %d, %d", lists.Load(), opens.Load(), tt.wantLists, tt.wantOpens)
			}
			if st := c.Stats(); st != (Stats{List: Counts{OK: int(tt.wantLists)}}) {
				t.Errorf("stats %+v", st)
			}
		})
	}
}

// The no-tools path costs the Context itself and nothing more.
func TestNoToolsAllocs(t *testing.T) {
	history := []responses.Item{{Type: responses.ItemMessage, Role: "user"}}
	ctx := context.Background()
	allocs := testing.AllocsPerRun(100, func() {
		c := New(nil, history, nil)
		_ = c.Init(ctx)
		_ = c.Offered()
		_ = c.Call(ctx, nil)
		_ = c.Close(ctx)
	})
	if allocs > 1 {
		t.Errorf("%v allocations per request with no tools, want 1", allocs)
	}
}

func TestHistory(t *testing.T) {
	in := make([]responses.Item, 1, 10)
	in[0] = responses.Item{Type: responses.ItemMessage, Role: "user"}
	c := New(nil, in, nil)
	items := c.Items()
	_ = append(items, responses.Item{Type: "intruder"})
	c.Append(responses.Item{Type: responses.ItemFunctionCall, Call: &responses.ItemCall{CallID: "c1"}})
	got := c.Items()
	if len(got) != 2 || got[1].CallFields().CallID != "c1" {
		t.Fatalf("history %+v", got)
	}
	// The Context owns the history it was given: with room past its end,
	// an append grows it in place instead of copying a long history.
	if &got[0] != &in[0] {
		t.Error("Append copied a history that had room")
	}
	// Full: the next append moves the history, and the old array keeps
	// what it had.
	full := []responses.Item{{Type: responses.ItemMessage, Role: "user"}}
	c = New(nil, full, nil)
	c.Append(responses.Item{Type: responses.ItemFunctionCall, Call: &responses.ItemCall{CallID: "c2"}})
	if got := c.Items(); len(got) != 2 || got[1].CallFields().CallID != "c2" || len(full) != 1 {
		t.Fatalf("history %+v", got)
	}
}
