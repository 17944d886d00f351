package conversation

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/loomgate/loom/internal/testutil"
	"github.com/loomgate/loom/tools"
)

// The seed's matrix (vLLM's test_mcp_sessions_cleaned_once_before_close),
// ported and made stronger: sessions open lazily, so a tool offered but not
// called must never have a session at all; calls come in several turns and
// concurrently within a turn; one server offers two tools (still one
// session, one cleanup); close order is checked against the actual order
// of opening, not the order of registration.
func TestLifecycleMatrix(t *testing.T) {
	toolsOf := map[string][]string{
		"browser":   {"search"},
		"python":    {"python"},
		"container": {"exec"},
		"docs":      {"docs_read", "docs_write"},
	}
	serverOf := map[string]string{}
	for s, ts := range toolsOf {
		for _, tl := range ts {
			serverOf[tl] = s
		}
	}
	tests := []struct {
		name      string
		available []string   // servers, in registration order
		turns     [][]string // tools called, per model turn
		// wantOpen is the exact order of opening, when the turns make it
		// deterministic.
		wantOpen []string
	}{
		{name: "none"},
		{name: "one", available: []string{"python"}, turns: [][]string{{"python"}}, wantOpen: []string{"python"}},
		{name: "unused", available: []string{"browser", "python"}},
		{name: "first", available: []string{"browser", "python", "container"}, turns: [][]string{{"search"}}, wantOpen: []string{"browser"}},
		{name: "last", available: []string{"browser", "python", "container"}, turns: [][]string{{"exec"}, {"exec"}}, wantOpen: []string{"container"}},
		{
			name:      "all",
			available: []string{"browser", "python", "container", "docs"},
			turns:     [][]string{{"exec", "search"}, {"python", "exec", "docs_read"}, {"docs_write", "docs_read"}},
		},
		{
			// Opening order differs from registration order, so the
			// reverse-order check cannot pass by accident.
			name:      "all sequential",
			available: []string{"browser", "python", "container", "docs"},
			turns:     [][]string{{"exec"}, {"search"}, {"docs_read"}, {"python"}, {"docs_write", "search"}},
			wantOpen:  []string{"container", "browser", "docs", "python"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			log := &eventLog{}
			var logs testutil.LockedBuffer
			var servers []tools.Server
			for _, name := range tt.available {
				servers = append(servers, newFake(log, name, toolsOf[name]...))
			}
			c := New(registry(t, servers...), nil, &Options{ResponseID: "resp_matrix", Logger: testLogger(&logs)})
			ctx := context.Background()

			if err := c.Init(ctx); err != nil {
				t.Fatal(err)
			}
			offered, before := slices.Clone(c.Offered()), log.all()
			if err := c.Init(ctx); err != nil {
				t.Fatal(err)
			}
			if got := log.all(); !slices.Equal(got, before) {
				t.Fatalf("second Init did work: %v -> %v", before, got)
			}
			if !equalNames(c.Offered(), offered) {
				t.Fatalf("second Init changed the offer: %v -> %v", names(offered), names(c.Offered()))
			}
			for _, e := range before {
				if e.kind != "list" {
					t.Fatalf("Init did more than list: %v", before)
				}
			}

			var wantCalled []string
			called := map[string]bool{} // servers
			for _, turn := range tt.turns {
				res := c.Call(ctx, calls(turn...))
				if len(res) != len(turn) {
					t.Fatalf("got %d results for %d calls", len(res), len(turn))
				}
				for i, r := range res {
					if r.IsError || r.Err != nil {
						t.Fatalf("call %s: %v", turn[i], r.Err)
					}
					want := serverOf[turn[i]] + ":" + turn[i] + ":" + calls(turn...)[i].Arguments
					if r.Text() != want || r.CallID != calls(turn...)[i].CallID {
						t.Errorf("result %d = %q (%s), want %q (%s): results out of call order", i, r.Text(), r.CallID, want, calls(turn...)[i].CallID)
					}
					called[serverOf[turn[i]]] = true
					if !slices.Contains(wantCalled, turn[i]) {
						wantCalled = append(wantCalled, turn[i])
					}
				}
			}
			if tt.wantOpen != nil {
				if got := c.Called(); !slices.Equal(got, wantCalled) {
					t.Errorf("Called() = %v, want %v", got, wantCalled)
				}
			} else if got := c.Called(); !sameSet(got, wantCalled) {
				t.Errorf("Called() = %v, want %v in any order", got, wantCalled)
			}

			if err := c.Close(ctx); err != nil {
				t.Fatalf("Close: %v", err)
			}
			afterFirst := log.all()
			if err := c.Close(ctx); err != nil {
				t.Fatalf("second Close: %v", err)
			}
			if got := log.all(); !slices.Equal(got, afterFirst) {
				t.Fatalf("second Close did work: %v", got[len(afterFirst):])
			}

			events := log.all()
			for _, s := range tt.available {
				if n := log.count("list", s); n != 1 {
					t.Errorf("%s listed %d times, want 1", s, n)
				}
				want := 0
				if called[s] {
					want = 1
				}
				for _, kind := range []string{"open", "cleanup", "close"} {
					if n := log.count(kind, s); n != want {
						t.Errorf("%s: %d %s, want %d (called=%v)", s, n, kind, want, called[s])
					}
				}
			}
			lastCleanup, firstClose := -1, len(events)
			for i, e := range events {
				if e.kind == "cleanup" {
					lastCleanup = i
				}
				if e.kind == "close" && i < firstClose {
					firstClose = i
				}
			}
			if lastCleanup > firstClose {
				t.Errorf("a cleanup came after a close: %v", events)
			}
			opens, closes := log.servers("open"), log.servers("close")
			if tt.wantOpen != nil {
				if !slices.Equal(opens, tt.wantOpen) {
					t.Errorf("opened %v, want %v", opens, tt.wantOpen)
				}
				slices.Reverse(opens)
				if !slices.Equal(closes, opens) {
					t.Errorf("closed %v, want reverse of opening %v", closes, opens)
				}
			} else {
				// Sessions opened concurrently in one turn have no order
				// between them, but a session opened in a later turn must
				// close before any opened in an earlier one.
				turnOpened := map[string]int{}
				for i, turn := range tt.turns {
					for _, tl := range turn {
						if _, ok := turnOpened[serverOf[tl]]; !ok {
							turnOpened[serverOf[tl]] = i
						}
					}
				}
				for i := 1; i < len(closes); i++ {
					if turnOpened[closes[i]] > turnOpened[closes[i-1]] {
						t.Errorf("closed %v: %s (opened in turn %d) after %s (turn %d)", closes, closes[i], turnOpened[closes[i]], closes[i-1], turnOpened[closes[i-1]])
					}
				}
			}

			st := c.Stats()
			if st.List.OK != len(tt.available) || st.Open.OK != len(called) || st.Cleanup.OK != len(called) || st.Close.OK != len(called) {
				t.Errorf("stats %+v, want %d listed and %d opened, cleaned, closed", st, len(tt.available), len(called))
			}
			if st.List.Failures()+st.Open.Failures()+st.Call.Failures()+st.Cleanup.Failures()+st.Close.Failures() != 0 {
				t.Errorf("failures counted: %+v", st)
			}
			if s := logs.String(); s != "" {
				t.Errorf("unexpected logs:\n%s", s)
			}
		})
	}
}

// Offered lists function tools first, then each server's tools in
// registration order, each tagged with its server; IsServerTool tells the
// two kinds apart.
func TestOffered(t *testing.T) {
	log := &eventLog{}
	reg := registry(t, newFake(log, "b", "b1", "b2"), newFake(log, "a", "a1"))
	desc := "client side"
	if err := reg.AddFunction(tools.FunctionDefinition(responsesTool("get_weather", &desc))); err != nil {
		t.Fatal(err)
	}
	c := New(reg, nil, nil)
	defer c.Close(context.Background())
	if got := c.Offered(); got != nil {
		t.Fatalf("offered before Init: %v", names(got))
	}
	if err := c.Init(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := c.Offered()
	want := []string{"get_weather/", "b1/b", "b2/b", "a1/a"}
	var have []string
	for _, d := range got {
		have = append(have, d.Name+"/"+d.Server)
	}
	if !slices.Equal(have, want) {
		t.Errorf("offered %v, want %v", have, want)
	}
	if got[0].Description != desc || string(got[1].Parameters) != `{"type":"object"}` {
		t.Errorf("definitions not kept: %+v", got[:2])
	}
	for name, want := range map[string]bool{"get_weather": false, "b1": true, "a1": true, "nope": false} {
		if c.IsServerTool(name) != want {
			t.Errorf("IsServerTool(%q) = %v", name, !want)
		}
	}
	// A function tool is the client's: Call refuses it and opens nothing.
	res := c.Call(context.Background(), calls("get_weather", "nope"))
	for _, r := range res {
		if !r.IsError || !errorsIs(r.Err, tools.ErrUnknownTool) {
			t.Errorf("call of a non-server tool: %+v", r)
		}
	}
	if n := len(log.servers("open")); n != 0 {
		t.Errorf("%d sessions opened", n)
	}
}

// A tool name offered twice keeps its first owner and is reported.
func TestDuplicateToolName(t *testing.T) {
	log := &eventLog{}
	reg := registry(t, newFake(log, "a", "x", "y"), newFake(log, "b", "y", "z"))
	c := New(reg, nil, nil)
	defer c.Close(context.Background())
	err := c.Init(context.Background())
	var de *tools.DuplicateError
	if !errorsAs(err, &de) || de.Name != "y" || de.Sources != [2]string{"a", "b"} {
		t.Fatalf("Init = %v, want a duplicate y from a and b", err)
	}
	if !strings.Contains(err.Error(), `"y"`) {
		t.Errorf("error does not name the tool: %v", err)
	}
	if got := names(c.Offered()); !slices.Equal(got, []string{"x", "y", "z"}) {
		t.Errorf("offered %v", got)
	}
	if c.Call(context.Background(), calls("y"))[0].Text() != "a:y:"+calls("y")[0].Arguments {
		t.Error("y not routed to its first owner")
	}
}
