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

	"github.com/loomgate/loom/harmony"
	"github.com/loomgate/loom/model/mockllm"
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

// codexConfig is the whole config.toml: a provider for loom, nothing else.
func codexConfig(baseURL string) string {
	return fmt.Sprintf(`model = %q
model_provider = "loom"

[model_providers.loom]
name = "loom"
base_url = %q
wire_api = "responses"
`, mockllm.DefaultModel, baseURL)
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
// sends, so that the test can say what Codex's defaults are.
type codexRecorder struct {
	URL  string
	mu   sync.Mutex
	reqs []codexCLIRequest
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
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(codexConfig(baseURL)), 0o644); err != nil {
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
