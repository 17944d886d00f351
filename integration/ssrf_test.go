package integration

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/loomgate/loom/engine"
	"github.com/loomgate/loom/tools/mcp"
	"github.com/loomgate/loom/tools/websearch"
)

// ssrfForms are IPv6 addresses that carry an IPv4 address, and a word the
// refusal must contain. The policy's own test (tools/mcp's
// TestPolicyEmbeddedIPv4) lists every form with every kind of IPv4
// address; here each form is tried once on every fetch path.
var ssrfForms = []struct{ name, addr, reason string }{
	{"compat", "::127.0.0.1", "loopback"},                        // IPv4-compatible, the address of the finding
	{"mapped", "::ffff:127.0.0.1", "loopback"},                   // IPv4-mapped
	{"translated", "::ffff:0:a00:1", "private"},                  // IPv4-translated 10.0.0.1
	{"nat64", "64:ff9b::a9fe:a9fe", "metadata"},                  // NAT64 of 169.254.169.254
	{"sixtofour", "2002:a9fe:a9fe::1", "metadata"},               // 6to4 of 169.254.169.254
	{"localnat64", "64:ff9b:1::7f00:1", "nat64"},                 // local-use NAT64, refused whatever it carries
	{"teredo", "2001:0:4136:e378:8000:63bf:80ff:fffe", "teredo"}, // Teredo, client 127.0.0.1
}

// ssrfNet is the network of these tests, all of it on loopback: a
// resolver for the .test names, a redirector (allowlisted by name, the
// one place loom may connect to) that sends a fetch to any URL, and a
// dialer that dials the redirector as asked and hands any other dial to a
// victim listener, which counts the connections it accepts. Every form
// must be refused before it is dialled: the victim must see nothing.
type ssrfNet struct {
	redirector *httptest.Server
	port       string
	victim     net.Listener
	accepted   atomic.Int32
	resolver   *mcptResolver
	mu         sync.Mutex
	misdials   []string
}

func newSSRFNet(t *testing.T) *ssrfNet {
	t.Helper()
	n := &ssrfNet{}
	n.redirector = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Query().Get("u"), http.StatusTemporaryRedirect)
	}))
	t.Cleanup(n.redirector.Close)
	n.port = n.redirector.URL[strings.LastIndex(n.redirector.URL, ":")+1:]
	victim, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n.victim = victim
	t.Cleanup(func() { victim.Close() })
	go func() {
		for {
			c, err := victim.Accept()
			if err != nil {
				return
			}
			n.accepted.Add(1)
			c.Close()
		}
	}()
	hosts := map[string][][]netip.Addr{"redirector.test": mcptAddrs("127.0.0.1")}
	for _, f := range ssrfForms {
		a := netip.MustParseAddr(f.addr)
		hosts[f.name+".test"] = [][]netip.Addr{{a}}
		// Public when loom checks the URL, the form when it dials.
		hosts["rebind-"+f.name+".test"] = [][]netip.Addr{{netip.MustParseAddr("93.184.216.34")}, {a}}
	}
	n.resolver = &mcptResolver{hosts: hosts}
	return n
}

// DialContext is the policy's dialer.
func (n *ssrfNet) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	d := &net.Dialer{Timeout: 5 * time.Second}
	if address == "127.0.0.1:"+n.port {
		return d.DialContext(ctx, network, address)
	}
	n.mu.Lock()
	n.misdials = append(n.misdials, address)
	n.mu.Unlock()
	return d.DialContext(ctx, "tcp", n.victim.Addr().String())
}

func (n *ssrfNet) policy(t *testing.T) *mcp.Policy {
	t.Helper()
	p, err := mcp.NewPolicy(&mcp.PolicyOptions{Allow: "redirector.test", Resolver: n.resolver, Dialer: n})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// ssrfURLs are the ways a form reaches a fetch: as the URL's host, as a
// DNS answer, as a DNS answer that changes between the check and the
// dial, and through a redirect from an allowed server.
func (n *ssrfNet) urls(name, addr string) map[string]string {
	literal := "http://" + net.JoinHostPort(addr, n.port) + "/x"
	return map[string]string{
		"literal":  literal,
		"dns":      "http://" + name + ".test:" + n.port + "/x",
		"rebind":   "http://rebind-" + name + ".test:" + n.port + "/x",
		"redirect": "http://redirector.test:" + n.port + "/to?u=" + url.QueryEscape(literal),
	}
}

// check fails the test if anything but the redirector was dialled.
func (n *ssrfNet) check(t *testing.T) {
	t.Helper()
	n.mu.Lock()
	misdials := slices.Clone(n.misdials)
	n.mu.Unlock()
	if len(misdials) != 0 || n.accepted.Load() != 0 {
		t.Errorf("loom dialled %v (the victim accepted %d connections): the policy let them through", misdials, n.accepted.Load())
	}
}

// TestEmbeddedIPv4RefusedOnEveryFetchPath: an IPv6 address that carries
// an IPv4 address the policy refuses is refused on every path loom
// fetches a URL on (an MCP server_url, an input_image URL, a page the
// web search tool opens), whether it is the URL's host, a DNS answer
// (also one that changes before the dial) or a redirect's target, and it
// is never dialled.
func TestEmbeddedIPv4RefusedOnEveryFetchPath(t *testing.T) {
	t.Run("mcp server_url", func(t *testing.T) {
		n := newSSRFNet(t)
		h := mcptHarness(t, &mcp.ClientOptions{Policy: n.policy(t), Retry: mcp.RetryOptions{Max: -1}})
		for _, f := range ssrfForms {
			for way, u := range n.urls(f.name, f.addr) {
				body := map[string]any{"model": "mock-model", "input": "#say hi", "tools": []any{mcptTool("s", u, nil)}}
				if way == "rebind" || way == "redirect" {
					// The URL passes the check; connecting fails, and
					// the server is reported as failed to list.
					r := mcptCreate(t, h, body)
					if list := r.only(t, "mcp_list_tools"); list.Error == nil || string(list.Error) == "null" || len(list.Tools) != 0 {
						t.Errorf("%s %s: listing %+v, want an error", f.name, way, list)
					}
					continue
				}
				status, b := mcptPost(t, h, body)
				if msg := mcptAPIError(t, status, b, "tools[0].server_url"); !strings.Contains(strings.ToLower(msg), f.reason) {
					t.Errorf("%s %s: message %q does not say %q", f.name, way, msg, f.reason)
				}
			}
		}
		n.check(t)
	})

	t.Run("input_image", func(t *testing.T) {
		n := newSSRFNet(t)
		h := newHarness(t, &harnessOptions{ImageURLPolicy: n.policy(t)})
		for _, f := range ssrfForms {
			for way, u := range n.urls(f.name, f.addr) {
				status, b := postPath(t, h, "/responses", map[string]any{"model": "mock-model", "input": imageInput(u, "#say no")})
				var e struct {
					Error struct{ Param, Message string }
				}
				json.Unmarshal(b, &e)
				if status != http.StatusBadRequest || e.Error.Param != "input[0].content[1].image_url" || !strings.Contains(strings.ToLower(e.Error.Message), f.reason) {
					t.Errorf("%s %s: %d %s, want a 400 naming the image_url and saying %q", f.name, way, status, b, f.reason)
				}
			}
		}
		if n := len(h.Mock.Requests()); n != 0 {
			t.Errorf("%d refused requests reached the upstream", n)
		}
		n.check(t)
	})

	t.Run("web search page", func(t *testing.T) {
		n := newSSRFNet(t)
		fetcher, err := websearch.NewFetcher(n.policy(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		// browser.open of a URL, on the harmony upstream.
		h := upstreams[1].harness(t, &harnessOptions{ToolProviders: []engine.ToolProvider{
			websearch.New(&websearch.Options{Fetcher: fetcher, Browser: true})}})
		for _, f := range ssrfForms {
			for way, u := range n.urls(f.name, f.addr) {
				script := `#builtin browser.open {"id": "` + u + `"}` + "\n#then\n#say done"
				resp, _ := streamResponse(t, h, responses.ResponseNewParams{
					Model: openai.ChatModel("mock-model"), Input: textInput(script), Tools: []responses.ToolUnionParam{webSearchTool},
				})
				calls := webSearchCalls(resp)
				if resp.Status != responses.ResponseStatusCompleted || len(calls) != 1 || calls[0].Status != "failed" {
					t.Errorf("%s %s: response %s, want one failed web_search_call", f.name, way, resp.RawJSON())
					continue
				}
				if prompt := lastPromptText(t, h); !strings.Contains(strings.ToLower(prompt), f.reason) {
					t.Errorf("%s %s: the model was not told why the page is refused: %s", f.name, way, prompt)
				}
			}
		}
		n.check(t)
	})
}
