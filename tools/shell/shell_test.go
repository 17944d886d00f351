package shell

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loomgate/loom/internal/testutil"
	"github.com/loomgate/loom/tools"
	"github.com/loomgate/loom/tools/sandbox"
)

// newServer builds a shell Server on a real bubblewrap sandbox. It fails
// (not skips) without bwrap: CI installs it.
func newServer(t *testing.T, o *Options) *Server {
	t.Helper()
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Fatalf("bubblewrap (bwrap) is required for these tests: apt-get install -y bubblewrap (%v)", err)
	}
	// Not t.TempDir: mode 0700, which a session uid could not traverse.
	base, err := os.MkdirTemp("", "loom-shell-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	sb, err := sandbox.New(&sandbox.Options{WorkDirBase: base, Logger: slog.New(slog.DiscardHandler)})
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

func open(t *testing.T, srv *Server) *Session {
	t.Helper()
	s, err := srv.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s.(*Session)
}

// call runs an action and decodes its output, checking that the text and
// the structured content agree.
func call(t *testing.T, s *Session, action string) CallOutput {
	t.Helper()
	res, err := s.Call(context.Background(), tools.Call{CallID: "sh1", Name: Name, Arguments: action})
	if err != nil {
		t.Fatalf("Call(%s): %v", action, err)
	}
	if res.IsError || res.CallID != "sh1" {
		t.Fatalf("Call(%s): IsError %v, CallID %q: %s", action, res.IsError, res.CallID, res.Text())
	}
	if res.Text() != string(res.Structured) {
		t.Errorf("text %s and structured %s differ", res.Text(), res.Structured)
	}
	var out CallOutput
	if err := json.Unmarshal(res.Structured, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func exitOutcome(code int) Outcome { return Outcome{Type: OutcomeExit, ExitCode: &code} }

func sameOutcome(a, b Outcome) bool {
	return a.Type == b.Type && (a.ExitCode == nil) == (b.ExitCode == nil) && (a.ExitCode == nil || *a.ExitCode == *b.ExitCode)
}

func TestCommands(t *testing.T) {
	s := open(t, newServer(t, nil))
	out := call(t, s, `{"commands":["echo hello; echo warn >&2", "pwd", "exit 3", "ls /nonexistent"]}`)
	want := []CommandOutput{
		{Stdout: "hello\n", Stderr: "warn\n", Outcome: exitOutcome(0)},
		{Stdout: "/mnt/data\n", Outcome: exitOutcome(0)},
		{Outcome: exitOutcome(3)},
		{Stderr: "ls: cannot access '/nonexistent': No such file or directory\n", Outcome: exitOutcome(2)},
	}
	if len(out.Output) != len(want) || out.MaxOutputLength != DefaultMaxOutputBytes {
		t.Fatalf("output %+v", out)
	}
	for i, w := range want {
		g := out.Output[i]
		if g.Stdout != w.Stdout || g.Stderr != w.Stderr || !sameOutcome(g.Outcome, w.Outcome) {
			t.Errorf("command %d: %+v, want %+v", i, g, w)
		}
	}
	// The exact wire shape of one entry.
	b, _ := json.Marshal(out.Output[2])
	if string(b) != `{"stdout":"","stderr":"","outcome":{"type":"exit","exit_code":3}}` {
		t.Errorf("wire shape %s", b)
	}
}

// Files persist across calls in a session; processes do not outlive their
// command.
func TestWorkDirPersists(t *testing.T) {
	s := open(t, newServer(t, nil))
	call(t, s, `{"commands":["echo kept > f.txt", "sleep 300 &"]}`)
	uid, own := s.Box().UID()
	if !own {
		t.Fatal("tests must run as root: sessions need uids of their own to be checked")
	}
	if left := sandbox.UIDPIDs(uid); len(left) > 0 {
		t.Errorf("a background process outlived its command: %v", left)
	}
	out := call(t, s, `{"commands":["cat f.txt"]}`)
	if out.Output[0].Stdout != "kept\n" {
		t.Errorf("cat: %+v", out.Output[0])
	}
}

func TestTimeout(t *testing.T) {
	s := open(t, newServer(t, &Options{Limits: sandbox.Limits{CallTimeout: 5 * time.Second}}))
	start := time.Now()
	out := call(t, s, `{"commands":["echo before; sleep 300", "echo never"], "timeout_ms": 500}`)
	if d := time.Since(start); d > 4*time.Second {
		t.Errorf("took %v with timeout_ms 500", d)
	}
	if len(out.Output) != 1 || out.Output[0].Stdout != "before\n" || !sameOutcome(out.Output[0].Outcome, Outcome{Type: OutcomeTimeout}) {
		t.Errorf("output %+v, want one timed-out command", out)
	}
	b, _ := json.Marshal(out.Output[0].Outcome)
	if string(b) != `{"type":"timeout"}` {
		t.Errorf("timeout outcome %s", b)
	}
	// The server's limit bounds the model's.
	srv := newServer(t, &Options{Limits: sandbox.Limits{CallTimeout: 300 * time.Millisecond}})
	out = call(t, open(t, srv), `{"commands":["sleep 300"], "timeout_ms": 600000}`)
	if out.Output[0].Outcome.Type != OutcomeTimeout {
		t.Errorf("timeout_ms above the server's limit: %+v", out)
	}
}

func TestOutputCap(t *testing.T) {
	s := open(t, newServer(t, &Options{Limits: sandbox.Limits{MaxOutputBytes: 1000}}))
	out := call(t, s, `{"commands":["head -c 5000 /dev/zero | tr '\\0' x", "head -c 5000 /dev/zero | tr '\\0' y >&2", "printf abc"], "max_output_length": 100}`)
	if out.MaxOutputLength != 100 {
		t.Errorf("max_output_length %d, want 100", out.MaxOutputLength)
	}
	if want := strings.Repeat("x", 100) + "\n[output truncated at 100 bytes]"; out.Output[0].Stdout != want {
		t.Errorf("stdout %q", out.Output[0].Stdout)
	}
	if want := strings.Repeat("y", 100) + "\n[output truncated at 100 bytes]"; out.Output[1].Stderr != want {
		t.Errorf("stderr %q", out.Output[1].Stderr)
	}
	if out.Output[2].Stdout != "abc" {
		t.Errorf("a small output: %q", out.Output[2].Stdout)
	}
	// The model cannot raise the server's cap.
	out = call(t, s, `{"commands":["head -c 5000 /dev/zero | tr '\\0' z"], "max_output_length": 100000}`)
	if out.MaxOutputLength != 1000 || len(out.Output[0].Stdout) != 1000+len("\n[output truncated at 1000 bytes]") {
		t.Errorf("cap %d, stdout of %d bytes", out.MaxOutputLength, len(out.Output[0].Stdout))
	}
}

func TestBadArguments(t *testing.T) {
	s := open(t, newServer(t, nil))
	for _, args := range []string{`not json`, `{}`, `{"commands":[]}`, `{"commands":[" "]}`, `{"commands":"ls"}`} {
		res, err := s.Call(context.Background(), tools.Call{CallID: "b", Name: Name, Arguments: args})
		var ae *ArgumentError
		if err != nil || !res.IsError || !errors.As(res.Err, &ae) {
			t.Errorf("%s: %+v, %v; want an argument error result", args, res, err)
		}
	}
	// {"command": "..."} is accepted as one command.
	out := call(t, s, `{"command":"echo one"}`)
	if out.Output[0].Stdout != "one\n" {
		t.Errorf("single command: %+v", out)
	}
}

func TestCleanupAndClose(t *testing.T) {
	s := open(t, newServer(t, nil))
	call(t, s, `{"commands":["echo x > f"]}`)
	// A long command still running when the response ends.
	errc := make(chan error, 1)
	go func() {
		_, err := s.Call(context.Background(), tools.Call{Name: Name, Arguments: `{"commands":["touch started; sleep 300"]}`})
		errc <- err
	}()
	uid, _ := s.Box().UID()
	dir := s.Box().Dir()
	// The command says it runs by creating a file.
	testutil.WaitFor(t, "the command to start", func() bool {
		_, err := os.Stat(filepath.Join(dir, "started"))
		return err == nil
	})
	if err := s.Cleanup(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, tools.ErrClosed) {
			t.Errorf("the running call returned %v, want ErrClosed", err)
		}
	case <-time.After(60 * time.Second): // only a broken Cleanup comes here
		t.Fatal("the running call did not end at Cleanup")
	}
	if left := sandbox.UIDPIDs(uid); len(left) > 0 {
		t.Errorf("processes left after Cleanup: %v", left)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("work dir still there: %v", err)
	}
	if _, err := s.Call(context.Background(), tools.Call{Name: Name, Arguments: `{"commands":["true"]}`}); !errors.Is(err, tools.ErrClosed) {
		t.Errorf("Call after Cleanup: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Error(err)
	}
}

func TestDefinition(t *testing.T) {
	srv := newServer(t, nil)
	d := srv.Definition()
	var schema map[string]any
	if err := json.Unmarshal(d.Parameters, &schema); err != nil {
		t.Fatalf("parameters %s: %v", d.Parameters, err)
	}
	props, _ := schema["properties"].(map[string]any)
	for _, k := range []string{"commands", "timeout_ms", "max_output_length"} {
		if _, ok := props[k]; !ok {
			t.Errorf("parameters lack %s: %s", k, d.Parameters)
		}
	}
	if d.Name != "shell" || srv.Name() != "shell" || !strings.Contains(d.Description, "/mnt/data") {
		t.Errorf("definition %+v", d)
	}
}
