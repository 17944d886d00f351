package mcp

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/loomgate/loom/tools"
	"github.com/loomgate/loom/tools/mcp/mcptest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	mcptest.RemoveBuild()
	os.Exit(code)
}

// TestEverythingServer runs the go-sdk conformance everything-server
// (stateless 2026-07-28) and drives every test_input_required_result_*
// tool through its rounds, answering as the engine would.
func TestEverythingServer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the go-sdk everything-server")
	}
	srvURL := mcptest.StartEverything(t)

	c := loopbackClient(t, nil)
	srv := newServer(t, c, ServerConfig{
		Label:        "everything",
		URL:          srvURL,
		Capabilities: Capabilities{Elicitation: true, Sampling: true, Roots: true},
		Roots:        []Root{{URI: "file:///work", Name: "work"}},
	})
	defs, err := srv.Tools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, d := range defs {
		names[d.Name] = true
	}
	for _, n := range []string{"test_simple_text", "test_input_required_result_elicitation", "test_x_mcp_header"} {
		if !names[n] {
			t.Fatalf("tool %s not listed (%d tools)", n, len(defs))
		}
	}
	sess := open(t, srv)
	if ss := sess.(*Session); ss.Legacy() || ss.ID() != "" {
		t.Fatalf("stateless server seen as legacy (%v) or with a session id %q", ss.Legacy(), ss.ID())
	}
	res, err := sess.Call(context.Background(), tools.Call{Name: "test_simple_text"})
	if err != nil || res.IsError || res.Text() == "" {
		t.Fatalf("test_simple_text: %+v, %v", res, err)
	}
	res, err = sess.Call(context.Background(), tools.Call{Name: "test_x_mcp_header", Arguments: `{"region":"eu-west","level":3}`})
	if err != nil || res.IsError {
		t.Fatalf("test_x_mcp_header (the server checks Mcp-Param-Region): %+v, %v", res, err)
	}

	answers := map[string]json.RawMessage{
		MethodElicit:        json.RawMessage(`{"action":"accept","content":{"name":"Ada","color":"teal","ok":true}}`),
		MethodCreateMessage: json.RawMessage(`{"role":"assistant","content":{"type":"text","text":"Paris"},"model":"scripted"}`),
		MethodListRoots:     srv.Roots(),
	}
	tests := []struct {
		tool    string
		methods []string // of the first round, sorted by key
		rounds  int      // input rounds before completion
		want    string   // in the final text
	}{
		{"test_input_required_result_elicitation", []string{MethodElicit}, 1, "Hello, Ada!"},
		{"test_input_required_result_sampling", []string{MethodCreateMessage}, 1, "Sampling response: Paris"},
		{"test_input_required_result_list_roots", []string{MethodListRoots}, 1, "1 root(s): file:///work"},
		{"test_input_required_result_request_state", []string{MethodElicit}, 1, "state-ok"},
		{"test_input_required_result_multiple_inputs", []string{MethodListRoots, MethodCreateMessage, MethodElicit}, 1, "Paris Ada — 1 root(s) visible"},
		{"test_input_required_result_multi_round", []string{MethodElicit}, 2, "Ada likes teal"},
		{"test_input_required_result_capabilities", []string{MethodListRoots, MethodCreateMessage, MethodElicit}, 1, "fulfilled"},
	}
	for _, tt := range tests {
		t.Run(strings.TrimPrefix(tt.tool, "test_input_required_result_"), func(t *testing.T) {
			call := tools.Call{CallID: "c", Name: tt.tool, Arguments: `{}`}
			for round := 0; ; round++ {
				res, err := sess.Call(context.Background(), call)
				if err != nil {
					t.Fatal(err)
				}
				if res.InputRequired == nil {
					if round != tt.rounds {
						t.Fatalf("completed after %d rounds, want %d", round, tt.rounds)
					}
					if res.IsError || !strings.Contains(res.Text(), tt.want) {
						t.Fatalf("result %+v, want %q", res, tt.want)
					}
					return
				}
				if round == 5 {
					t.Fatal("more than 5 rounds")
				}
				if round == 0 {
					var got []string
					for _, k := range sortedKeys(res.InputRequired.Requests) {
						got = append(got, res.InputRequired.Requests[k].Method)
					}
					if strings.Join(got, ",") != strings.Join(tt.methods, ",") {
						t.Fatalf("first round asks %v, want %v", got, tt.methods)
					}
				}
				in := &tools.Input{Responses: map[string]json.RawMessage{}, State: res.InputRequired.State}
				for k, r := range res.InputRequired.Requests {
					in.Responses[k] = answers[r.Method]
				}
				call.Input = in
			}
		})
	}

	t.Run("tampered_state", func(t *testing.T) {
		call := tools.Call{CallID: "c", Name: "test_input_required_result_tampered_state"}
		res, err := sess.Call(context.Background(), call)
		if err != nil || res.InputRequired == nil {
			t.Fatalf("first round: %+v, %v", res, err)
		}
		call.Input = &tools.Input{
			Responses: map[string]json.RawMessage{"confirm": answers[MethodElicit]},
			State:     res.InputRequired.State + "-TAMPERED",
		}
		res, err = sess.Call(context.Background(), call)
		if err != nil {
			t.Fatal(err)
		}
		if !res.IsError || !strings.Contains(res.Text(), "invalid requestState: tampered") {
			t.Fatalf("tampered retry: %+v", res)
		}
	})
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	for i := range keys {
		for j := i + 1; j < len(keys); j++ {
			if keys[j] < keys[i] {
				keys[i], keys[j] = keys[j], keys[i]
			}
		}
	}
	return keys
}

// TestLegacyServerEverything runs npm's @modelcontextprotocol/server-everything
// (session-based, 2025-11-25): loom falls back from server/discover to
// initialize, calls a tool in the session, answers an in-session
// elicitation through the hook, and ends the session with a DELETE on
// Close. It needs npm ci --prefix tools/mcp/testdata/node.
func TestLegacyServerEverything(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a Node MCP server")
	}
	addr, output := mcptest.StartNodeEverything(t)

	// Record what goes on the wire, below the credentials transport.
	rt := &recordingTransport{next: newBaseTransport(mustPolicy(t, "127.0.0.1"))}
	c := loopbackClient(t, &ClientOptions{Transport: rt})
	var elicited sync.WaitGroup
	elicited.Add(1)
	srv := newServer(t, c, ServerConfig{
		Label:         "everything",
		URL:           "http://" + addr + "/mcp",
		Authorization: "legacy-token",
		Capabilities:  Capabilities{Elicitation: true},
		ElicitationHandler: func(_ context.Context, req tools.InputRequest) (json.RawMessage, error) {
			defer elicited.Done()
			if req.Method != MethodElicit || !strings.Contains(string(req.Params), "requestedSchema") {
				t.Errorf("elicitation hook got %s %s", req.Method, req.Params)
			}
			return json.RawMessage(`{"action":"decline"}`), nil
		},
	})
	defs, err := srv.Tools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	hasEcho, hasElicit := false, false
	for _, d := range defs {
		hasEcho = hasEcho || d.Name == "echo"
		hasElicit = hasElicit || d.Name == "trigger-elicitation-request"
	}
	if !hasEcho {
		t.Fatalf("echo not listed: %v", defs)
	}

	sess, err := srv.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ss := sess.(*Session)
	if !ss.Legacy() || ss.ID() == "" {
		t.Fatalf("legacy session: legacy=%v id=%q", ss.Legacy(), ss.ID())
	}
	id := ss.ID()
	res, err := sess.Call(context.Background(), tools.Call{Name: "echo", Arguments: `{"message":"hi loom"}`})
	if err != nil || res.IsError || !strings.Contains(res.Text(), "hi loom") {
		t.Fatalf("echo: %+v, %v", res, err)
	}
	if hasElicit {
		res, err = sess.Call(context.Background(), tools.Call{Name: "trigger-elicitation-request", Arguments: `{}`})
		if err != nil {
			t.Fatalf("trigger-elicitation-request: %v", err)
		}
		elicited.Wait()
	} else {
		t.Log("server offers no trigger-elicitation-request: in-session elicitation not exercised")
	}
	if err := sess.Cleanup(context.Background()); err != nil {
		t.Fatal(err) // no cleanup_session: nothing sent
	}
	if err := sess.Close(); err != nil {
		t.Fatal(err)
	}

	// Two sessions were opened, each ended by one DELETE: the listing's
	// and the one that Close ended.
	var deletes, ours int
	for _, r := range rt.all() {
		if r.Header.Get("Authorization") != "Bearer legacy-token" {
			t.Errorf("%s %s without the credentials", r.Method, r.RPCMethod)
		}
		if r.Method == http.MethodDelete {
			deletes++
			if r.Header.Get("Mcp-Session-Id") == id {
				ours++
			}
			if r.Status/100 != 2 {
				t.Errorf("DELETE for session %q answered %d", r.Header.Get("Mcp-Session-Id"), r.Status)
			}
		}
	}
	if deletes != 2 || ours != 1 {
		t.Fatalf("%d DELETEs, %d for the called session; want 2 and 1", deletes, ours)
	}
	// The listing's session ended too, and the era is remembered: a second
	// Open skips server/discover.
	before := rt.count("server/discover")
	sess2, err := srv.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	_ = sess2.Close()
	if rt.count("server/discover") != before {
		t.Fatal("known legacy server probed again")
	}
	if out := output(); !strings.Contains(out, "Received session termination request for session "+id) {
		t.Errorf("server did not see the session end:\n%s", out)
	}
}

func mustPolicy(t *testing.T, allow string) *Policy {
	p, err := NewPolicy(&PolicyOptions{Allow: allow})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// recordingTransport records requests as sent (after the credentials are
// added) and their status.
type recordingTransport struct {
	next http.RoundTripper
	mu   sync.Mutex
	reqs []sent
}

type sent struct {
	Method, RPCMethod string
	Header            http.Header
	Status            int
}

func (rt *recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	s := sent{Method: req.Method, RPCMethod: req.Header.Get("Mcp-Method"), Header: req.Header.Clone()}
	if s.RPCMethod == "" && req.GetBody != nil {
		if body, err := req.GetBody(); err == nil {
			var m struct {
				Method string `json:"method"`
			}
			_ = json.NewDecoder(body).Decode(&m)
			s.RPCMethod = m.Method
		}
	}
	resp, err := rt.next.RoundTrip(req)
	if resp != nil {
		s.Status = resp.StatusCode
	}
	rt.mu.Lock()
	rt.reqs = append(rt.reqs, s)
	rt.mu.Unlock()
	return resp, err
}

func (rt *recordingTransport) all() []sent {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return append([]sent(nil), rt.reqs...)
}

func (rt *recordingTransport) count(rpc string) int {
	n := 0
	for _, r := range rt.all() {
		if r.RPCMethod == rpc {
			n++
		}
	}
	return n
}
