package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	oairesponses "github.com/openai/openai-go/v3/responses"

	"github.com/loomgate/loom/engine"
	"github.com/loomgate/loom/harmony"
	"github.com/loomgate/loom/internal/testutil"
	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/tools/local"
	"github.com/loomgate/loom/tools/python"
	"github.com/loomgate/loom/tools/sandbox"
	"github.com/loomgate/loom/tools/shell"
)

// End-to-end tests of the local tools (issue 6): the sandboxed Python
// interpreter behind code_interpreter (chat) and the harmony built-in
// python namespace (completions), through loom over HTTP, with a real
// bubblewrap sandbox. They need root (each session gets a uid of its own,
// which is how the tests find every process a session started) and bwrap.

// localEnv is one sandbox and the local tool servers built on it. Its
// sessions run under uids of a range of its own and keep their work
// directories under Base, so a test can see everything they left.
type localEnv struct {
	Base     string // sandbox.Options.WorkDirBase
	UIDBase  uint32
	UIDCount uint32
	Provider *local.Provider
	Log      *testutil.LockedBuffer // the sandbox's and the tools' log
}

// localEnvs numbers the environments of this test process, to give each
// a uid range of its own.
var localEnvs atomic.Uint32

const (
	// envUIDs is the size of each environment's uid range.
	envUIDs = 64
	// leftoverWait bounds the wait for a session's processes and work
	// directory to go after its response ended. Cleanup runs on a
	// context of its own as the request ends; Close waits at most a few
	// seconds for processes to die.
	leftoverWait = 15 * time.Second
)

// newLocalEnv builds a bubblewrap sandbox with python (pyOpts) and shell
// servers. sbOpts may set limits; the work directory base, uid range and
// logger are the test's.
func newLocalEnv(t *testing.T, pyOpts *python.Options, sbOpts *sandbox.Options) *localEnv {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("the local tool tests must run as root: sessions need uids of their own to be found in the process table")
	}
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Fatalf("bubblewrap (bwrap) is required for these tests: apt-get install -y bubblewrap (%v)", err)
	}
	// t.TempDir is mode 0700 (and so is its parent): session uids must be
	// able to reach their own directory below it.
	base := t.TempDir()
	for _, d := range []string{base, filepath.Dir(base)} {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	n := localEnvs.Add(1)
	if n >= 16384/envUIDs {
		t.Fatal("too many local tool environments in one test process")
	}
	// A range per test process (pid) and per environment, away from the
	// sandbox's default range, which other packages' tests use.
	env := &localEnv{
		Base:     base,
		UIDBase:  910_000_000 + uint32(os.Getpid()%30000)*16384 + n*envUIDs,
		UIDCount: envUIDs,
		Log:      &testutil.LockedBuffer{},
	}
	so := sandbox.Options{}
	if sbOpts != nil {
		so = *sbOpts
	}
	so.WorkDirBase, so.UIDBase, so.UIDCount = base, env.UIDBase, env.UIDCount
	so.Logger = slog.New(slog.NewTextHandler(env.Log, nil))
	sb, err := sandbox.New(&so)
	if err != nil {
		t.Fatal(err)
	}
	if !sb.Sandboxed() {
		t.Fatal("the sandbox fell back to running unsandboxed")
	}
	po := python.Options{}
	if pyOpts != nil {
		po = *pyOpts
	}
	py, err := python.New(sb, &po)
	if err != nil {
		t.Fatal(err)
	}
	sh, err := shell.New(sb, nil)
	if err != nil {
		t.Fatal(err)
	}
	env.Provider = &local.Provider{Python: py, Shell: sh}
	// Whatever a test did, nothing may outlive it.
	t.Cleanup(func() {
		if procs, dirs := env.waitClean(); len(procs)+len(dirs) > 0 {
			t.Errorf("at the end of the test, sessions left processes %v and work directories %v", procs, dirs)
		}
		if t.Failed() {
			t.Logf("sandbox log:\n%s", env.Log.String())
		}
	})
	return env
}

// leftovers lists the live processes running as a uid of the
// environment's range (real, effective, saved or filesystem uid), found by
// scanning the process table, and the session directories under Base.
func (e *localEnv) leftovers() (procs, dirs []string) {
	names, _ := filepath.Glob("/proc/[0-9]*/status")
	for _, status := range names {
		b, err := os.ReadFile(status)
		if err != nil {
			continue // gone meanwhile
		}
		var name, state string
		inRange := false
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			k, v, _ := strings.Cut(sc.Text(), ":")
			v = strings.TrimSpace(v)
			switch k {
			case "Name":
				name = v
			case "State":
				state = v
			case "Uid":
				for _, f := range strings.Fields(v) {
					if uid, err := strconv.ParseUint(f, 10, 32); err == nil && uid >= uint64(e.UIDBase) && uid < uint64(e.UIDBase+e.UIDCount) {
						inRange = true
					}
				}
			}
		}
		// A zombie runs nothing; it is its parent's to reap.
		if inRange && !strings.HasPrefix(state, "Z") && !strings.HasPrefix(state, "X") {
			procs = append(procs, fmt.Sprintf("%s (%s, %s)", filepath.Base(filepath.Dir(status)), name, state))
		}
	}
	entries, _ := os.ReadDir(e.Base)
	for _, d := range entries {
		dirs = append(dirs, d.Name())
	}
	return procs, dirs
}

// waitClean waits, boundedly, until no session of the environment has a
// process or a work directory left, and returns what is left.
func (e *localEnv) waitClean() (procs, dirs []string) {
	testutil.Eventually(leftoverWait, func() bool {
		procs, dirs = e.leftovers()
		return len(procs)+len(dirs) == 0
	})
	return procs, dirs
}

// requireClean fails the test if the sessions left anything, after a
// bounded wait.
func (e *localEnv) requireClean(t *testing.T, when string) {
	t.Helper()
	if procs, dirs := e.waitClean(); len(procs)+len(dirs) > 0 {
		t.Errorf("%s: still running after %s: %v; work directories left: %v", when, leftoverWait, procs, dirs)
	}
}

// waitMarker waits until a session's work directory holds a file named
// name (the code writes it when it has started), and returns the
// session's uid (the owner of its work directory).
func (e *localEnv) waitMarker(ctx context.Context, t *testing.T, name string) uint32 {
	t.Helper()
	for {
		matches, _ := filepath.Glob(filepath.Join(e.Base, "*", name))
		if len(matches) > 0 {
			fi, err := os.Stat(filepath.Dir(matches[0]))
			if err == nil {
				return statUID(fi)
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the code never started (no %s in a work directory): %v\nsandbox log:\n%s", name, ctx.Err(), e.Log.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// localHarness is a harness whose loom runs env's local tools.
func localHarness(t *testing.T, up upstream, env *localEnv) *harness {
	t.Helper()
	return up.harness(t, &harnessOptions{ToolProviders: []engine.ToolProvider{env.Provider}})
}

// codeInterpreterTool is the tool a Responses client asks for.
var codeInterpreterTool = map[string]any{"type": "code_interpreter", "container": map[string]any{"type": "auto"}}

// pyCall scripts one model call of python running code: a function call
// {"code": ...} over chat, a call to the built-in python namespace with
// the raw code over harmony. The code must be one line (a script line);
// blocks go through exec("...\n...").
func pyCall(t *testing.T, upstream, code string) string {
	t.Helper()
	if strings.Contains(code, "\n") {
		t.Fatalf("scripted code must be one line: %q", code)
	}
	if upstream == "completions" {
		return "#builtin python " + code
	}
	args, _ := json.Marshal(map[string]string{"code": code})
	return "#call python " + string(args)
}

// pyScript scripts one call per model turn, then the default answer.
func pyScript(t *testing.T, upstream string, codes ...string) string {
	t.Helper()
	var turns []string
	for _, c := range codes {
		turns = append(turns, pyCall(t, upstream, c))
	}
	return strings.Join(turns, "\n#then\n")
}

// ciCall is a code_interpreter_call item as the client got it.
type ciCall struct {
	ID, Status, Code string
	Logs             []string
}

// ciCalls returns the response's code_interpreter_call items.
func ciCalls(t *testing.T, resp map[string]any) []ciCall {
	t.Helper()
	var out []ciCall
	for _, raw := range resp["output"].([]any) {
		it := raw.(map[string]any)
		if it["type"] != "code_interpreter_call" {
			continue
		}
		c := ciCall{}
		c.ID, _ = it["id"].(string)
		c.Status, _ = it["status"].(string)
		c.Code, _ = it["code"].(string)
		outputs, _ := it["outputs"].([]any)
		for _, o := range outputs {
			o := o.(map[string]any)
			if o["type"] != "logs" {
				t.Errorf("output of type %v, want logs", o["type"])
			}
			logs, _ := o["logs"].(string)
			c.Logs = append(c.Logs, logs)
		}
		out = append(out, c)
	}
	return out
}

// answerText is the text of the response's message items.
func answerText(resp map[string]any) string {
	var b strings.Builder
	for _, raw := range resp["output"].([]any) {
		it := raw.(map[string]any)
		if it["type"] != "message" {
			continue
		}
		for _, p := range it["content"].([]any) {
			if s, ok := p.(map[string]any)["text"].(string); ok {
				b.WriteString(s)
			}
		}
	}
	return b.String()
}

// pyExchange is one python call and its result as the model saw them in
// an upstream request.
type pyExchange struct{ Code, Result string }

// modelSawPython returns the python calls and results in the last request
// the upstream received: over chat, assistant tool calls of the function
// python ({"code": ...}) and the tool messages answering them; over
// harmony, messages to the built-in python on the analysis channel with
// content type code and the messages from python. It fails on a python
// call rendered in any other way.
func modelSawPython(t *testing.T, h *harness) []pyExchange {
	t.Helper()
	var out []pyExchange
	if isCompletions(t, h) {
		for _, m := range lastCompletion(t, h).PromptMessages {
			switch {
			case m.Author.Role == harmony.RoleAssistant && strings.HasSuffix(m.Recipient, "python"):
				if m.Recipient != "python" || m.Channel != "analysis" || m.ContentType != "code" {
					t.Errorf("the model's python call came back to it as to=%s on %s (%s), want to=python on analysis (code)", m.Recipient, m.Channel, m.ContentType)
				}
				out = append(out, pyExchange{Code: m.Text()})
			case m.Author.Role == harmony.RoleTool && strings.HasSuffix(m.Author.Name, "python"):
				if m.Author.Name != "python" || m.Channel != "analysis" {
					t.Errorf("python's result came back to the model from %s on %s, want from python on analysis", m.Author.Name, m.Channel)
				}
				if len(out) == 0 {
					t.Fatal("a python result before any python call")
				}
				out[len(out)-1].Result = m.Text()
			}
		}
		return out
	}
	ids := map[string]int{}
	for _, m := range lastChatRequest(t, h).Messages {
		for _, tc := range m.ToolCalls {
			if tc.Function.Name != "python" {
				continue
			}
			var args struct {
				Code *string `json:"code"`
			}
			if err := json.Unmarshal([]byte(tc.Function.Arguments), &args); err != nil || args.Code == nil {
				t.Errorf("python call arguments %q are not {\"code\": ...}", tc.Function.Arguments)
				continue
			}
			ids[tc.ID] = len(out)
			out = append(out, pyExchange{Code: *args.Code})
		}
		if m.Role == "tool" {
			if i, ok := ids[m.ToolCallID]; ok {
				out[i].Result = m.Text()
			}
		}
	}
	return out
}

// runPython sends one non-streaming response with the code_interpreter
// tool and the given calls, and checks what every party saw: the client
// got one completed code_interpreter_call per call, with its code; the
// model got each call and its result back, the same text as the client's
// logs; the answer (the scripted default) quotes the last result. It
// returns the logs of each call.
func runPython(t *testing.T, h *harness, upstream string, codes ...string) []string {
	t.Helper()
	resp := postJSON(t, h, map[string]any{
		"model": "mock-model", "input": pyScript(t, upstream, codes...),
		"tools": []any{codeInterpreterTool},
	})
	if resp["status"] != "completed" {
		t.Errorf("status %v, want completed", resp["status"])
	}
	calls := ciCalls(t, resp)
	if len(calls) != len(codes) {
		t.Fatalf("%d code_interpreter_call items, want %d: %v", len(calls), len(codes), resp["output"])
	}
	logs := make([]string, len(calls))
	for i, c := range calls {
		if c.Code != codes[i] {
			t.Errorf("call %d: the client saw code %q, want %q", i, c.Code, codes[i])
		}
		if c.Status != "completed" {
			t.Errorf("call %d: status %q", i, c.Status)
		}
		if len(c.Logs) != 1 {
			t.Errorf("call %d: %d logs outputs, want 1", i, len(c.Logs))
			continue
		}
		logs[i] = c.Logs[0]
	}
	// The upstream's last request (the turn after the last call) carries
	// every call and its result.
	if n := len(h.Mock.Requests()); n < len(codes)+1 {
		t.Fatalf("upstream got %d requests, want %d", n, len(codes)+1)
	}
	seen := modelSawPython(t, h)
	if len(seen) != len(codes) {
		t.Fatalf("the model saw %d python calls, want %d: %+v", len(seen), len(codes), seen)
	}
	for i, s := range seen {
		if s.Code != codes[i] {
			t.Errorf("call %d: the model saw its code as %q, want %q", i, s.Code, codes[i])
		}
		if s.Result != logs[i] {
			t.Errorf("call %d: the model saw the result %q, the client %q", i, s.Result, logs[i])
		}
	}
	if want := "tool said: " + logs[len(logs)-1]; answerText(resp) != want {
		t.Errorf("answer %q, want %q", answerText(resp), want)
	}
	return logs
}

func TestLocalPythonEndToEnd(t *testing.T) {
	for _, up := range upstreams {
		t.Run(up.name, func(t *testing.T) {
			env := newLocalEnv(t, &python.Options{Limits: sandbox.Limits{MaxOutputBytes: 1000}}, nil)
			h := localHarness(t, up, env)
			// Limits that overrun: a short call timeout, a process cap.
			short := newLocalEnv(t, &python.Options{Limits: sandbox.Limits{CallTimeout: time.Second}}, &sandbox.Options{MaxProcesses: 32})
			hShort := localHarness(t, up, short)

			t.Run("runs", func(t *testing.T) {
				logs := runPython(t, h, up.name, "print(6*7); import os; print(os.getcwd())")
				if want := "42\n/mnt/data\n"; logs[0] != want {
					t.Errorf("logs %q, want %q", logs[0], want)
				}
				// The model was told the real limits: the python
				// function's description over chat, the built-in python
				// namespace over harmony.
				prompt := upstreamPrompt(t, h.Mock.Requests()[0].Body)
				for _, want := range []string{"time out after 30.0 seconds", "Internet access for this session is disabled."} {
					if !strings.Contains(prompt, want) {
						t.Errorf("the python tool offered to the model does not say %q:\n%s", want, prompt)
					}
				}
				if isCompletions(t, h) && !strings.Contains(prompt, "## python\n\n") {
					t.Errorf("python is not declared as the built-in namespace:\n%s", prompt)
				}
				env.requireClean(t, "after a completed response")
			})

			t.Run("state persists", func(t *testing.T) {
				logs := runPython(t, h, up.name, "x = 21", "print(x*2)")
				if !slices.Equal(logs, []string{"", "42\n"}) {
					t.Errorf("logs %q, want the second call to see the first's x", logs)
				}
				env.requireClean(t, "after a completed response")
			})

			t.Run("previous_response_id", func(t *testing.T) {
				first := postJSON(t, h, map[string]any{"model": "mock-model", "input": pyScript(t, up.name, "print(1+1)"),
					"tools": []any{codeInterpreterTool}})
				postJSON(t, h, map[string]any{"model": "mock-model", "input": "#say ok", "previous_response_id": first["id"],
					"tools": []any{codeInterpreterTool}})
				// Over chat the stored call comes back to the model as it
				// made it, a python function call and its result. Over
				// harmony it was on the analysis channel of a finished
				// turn, which gpt-oss's prompts drop.
				seen := modelSawPython(t, h)
				want := []pyExchange{{"print(1+1)", "2\n"}}
				if isCompletions(t, h) {
					want = nil
				}
				if !slices.Equal(seen, want) {
					t.Errorf("the continued conversation shows the model %+v, want %+v", seen, want)
				}
				env.requireClean(t, "after two responses")
			})

			t.Run("timeout", func(t *testing.T) {
				start := time.Now()
				logs := runPython(t, hShort, up.name, "while True: pass")
				if d := time.Since(start); d > 10*time.Second {
					t.Errorf("the response took %s with a 1s call limit", d)
				}
				if !strings.Contains(logs[0], "timed out after 1s") {
					t.Errorf("logs %q, want them to tell of the 1s timeout", logs[0])
				}
				short.requireClean(t, "after a timed-out call")
			})

			t.Run("output cap", func(t *testing.T) {
				logs := runPython(t, h, up.name, "print('x' * 5000)")
				if want := strings.Repeat("x", 1000) + "\n[output truncated at 1000 bytes]"; logs[0] != want {
					t.Errorf("logs (%d bytes) %.80q..., want 1000 bytes and the truncation marker", len(logs[0]), logs[0])
				}
				env.requireClean(t, "after a completed response")
			})

			t.Run("fork bomb", func(t *testing.T) {
				logs := runPython(t, hShort, up.name, `import os; exec("while True:\n try: os.fork()\n except OSError: pass")`)
				if !strings.Contains(logs[0], "timed out") {
					t.Errorf("logs %q, want the bomb stopped at the time limit", logs[0])
				}
				// The host is fine: it can start processes.
				if err := exec.Command("true").Run(); err != nil {
					t.Errorf("the host cannot start a process after the bomb: %v", err)
				}
				short.requireClean(t, "after a fork bomb")
			})

			t.Run("memory hog", func(t *testing.T) {
				logs := runPython(t, h, up.name, "b = bytearray(2 * 1024**3); print(len(b))")
				if !strings.Contains(logs[0], "MemoryError") || strings.Contains(logs[0], "2147483648") {
					t.Errorf("logs %q, want a MemoryError", logs[0])
				}
				env.requireClean(t, "after a memory hog")
			})

			t.Run("no loopback", func(t *testing.T) {
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				var accepted atomic.Int64
				acceptDone := make(chan struct{})
				go func() {
					defer close(acceptDone)
					for {
						c, err := ln.Accept()
						if err != nil {
							return
						}
						accepted.Add(1)
						c.Close()
					}
				}()
				port := ln.Addr().(*net.TCPAddr).Port
				logs := runPython(t, h, up.name, fmt.Sprintf("import socket; socket.create_connection(('127.0.0.1', %d), timeout=2); print('conn' + 'ected')", port))
				ln.Close()
				<-acceptDone
				if accepted.Load() != 0 {
					t.Errorf("the host listener accepted %d connection(s) from the sandbox", accepted.Load())
				}
				if strings.Contains(logs[0], "connected\n") || !strings.Contains(logs[0], "ConnectionRefusedError") {
					t.Errorf("logs %q, want the connection refused", logs[0])
				}
				env.requireClean(t, "after a completed response")
			})

			t.Run("no writes outside the work directory", func(t *testing.T) {
				outside := t.TempDir()
				targets := []string{"/x", "/etc/x", "/usr/x", filepath.Join(outside, "x"), filepath.Join(env.Base, "x")}
				list, _ := json.Marshal(targets)
				code := fmt.Sprintf(`exec("for p in %s:\n try:\n  open(p, 'w').write('x'); print('WROTE', p)\n except OSError as e:\n  print('denied', type(e).__name__)"); open('inside', 'w').write('ok'); print(open('/mnt/data/inside').read())`,
					strings.ReplaceAll(string(list), `"`, `'`))
				logs := runPython(t, h, up.name, code)
				if strings.Contains(logs[0], "WROTE") || strings.Count(logs[0], "denied") != len(targets) || !strings.HasSuffix(logs[0], "ok\n") {
					t.Errorf("logs %q, want every write outside denied and the work directory writable", logs[0])
				}
				for _, p := range targets {
					if _, err := os.Stat(p); err == nil {
						t.Errorf("%s was written on the host", p)
						os.Remove(p)
					}
				}
				env.requireClean(t, "after a completed response")
			})
		})
	}
}

// TestLocalPythonCleanupOnEveryEnd checks that however a response ends —
// completed, failed, cancelled or disconnected — no process its python
// session started is left and its work directory is gone. The code starts
// processes that try to outlive it: a sleep in a session of its own and a
// double-forked one.
func TestLocalPythonCleanupOnEveryEnd(t *testing.T) {
	const escape = `import subprocess; subprocess.Popen(['sleep', '300'], start_new_session=True); subprocess.Popen(['sh', '-c', 'sleep 300 &']); open('started', 'w').close()`
	const slow = `import subprocess; subprocess.Popen(['sleep', '300'], start_new_session=True); open('started', 'w').close(); import time; time.sleep(30)`
	for _, up := range upstreams {
		t.Run(up.name, func(t *testing.T) {
			env := newLocalEnv(t, nil, nil)
			h := localHarness(t, up, env)
			ctx, cancel := context.WithTimeout(t.Context(), 45*time.Second)
			defer cancel()

			t.Run("completed", func(t *testing.T) {
				resp := postJSON(t, h, map[string]any{"model": "mock-model", "input": pyScript(t, up.name, escape, "print('second')"),
					"tools": []any{codeInterpreterTool}})
				if resp["status"] != "completed" || len(ciCalls(t, resp)) != 2 {
					t.Errorf("status %v, output %v", resp["status"], resp["output"])
				}
				env.requireClean(t, "after a completed response")
			})

			t.Run("failed", func(t *testing.T) {
				// The upstream drops the connection in the turn after
				// the call.
				body, _ := json.Marshal(map[string]any{"model": "mock-model", "stream": true,
					"input": pyCall(t, up.name, escape) + "\n#then\n#cut 1", "tools": []any{codeInterpreterTool}})
				status, stream := postStream(t, h.BaseURL+"/responses", string(body), nil)
				if status != http.StatusOK {
					t.Fatalf("status %d: %s", status, stream)
				}
				events := parseSSE(t, stream)
				if firstIndex(events, "response.code_interpreter_call.completed") < 0 || firstIndex(events, "response.failed") < 0 {
					t.Errorf("want the call completed, then the response failed:\n%s", stream)
				}
				env.requireClean(t, "after a failed response")
			})

			t.Run("cancelled", func(t *testing.T) {
				// The response's context is cancelled while the code
				// runs (what loom's shutdown deadline does), not by a
				// client that went away.
				req, apiErr := responses.DecodeRequest(fmt.Appendf(nil, `{"model":"mock-model","input":%q,"tools":[{"type":"code_interpreter","container":{"type":"auto"}}]}`,
					pyCall(t, up.name, slow)))
				if apiErr != nil {
					t.Fatal(apiErr)
				}
				runCtx, stop := context.WithCancel(ctx)
				type result struct {
					resp *responses.Response
					err  error
				}
				done := make(chan result, 1)
				go func() {
					// A sink, as a streaming client has: the response is
					// stored however it ends.
					resp, err := h.Engine.Run(runCtx, req, func(*responses.Event) error { return nil })
					done <- result{resp, err}
				}()
				uid := env.waitMarker(ctx, t, "started")
				if len(sandbox.UIDPIDs(uid)) == 0 {
					t.Error("no process of the session is running while its code sleeps")
				}
				stop()
				var res result
				select {
				case res = <-done:
				case <-ctx.Done():
					t.Fatal("the cancelled response did not end")
				}
				if !errors.Is(res.err, context.Canceled) || res.resp == nil || res.resp.Status != "cancelled" {
					t.Errorf("Run ended with %v, status %v; want cancelled", res.err, res.resp)
				}
				env.requireClean(t, "after a cancelled response")
				if left := sandbox.UIDPIDs(uid); len(left) > 0 {
					t.Errorf("processes of the session's uid %d left: %v", uid, left)
				}
				if status := waitStored(ctx, t, h, res.resp.ID); status != "cancelled" {
					t.Errorf("stored status %q, want cancelled", status)
				}
			})

			t.Run("disconnected", func(t *testing.T) {
				reqCtx, disconnect := context.WithCancel(ctx)
				defer disconnect()
				body, _ := json.Marshal(map[string]any{"model": "mock-model", "stream": true,
					"input": pyCall(t, up.name, slow), "tools": []any{codeInterpreterTool}})
				req, _ := http.NewRequestWithContext(reqCtx, http.MethodPost, h.BaseURL+"/responses", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				transport := &http.Transport{}
				defer transport.CloseIdleConnections()
				done := make(chan error, 1)
				go func() {
					res, err := (&http.Client{Transport: transport}).Do(req)
					if err == nil {
						_, err = io.Copy(io.Discard, res.Body)
						res.Body.Close()
					}
					done <- err
				}()
				uid := env.waitMarker(ctx, t, "started")
				start := time.Now()
				disconnect()
				if err := <-done; !errors.Is(err, context.Canceled) {
					t.Errorf("client ended with %v", err)
				}
				env.requireClean(t, "after a client disconnect")
				if left := sandbox.UIDPIDs(uid); len(left) > 0 {
					t.Errorf("processes of the session's uid %d left: %v", uid, left)
				}
				// Cleanup did not wait for the 30s sleep to end.
				if d := time.Since(start); d > 10*time.Second {
					t.Errorf("cleanup took %s after the disconnect", d)
				}
				if !h.WaitIdle(5 * time.Second) {
					t.Error("loom is still serving the disconnected request")
				}
			})
		})
	}
}

func TestLocalToolsDisabled(t *testing.T) {
	for _, up := range upstreams {
		t.Run(up.name, func(t *testing.T) {
			h := up.harness(t, &harnessOptions{ToolProviders: []engine.ToolProvider{&local.Provider{HowToEnable: map[string]string{
				responses.ToolCodeInterpreter: "the operator enables it with --enable-python",
				responses.ToolShell:           "the operator enables it with --enable-shell",
			}}}})
			for _, tc := range []struct {
				tools string
				param string
				flag  string
			}{
				{`[{"type":"code_interpreter","container":{"type":"auto"}}]`, "tools[0].type", "--enable-python"},
				{`[{"type":"function","name":"f","parameters":{"type":"object"}},{"type":"code_interpreter","container":{"type":"auto"}}]`, "tools[1].type", "--enable-python"},
				{`[{"type":"shell","environment":{"type":"container_auto"}}]`, "tools[0].type", "--enable-shell"},
			} {
				status, body := doRaw(t, http.MethodPost, h.BaseURL+"/responses",
					`{"model":"mock-model","input":"`+pyCall(t, "completions", "print(1)")+`","tools":`+tc.tools+`}`)
				checkAPIError(t, h, status, body, wantError{status: http.StatusBadRequest, typ: "invalid_request_error", param: tc.param})
				if msg := string(body); !strings.Contains(msg, "not enabled") || !strings.Contains(msg, tc.flag) {
					t.Errorf("the error does not say the tool is off and how to enable it (%s): %s", tc.flag, body)
				}
			}
			checkNothingHappened(t, h, 0, 0)
		})
	}
}

// TestOpenAIGoCodeInterpreter checks what the official Go SDK sees of a
// scripted python call: a code_interpreter_call output item with its code
// and logs, and, streamed, the code interpreter's events in order.
func TestOpenAIGoCodeInterpreter(t *testing.T) {
	const code = "print(6*7)"
	tool := oairesponses.ToolUnionParam{OfCodeInterpreter: &oairesponses.ToolCodeInterpreterParam{
		Container: oairesponses.ToolCodeInterpreterContainerUnionParam{
			OfCodeInterpreterToolAuto: &oairesponses.ToolCodeInterpreterContainerCodeInterpreterContainerAutoParam{},
		},
	}}
	checkItem := func(t *testing.T, r *oairesponses.Response) {
		t.Helper()
		var found int
		for _, item := range r.Output {
			if item.Type != "code_interpreter_call" {
				continue
			}
			found++
			ci := item.AsCodeInterpreterCall()
			if ci.ID == "" || ci.Code != code || ci.Status != "completed" {
				t.Errorf("code_interpreter_call id %q, code %q, status %q; want code %q, completed", ci.ID, ci.Code, ci.Status, code)
			}
			if len(ci.Outputs) != 1 || ci.Outputs[0].Type != "logs" || ci.Outputs[0].AsLogs().Logs != "42\n" {
				t.Errorf("outputs %+v, want one logs output \"42\\n\"", ci.Outputs)
			}
		}
		if found != 1 {
			t.Errorf("%d code_interpreter_call items, want 1", found)
		}
		if got := r.OutputText(); got != "tool said: 42\n" {
			t.Errorf("output text %q", got)
		}
	}
	for _, up := range upstreams {
		t.Run(up.name, func(t *testing.T) {
			env := newLocalEnv(t, nil, nil)
			h := localHarness(t, up, env)
			client := newOpenAIGo(h)
			params := oairesponses.ResponseNewParams{
				Model: "mock-model",
				Input: textInput(pyCall(t, up.name, code)),
				Tools: []oairesponses.ToolUnionParam{tool},
			}

			t.Run("create", func(t *testing.T) {
				r, err := client.Responses.New(clientCtx(t), params)
				if err != nil {
					t.Fatal(err)
				}
				if r.Status != "completed" {
					t.Errorf("status %q", r.Status)
				}
				checkItem(t, r)
				env.requireClean(t, "after the response")
			})

			t.Run("stream", func(t *testing.T) {
				stream := client.Responses.NewStreaming(clientCtx(t), params)
				var types []string
				var raws []json.RawMessage
				var deltas, doneCode string
				var final *oairesponses.Response
				for stream.Next() {
					ev := stream.Current()
					types = append(types, ev.Type)
					raws = append(raws, json.RawMessage(ev.RawJSON()))
					switch ev.Type {
					case "response.code_interpreter_call_code.delta":
						deltas += ev.AsResponseCodeInterpreterCallCodeDelta().Delta
					case "response.code_interpreter_call_code.done":
						doneCode = ev.AsResponseCodeInterpreterCallCodeDone().Code
					case "response.completed":
						r := ev.AsResponseCompleted().Response
						final = &r
					}
				}
				if err := stream.Err(); err != nil {
					t.Fatal(err)
				}
				checkEventStream(t, raws)
				want := []string{
					"response.output_item.added",
					"response.code_interpreter_call.in_progress",
					"response.code_interpreter_call_code.delta",
					"response.code_interpreter_call_code.done",
					"response.code_interpreter_call.interpreting",
					"response.code_interpreter_call.completed",
					"response.output_item.done",
				}
				// The events of the code_interpreter_call item, with runs of
				// deltas counted once.
				var got []string
				for _, raw := range raws {
					var ev struct {
						Type   string `json:"type"`
						ItemID string `json:"item_id"`
						Item   struct {
							Type string `json:"type"`
						} `json:"item"`
					}
					json.Unmarshal(raw, &ev)
					if (ev.ItemID == "" || !strings.HasPrefix(ev.ItemID, "ci")) && ev.Item.Type != "code_interpreter_call" {
						continue
					}
					if len(got) == 0 || got[len(got)-1] != ev.Type {
						got = append(got, ev.Type)
					}
				}
				if !slices.Equal(got, want) {
					t.Errorf("code interpreter events %q, want %q (all: %q)", got, want, types)
				}
				if deltas != code || doneCode != code {
					t.Errorf("code deltas %q, done %q; want %q", deltas, doneCode, code)
				}
				if final == nil {
					t.Fatal("no response.completed")
				}
				checkItem(t, final)
				env.requireClean(t, "after the streamed response")
			})
			requireCaptured(t, h, 1, 10)
		})
	}
}

// statUID is the owner of a file.
func statUID(fi os.FileInfo) uint32 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Uid
	}
	return 0
}
