package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	oairesponses "github.com/openai/openai-go/v3/responses"

	"github.com/loomgate/loom/internal/testutil"
	"github.com/loomgate/loom/model/mockllm"
	"github.com/loomgate/loom/tools/sandbox"
)

// Tests of loom serve with the local tools (issue 6): the operator's
// flags, the refusal to run them unsandboxed without an explicit opt-in,
// and a python call seen by the openai-go client through a real Main.

// sandboxTmp points TMPDIR, under which the sandbox keeps its work
// directories (loom-sandbox), at a fresh directory that session uids can
// traverse, and returns the work directory base.
func sandboxTmp(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("TMPDIR", dir)
	return filepath.Join(dir, "loom-sandbox")
}

// toolConfig is a serve configuration over upstream with the given tool
// flags, parsed as an operator would give them.
func toolConfig(t *testing.T, upstream string, flags ...string) *Config {
	t.Helper()
	args := append([]string{"--upstream-url", upstream, "--addr", "127.0.0.1:0", "--store", ":memory:"}, flags...)
	cfg, err := parseServeFlags(args, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestLocalToolFlags(t *testing.T) {
	cfg, err := parseServeFlags([]string{"--upstream-url", "http://127.0.0.1:1/v1", "--allow-unsandboxed", "--tool-timeout", "5s"},
		env(map[string]string{"LOOM_ENABLE_PYTHON": "true", "LOOM_ENABLE_SHELL": "1"}))
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.EnablePython || !cfg.EnableShell || !cfg.AllowUnsandboxed || cfg.ToolTimeout != 5*time.Second {
		t.Errorf("local tool flags not read: %+v", cfg)
	}
	cfg, err = parseServeFlags([]string{"--upstream-url", "http://127.0.0.1:1/v1"}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.EnablePython || cfg.EnableShell || cfg.AllowUnsandboxed {
		t.Errorf("local tools are on by default: %+v", cfg)
	}
}

// Without bubblewrap, enabling a local tool fails to start unless the
// operator explicitly allows running unsandboxed; then loom starts and
// says so loudly.
func TestLocalToolsNeedSandbox(t *testing.T) {
	base := sandboxTmp(t)
	// No bwrap (nor anything else) on PATH: sandbox.New looks it up there.
	t.Setenv("PATH", t.TempDir())
	if _, err := exec.LookPath("bwrap"); err == nil {
		t.Fatal("bwrap is still found")
	}
	for _, flag := range []string{"--enable-python", "--enable-shell"} {
		t.Run(flag, func(t *testing.T) {
			var logs testutil.LockedBuffer
			m := NewMain(toolConfig(t, "http://127.0.0.1:1/v1", flag), newLogger(&logs, "text", "info"))
			err := m.Open(context.Background())
			m.Close()
			if err == nil {
				t.Fatal("Open succeeded with the local tools enabled and no bubblewrap")
			}
			for _, want := range []string{"bubblewrap is not available", "bwrap not found", "--allow-unsandboxed"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Open's error does not say %q: %v", want, err)
				}
			}
		})
	}

	t.Run("--allow-unsandboxed", func(t *testing.T) {
		var logs testutil.LockedBuffer
		m := NewMain(toolConfig(t, "http://127.0.0.1:1/v1", "--enable-python", "--allow-unsandboxed"), newLogger(&logs, "text", "info"))
		if err := m.Open(context.Background()); err != nil {
			m.Close()
			t.Fatalf("Open with --allow-unsandboxed: %v", err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- m.Run(ctx) }()
		res, err := http.Get("http://" + m.Addr() + "/healthz")
		if err != nil {
			t.Errorf("the server does not answer: %v", err)
		} else {
			res.Body.Close()
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		m.Close()
		out := logs.String()
		for _, want := range []string{"ERR", "UNSANDBOXED", "bwrap not found", "local tools enabled", "sandboxed=false"} {
			if !strings.Contains(out, want) {
				t.Errorf("the log does not say %q:\n%s", want, out)
			}
		}
	})
	if entries, _ := os.ReadDir(base); len(entries) != 0 {
		t.Errorf("work directories left: %v", entries)
	}
}

// startToolMain runs loom serve with python enabled over a scripted chat
// upstream, with sandbox work directories under a base of the test's.
func startToolMain(t *testing.T, shutdown time.Duration) (addr, base string, stop func() error) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("must run as root: sessions need uids of their own to be found in the process table")
	}
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Fatalf("bubblewrap (bwrap) is required: %v", err)
	}
	base = sandboxTmp(t)
	mock := mockllm.New(nil)
	up := httptest.NewServer(mock)
	t.Cleanup(up.Close)
	t.Cleanup(mock.Close)
	cfg := toolConfig(t, up.URL+"/v1", "--enable-python", "--tool-timeout", "20s")
	cfg.ShutdownTimeout = shutdown
	var logs testutil.LockedBuffer
	m := NewMain(cfg, newLogger(&logs, "text", "info"))
	if err := m.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		m.Close()
		if t.Failed() {
			t.Logf("loom's log:\n%s", logs.String())
		}
	})
	if strings.Contains(logs.String(), "UNSANDBOXED") {
		t.Fatalf("loom fell back to running unsandboxed:\n%s", logs.String())
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	stopped := false
	stop = func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(30 * time.Second):
			t.Fatal("Run did not return after shutdown")
			return nil
		}
	}
	t.Cleanup(func() { stop() })
	return m.Addr(), base, stop
}

// waitEmpty waits, boundedly, until dir holds nothing and no process runs
// as uid (when uid is not 0). Nothing signals the kernel's reaping or the
// removal, so it polls.
func waitEmpty(t *testing.T, dir string, uid uint32) {
	t.Helper()
	var entries []os.DirEntry
	var pids []int
	empty := func() bool {
		entries, _ = os.ReadDir(dir)
		pids = nil
		if uid != 0 {
			pids = sandbox.UIDPIDs(uid)
		}
		return len(entries) == 0 && len(pids) == 0
	}
	if !testutil.Eventually(testutil.Patience, empty) {
		t.Errorf("after %v, work directories %v and processes %v of uid %d are left", testutil.Patience, entries, pids, uid)
	}
}

func TestServePythonOpenAIGo(t *testing.T) {
	addr, base, _ := startToolMain(t, 10*time.Second)
	client := openai.NewClient(option.WithBaseURL("http://"+addr+"/v1/"), option.WithAPIKey("x"), option.WithMaxRetries(0))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const code = "import sys; print(sys.version_info[0] * 14); x = 1"
	args, _ := json.Marshal(map[string]string{"code": code})
	r, err := client.Responses.New(ctx, oairesponses.ResponseNewParams{
		Model: "mock-model",
		Input: oairesponses.ResponseNewParamsInputUnion{OfString: openai.String("#call python " + string(args))},
		Tools: []oairesponses.ToolUnionParam{{OfCodeInterpreter: &oairesponses.ToolCodeInterpreterParam{
			Container: oairesponses.ToolCodeInterpreterContainerUnionParam{
				OfCodeInterpreterToolAuto: &oairesponses.ToolCodeInterpreterContainerCodeInterpreterContainerAutoParam{},
			},
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var calls int
	for _, item := range r.Output {
		if item.Type != "code_interpreter_call" {
			continue
		}
		calls++
		ci := item.AsCodeInterpreterCall()
		if ci.Code != code || ci.Status != "completed" {
			t.Errorf("code_interpreter_call code %q, status %q; want %q, completed", ci.Code, ci.Status, code)
		}
		if len(ci.Outputs) != 1 || ci.Outputs[0].AsLogs().Logs != "42\n" {
			t.Errorf("outputs %+v, want logs \"42\\n\"", ci.Outputs)
		}
	}
	if calls != 1 || r.OutputText() != "tool said: 42\n" {
		t.Errorf("%d code_interpreter_call items, answer %q", calls, r.OutputText())
	}
	waitEmpty(t, base, 0)
}

// A response whose code is still running when the shutdown deadline
// passes is cancelled, and its session leaves nothing behind.
func TestServePythonCancelledAtShutdown(t *testing.T) {
	addr, base, stop := startToolMain(t, 300*time.Millisecond)
	args, _ := json.Marshal(map[string]string{"code": "import subprocess, time; subprocess.Popen(['sleep', '300'], start_new_session=True); open('started', 'w').close(); time.sleep(30)"})
	body, _ := json.Marshal(map[string]any{"model": "mock-model", "stream": true, "input": "#call python " + string(args),
		"tools": []any{map[string]any{"type": "code_interpreter", "container": map[string]any{"type": "auto"}}}})
	got := postInBackground(addr, body)
	var uid uint32
	// The code says it runs by creating a file in its work directory.
	testutil.WaitFor(t, "the code to start", func() bool {
		if m, _ := filepath.Glob(filepath.Join(base, "*", "started")); len(m) > 0 {
			if fi, err := os.Stat(filepath.Dir(m[0])); err == nil {
				uid = fi.Sys().(*syscall.Stat_t).Uid
			}
		}
		return uid != 0
	})
	if len(sandbox.UIDPIDs(uid)) == 0 {
		t.Error("no process of the session runs while its code sleeps")
	}
	if err := stop(); err != nil {
		t.Errorf("Run: %v", err)
	}
	stream := <-got
	if !strings.Contains(stream, `"status":"cancelled"`) || !strings.Contains(stream, "response.code_interpreter_call.interpreting") {
		t.Errorf("want the call interpreting, then the response cancelled:\n%s", stream)
	}
	waitEmpty(t, base, uid)
}
