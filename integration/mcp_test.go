package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loomgate/loom/engine"
	"github.com/loomgate/loom/internal/testutil"
	"github.com/loomgate/loom/model/chat"
	"github.com/loomgate/loom/model/mockllm"
	"github.com/loomgate/loom/server"
	"github.com/loomgate/loom/store"
	"github.com/loomgate/loom/store/sqlite"
	"github.com/loomgate/loom/tools/mcp"
	"github.com/loomgate/loom/tools/mcp/mcptest"
)

// The tests of this file run loom's MCP tools end to end: a Responses
// request over HTTP, loom's engine and MCP client, and real MCP servers on
// loopback (in-process go-sdk servers, and npm's server-everything). Their
// helpers are prefixed mcpt, to stay clear of other files' names.

// mcptServer is an in-process MCP server (go-sdk, stateless 2026-07-28)
// that counts the JSON-RPC methods it receives, by reading each request
// body's "method", and records every tool call with its arguments and the
// headers of every request.
type mcptServer struct {
	URL string

	mu   sync.Mutex
	fail string // a JSON-RPC method answered with an HTTP 500
	// challenge is a JSON-RPC method answered with a 401 and a Bearer
	// challenge, as a server behind OAuth answers a request without a
	// token.
	challenge string
	methods   map[string]int // JSON-RPC method; "HTTP <verb>" for a request with none
	calls     []mcptCall
	headers   []http.Header
}

type mcptCall struct{ Name, Args string }

// mcptStart serves tools that answer "NAME ran with ARGS". opts may set the
// server's cache hints (SetCacheable).
func mcptStart(t *testing.T, opts *mcpsdk.ServerOptions, toolNames ...string) *mcptServer {
	t.Helper()
	ms := &mcptServer{methods: map[string]int{}}
	s := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "mcpt", Version: "1"}, opts)
	for _, name := range toolNames {
		s.AddTool(&mcpsdk.Tool{Name: name, Description: "tool " + name, InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(_ context.Context, req *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
				args := string(req.Params.Arguments)
				ms.mu.Lock()
				ms.calls = append(ms.calls, mcptCall{name, args})
				ms.mu.Unlock()
				return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: name + " ran with " + args}}}, nil
			})
	}
	h := mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return s },
		// The SSRF tests reach it by made-up names (loop.test): the SDK's
		// DNS-rebinding guard would refuse their Host header.
		&mcpsdk.StreamableHTTPOptions{Stateless: true, JSONResponse: true, DisableLocalhostProtection: true})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var msg struct {
			Method string `json:"method"`
		}
		method := "HTTP " + r.Method
		if json.Unmarshal(body, &msg) == nil && msg.Method != "" {
			method = msg.Method
		}
		ms.mu.Lock()
		ms.methods[method]++
		ms.headers = append(ms.headers, r.Header.Clone())
		fail := ms.fail != "" && ms.fail == method
		challenge := ms.challenge != "" && ms.challenge == method
		ms.mu.Unlock()
		if challenge {
			w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="http://`+r.Host+`/.well-known/oauth-protected-resource"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		if fail {
			http.Error(w, "failing "+method, http.StatusInternalServerError)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	ms.URL = ts.URL
	return ms
}

func (ms *mcptServer) count(method string) int {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	return ms.methods[method]
}

func (ms *mcptServer) methodSet() map[string]int {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	out := make(map[string]int, len(ms.methods))
	for k, v := range ms.methods {
		out[k] = v
	}
	return out
}

func (ms *mcptServer) toolCalls() []mcptCall {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	return slices.Clone(ms.calls)
}

func (ms *mcptServer) requestHeaders() []http.Header {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	return slices.Clone(ms.headers)
}

// callsOf returns the arguments of the calls to one tool.
func (ms *mcptServer) callsOf(name string) []string {
	var out []string
	for _, c := range ms.toolCalls() {
		if c.Name == name {
			out = append(out, c.Args)
		}
	}
	return out
}

// mcptCacheable makes a go-sdk server send ttlMs and cacheScope with its
// lists.
func mcptCacheable(ttl time.Duration, scope string) *mcpsdk.ServerOptions {
	return &mcpsdk.ServerOptions{SetCacheable: func(_ context.Context, _ mcpsdk.Request, c *mcpsdk.Cacheable) {
		c.TTLMs = int(ttl / time.Millisecond)
		c.CacheScope = scope
	}}
}

// mcptHarness is loom with the MCP provider, over a client whose policy
// admits loopback (as --mcp-allow=127.0.0.1,::1 does).
func mcptHarness(t *testing.T, opts *mcp.ClientOptions) *harness {
	t.Helper()
	var o mcp.ClientOptions
	if opts != nil {
		o = *opts
	}
	if o.Policy == nil {
		p, err := mcp.NewPolicy(&mcp.PolicyOptions{Allow: "127.0.0.1,::1"})
		if err != nil {
			t.Fatal(err)
		}
		o.Policy = p
	}
	provider := &mcp.Provider{Client: mcp.NewClient(&o)}
	return newHarness(t, &harnessOptions{ToolProviders: []engine.ToolProvider{provider}})
}

// mcptTool is a request's mcp tool.
func mcptTool(label, url string, extra map[string]any) map[string]any {
	tool := map[string]any{"type": "mcp", "server_label": label, "server_url": url}
	for k, v := range extra {
		tool[k] = v
	}
	return tool
}

// mcptPost sends a create request as JSON and returns the status and body.
func mcptPost(t *testing.T, h *harness, body map[string]any) (int, []byte) {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	return doRaw(t, http.MethodPost, h.BaseURL+"/responses", string(b))
}

// mcptCreate sends a create request that must succeed and decodes it.
func mcptCreate(t *testing.T, h *harness, body map[string]any) mcptResponse {
	t.Helper()
	status, raw := mcptPost(t, h, body)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, raw)
	}
	var r mcptResponse
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	return r
}

type mcptResponse struct {
	ID     string     `json:"id"`
	Status string     `json:"status"`
	Output []mcptItem `json:"output"`
}

type mcptItem struct {
	Type              string          `json:"type"`
	ID                string          `json:"id"`
	Status            string          `json:"status"`
	ServerLabel       string          `json:"server_label"`
	Name              string          `json:"name"`
	Arguments         string          `json:"arguments"`
	Output            *string         `json:"output"`
	Error             json.RawMessage `json:"error"`
	ApprovalRequestID *string         `json:"approval_request_id"`
	Tools             []struct {
		Name string `json:"name"`
	} `json:"tools"`
	Content []struct {
		Text string `json:"text"`
	} `json:"content"`
}

func (r mcptResponse) types() []string {
	var out []string
	for _, it := range r.Output {
		out = append(out, it.Type)
	}
	return out
}

// only returns the one output item of a type.
func (r mcptResponse) only(t *testing.T, typ string) mcptItem {
	t.Helper()
	var found []mcptItem
	for _, it := range r.Output {
		if it.Type == typ {
			found = append(found, it)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d %s items in output %v, want 1", len(found), typ, r.types())
	}
	return found[0]
}

// mcptAPIError checks a 400 and the param it names.
func mcptAPIError(t *testing.T, status int, body []byte, param string) string {
	t.Helper()
	if status != http.StatusBadRequest {
		t.Fatalf("status %d, want 400; body %s", status, body)
	}
	var env struct {
		Error struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Param   *string `json:"param"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	if env.Error.Type != "invalid_request_error" || env.Error.Param == nil || *env.Error.Param != param {
		t.Fatalf("error %s, want an invalid_request_error with param %q", body, param)
	}
	return env.Error.Message
}

// mcptTimeline returns the steps of the timeline stored with response id.
func mcptTimeline(t *testing.T, h *harness, id string) []engine.TimelineStep {
	t.Helper()
	rec, err := h.Store.GetResponse(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	tl, err := engine.DecodeTimeline(rec.Timeline)
	if err != nil || tl == nil {
		t.Fatalf("timeline of %s: %s (%v)", id, rec.Timeline, err)
	}
	return tl.Steps
}

// mcptToolMessages returns the contents of the tool messages of the last
// request the scripted upstream received: what the model read.
func mcptToolMessages(t *testing.T, h *harness) []string {
	t.Helper()
	var out []string
	for _, m := range lastChatRequest(t, h).Messages {
		if m.Role != "tool" {
			continue
		}
		var s string
		if err := json.Unmarshal(m.Content, &s); err != nil {
			s = string(m.Content)
		}
		out = append(out, s)
	}
	return out
}

// TestMCPApprovals: require_approval through loom, with the follow-up
// answers of the Responses client.
func TestMCPApprovals(t *testing.T) {
	const script = "#call s__a {\"x\":1}\n#then\n#say done"

	t.Run("always then approve", func(t *testing.T) {
		ms := mcptStart(t, nil, "a", "b")
		h := mcptHarness(t, nil)
		tools := []any{mcptTool("s", ms.URL, map[string]any{"require_approval": "always"})}
		r1 := mcptCreate(t, h, map[string]any{"model": "mock-model", "input": script, "tools": tools})
		if r1.Status != "completed" {
			t.Fatalf("status %q", r1.Status)
		}
		if !slices.Equal(r1.types(), []string{"mcp_list_tools", "mcp_approval_request"}) {
			t.Fatalf("output %v", r1.types())
		}
		req := r1.only(t, "mcp_approval_request")
		if req.ServerLabel != "s" || req.Name != "a" || req.Arguments != `{"x":1}` || req.ID == "" {
			t.Fatalf("approval request %+v", req)
		}
		if n := ms.count("tools/call"); n != 0 {
			t.Fatalf("the server saw %d tools/call before the approval", n)
		}

		r2 := mcptCreate(t, h, map[string]any{
			"model": "mock-model", "previous_response_id": r1.ID, "tools": tools,
			"input": []any{map[string]any{"type": "mcp_approval_response", "approval_request_id": req.ID, "approve": true}},
		})
		call := r2.only(t, "mcp_call")
		if call.ApprovalRequestID == nil || *call.ApprovalRequestID != req.ID {
			t.Errorf("mcp_call approval_request_id %v, want %q", call.ApprovalRequestID, req.ID)
		}
		if call.Name != "a" || call.ServerLabel != "s" || call.Arguments != `{"x":1}` ||
			call.Output == nil || *call.Output != `a ran with {"x":1}` {
			t.Errorf("mcp_call %+v", call)
		}
		if got := ms.callsOf("a"); !slices.Equal(got, []string{`{"x":1}`}) {
			t.Errorf("server ran a with %q", got)
		}
		if msgs := mcptToolMessages(t, h); !slices.Contains(msgs, `a ran with {"x":1}`) {
			t.Errorf("the model read tool messages %q, not the result", msgs)
		}
		if slices.Contains(r2.types(), "mcp_list_tools") {
			t.Errorf("mcp_list_tools again in the follow-up: %v", r2.types())
		}
		// The console's timeline: the approved call ran before the
		// model's turn, and shows the mcp_call item.
		if steps := mcptTimeline(t, h, r2.ID); len(steps) < 2 || steps[0].Kind != engine.StepApproval || steps[0].Name != "s__a" ||
			steps[0].ItemID != call.ID || steps[0].Error != "" || steps[1].Kind != engine.StepTurn {
			t.Errorf("timeline %+v, want the approved call, then the turn", steps)
		}

		// The same approval again, on the chain that already answered it.
		status, body := mcptPost(t, h, map[string]any{
			"model": "mock-model", "previous_response_id": r2.ID, "tools": tools,
			"input": []any{map[string]any{"type": "mcp_approval_response", "approval_request_id": req.ID, "approve": true}},
		})
		mcptAPIError(t, status, body, "input[0].approval_request_id")
		// ... and on the chain of another conversation.
		other := mcptCreate(t, h, map[string]any{"model": "mock-model", "input": "#say hi", "tools": tools})
		status, body = mcptPost(t, h, map[string]any{
			"model": "mock-model", "previous_response_id": other.ID, "tools": tools,
			"input": []any{map[string]any{"type": "mcp_approval_response", "approval_request_id": req.ID, "approve": true}},
		})
		mcptAPIError(t, status, body, "input[0].approval_request_id")
		if n := ms.count("tools/call"); n != 1 {
			t.Errorf("the server saw %d tools/call, want the approved one only", n)
		}
	})

	t.Run("never runs at once", func(t *testing.T) {
		ms := mcptStart(t, nil, "a")
		h := mcptHarness(t, nil)
		r := mcptCreate(t, h, map[string]any{"model": "mock-model", "input": script,
			"tools": []any{mcptTool("s", ms.URL, map[string]any{"require_approval": "never"})}})
		if !slices.Equal(r.types(), []string{"mcp_list_tools", "mcp_call", "message"}) {
			t.Fatalf("output %v", r.types())
		}
		if call := r.only(t, "mcp_call"); call.Output == nil || *call.Output != `a ran with {"x":1}` || call.ApprovalRequestID != nil {
			t.Errorf("mcp_call %+v", call)
		}
		if got := ms.callsOf("a"); len(got) != 1 {
			t.Errorf("server ran a %d times", len(got))
		}
	})

	t.Run("per tool", func(t *testing.T) {
		ms := mcptStart(t, nil, "a", "b")
		h := mcptHarness(t, nil)
		r := mcptCreate(t, h, map[string]any{"model": "mock-model",
			"input": "#call s__a {\"n\":1}\n#call s__b {\"n\":2}\n#then\n#say done",
			"tools": []any{mcptTool("s", ms.URL, map[string]any{"require_approval": map[string]any{"never": map[string]any{"tool_names": []string{"a"}}}})}})
		if r.Status != "completed" {
			t.Fatalf("status %q", r.Status)
		}
		if call := r.only(t, "mcp_call"); call.Name != "a" || call.Output == nil || *call.Output != `a ran with {"n":1}` {
			t.Errorf("mcp_call %+v", call)
		}
		if req := r.only(t, "mcp_approval_request"); req.Name != "b" || req.Arguments != `{"n":2}` {
			t.Errorf("approval request %+v", req)
		}
		if got := ms.toolCalls(); len(got) != 1 || got[0].Name != "a" {
			t.Errorf("server calls %+v, want a only", got)
		}
	})

	t.Run("denial reaches the model", func(t *testing.T) {
		ms := mcptStart(t, nil, "a")
		h := mcptHarness(t, nil)
		tools := []any{mcptTool("s", ms.URL, nil)} // no require_approval: always
		r1 := mcptCreate(t, h, map[string]any{"model": "mock-model", "input": script, "tools": tools})
		req := r1.only(t, "mcp_approval_request")
		r2 := mcptCreate(t, h, map[string]any{
			"model": "mock-model", "previous_response_id": r1.ID, "tools": tools,
			"input": []any{map[string]any{"type": "mcp_approval_response", "approval_request_id": req.ID, "approve": false, "reason": "not today"}},
		})
		if slices.Contains(r2.types(), "mcp_call") {
			t.Errorf("a denied call is reported as run: %v", r2.types())
		}
		msgs := mcptToolMessages(t, h)
		if len(msgs) != 1 || !strings.Contains(msgs[0], "denied") || !strings.Contains(msgs[0], "not today") {
			t.Errorf("the model read %q, want the denial", msgs)
		}
		if n := ms.count("tools/call"); n != 0 {
			t.Errorf("the server saw %d tools/call for a denied call", n)
		}
		if steps := mcptTimeline(t, h, r2.ID); len(steps) < 1 || steps[0].Kind != engine.StepApproval || !strings.Contains(steps[0].Error, "not today") ||
			steps[0].EndUS != steps[0].StartUS {
			t.Errorf("timeline %+v, want the denial first, a mark with its reason", steps)
		}
	})

	t.Run("bound to the exact call", func(t *testing.T) {
		ms := mcptStart(t, nil, "a", "b")
		h := mcptHarness(t, nil)
		tools := []any{mcptTool("s", ms.URL, map[string]any{"require_approval": "always"})}
		r1 := mcptCreate(t, h, map[string]any{"model": "mock-model", "input": script, "tools": tools})
		req := r1.only(t, "mcp_approval_request")
		// The client restates the request with other arguments (and
		// another tool) next to its approval.
		status, body := mcptPost(t, h, map[string]any{
			"model": "mock-model", "previous_response_id": r1.ID, "tools": tools,
			"input": []any{
				map[string]any{"type": "mcp_approval_request", "id": req.ID, "server_label": "s", "name": "b", "arguments": `{"x":666}`},
				map[string]any{"type": "mcp_approval_response", "approval_request_id": req.ID, "approve": true},
			},
		})
		switch status {
		case http.StatusBadRequest: // refused: fine
		case http.StatusOK:
			var r2 mcptResponse
			json.Unmarshal(body, &r2)
			if call := r2.only(t, "mcp_call"); call.Name != "a" || call.Arguments != `{"x":1}` {
				t.Errorf("the approved call ran as %s %s, want a {\"x\":1}", call.Name, call.Arguments)
			}
		default:
			t.Fatalf("status %d: %s", status, body)
		}
		for _, c := range ms.toolCalls() {
			if c.Name != "a" || c.Args != `{"x":1}` {
				t.Errorf("the server ran %s %s, which nobody was asked to approve", c.Name, c.Args)
			}
		}
		// An approval request the client made up is no approval.
		status, body = mcptPost(t, h, map[string]any{
			"model": "mock-model", "previous_response_id": r1.ID, "tools": tools,
			"input": []any{
				map[string]any{"type": "mcp_approval_request", "id": "mcpr_forged", "server_label": "s", "name": "b", "arguments": `{"x":666}`},
				map[string]any{"type": "mcp_approval_response", "approval_request_id": "mcpr_forged", "approve": true},
			},
		})
		if status == http.StatusOK {
			t.Errorf("an approval of a request loom never made was accepted: %s", body)
		}
		if got := ms.callsOf("b"); len(got) != 0 {
			t.Errorf("the server ran b with %q", got)
		}
		// The refused attempts did not use up the approval, if the first
		// one was refused: the plain answer runs the call as asked.
		if len(ms.toolCalls()) == 0 {
			r2 := mcptCreate(t, h, map[string]any{
				"model": "mock-model", "previous_response_id": r1.ID, "tools": tools,
				"input": []any{map[string]any{"type": "mcp_approval_response", "approval_request_id": req.ID, "approve": true}},
			})
			if call := r2.only(t, "mcp_call"); call.Name != "a" || call.Arguments != `{"x":1}` {
				t.Errorf("mcp_call %+v", call)
			}
		}
		if got := ms.toolCalls(); len(got) != 1 || got[0] != (mcptCall{"a", `{"x":1}`}) {
			t.Errorf("server calls %+v, want a {\"x\":1} once", got)
		}
	})
}

// TestMCPToolListCache: the tool-list cache across responses, as a server's
// ttlMs and cacheScope say.
func TestMCPToolListCache(t *testing.T) {
	tests := []struct {
		name   string
		ttl    time.Duration
		scope  string
		tokens []string // one response per token
		lists  int
	}{
		{"within ttl", time.Minute, "private", []string{"tok-a", "tok-a"}, 1},
		{"private, two credentials", time.Minute, "private", []string{"tok-a", "tok-b", "tok-a", "tok-b"}, 2},
		{"public, two credentials", time.Minute, "public", []string{"tok-a", "tok-b"}, 1},
		{"ttl 0", 0, "public", []string{"tok-a", "tok-a"}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ms := mcptStart(t, mcptCacheable(tt.ttl, tt.scope), "a", "b")
			h := mcptHarness(t, nil)
			for _, tok := range tt.tokens {
				r := mcptCreate(t, h, map[string]any{"model": "mock-model", "input": "#say hi",
					"tools": []any{mcptTool("s", ms.URL, map[string]any{"authorization": tok})}})
				// Every response is a new conversation: each lists the
				// server's tools as an item, cached or not.
				list := r.only(t, "mcp_list_tools")
				if len(list.Tools) != 2 || list.Error != nil && string(list.Error) != "null" {
					t.Fatalf("mcp_list_tools %+v", list)
				}
			}
			if n := ms.count("tools/list"); n != tt.lists {
				t.Fatalf("tools/list reached the server %d times, want %d", n, tt.lists)
			}
		})
	}
}

// mcptResolver is a fake DNS: no lookup leaves the process. A host with
// several answers gives them in turn (the last one repeats), to play DNS
// rebinding.
type mcptResolver struct {
	mu      sync.Mutex
	hosts   map[string][][]netip.Addr
	lookups []string
}

func (r *mcptResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lookups = append(r.lookups, host)
	answers := r.hosts[host]
	if len(answers) == 0 {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	a := answers[0]
	if len(answers) > 1 {
		r.hosts[host] = answers[1:]
	}
	return a, nil
}

// mcptDialer dials loopback only, and fails the test if asked for any
// other address: no packet of these tests leaves the machine.
type mcptDialer struct {
	t     *testing.T
	mu    sync.Mutex
	dials []string
}

func (d *mcptDialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	d.mu.Lock()
	d.dials = append(d.dials, address)
	d.mu.Unlock()
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		d.t.Errorf("dial to %q", address)
		return nil, err
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || !ip.IsLoopback() {
		d.t.Errorf("loom tried to dial %s (%s): only loopback may be dialed", address, network)
		return nil, errors.New("mcptDialer: refused")
	}
	return (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, network, address)
}

func (d *mcptDialer) attempts() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.dials)
}

func mcptAddrs(s ...string) [][]netip.Addr {
	var out []netip.Addr
	for _, a := range s {
		out = append(out, netip.MustParseAddr(a))
	}
	return [][]netip.Addr{out}
}

// TestMCPServerURLPolicy: request-supplied server_urls that resolve to
// loopback, private, link-local or metadata addresses are refused with a
// 400 unless allowlisted, with the resolver and dialer injected: nothing
// is ever dialed but loopback.
func TestMCPServerURLPolicy(t *testing.T) {
	ms := mcptStart(t, nil, "a")
	port := ms.URL[strings.LastIndex(ms.URL, ":")+1:]
	newResolver := func() *mcptResolver {
		return &mcptResolver{hosts: map[string][][]netip.Addr{
			"loop.test":      mcptAddrs("127.0.0.1"),
			"loop6.test":     mcptAddrs("::1"),
			"ten.test":       mcptAddrs("10.1.2.3"),
			"172.test":       mcptAddrs("172.16.5.4"),
			"172b.test":      mcptAddrs("172.31.255.1"),
			"192.test":       mcptAddrs("192.168.1.10"),
			"linklocal.test": mcptAddrs("169.254.10.10"),
			"metadata.test":  mcptAddrs("169.254.169.254"),
			"v6ula.test":     mcptAddrs("fd12:3456::1"),
			"v6ll.test":      mcptAddrs("fe80::1"),
			"mapped.test":    mcptAddrs("::ffff:10.0.0.1"),
			"mixed.test":     mcptAddrs("8.8.8.8", "10.0.0.1"), // any refused address refuses the host
			// Public when loom checks the URL, private when it dials.
			"rebind.test": {{netip.MustParseAddr("93.184.216.34")}, {netip.MustParseAddr("10.0.0.7")}},
		}}
	}

	refused := []struct {
		url    string
		reason string
	}{
		{"http://loop.test:" + port + "/", "loopback"},
		{"http://loop6.test:" + port + "/", "loopback"},
		{"http://127.0.0.1:" + port + "/", "loopback"},
		{"http://[::1]:" + port + "/", "loopback"},
		{"http://localhost:" + port + "/", "loopback"},
		{"http://ten.test/mcp", "private"},
		{"http://10.0.0.1/mcp", "private"},
		{"http://172.test/mcp", "private"},
		{"http://172b.test/mcp", "private"},
		{"http://192.test/mcp", "private"},
		{"http://192.168.0.1/mcp", "private"},
		{"http://v6ula.test/mcp", "private"},
		{"http://linklocal.test/mcp", "link-local"},
		{"http://v6ll.test/mcp", "link-local"},
		{"http://metadata.test/latest/meta-data/", "metadata"},
		{"http://169.254.169.254/latest/meta-data/", "metadata"},
		{"http://mapped.test/mcp", "private"},
		{"http://mixed.test/mcp", "private"},
		{"http://nxdomain.test/mcp", "resolve"},
		{"ftp://8.8.8.8/mcp", "scheme"},
	}
	for _, tt := range refused {
		t.Run("refused "+tt.url, func(t *testing.T) {
			dialer := &mcptDialer{t: t}
			policy, err := mcp.NewPolicy(&mcp.PolicyOptions{Resolver: newResolver(), Dialer: dialer})
			if err != nil {
				t.Fatal(err)
			}
			h := mcptHarness(t, &mcp.ClientOptions{Policy: policy})
			saves := h.Store.saves.Load()
			status, body := mcptPost(t, h, map[string]any{"model": "mock-model", "input": "#call s__a {}",
				"tools": []any{mcptTool("s", tt.url, map[string]any{"require_approval": "never"})}})
			msg := mcptAPIError(t, status, body, "tools[0].server_url")
			if !strings.Contains(msg, tt.reason) {
				t.Errorf("message %q does not say %q", msg, tt.reason)
			}
			if d := dialer.attempts(); len(d) != 0 {
				t.Errorf("dials attempted: %v", d)
			}
			if n := len(h.Mock.Requests()); n != 0 || h.Store.saves.Load() != saves {
				t.Errorf("a refused request reached the upstream (%d) or the store", n)
			}
		})
	}

	// The same URL in the second tool names that tool.
	t.Run("second tool", func(t *testing.T) {
		dialer := &mcptDialer{t: t}
		policy, _ := mcp.NewPolicy(&mcp.PolicyOptions{Resolver: newResolver(), Dialer: dialer})
		h := mcptHarness(t, &mcp.ClientOptions{Policy: policy})
		status, body := mcptPost(t, h, map[string]any{"model": "mock-model", "input": "#say hi",
			"tools": []any{
				map[string]any{"type": "function", "name": "f", "parameters": map[string]any{"type": "object"}},
				mcptTool("s", "http://metadata.test/", nil)}})
		mcptAPIError(t, status, body, "tools[1].server_url")
		if d := dialer.attempts(); len(d) != 0 {
			t.Errorf("dials attempted: %v", d)
		}
	})

	// DNS rebinding: the name passes the check and then resolves to a
	// private address when loom connects; the dial-time check refuses it
	// and the server is reported as failed to list.
	t.Run("rebinding", func(t *testing.T) {
		dialer := &mcptDialer{t: t}
		resolver := newResolver()
		policy, _ := mcp.NewPolicy(&mcp.PolicyOptions{Resolver: resolver, Dialer: dialer})
		h := mcptHarness(t, &mcp.ClientOptions{Policy: policy, Retry: mcp.RetryOptions{Max: -1}})
		r := mcptCreate(t, h, map[string]any{"model": "mock-model", "input": "#say hi",
			"tools": []any{mcptTool("s", "http://rebind.test/mcp", nil)}})
		if list := r.only(t, "mcp_list_tools"); list.Error == nil || string(list.Error) == "null" || len(list.Tools) != 0 {
			t.Errorf("listing a rebound host: %+v", list)
		}
		if d := dialer.attempts(); len(d) != 0 {
			t.Errorf("dials attempted: %v", d)
		}
		resolver.mu.Lock()
		n := len(resolver.lookups)
		resolver.mu.Unlock()
		if n < 2 {
			t.Errorf("rebind.test looked up %d times: the dial-time check did not run", n)
		}
	})

	// Allowlisted, by address or by name: the server is reached, on
	// loopback, and only there.
	for _, allow := range []struct{ allow, url string }{
		{"127.0.0.1", "http://127.0.0.1:" + port + "/"},
		{"127.0.0.0/8", "http://loop.test:" + port + "/"},
		{"loop.test", "http://loop.test:" + port + "/"},
	} {
		t.Run("allowed "+allow.allow+" "+allow.url, func(t *testing.T) {
			dialer := &mcptDialer{t: t}
			resolver := newResolver()
			policy, err := mcp.NewPolicy(&mcp.PolicyOptions{Allow: allow.allow, Resolver: resolver, Dialer: dialer})
			if err != nil {
				t.Fatal(err)
			}
			h := mcptHarness(t, &mcp.ClientOptions{Policy: policy})
			before := len(ms.callsOf("a"))
			r := mcptCreate(t, h, map[string]any{"model": "mock-model", "input": "#call s__a {}\n#then\n#say done",
				"tools": []any{mcptTool("s", allow.url, map[string]any{"require_approval": "never"})}})
			if call := r.only(t, "mcp_call"); call.Output == nil || *call.Output != "a ran with {}" {
				t.Errorf("mcp_call %+v", call)
			}
			if len(ms.callsOf("a")) != before+1 {
				t.Error("the allowlisted server was not called")
			}
			d := dialer.attempts()
			if len(d) == 0 {
				t.Error("nothing dialed through the policy's dialer")
			}
			for _, a := range d {
				if a != "127.0.0.1:"+port {
					t.Errorf("dialed %s", a)
				}
			}
		})
	}
}

// TestMCPProtocolHeaders: a request's headers cannot set the headers the
// MCP protocol owns; the headers it may set go to its own server only.
func TestMCPProtocolHeaders(t *testing.T) {
	ms := mcptStart(t, nil, "a")
	other := mcptStart(t, nil, "b")
	h := mcptHarness(t, nil)
	for _, name := range []string{"Mcp-Session-Id", "mcp-session-id", "MCP-Protocol-Version", "Mcp-Method", "mcp-name", "Mcp-Param-Region", "Content-Type", "Accept", "Host"} {
		t.Run(name, func(t *testing.T) {
			status, body := mcptPost(t, h, map[string]any{"model": "mock-model", "input": "#call s__a {}",
				"tools": []any{mcptTool("s", ms.URL, map[string]any{"require_approval": "never", "headers": map[string]string{name: "forged-value"}})}})
			msg := mcptAPIError(t, status, body, "tools[0].headers")
			if strings.Contains(msg, "forged-value") {
				t.Errorf("the error echoes the header's value: %q", msg)
			}
		})
	}
	t.Run("second server", func(t *testing.T) {
		status, body := mcptPost(t, h, map[string]any{"model": "mock-model", "input": "#say hi",
			"tools": []any{mcptTool("o", other.URL, nil),
				mcptTool("s", ms.URL, map[string]any{"headers": map[string]string{"X-Ok": "1", "Mcp-Session-Id": "forged"}})}})
		mcptAPIError(t, status, body, "tools[1].headers")
	})
	if n := len(ms.requestHeaders()) + len(other.requestHeaders()); n != 0 {
		t.Fatalf("refused requests reached the MCP servers (%d requests)", n)
	}

	// Allowed headers and the authorization reach their server, on every
	// request, and not the other server of the same request.
	r := mcptCreate(t, h, map[string]any{"model": "mock-model", "input": "#call s__a {}\n#call o__b {}\n#then\n#say done",
		"tools": []any{
			mcptTool("s", ms.URL, map[string]any{"require_approval": "never", "authorization": "tok-s", "headers": map[string]string{"x-tenant": "t1"}}),
			mcptTool("o", other.URL, map[string]any{"require_approval": "never"}),
		}})
	if n := strings.Count(strings.Join(r.types(), ","), "mcp_call"); n != 2 {
		t.Fatalf("output %v", r.types())
	}
	for _, hd := range ms.requestHeaders() {
		if hd.Get("Authorization") != "Bearer tok-s" || hd.Get("X-Tenant") != "t1" {
			t.Errorf("a request to s without its credentials: %v", hd)
		}
		if v := hd.Get("Mcp-Session-Id"); v != "" {
			t.Errorf("Mcp-Session-Id %q sent to a stateless server", v)
		}
	}
	for _, hd := range other.requestHeaders() {
		if hd.Get("Authorization") != "" || hd.Get("X-Tenant") != "" {
			t.Errorf("s's credentials reached o: %v", hd)
		}
	}
}

// mcptRecordingStore keeps a JSON copy of everything saved.
type mcptRecordingStore struct {
	engine.Store
	saved testutil.LockedBuffer
}

func (s *mcptRecordingStore) SaveResponse(ctx context.Context, rec *store.Record) error {
	b, _ := json.Marshal(rec)
	s.saved.Write(b)
	return s.Store.SaveResponse(ctx, rec)
}

func (s *mcptRecordingStore) String() string { return s.saved.String() }

// TestMCPCredentialsNeverLogged runs loom's server, engine, store and MCP
// client with every log at debug level into one buffer, sends requests
// carrying an authorization and a secret header through success and
// failure paths, and checks that neither secret appears in the logs, in
// any body loom answered, in what was stored, or in what the upstream
// model received.
func TestMCPCredentialsNeverLogged(t *testing.T) {
	const token, key = "sekret-token-123", "sekret-key-456"
	logs := &testutil.LockedBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))

	ms := mcptStart(t, nil, "echo")
	// A server whose calls fail, and one that fails every request, for
	// the error paths.
	flaky := mcptStart(t, nil, "echo")
	flaky.fail = "tools/call"
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "broken", http.StatusInternalServerError)
	}))
	t.Cleanup(broken.Close)

	mock := mockllm.New(nil)
	mockSrv := httptest.NewServer(mock)
	t.Cleanup(mockSrv.Close)
	t.Cleanup(mock.Close)
	db, err := sqlite.Open(context.Background(), ":memory:", &sqlite.Options{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	recording := &mcptRecordingStore{Store: db}
	policy, err := mcp.NewPolicy(&mcp.PolicyOptions{Allow: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	provider := &mcp.Provider{Client: mcp.NewClient(&mcp.ClientOptions{Policy: policy, Logger: logger, Retry: mcp.RetryOptions{Max: 1, WaitMin: time.Millisecond, WaitMax: 5 * time.Millisecond}})}
	eng := engine.New(chat.New(mockSrv.URL+"/v1", "test-key", &chat.Options{}), recording,
		&engine.Options{Logger: logger, ToolProviders: []engine.ToolProvider{provider}})
	loom := httptest.NewServer(server.New(eng, &server.Options{Logger: logger}))
	t.Cleanup(loom.Close)

	var bodies []string
	do := func(method, path string, body any) (int, []byte) {
		t.Helper()
		var s string
		if body != nil {
			b, _ := json.Marshal(body)
			s = string(b)
		}
		status, raw := doRaw(t, method, loom.URL+path, s)
		bodies = append(bodies, string(raw))
		return status, raw
	}
	creds := map[string]any{"require_approval": "never", "authorization": token, "headers": map[string]string{"X-Api-Key": key}}
	tools := []any{mcptTool("sec", ms.URL, creds), mcptTool("down", broken.URL, creds), mcptTool("flaky", flaky.URL, creds)}

	// A call that runs, a call that fails, a server that cannot be
	// listed, non-streaming.
	status, raw := do(http.MethodPost, "/v1/responses", map[string]any{"model": "mock-model",
		"input": "#call sec__echo {\"v\":1}\n#call flaky__echo {}\n#then\n#say done", "tools": tools})
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, raw)
	}
	var r mcptResponse
	json.Unmarshal(raw, &r)
	var ran, failed int
	for _, it := range r.Output {
		if it.Type != "mcp_call" {
			continue
		}
		switch {
		case it.ServerLabel == "sec" && it.Output != nil && strings.Contains(*it.Output, "echo ran with"):
			ran++
		case it.ServerLabel == "flaky" && it.Status == "failed":
			failed++
		default:
			t.Errorf("mcp_call %+v", it)
		}
	}
	if ran != 1 || failed != 1 {
		t.Errorf("output %v: %d calls ran and %d failed, want 1 and 1", r.types(), ran, failed)
	}
	// Streaming, with an approval request.
	approve := map[string]any{"require_approval": "always", "authorization": token, "headers": map[string]string{"X-Api-Key": key}}
	status, raw = do(http.MethodPost, "/v1/responses", map[string]any{"model": "mock-model", "stream": true,
		"input": "#call sec__echo {\"v\":2}", "tools": []any{mcptTool("sec", ms.URL, approve)}})
	if status != http.StatusOK || !strings.Contains(string(raw), "mcp_approval_request") {
		t.Fatalf("stream: %d %s", status, raw)
	}
	// Reading back what was stored.
	do(http.MethodGet, "/v1/responses/"+r.ID, nil)
	do(http.MethodGet, "/v1/responses/"+r.ID+"/input_items", nil)
	do(http.MethodGet, "/v1/responses/"+r.ID+"?stream=true", nil)
	// Refusals: a protocol header, and a URL carrying credentials.
	status, _ = do(http.MethodPost, "/v1/responses", map[string]any{"model": "mock-model", "input": "hi",
		"tools": []any{mcptTool("sec", ms.URL, map[string]any{"authorization": token, "headers": map[string]string{"Mcp-Session-Id": key}})}})
	if status != http.StatusBadRequest {
		t.Errorf("protocol header: status %d", status)
	}
	status, _ = do(http.MethodPost, "/v1/responses", map[string]any{"model": "mock-model", "input": "hi",
		"tools": []any{mcptTool("sec", "http://user:"+token+"@127.0.0.1:1/mcp", nil)}})
	if status != http.StatusBadRequest {
		t.Errorf("credentials in the URL: status %d", status)
	}
	// An invalid header value with the secret in it.
	status, _ = do(http.MethodPost, "/v1/responses", map[string]any{"model": "mock-model", "input": "hi",
		"tools": []any{mcptTool("sec", ms.URL, map[string]any{"headers": map[string]string{"X-Api-Key": key + "\r\nX-Evil: 1"}})}})
	if status != http.StatusBadRequest {
		t.Errorf("header with CRLF: status %d", status)
	}

	// The credentials did reach the server they were for.
	seen := false
	for _, hd := range ms.requestHeaders() {
		seen = seen || hd.Get("Authorization") == "Bearer "+token && hd.Get("X-Api-Key") == key
	}
	if !seen {
		t.Fatal("the MCP server never received the credentials: the test proves nothing")
	}
	if logs.String() == "" {
		t.Fatal("nothing was logged: the test proves nothing")
	}
	var upstream strings.Builder
	for _, req := range mock.Requests() {
		upstream.Write(req.Body)
		for k, v := range req.Header {
			upstream.WriteString(k + ": " + strings.Join(v, ",") + "\n")
		}
	}
	places := map[string]string{
		"the logs":            logs.String(),
		"the response bodies": strings.Join(bodies, "\n"),
		"the stored records":  recording.String(),
		"the upstream":        upstream.String(),
	}
	for where, text := range places {
		for _, secret := range []string{token, key} {
			if i := strings.Index(text, secret); i >= 0 {
				lo, hi := max(0, i-200), min(len(text), i+100)
				t.Errorf("%s in %s: ...%s...", secret, where, text[lo:hi])
			}
		}
	}
}

// TestMCPLazyCleanupThreeServers: three MCP servers offered, one tool of
// one server called (twice): only that server sees tools/call, and exactly
// one cleanup_session; the other two see at most the listing.
func TestMCPLazyCleanupThreeServers(t *testing.T) {
	servers := map[string]*mcptServer{
		"alpha": mcptStart(t, nil, "work", "cleanup_session"),
		"beta":  mcptStart(t, nil, "work", "cleanup_session"),
		"gamma": mcptStart(t, nil, "work", "cleanup_session"),
	}
	h := mcptHarness(t, nil)
	var tools []any
	for _, label := range []string{"alpha", "beta", "gamma"} {
		tools = append(tools, mcptTool(label, servers[label].URL, map[string]any{"require_approval": "never"}))
	}
	r := mcptCreate(t, h, map[string]any{"model": "mock-model",
		"input": "#call beta__work {\"n\":1}\n#then\n#call beta__work {\"n\":2}\n#then\n#say done", "tools": tools})
	if !slices.Equal(r.types(), []string{"mcp_list_tools", "mcp_list_tools", "mcp_list_tools", "mcp_call", "mcp_call", "message"}) {
		t.Fatalf("output %v", r.types())
	}
	for _, it := range r.Output {
		if it.Type != "mcp_list_tools" {
			continue
		}
		var names []string
		for _, tl := range it.Tools {
			names = append(names, tl.Name)
		}
		if !slices.Equal(names, []string{"work"}) {
			t.Errorf("%s offers %v: cleanup_session must not be offered", it.ServerLabel, names)
		}
	}
	// Cleanup runs as the response ends, before loom answers; a short
	// bounded wait covers a slow Close all the same.
	beta := servers["beta"]
	testutil.Eventually(2*time.Second, func() bool { return len(beta.callsOf("cleanup_session")) > 0 })
	if got := beta.callsOf("work"); !slices.Equal(got, []string{`{"n":1}`, `{"n":2}`}) {
		t.Errorf("beta ran work with %q", got)
	}
	if n := len(beta.callsOf("cleanup_session")); n != 1 {
		t.Errorf("beta's cleanup_session ran %d times, want 1", n)
	}
	if n := beta.count("tools/call"); n != 3 {
		t.Errorf("beta saw %d tools/call, want 2 calls and 1 cleanup", n)
	}
	for _, label := range []string{"alpha", "gamma"} {
		for method, n := range servers[label].methodSet() {
			switch method {
			case "tools/list", "server/discover", "initialize", "notifications/initialized":
				if method == "tools/list" && n > 1 {
					t.Errorf("%s listed %d times", label, n)
				}
			default:
				t.Errorf("%s, never called, saw %s (%d times)", label, method, n)
			}
		}
		if n := len(servers[label].toolCalls()); n != 0 {
			t.Errorf("%s ran %d tool calls", label, n)
		}
	}
}

// mcptProxyLog records what passes a reverse proxy in front of a
// session-based MCP server.
type mcptProxyLog struct {
	mu       sync.Mutex
	created  []string       // session ids the server handed out
	deletes  map[string]int // DELETEs per session id, with their status
	deleteOK map[string]bool
	calls    map[string][]string // tools/call params.name per session id
}

// TestMCPLegacyServerEverythingThroughLoom calls npm's session-based
// @modelcontextprotocol/server-everything through loom: its echo tool runs
// as an mcp_call, and every session loom opened on it (the listing's and
// the call's) is ended with a DELETE by the time the response is done.
// A reverse proxy in front of the server observes the traffic.
func TestMCPLegacyServerEverythingThroughLoom(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a Node MCP server")
	}
	addr, output := mcptest.StartNodeEverything(t)

	plog := &mcptProxyLog{deletes: map[string]int{}, deleteOK: map[string]bool{}, calls: map[string][]string{}}
	target, _ := url.Parse("http://" + addr)
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.FlushInterval = -1 // SSE answers pass at once
	proxy.ModifyResponse = func(resp *http.Response) error {
		sid := resp.Request.Header.Get("Mcp-Session-Id")
		plog.mu.Lock()
		defer plog.mu.Unlock()
		if id := resp.Header.Get("Mcp-Session-Id"); id != "" && sid == "" {
			plog.created = append(plog.created, id)
		}
		if resp.Request.Method == http.MethodDelete {
			plog.deletes[sid]++
			plog.deleteOK[sid] = resp.StatusCode/100 == 2
		}
		return nil
	}
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var msg struct {
				Method string `json:"method"`
				Params struct {
					Name string `json:"name"`
				} `json:"params"`
			}
			if json.Unmarshal(body, &msg) == nil && msg.Method == "tools/call" {
				plog.mu.Lock()
				sid := r.Header.Get("Mcp-Session-Id")
				plog.calls[sid] = append(plog.calls[sid], msg.Params.Name)
				plog.mu.Unlock()
			}
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)

	h := mcptHarness(t, nil)
	r := mcptCreate(t, h, map[string]any{"model": "mock-model",
		"input": "#call everything__echo {\"message\":\"hi loom\"}\n#then\n#say done",
		"tools": []any{mcptTool("everything", front.URL+"/mcp", map[string]any{"require_approval": "never", "allowed_tools": []string{"echo"}})}})
	if !slices.Equal(r.types(), []string{"mcp_list_tools", "mcp_call", "message"}) {
		t.Fatalf("output %v: %+v", r.types(), r.Output)
	}
	call := r.only(t, "mcp_call")
	if call.Status != "completed" || call.Output == nil || !strings.Contains(*call.Output, "hi loom") {
		t.Fatalf("mcp_call %+v", call)
	}
	if msgs := mcptToolMessages(t, h); len(msgs) != 1 || !strings.Contains(msgs[0], "hi loom") {
		t.Errorf("the model read %q", msgs)
	}

	// Find the session that ran echo, and wait (bounded) for every
	// session to be ended.
	var callSession string
	ended := func() bool {
		plog.mu.Lock()
		defer plog.mu.Unlock()
		callSession = ""
		for sid, names := range plog.calls {
			if slices.Contains(names, "echo") {
				callSession = sid
			}
		}
		for _, id := range plog.created {
			if plog.deletes[id] == 0 {
				return false
			}
		}
		return len(plog.created) > 0
	}
	testutil.Eventually(2*time.Second, ended)
	plog.mu.Lock()
	defer plog.mu.Unlock()
	if callSession == "" {
		t.Fatalf("no tools/call echo went through the proxy (calls %v)", plog.calls)
	}
	if !slices.Contains(plog.created, callSession) {
		t.Errorf("echo ran in session %q, which the server never handed out (%v)", callSession, plog.created)
	}
	if n := plog.deletes[callSession]; n != 1 || !plog.deleteOK[callSession] {
		t.Errorf("the called session %q got %d DELETEs (ok %v), want 1", callSession, n, plog.deleteOK[callSession])
	}
	// The listing's session ends too: no session is left on the server.
	if len(plog.created) != 2 {
		t.Errorf("%d sessions opened, want 2 (the listing's and the call's): %v", len(plog.created), plog.created)
	}
	for _, id := range plog.created {
		if plog.deletes[id] != 1 {
			t.Errorf("session %q got %d DELETEs, want 1", id, plog.deletes[id])
		}
	}
	if out := output(); !strings.Contains(out, "session termination request for session "+callSession) {
		t.Errorf("server-everything did not log the end of session %s:\n%s", callSession, out)
	}
}

// TestMCPListToolsOncePerResentHistory: a client that keeps the history
// itself (Codex, the Agents SDK) resends the mcp_list_tools item with the
// rest of the conversation instead of using previous_response_id; the
// server is not listed to it again (issue 13, point 6).
func TestMCPListToolsOncePerResentHistory(t *testing.T) {
	ms := mcptStart(t, nil, "a")
	h := mcptHarness(t, nil)
	tools := []any{mcptTool("s", ms.URL, map[string]any{"require_approval": "never"})}
	status, raw := mcptPost(t, h, map[string]any{"model": "mock-model", "input": "#call s__a {\"x\":1}\n#then\n#say done", "tools": tools, "store": false})
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, raw)
	}
	var first struct {
		Output []json.RawMessage `json:"output"`
	}
	if err := json.Unmarshal(raw, &first); err != nil {
		t.Fatal(err)
	}
	var r1 mcptResponse
	json.Unmarshal(raw, &r1)
	if !slices.Equal(r1.types(), []string{"mcp_list_tools", "mcp_call", "message"}) {
		t.Fatalf("first output %v", r1.types())
	}
	input := []any{map[string]any{"role": "user", "content": "#call s__a {\"x\":1}\n#then\n#say done"}}
	for _, it := range first.Output {
		input = append(input, it)
	}
	input = append(input, map[string]any{"role": "user", "content": "#say again"})
	r2 := mcptCreate(t, h, map[string]any{"model": "mock-model", "input": input, "tools": tools, "store": false})
	if !slices.Equal(r2.types(), []string{"message"}) {
		t.Errorf("output of the resent history %v, want the message alone (no second mcp_list_tools)", r2.types())
	}
	// Without the item in the history, the server is listed.
	r3 := mcptCreate(t, h, map[string]any{"model": "mock-model", "input": "#say again", "tools": tools, "store": false})
	if !slices.Equal(r3.types(), []string{"mcp_list_tools", "message"}) {
		t.Errorf("output of a new conversation %v, want mcp_list_tools first", r3.types())
	}
}
