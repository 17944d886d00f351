package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/loomgate/loom/harmony"
	"github.com/loomgate/loom/model/mockllm"
	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/tools/websearch"
)

// The Codex CLI (npm @openai/codex, testdata/codex) against loom, as a new
// user runs it: a config.toml that only sets a provider for loom with
// wire_api "responses", and `codex exec` on a task that makes the model
// call exec_command and then answer (issue 13, done-when 1). Codex sends
// its stock tools: functions, the multi_agent_v1 namespace, web_search.

// codexDir holds the package.json and lockfile of the Codex CLI.
var codexDir = filepath.Join("testdata", "codex")

// codexTimeout bounds one codex exec run: its startup and two turns.
const codexTimeout = 120 * time.Second

// codexMarker is what the scripted model's command prints, so that the
// test sees the command ran and its output reached the model.
const codexMarker = "loom-codex-marker-7"

// codexScript makes the model run one command, then answer.
const (
	codexScript = "Print the marker.\n#reason The user wants the marker printed; exec_command runs it.\n" +
		"#call exec_command {\"cmd\":\"echo " + codexMarker + "\"}\n#then\n#say " + codexAnswer
	codexAnswer = "The command printed the marker."
)

// codexConfig is the whole config.toml: a provider for loom, nothing else;
// with websockets, the provider says it supports WebSocket mode.
func codexConfig(baseURL string, websockets bool) string {
	conf := fmt.Sprintf(`model = %q
model_provider = "loom"

[model_providers.loom]
name = "loom"
base_url = %q
wire_api = "responses"
`, mockllm.DefaultModel, baseURL)
	if websockets {
		conf += "supports_websockets = true\n"
	}
	return conf
}

// closedPort returns a loopback address nothing listens on: Codex's
// attempts to reach outside hosts go there and fail at once.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// codexCLIRequest is one request Codex made to loom.
type codexCLIRequest struct {
	Method, Path string
	Header       http.Header
	Body         []byte
}

// codexRecorder is a loopback hop in front of loom that keeps what Codex
// sends, so that the test can say what Codex's defaults are. A WebSocket
// upgrade is relayed message by message: the upgrade is kept as a GET,
// each message Codex sends as a "WS" request with the message as its
// body, and each event loom sends back in events.
type codexRecorder struct {
	URL    string
	mu     sync.Mutex
	reqs   []codexCLIRequest
	events [][]byte
}

func newCodexRecorder(t *testing.T, target string) *codexRecorder {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rec := &codexRecorder{}
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: u.Scheme, Host: u.Host})
	proxy.FlushInterval = -1 // pass SSE events on as they come
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
			rec.relaySocket(t, w, r, u)
			return
		}
		body, _ := io.ReadAll(io.LimitReader(r.Body, 16<<20))
		r.Body = io.NopCloser(bytes.NewReader(body))
		rec.mu.Lock()
		rec.reqs = append(rec.reqs, codexCLIRequest{r.Method, r.URL.Path, r.Header.Clone(), body})
		rec.mu.Unlock()
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	rec.URL = srv.URL + u.Path
	return rec
}

// relaySocket accepts Codex's WebSocket upgrade, opens one to loom with
// the same headers, and passes the messages both ways, keeping them.
func (rec *codexRecorder) relaySocket(t *testing.T, w http.ResponseWriter, r *http.Request, target *url.URL) {
	header := http.Header{}
	for k, v := range r.Header {
		switch http.CanonicalHeaderKey(k) {
		case "Upgrade", "Connection", "Sec-Websocket-Key", "Sec-Websocket-Version", "Sec-Websocket-Extensions", "Host":
		default:
			header[k] = v
		}
	}
	rec.mu.Lock()
	rec.reqs = append(rec.reqs, codexCLIRequest{r.Method, r.URL.Path, r.Header.Clone(), nil})
	rec.mu.Unlock()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	up, resp, err := websocket.Dial(ctx, "ws://"+target.Host+r.URL.Path, &websocket.DialOptions{HTTPHeader: header})
	if err != nil {
		// loom refused the upgrade: Codex gets loom's answer.
		if resp != nil {
			w.WriteHeader(resp.StatusCode)
			return
		}
		t.Errorf("dialling loom's WebSocket: %v", err)
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	up.SetReadLimit(64 << 20)
	down, err := websocket.Accept(w, r, nil)
	if err != nil {
		up.CloseNow()
		return
	}
	down.SetReadLimit(64 << 20)
	relay := func(from, to *websocket.Conn, fromCodex bool) {
		defer cancel()
		for {
			typ, msg, err := from.Read(ctx)
			if err != nil {
				status := websocket.CloseStatus(err)
				if status == -1 {
					status = websocket.StatusGoingAway
				}
				to.Close(status, "")
				return
			}
			rec.mu.Lock()
			if fromCodex {
				rec.reqs = append(rec.reqs, codexCLIRequest{"WS", r.URL.Path, nil, msg})
			} else {
				rec.events = append(rec.events, msg)
			}
			rec.mu.Unlock()
			if err := to.Write(ctx, typ, msg); err != nil {
				return
			}
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		relay(up, down, false)
	}()
	relay(down, up, true)
	<-done
}

// socketMessages returns the messages Codex sent over WebSocket.
func (rec *codexRecorder) socketMessages() [][]byte {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var out [][]byte
	for _, r := range rec.reqs {
		if r.Method == "WS" {
			out = append(out, r.Body)
		}
	}
	return out
}

// responses returns the bodies of Codex's POST /v1/responses requests.
func (rec *codexRecorder) responses(t *testing.T) []codexBody {
	t.Helper()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var out []codexBody
	for _, r := range rec.reqs {
		if r.Method != http.MethodPost || !strings.HasSuffix(r.Path, "/responses") {
			continue
		}
		var b codexBody
		if err := json.Unmarshal(r.Body, &b); err != nil {
			t.Fatalf("codex sent a body that is not JSON: %v", err)
		}
		out = append(out, b)
	}
	return out
}

// codexBody is what the test reads of a Codex request body.
type codexBody struct {
	Tools []struct {
		Type  string `json:"type"`
		Name  string `json:"name"`
		Tools []struct {
			Type string `json:"type"`
			Name string `json:"name"`
		} `json:"tools"`
	} `json:"tools"`
	Input   []codexInput `json:"input"`
	Store   *bool        `json:"store"`
	Stream  bool         `json:"stream"`
	Include []string     `json:"include"`
}

// codexInput is what the test reads of an input item Codex sent.
type codexInput struct {
	Type      string          `json:"type"`
	Status    string          `json:"status"`
	Role      string          `json:"role"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Namespace string          `json:"namespace"`
	Output    json.RawMessage `json:"output"`
	Content   []struct {
		Text string `json:"text"`
	} `json:"content"`
}

// runCodex runs `codex exec` on prompt against baseURL and returns its
// last message and everything it printed.
func runCodex(t *testing.T, baseURL, prompt string) (last string, output string) {
	t.Helper()
	return runCodexConfig(t, codexConfig(baseURL, false), prompt)
}

// runCodexConfig runs `codex exec` on prompt with config as its
// config.toml.
func runCodexConfig(t *testing.T, config, prompt string) (last string, output string) {
	t.Helper()
	bin, err := filepath.Abs(filepath.Join(codexDir, "node_modules", ".bin", "codex"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		// Not a skip: CI installs it, and a skipped client test would
		// hide a broken install.
		t.Fatalf("the Codex CLI is not installed (%v): run `npm ci --prefix integration/testdata/codex`", err)
	}
	root := t.TempDir()
	home, tmp, work := filepath.Join(root, "codex-home"), filepath.Join(root, "tmp"), filepath.Join(root, "work")
	for _, d := range []string{home, tmp, work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	lastFile := filepath.Join(root, "last-message.txt")
	ctx, cancel := context.WithTimeout(t.Context(), codexTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "exec", "--skip-git-repo-check", "-C", work, "--output-last-message", lastFile, prompt)
	proxy := "http://" + closedPort(t)
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + root,
		"CODEX_HOME=" + home,
		"TMPDIR=" + tmp,
		"HTTPS_PROXY=" + proxy, "HTTP_PROXY=" + proxy, "https_proxy=" + proxy, "http_proxy=" + proxy,
		"NO_PROXY=127.0.0.1,localhost", "no_proxy=127.0.0.1,localhost",
		"NO_COLOR=1",
	}
	cmd.WaitDelay = 5 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("codex exec: %v\n%s", err, out.Bytes())
	}
	b, err := os.ReadFile(lastFile)
	if err != nil {
		t.Fatalf("codex wrote no last message (%v):\n%s", err, out.Bytes())
	}
	return strings.TrimSpace(string(b)), out.String()
}

func TestCodexCLIExec(t *testing.T) {
	for _, up := range upstreams {
		// The reasoning the model writes comes back sealed in Codex's
		// history; no search is made.
		t.Run(up.name+"/exec_command", func(t *testing.T) {
			h := webSearchHarness(t, up, nil, false)
			rec := newCodexRecorder(t, h.BaseURL)
			last, out := runCodex(t, rec.URL, codexScript)
			if last != codexAnswer {
				t.Errorf("codex's last message %q, want the model's answer:\n%s", last, out)
			}
			checkCodexExchange(t, h, rec)
			requireCaptured(t, h, 0, 10)
		})
		// A call to a function of Codex's multi_agent_v1 namespace
		// reaches Codex with its namespace, and Codex's router runs it
		// (a bad agent id: an error the model reads) and goes on.
		t.Run(up.name+"/namespaced call", func(t *testing.T) {
			h := webSearchHarness(t, up, nil, false)
			rec := newCodexRecorder(t, h.BaseURL)
			script := "Close it.\n#call multi_agent_v1__close_agent {\"target\":\"nope\"}\n#then\n#say closed"
			if up.name == "completions" {
				script = "Close it.\n#callns multi_agent_v1.close_agent {\"target\":\"nope\"}\n#then\n#say closed"
			}
			last, out := runCodex(t, rec.URL, script)
			if last != "closed" {
				t.Errorf("codex's last message %q, want the model's answer:\n%s", last, out)
			}
			bodies := rec.responses(t)
			if len(bodies) != 2 {
				t.Fatalf("codex sent %d requests, want 2:\n%s", len(bodies), out)
			}
			var call, output *codexInput
			for i, it := range bodies[1].Input {
				switch it.Type {
				case "function_call":
					call = &bodies[1].Input[i]
				case "function_call_output":
					output = &bodies[1].Input[i]
				}
			}
			if call == nil || call.Namespace != "multi_agent_v1" || call.Name != "close_agent" {
				t.Fatalf("codex resent the call as %+v, want close_agent in multi_agent_v1", call)
			}
			if output == nil || output.CallID != call.CallID || !strings.Contains(string(output.Output), "invalid agent id") {
				t.Errorf("codex answered %+v, want its router's error for the bad agent id", output)
			}
			requireCaptured(t, h, 0, 10)
		})
		// The model searches first (loom runs it: over the backend, or
		// failing visibly without one), then calls exec_command (Codex
		// runs it), then answers.
		for _, withBackend := range []bool{false, true} {
			name := up.name + "/search then exec_command, no web search backend"
			if withBackend {
				name = up.name + "/search then exec_command, SearXNG backend"
			}
			t.Run(name, func(t *testing.T) {
				var backend websearch.Backend
				sx := newSearXNG(t)
				if withBackend {
					var err error
					if backend, err = websearch.NewSearXNG(sx.URL+"/search", nil); err != nil {
						t.Fatal(err)
					}
				}
				h := webSearchHarness(t, up, backend, withBackend)
				rec := newCodexRecorder(t, h.BaseURL)
				script := "Print the marker.\n" + searchCall(up, "codex marker") + "\n#then\n" +
					"#call exec_command {\"cmd\":\"echo " + codexMarker + "\"}\n#then\n#say " + codexAnswer
				last, out := runCodex(t, rec.URL, script)
				if last != codexAnswer {
					t.Errorf("codex's last message %q, want the model's answer:\n%s", last, out)
				}
				queries, _ := sx.searches()
				if want := map[bool]int{false: 0, true: 1}[withBackend]; len(queries) != want || (want == 1 && queries[0] != "codex marker") {
					t.Errorf("the search backend got %q, want %d searches for \"codex marker\"", queries, want)
				}
				bodies := checkCodexExchange(t, h, rec)
				status := "completed"
				if !withBackend {
					status = "failed"
				}
				if !slices.ContainsFunc(bodies[1].Input, func(it codexInput) bool { return it.Type == "web_search_call" && it.Status == status }) {
					t.Errorf("codex's follow-up does not resend the %s web_search_call", status)
				}
				if prompt := lastPromptText(t, h); !strings.Contains(prompt, "web search search") {
					t.Errorf("the resent web_search_call is not in the model's history on the follow-up: %s", prompt)
				}
				requireCaptured(t, h, 0, 10)
			})
		}
	}
}

// checkCodexExchange checks what Codex sent (two requests) and what the
// model read: the stock tools (a namespace and web_search among them) on
// the first request, the command's output in the history Codex resent
// (with the sealed reasoning, when the model reasoned), and that output
// in front of the model.
func checkCodexExchange(t *testing.T, h *harness, rec *codexRecorder) []codexBody {
	t.Helper()
	bodies := rec.responses(t)
	if len(bodies) != 2 {
		t.Fatalf("codex sent %d requests to /v1/responses, want 2 (the call, then its output)", len(bodies))
	}
	var types []string
	for _, tl := range bodies[0].Tools {
		types = append(types, tl.Type)
	}
	if !slices.Contains(types, "namespace") || !slices.Contains(types, "web_search") || !slices.Contains(types, "function") {
		t.Errorf("codex sent tools of types %v; the test expects its stock functions, namespace and web_search", types)
	}
	second := bodies[1]
	if second.Store == nil || *second.Store || !second.Stream || !slices.Contains(second.Include, "reasoning.encrypted_content") {
		t.Errorf("codex's follow-up: store %v, stream %v, include %v", second.Store, second.Stream, second.Include)
	}
	sawReasoning, sawOutput := !strings.Contains(codexLastUser(second), "#reason"), false
	for _, it := range second.Input {
		switch it.Type {
		case "reasoning":
			sawReasoning = true
		case "function_call_output":
			sawOutput = strings.Contains(string(it.Output), codexMarker)
		}
	}
	if !sawReasoning || !sawOutput {
		t.Errorf("codex's follow-up resent reasoning %v and the command's output %v, want both", sawReasoning, sawOutput)
	}
	if prompt := harmonyPrompt(t, h); prompt != nil {
		read := slices.IndexFunc(prompt, func(m harmony.Message) bool {
			return m.Author.Role == harmony.RoleTool && m.Author.Name == "functions.exec_command" && strings.Contains(m.Text(), codexMarker)
		})
		declared := slices.IndexFunc(prompt, func(m harmony.Message) bool {
			return m.Author.Role == harmony.RoleDeveloper && strings.Contains(m.Text(), "namespace multi_agent_v1 {")
		})
		if read < 0 || declared < 0 {
			t.Errorf("the harmony prompt has the command's output at %d and the multi_agent_v1 namespace at %d: %+v", read, declared, prompt)
		}
		return bodies
	}
	req := lastChatRequest(t, h)
	read := slices.ContainsFunc(req.Messages, func(m mockllm.Message) bool {
		return m.Role == "tool" && strings.Contains(string(m.Content), codexMarker)
	})
	offered := slices.ContainsFunc(req.Tools, func(tl mockllm.Tool) bool { return tl.Function.Name == "multi_agent_v1__spawn_agent" })
	if !read || !offered {
		t.Errorf("the chat upstream read the command's output: %v; was offered multi_agent_v1__spawn_agent: %v", read, offered)
	}
	return bodies
}

// codexLastUser is the text of the last user message of a body: the task.
func codexLastUser(b codexBody) string {
	text := ""
	for _, it := range b.Input {
		if it.Type == "message" && it.Role == "user" {
			text = ""
			for _, c := range it.Content {
				text += c.Text
			}
		}
	}
	return text
}

// codexSocketMessage is what the test reads of a message Codex sent over
// WebSocket.
type codexSocketMessage struct {
	Type               string       `json:"type"`
	Generate           *bool        `json:"generate"`
	PreviousResponseID string       `json:"previous_response_id"`
	Store              *bool        `json:"store"`
	Input              []codexInput `json:"input"`
}

// TestCodexCLIExecWebSocket: Codex over WebSocket mode, as a provider with
// supports_websockets = true gets it (the config is stock otherwise), on
// both upstreams. Codex opens one connection, warms it up with a
// response.create that has generate false and the session's first input,
// then sends each turn as only the new input and the previous response's
// id. loom prepares the warm-up without calling the model (the model is
// called once per turn, twice in all), and the continuations hold the
// whole conversation: the model reads Codex's instructions from the
// warm-up and the command's output from the last turn.
func TestCodexCLIExecWebSocket(t *testing.T) {
	for _, up := range upstreams {
		t.Run(up.name, func(t *testing.T) {
			h := webSearchHarness(t, up, nil, false)
			rec := newCodexRecorder(t, h.BaseURL)
			last, out := runCodexConfig(t, codexConfig(rec.URL, true), codexScript)
			if last != codexAnswer {
				t.Errorf("codex's last message %q, want the model's answer:\n%s", last, out)
			}
			if bodies := rec.responses(t); len(bodies) != 0 {
				t.Errorf("codex sent %d requests over HTTP, want all over the WebSocket", len(bodies))
			}
			var msgs []codexSocketMessage
			for _, raw := range rec.socketMessages() {
				var m codexSocketMessage
				if err := json.Unmarshal(raw, &m); err != nil {
					t.Fatalf("codex sent a message that is not JSON: %v", err)
				}
				msgs = append(msgs, m)
			}
			// What Codex sends: the warm-up, the task, the command's
			// output; each a store false response.create, the last two
			// continuing the one before.
			if len(msgs) != 3 {
				t.Fatalf("codex sent %d messages, want 3 (warm-up, task, command output):\n%s", len(msgs), out)
			}
			if m := msgs[0]; m.Generate == nil || *m.Generate || m.PreviousResponseID != "" {
				t.Errorf("codex's first message: generate %v, previous_response_id %q; want a warm-up", m.Generate, m.PreviousResponseID)
			}
			for i, m := range msgs {
				if m.Type != "response.create" || m.Store == nil || *m.Store {
					t.Errorf("message %d: type %q, store %v", i, m.Type, m.Store)
				}
				if i > 0 && (m.PreviousResponseID == "" || m.Generate != nil) {
					t.Errorf("message %d: previous_response_id %q, generate %v; want a continuation", i, m.PreviousResponseID, m.Generate)
				}
			}
			if !strings.Contains(codexLastUser(codexBody{Input: msgs[1].Input}), "Print the marker.") {
				t.Errorf("the task is not in codex's second message: %+v", msgs[1].Input)
			}
			if !slices.ContainsFunc(msgs[2].Input, func(it codexInput) bool {
				return it.Type == "function_call_output" && strings.Contains(string(it.Output), codexMarker)
			}) {
				t.Errorf("codex's third message does not carry the command's output: %+v", msgs[2].Input)
			}
			// What loom answered: three responses, the warm-up's with no
			// output; every event valid.
			var completed []string
			rec.mu.Lock()
			events := slices.Clone(rec.events)
			rec.mu.Unlock()
			for _, raw := range events {
				validateEventIn(t, responses.DialectOpenAI, raw)
				var ev struct {
					Type     string `json:"type"`
					Response struct {
						Output []struct {
							Type string `json:"type"`
						} `json:"output"`
					} `json:"response"`
				}
				json.Unmarshal(raw, &ev)
				if ev.Type == "response.completed" {
					var types []string
					for _, it := range ev.Response.Output {
						types = append(types, it.Type)
					}
					completed = append(completed, strings.Join(types, ","))
				}
			}
			if len(completed) != 3 || completed[0] != "" {
				t.Errorf("loom completed responses with outputs %q; want 3, the warm-up's empty", completed)
			}
			// The model: called once per turn, not for the warm-up, and
			// reading the whole conversation at the end.
			if n := len(h.Mock.Requests()); n != 2 {
				t.Errorf("the model was called %d times, want 2 (the warm-up generates nothing)", n)
			}
			prompt := lastPrompt(t, h)
			for _, want := range []string{"You are a coding agent", "Print the marker.", codexMarker} {
				if !strings.Contains(prompt, want) {
					t.Errorf("the model's last prompt lacks %q", want)
				}
			}
		})
	}
}
