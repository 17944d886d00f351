package python

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loomgate/loom/internal/testutil"
	"github.com/loomgate/loom/tools"
	"github.com/loomgate/loom/tools/sandbox"
)

// newServer builds a python Server on a real bubblewrap sandbox. It fails
// (not skips) without bwrap: CI installs it.
func newServer(t *testing.T, o *Options, so *sandbox.Options) *Server {
	t.Helper()
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Fatalf("bubblewrap (bwrap) is required for these tests: apt-get install -y bubblewrap (%v)", err)
	}
	if so == nil {
		so = &sandbox.Options{}
	}
	so.WorkDirBase = testBase(t)
	so.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
	sb, err := sandbox.New(so)
	if err != nil {
		t.Fatal(err)
	}
	if !sb.Sandboxed() {
		t.Fatal("the sandbox fell back to unsandboxed")
	}
	srv, err := New(sb, o)
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

// testBase is a work directory base under the system temp dir: t.TempDir
// is mode 0700, which a session uid could not traverse.
func testBase(t *testing.T) string {
	t.Helper()
	base, err := os.MkdirTemp("", "loom-python-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	return base
}

func open(t *testing.T, srv *Server) *Session {
	t.Helper()
	s, err := srv.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s.(*Session)
}

// run calls the tool with code in the chat path's JSON form.
func run(t *testing.T, s *Session, code string) tools.Result {
	t.Helper()
	args, _ := json.Marshal(map[string]string{"code": code})
	res, err := s.Call(context.Background(), tools.Call{CallID: "c1", Name: Name, Arguments: string(args)})
	if err != nil {
		t.Fatalf("Call(%q): %v", code, err)
	}
	if res.CallID != "c1" {
		t.Errorf("CallID %q", res.CallID)
	}
	return res
}

func expect(t *testing.T, res tools.Result, want string, isError bool) {
	t.Helper()
	if got := res.Text(); got != want || res.IsError != isError {
		t.Errorf("result %q (IsError %v), want %q (IsError %v)", got, res.IsError, want, isError)
	}
}

// assertGone checks that no process of the session is left and its work
// directory is gone.
func assertGone(t *testing.T, s *Session) {
	t.Helper()
	uid, own := s.Box().UID()
	if !own {
		t.Fatal("tests must run as root: sessions need uids of their own to be checked")
	}
	if left := sandbox.UIDPIDs(uid); len(left) > 0 {
		t.Errorf("processes of the session (uid %d) still running: %v", uid, left)
	}
	if _, err := os.Stat(s.Box().Dir()); !os.IsNotExist(err) {
		t.Errorf("work directory %s still there (%v)", s.Box().Dir(), err)
	}
}

func TestRunsCode(t *testing.T) {
	s := open(t, newServer(t, nil, nil))
	expect(t, run(t, s, "print('hello')\n1 + 1"), "hello\n2\n", false)
	// Output of programs the code starts is captured too, in order.
	expect(t, run(t, s, "import subprocess, sys\nprint('a')\nsubprocess.run(['echo', 'b'])\nprint('c', file=sys.stderr)"), "a\nb\nc\n", false)
	// The harmony path sends raw code, not JSON.
	res, err := s.Call(context.Background(), tools.Call{CallID: "c2", Name: Name, Arguments: "import os\nos.getcwd()"})
	if err != nil {
		t.Fatal(err)
	}
	expect(t, res, "'/mnt/data'\n", false)
}

func TestStatePersists(t *testing.T) {
	s := open(t, newServer(t, nil, nil))
	expect(t, run(t, s, "x = 21\nopen('notes.txt', 'w').write('kept')"), "4\n", false)
	expect(t, run(t, s, "print(x * 2, open('notes.txt').read())"), "42 kept\n", false)
	// An exception is the model's to see; the state survives it.
	res := run(t, s, "def f():\n    return 1 / 0\nf()")
	if !res.IsError || !strings.Contains(res.Text(), "ZeroDivisionError") || !strings.Contains(res.Text(), "return 1 / 0") {
		t.Errorf("exception result %q (IsError %v)", res.Text(), res.IsError)
	}
	if strings.Contains(res.Text(), "driver") || strings.Contains(res.Text(), "<string>") {
		t.Errorf("the traceback shows the driver's frames: %q", res.Text())
	}
	expect(t, run(t, s, "x"), "21\n", false)
}

func TestTimeout(t *testing.T) {
	s := open(t, newServer(t, &Options{Limits: sandbox.Limits{CallTimeout: time.Second}}, nil))
	run(t, s, "y = 5")
	start := time.Now()
	res := run(t, s, "while True: pass")
	if d := time.Since(start); d < time.Second || d > 6*time.Second {
		t.Errorf("the call took %v with a 1s limit", d)
	}
	expect(t, res, "execution timed out after 1s; the interpreter state was reset", true)
	var te *TimeoutError
	if !errors.As(res.Err, &te) {
		t.Errorf("Err %v, want a *TimeoutError", res.Err)
	}
	// A fresh interpreter: it works, and the old state is gone.
	res = run(t, s, "print('alive')\ny")
	if !res.IsError || !strings.HasPrefix(res.Text(), "alive\n") || !strings.Contains(res.Text(), "NameError") {
		t.Errorf("after the reset: %q", res.Text())
	}
}

// A fork bomb stays within the session's process limit, the host can
// still start processes meanwhile, the time limit stops it, and nothing of
// it is left after Close.
func TestForkBombContained(t *testing.T) {
	const maxProcs = 32
	srv := newServer(t, &Options{Limits: sandbox.Limits{CallTimeout: 2 * time.Second}}, &sandbox.Options{MaxProcesses: maxProcs})
	s := open(t, srv)
	uid, own := s.Box().UID()
	if !own {
		t.Fatal("tests must run as root: the process limit needs a uid per session")
	}
	var peak atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan error, 1)
	go func() {
		var hostErr error
		for {
			select {
			case <-stop:
				sampled <- hostErr
				return
			case <-time.After(20 * time.Millisecond):
			}
			if n := int64(len(sandbox.UIDPIDs(uid))); n > peak.Load() {
				peak.Store(n)
			}
			if peak.Load() > 5 && hostErr == nil {
				hostErr = exec.Command("true").Run() // the host is not starved
			}
		}
	}()
	res := run(t, s, "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass")
	close(stop)
	if err := <-sampled; err != nil {
		t.Errorf("the host could not start a process during the bomb: %v", err)
	}
	expect(t, res, "execution timed out after 2s; the interpreter state was reset", true)
	t.Logf("peak of %d processes for the session", peak.Load())
	if p := peak.Load(); p > maxProcs || p < maxProcs/2 {
		t.Errorf("peak of %d processes for the session, want the bomb to reach and stay within %d", p, maxProcs)
	}
	expect(t, run(t, s, "print('after')"), "after\n", false)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	assertGone(t, s)
}

// Allocating 2 GiB fails inside the interpreter (RLIMIT_AS), which lives
// on.
func TestMemoryHog(t *testing.T) {
	s := open(t, newServer(t, nil, nil))
	run(t, s, "z = 'kept'")
	res := run(t, s, "b = bytearray(2 * 1024**3)\nprint(len(b))")
	if !res.IsError || !strings.Contains(res.Text(), "MemoryError") {
		t.Errorf("2 GiB allocation: %q (IsError %v), want a MemoryError", res.Text(), res.IsError)
	}
	expect(t, run(t, s, "z"), "'kept'\n", false)
}

func TestOutputTruncated(t *testing.T) {
	s := open(t, newServer(t, &Options{Limits: sandbox.Limits{MaxOutputBytes: 1000}}, nil))
	expect(t, run(t, s, "print('x' * 5000)"), strings.Repeat("x", 1000)+"\n[output truncated at 1000 bytes]", false)
	// At the limit exactly: nothing is cut.
	expect(t, run(t, s, "print('y' * 999)"), strings.Repeat("y", 999)+"\n", false)
	// A multi-byte character cut at the limit is dropped, not mangled.
	res := run(t, s, "print('a' + 'é' * 1000)")
	if want := "a" + strings.Repeat("é", 499) + "\n[output truncated at 1000 bytes]"; res.Text() != want {
		t.Errorf("cut UTF-8 output: %q", res.Text())
	}
}

func TestNoLoopbackConnection(t *testing.T) {
	s := open(t, newServer(t, nil, nil))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	// The accept loop reports every connection's peer until the test's
	// own marker connection, dialled once the sandbox's attempt is over:
	// a connection from the sandbox would have been queued before it.
	peers := make(chan string, 16)
	go func() {
		defer close(peers)
		for range cap(peers) {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			peers <- c.RemoteAddr().String()
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	res := run(t, s, fmt.Sprintf("import socket\nsocket.create_connection(('127.0.0.1', %d), timeout=2)\nprint('connected')", port))
	if !res.IsError || strings.Contains(res.Text(), "connected\n") || !strings.Contains(res.Text(), "ConnectionRefusedError") {
		t.Errorf("connecting to the host's loopback: %q (IsError %v)", res.Text(), res.IsError)
	}
	marker, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer marker.Close()
	for peer := range peers {
		if peer == marker.LocalAddr().String() {
			return
		}
		t.Errorf("the host listener accepted a connection from %s, before the marker", peer)
	}
	t.Error("the marker connection was not accepted")
}

func TestWritesOutsideWorkDirFail(t *testing.T) {
	srv := newServer(t, nil, nil)
	s := open(t, srv)
	outside := t.TempDir()
	targets := []string{"/x", "/etc/x", "/usr/x", filepath.Join(outside, "x"), filepath.Join(filepath.Dir(s.Box().Dir()), "x")}
	list, _ := json.Marshal(targets)
	code := fmt.Sprintf(`for p in %s:
    try:
        open(p, 'w').write('x')
        print('WROTE', p)
    except OSError as e:
        print('denied', type(e).__name__)
open('/mnt/data/inside', 'w').write('ok')
open('/tmp/scratch', 'w').write('ok')`, list)
	res := run(t, s, code)
	if res.IsError || strings.Contains(res.Text(), "WROTE") || strings.Count(res.Text(), "denied") != len(targets) {
		t.Errorf("writes outside the work dir: %q", res.Text())
	}
	for _, p := range targets {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s was written on the host", p)
			os.Remove(p)
		}
	}
	if b, err := os.ReadFile(filepath.Join(s.Box().Dir(), "inside")); err != nil || string(b) != "ok" {
		t.Errorf("the work dir file: %q, %v", b, err)
	}
}

// Cleanup kills the interpreter and whatever it started — in the
// background, in a new session, forked — and removes the work directory.
func TestCleanupLeavesNothing(t *testing.T) {
	s := open(t, newServer(t, nil, nil))
	run(t, s, `import os, subprocess
subprocess.Popen(['sleep', '300'], start_new_session=True)
subprocess.Popen(['sh', '-c', 'sleep 300 &'])
if os.fork() == 0:
    os.setsid()
    import time
    time.sleep(300)`)
	uid, _ := s.Box().UID()
	if n := len(sandbox.UIDPIDs(uid)); n < 4 {
		t.Fatalf("only %d processes of the session before Cleanup", n)
	}
	if err := s.Cleanup(context.Background()); err != nil {
		t.Fatal(err)
	}
	assertGone(t, s)
	if _, err := s.Call(context.Background(), tools.Call{Name: Name, Arguments: "1"}); !errors.Is(err, tools.ErrClosed) {
		t.Errorf("Call after Cleanup: %v, want ErrClosed", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close after Cleanup: %v", err)
	}
	if err := s.Cleanup(context.Background()); !errors.Is(err, tools.ErrClosed) {
		t.Errorf("Cleanup after Close: %v, want ErrClosed", err)
	}
}

// Close during a running call does not wait for it: it kills it.
func TestCloseDuringCall(t *testing.T) {
	s := open(t, newServer(t, nil, nil))
	errc := make(chan error, 1)
	go func() {
		_, err := s.Call(context.Background(), tools.Call{Name: Name, Arguments: "import time\nopen('started', 'w').close()\ntime.sleep(300)"})
		errc <- err
	}()
	// The code says it is in its sleep by creating a file.
	testutil.WaitFor(t, "the code to start", func() bool {
		_, err := os.Stat(filepath.Join(s.Box().Dir(), "started"))
		return err == nil
	})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// The bound only keeps a Close that waits for the call from hanging
	// the test (the call sleeps 300s).
	select {
	case err := <-errc:
		if !errors.Is(err, tools.ErrClosed) {
			t.Errorf("the running call returned %v, want ErrClosed", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the running call did not return after Close")
	}
	assertGone(t, s)
}

// A cancelled request ctx ends the call at once and kills the cell.
func TestCallCancelled(t *testing.T) {
	s := open(t, newServer(t, nil, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := s.Call(ctx, tools.Call{Name: Name, Arguments: "import time\ntime.sleep(300)"})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Call: %v, want the ctx's error", err)
	}
	expect(t, run(t, s, "print('fresh')"), "fresh\n", false)
}

func TestInterpreterExit(t *testing.T) {
	s := open(t, newServer(t, nil, nil))
	res := run(t, s, "import os\nos._exit(3)")
	expect(t, res, "the Python interpreter exited unexpectedly (status 3); the interpreter state was reset", true)
	var ee *ExitError
	if !errors.As(res.Err, &ee) {
		t.Errorf("Err %v, want an *ExitError", res.Err)
	}
	expect(t, run(t, s, "print('back')"), "back\n", false)
}

// CPU time is bounded apart from wall time: RLIMIT_CPU stops a busy
// interpreter before the call's time limit (its status says SIGXCPU; the
// time limit would say "timed out").
func TestCPULimit(t *testing.T) {
	s := open(t, newServer(t, &Options{Limits: sandbox.Limits{CallTimeout: time.Hour}}, &sandbox.Options{CPUSeconds: 1}))
	res := run(t, s, "while True: pass")
	expect(t, res, "the Python interpreter exited unexpectedly (status 152, CPU time limit reached); the interpreter state was reset", true)
}

func TestUnsandboxedNeedsOptIn(t *testing.T) {
	base := testBase(t)
	logger := slog.New(slog.NewTextHandler(t.Output(), nil))
	_, err := sandbox.New(&sandbox.Options{BwrapPath: "/nonexistent/bwrap", WorkDirBase: base, Logger: logger})
	if !errors.Is(err, sandbox.ErrUnavailable) {
		t.Fatalf("without bwrap and without opt-in: %v, want ErrUnavailable", err)
	}
	sb, err := sandbox.New(&sandbox.Options{BwrapPath: "/nonexistent/bwrap", WorkDirBase: base, Logger: logger, AllowUnsandboxed: true})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(sb, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := srv.Definition().Description; !strings.Contains(d, "not restricted") || strings.Contains(d, "/mnt/data") {
		t.Errorf("unsandboxed description: %q", d)
	}
	s := open(t, srv)
	expect(t, run(t, s, "import os\nos.getcwd()"), fmt.Sprintf("'%s'\n", s.Box().Dir()), false)
}

func TestDefinition(t *testing.T) {
	srv := newServer(t, nil, nil)
	d := srv.Definition()
	if d.Name != "python" || string(d.Parameters) != `{"type":"object","properties":{"code":{"type":"string"}},"required":["code"]}` {
		t.Errorf("definition %q %s", d.Name, d.Parameters)
	}
	for _, want := range []string{"stateful Jupyter notebook", "time out after 30.0 seconds", "'/mnt/data'", "Internet access for this session is disabled."} {
		if !strings.Contains(d.Description, want) {
			t.Errorf("description lacks %q: %s", want, d.Description)
		}
	}
	defs, err := srv.Tools(context.Background())
	if err != nil || len(defs) != 1 || defs[0].Name != "python" || srv.Name() != "python" {
		t.Errorf("Tools: %v, %v", defs, err)
	}
}

func TestCode(t *testing.T) {
	for _, tc := range []struct{ args, want string }{
		{`{"code": "print(1)"}`, "print(1)"},
		{` {"code":"a\nb"} `, "a\nb"},
		{"print(1)", "print(1)"},
		{"{1, 2}", "{1, 2}"},                                     // a set literal, not JSON
		{`{"x": 1}`, `{"x": 1}`},                                 // a dict literal: no "code"
		{`{"code": 1}`, `{"code": 1}`},                           // not a string
		{"import json\n{'code': 1}", "import json\n{'code': 1}"}, // raw code
	} {
		if got := Code(tc.args); got != tc.want {
			t.Errorf("Code(%q) = %q, want %q", tc.args, got, tc.want)
		}
	}
}
