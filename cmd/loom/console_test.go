package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loomgate/loom/model/mockllm"
)

// Issue 40: the operator console, in a real headless browser (Chromium,
// driven over the DevTools protocol by chromedp). loom runs with the
// scripted upstream and two MCP servers; one response calls a tool, then
// another that needs an input round (MRTR). The console lists it, opens its
// timeline, shows the calls in order with their durations, and refuses a
// request without the token. Screenshots of the list and of the timeline
// go to $LOOM_TEST_ARTIFACTS (default: a temporary directory).

const consoleToken = "console-test-token"

// chromium finds the browser: $LOOM_TEST_CHROMIUM, else chromium or
// chromium-browser on the PATH. The test fails, not skips, without one:
// scripts/test installs it.
func chromium(t *testing.T) string {
	if p := os.Getenv("LOOM_TEST_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("Chromium is missing: install it (Debian: apt-get install chromium; scripts/test does) or set LOOM_TEST_CHROMIUM to its path")
	return ""
}

// artifacts is where the test writes its screenshots.
func artifacts(t *testing.T) string {
	dir := os.Getenv("LOOM_TEST_ARTIFACTS")
	if dir == "" {
		return t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// searchMCPServer is a stateless MCP server whose tool "search" answers
// after a short while (so that its bar has a width to see).
func searchMCPServer(t *testing.T) string {
	s := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "w", Version: "1"}, nil)
	s.AddTool(&mcpsdk.Tool{Name: "search", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
			select {
			case <-time.After(30 * time.Millisecond):
			case <-ctx.Done():
			}
			return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: "Paris: 21 degrees, sunny"}}}, nil
		})
	srv := httptest.NewServer(mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return s },
		&mcpsdk.StreamableHTTPOptions{Stateless: true, JSONResponse: true}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// step is one row of the timeline's table as the browser shows it.
type step struct {
	Kind     string `json:"kind"`
	Label    string `json:"label"`
	Duration string `json:"duration"`
}

func TestConsoleInBrowser(t *testing.T) {
	browser := chromium(t)
	out := artifacts(t)

	askURL := samplingMCPServer(t, &mcpRecorder{})
	searchURL := searchMCPServer(t)
	mock := mockllm.New(nil)
	up := httptest.NewServer(mock)
	t.Cleanup(up.Close)
	t.Cleanup(mock.Close)
	cfg := testConfig(t, up.URL+"/v1")
	cfg.ConsoleAddr, cfg.ConsoleToken = "127.0.0.1:0", consoleToken
	cfg.ConsoleTraceURL = "http://jaeger.example:16686/trace/{trace_id}"
	m, _ := runMain(t, cfg, io.Discard)
	consoleURL := "http://" + m.ConsoleAddr()

	// One run: a turn calls w's search, the next t's ask (one input
	// round: a sampling request), the last answers.
	script := "#delay 20ms\n#call w__search {\"q\":\"weather in Paris\"}\n#then\n#delay 10ms\n#call t__ask {}\n#then\n#delay 15ms\n#say It is 21 degrees and sunny in Paris."
	body, _ := json.Marshal(map[string]any{"model": "m", "input": script, "tools": []map[string]any{
		{"type": "mcp", "server_label": "w", "server_url": searchURL, "require_approval": "never"},
		{"type": "mcp", "server_label": "t", "server_url": askURL, "require_approval": "never"},
	}})
	resp, err := http.Post("http://"+m.Addr()+"/v1/responses", "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var created struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	if err := json.Unmarshal(raw, &created); err != nil || resp.StatusCode != http.StatusOK || created.Status != "completed" {
		t.Fatalf("the run: %d %s", resp.StatusCode, raw)
	}
	rec, err := m.store.GetResponse(context.Background(), created.ID)
	if err != nil {
		t.Fatal(err)
	}

	// Without the token: refused, whatever the page.
	for _, path := range []string{"/responses", "/responses/" + created.ID, "/live", "/engines"} {
		resp, err := http.Get(consoleURL + path)
		if err != nil {
			t.Fatal(err)
		}
		page, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		// (The login form keeps the address asked for, the run's id.)
		if resp.StatusCode != http.StatusUnauthorized || strings.Contains(string(page), rec.TraceID) || strings.Contains(string(page), "search") {
			t.Errorf("%s without the token: %d, want 401 and nothing of the run", path, resp.StatusCode)
		}
	}

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(browser), chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.WindowSize(1280, 900), chromedp.UserDataDir(t.TempDir()))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	// Every step within a bound; the browser lives as long as bctx.
	ctx, cancel := context.WithTimeout(bctx, 45*time.Second)
	defer cancel()
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}

	// The browser without the token gets the login form, not the list.
	must("the console without the token", chromedp.Do(ctx,
		chromedp.Navigate(consoleURL+"/responses"), chromedp.WaitVisible(chromedp.CSS("#refused"))))
	refused, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("body")))
	must("the login page", err)
	if strings.Contains(refused, created.ID) {
		t.Errorf("the login page shows the run")
	}

	// The token once, in the address: the cookie, then the list.
	must("the list", chromedp.Do(ctx,
		chromedp.Navigate(consoleURL+"/responses?token="+consoleToken), chromedp.WaitVisible(chromedp.CSS("#responses"))))
	listed, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('#responses tbody a.id')].map(a => a.textContent)`))
	must("the list's runs", err)
	if !slices.Equal(listed, []string{created.ID}) {
		t.Errorf("the list shows %v, want [%s]", listed, created.ID)
	}
	location, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil || strings.Contains(location, "token=") {
		t.Errorf("the address still holds the token: %s (%v)", location, err)
	}
	list, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	must("the list's screenshot", err)
	writeArtifact(t, out, "console-list.png", list)

	// The run's timeline, opened from the list.
	must("the timeline", chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`#responses a[href="/responses/`+created.ID+`"]`)),
		chromedp.WaitVisible(chromedp.CSS("#steps"))))
	steps, err := chromedp.Run(ctx, chromedp.Evaluate[[]step](`[...document.querySelectorAll('#steps tbody tr')].map(tr => ({
		kind: tr.classList[1],
		label: tr.querySelector('.step-label').textContent,
		duration: tr.querySelector('.step-duration').textContent}))`))
	must("the timeline's steps", err)
	var kinds, calls []string
	for _, s := range steps {
		kinds = append(kinds, s.Kind)
		if s.Kind == "tool_call" {
			calls = append(calls, s.Label)
		}
		if !regexp.MustCompile(`^[0-9.]+ (µs|ms|s)$`).MatchString(s.Duration) {
			t.Errorf("step %q shows duration %q", s.Label, s.Duration)
		}
	}
	wantKinds := []string{"turn", "tool_call", "turn", "input_round", "tool_call", "turn", "cleanup"}
	if !slices.Equal(kinds, wantKinds) || !slices.Equal(calls, []string{"call w__search", "call t__ask"}) {
		t.Errorf("steps %+v, want kinds %v with the calls search then ask", steps, wantKinds)
	}
	trace, err := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.CSS("#trace"), "href"))
	must("the trace link", err)
	if trace.Value != "http://jaeger.example:16686/trace/"+rec.TraceID || rec.TraceID == "" {
		t.Errorf("trace link %q, want the viewer's page of trace %q", trace.Value, rec.TraceID)
	}

	// The search call's input and output, behind a click.
	must("the call's details", chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`#steps tr.tool_call summary`)),
		chromedp.WaitVisible(chromedp.CSS(`#steps tr.tool_call details[open] pre`))))
	shown, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#steps tr.tool_call details[open] pre`)))
	must("the call's details", err)
	if !strings.Contains(shown, "weather in Paris") || !strings.Contains(shown, "21 degrees, sunny") {
		t.Errorf("the search call's details show %q, want its arguments and output", shown)
	}
	timeline, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	must("the timeline's screenshot", err)
	writeArtifact(t, out, "console-timeline.png", timeline)

	// The engines page: the scripted engine, in service, with the run's
	// requests (its three turns and the sampling request).
	must("the engines", chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`nav a[href="/engines"]`)), chromedp.WaitVisible(chromedp.CSS("#engines"))))
	engines, err := chromedp.Run(ctx, chromedp.Evaluate[[][]string](`[...document.querySelectorAll('#engines tbody tr')].map(tr => [...tr.cells].map(c => c.textContent))`))
	must("the engines' rows", err)
	upHost := strings.TrimPrefix(up.URL, "http://")
	if len(engines) != 1 || len(engines[0]) < 4 || engines[0][0] != upHost || engines[0][1] != "in service" || engines[0][3] != "4" {
		t.Errorf("engines %q, want %s in service with 4 requests", engines, upHost)
	}
	// The live page: nothing in flight any more.
	must("the live page", chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`nav a[href="/live"]`)), chromedp.WaitVisible(chromedp.CSS("#inflight"))))
	inflight, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#inflight tbody")))
	must("the live page's rows", err)
	if !strings.Contains(inflight, "Nothing in flight") {
		t.Errorf("in flight after the run: %q", inflight)
	}
}

func writeArtifact(t *testing.T, dir, name string, b []byte) {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s (%d bytes)", path, len(b))
}
