package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loomgate/loom/internal/testutil"
	"github.com/loomgate/loom/tools"
)

// requireBwrap fails (not skips) without bubblewrap: the sandbox is the
// point of these tests, and CI installs it.
func requireBwrap(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Fatalf("bubblewrap (bwrap) is required for these tests: apt-get install -y bubblewrap (%v)", err)
	}
}

// testBase is a work directory base under the system temp dir: t.TempDir
// is mode 0700, which a session uid could not traverse.
func testBase(t *testing.T) string {
	t.Helper()
	base, err := os.MkdirTemp("", "loom-sandbox-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	return base
}

func newSandbox(t *testing.T, o *Options) *Sandbox {
	t.Helper()
	requireBwrap(t)
	if o == nil {
		o = &Options{}
	}
	if o.WorkDirBase == "" {
		o.WorkDirBase = testBase(t)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
	}
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Sandboxed() {
		t.Fatal("sandbox fell back to unsandboxed")
	}
	return s
}

func newBox(t *testing.T, s *Sandbox) *Box {
	t.Helper()
	b, err := s.NewBox()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// run runs a bash script in b and returns its stdout, stderr and exit code.
func run(t *testing.T, b *Box, script string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	exit, err := b.Run(ctx, Command{Args: []string{"bash", "-c", script}, Stdout: &out, Stderr: &errb})
	if err != nil {
		t.Fatalf("run %q: %v (stderr %q)", script, err, errb.String())
	}
	return out.String(), errb.String(), exit.Code
}

func TestRunsInSandbox(t *testing.T) {
	s := newSandbox(t, nil)
	b := newBox(t, s)
	out, errOut, code := run(t, b, `echo hello; echo oops >&2; pwd; id -u; hostname; exit 3`)
	if code != 3 {
		t.Errorf("exit code %d, want 3", code)
	}
	uid, own := b.UID()
	if os.Geteuid() == 0 && !own {
		t.Error("as root a box must have a uid of its own")
	}
	want := fmt.Sprintf("hello\n/mnt/data\n%d\nsandbox\n", uid)
	if out != want || errOut != "oops\n" {
		t.Errorf("stdout %q stderr %q, want %q and %q", out, errOut, want, "oops\n")
	}
}

func TestLimitsApplied(t *testing.T) {
	s := newSandbox(t, &Options{CPUSeconds: 7, MemoryBytes: 256 << 20, MaxProcesses: 33, MaxFileBytes: 1 << 20})
	b := newBox(t, s)
	out, _, _ := run(t, b, `ulimit -t; ulimit -v; ulimit -f; ulimit -u`)
	want := "7\n262144\n1024\n33\n" // bash counts -v and -f in KiB
	if os.Geteuid() != 0 {
		want = "7\n262144\n1024\n"
		out = strings.Join(strings.SplitAfter(out, "\n")[:3], "")
	}
	if out != want {
		t.Errorf("limits %q, want %q", out, want)
	}
}

// A connection to a port listening on the host's loopback fails: the
// sandbox has a loopback of its own.
func TestNoNetwork(t *testing.T) {
	s := newSandbox(t, nil)
	b := newBox(t, s)
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
	out, errOut, _ := run(t, b, fmt.Sprintf(`if echo hi > /dev/tcp/127.0.0.1/%d; then echo connected; fi; tail -n +3 /proc/net/dev | cut -d: -f1`, port))
	if strings.Contains(out, "connected") || !strings.Contains(errOut, "Connection refused") {
		t.Errorf("connecting to the host's loopback from the sandbox: %q, %q", out, errOut)
	}
	if strings.TrimSpace(out) != "lo" {
		t.Errorf("network interfaces in the sandbox: %q, want only lo", out)
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

// Only the work directory, /tmp and /dev/shm are writable; the host's
// other directories are read-only or not there at all.
func TestWritesConfined(t *testing.T) {
	s := newSandbox(t, nil)
	b := newBox(t, s)
	outside := t.TempDir() // exists on the host, outside the work dir
	targets := []string{"/x", "/etc/x", "/usr/x", "/mnt/x", filepath.Join(outside, "x"), filepath.Join(s.opts.WorkDirBase, "x")}
	var script strings.Builder
	for _, p := range targets {
		fmt.Fprintf(&script, "if echo x > %q 2>/dev/null; then echo 'wrote %s'; fi\n", p, p)
	}
	script.WriteString("echo ok > /mnt/data/inside && echo > /tmp/t && echo > /dev/shm/t && echo inside-ok\n")
	out, _, _ := run(t, b, script.String())
	if out != "inside-ok\n" {
		t.Errorf("output %q, want only inside-ok", out)
	}
	for _, p := range targets {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s was written on the host", p)
			os.Remove(p)
		}
	}
	if got, err := os.ReadFile(filepath.Join(b.Dir(), "inside")); err != nil || string(got) != "ok\n" {
		t.Errorf("work dir file: %q, %v", got, err)
	}
}

// The tmpfs mounts are size-capped: they live in memory.
func TestTmpfsCapped(t *testing.T) {
	s := newSandbox(t, &Options{TmpBytes: 1 << 20})
	b := newBox(t, s)
	_, errOut, code := run(t, b, `head -c 2000000 /dev/zero > /tmp/big`)
	if code == 0 || !strings.Contains(errOut, "No space left") {
		t.Errorf("2 MB into a 1 MiB /tmp: exit %d, %q", code, errOut)
	}
}

// Kill takes the whole namespace down, background and setsid'd processes
// included; Close then finds nothing of the uid and removes the directory.
func TestKillAndClose(t *testing.T) {
	s := newSandbox(t, nil)
	b, err := s.NewBox()
	if err != nil {
		t.Fatal(err)
	}
	// "started" comes once the three background processes exist.
	started, w := pipe(t)
	p, err := b.Start(Command{Args: []string{"bash", "-c", `sleep 300 & setsid sleep 300 & nohup sleep 300 >/dev/null 2>&1 & echo started; wait`}, Stdout: w})
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	if line, err := bufio.NewReader(started).ReadString('\n'); line != "started\n" {
		t.Fatalf("the program did not start: %q, %v", line, err)
	}
	// bwrap reported the namespace before the program ran; the Process
	// reads it on its own goroutine.
	testutil.WaitFor(t, "the PID namespace", func() bool { return p.PIDNamespace() != 0 })
	if n := len(NamespacePIDs(p.PIDNamespace())); n < 4 {
		t.Fatalf("%d processes in the namespace, want at least 4", n)
	}
	ns := p.PIDNamespace()
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	exit, err := p.Wait()
	if err != nil || !exit.Killed {
		t.Errorf("exit %+v, %v; want killed", exit, err)
	}
	if left := NamespacePIDs(ns); len(left) > 0 {
		t.Errorf("processes left in the namespace after Kill: %v", left)
	}

	// A second program, then Close while it runs.
	if _, err := b.Start(Command{Args: []string{"sleep", "300"}}); err != nil {
		t.Fatal(err)
	}
	dir := b.Dir()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	assertGone(t, b, dir)
	if _, err := b.Start(Command{Args: []string{"true"}}); !errors.Is(err, tools.ErrClosed) {
		t.Errorf("Start after Close: %v, want ErrClosed", err)
	}
}

func assertGone(t *testing.T, b *Box, dir string) {
	t.Helper()
	if uid, own := b.UID(); own {
		if left := UIDPIDs(uid); len(left) > 0 {
			t.Errorf("processes of uid %d left after Close: %v", uid, left)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("work dir %s still there: %v", dir, err)
	}
}

// pipe returns both ends of an os.Pipe, closed at the end of the test
// (closing the write end early, once handed on, is the caller's).
func pipe(t *testing.T) (r, w *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	return r, w
}

// A sandbox that cannot be built is a SetupError, not an exit code of the
// program.
func TestSetupError(t *testing.T) {
	// A plain work directory (no quota tmpfs), which the test can remove.
	s := newSandbox(t, &Options{DiskBytes: -1})
	b := newBox(t, s)
	if err := os.Remove(b.Dir()); err != nil {
		t.Fatal(err)
	}
	_, err := b.Run(context.Background(), Command{Args: []string{"true"}})
	var se *SetupError
	if !errors.As(err, &se) || !strings.Contains(se.Stderr, "bwrap") {
		t.Errorf("Run with the work dir gone: %v, want a SetupError from bwrap", err)
	}
}

func TestRunTimeout(t *testing.T) {
	s := newSandbox(t, nil)
	b := newBox(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	type result struct {
		exit Exit
		err  error
	}
	done := make(chan result, 1)
	go func() {
		exit, err := b.Run(ctx, Command{Args: []string{"bash", "-c", "trap '' TERM; sleep 300"}})
		done <- result{exit, err}
	}()
	select {
	case r := <-done:
		if !errors.Is(r.err, context.DeadlineExceeded) || !r.exit.Killed {
			t.Errorf("Run: %+v, %v; want killed at the deadline", r.exit, r.err)
		}
	case <-time.After(60 * time.Second): // only a broken Run comes here
		t.Fatal("Run still running a minute after its deadline")
	}
}

func TestUnavailable(t *testing.T) {
	base := testBase(t)
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	for _, tc := range []struct{ name, bwrap string }{
		{"missing", "/nonexistent/bwrap"},
		// A bwrap that cannot create namespaces (restricted user
		// namespaces) fails the probe the same way.
		{"broken", "/bin/false"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(&Options{BwrapPath: tc.bwrap, WorkDirBase: base, Logger: logger})
			if !errors.Is(err, ErrUnavailable) {
				t.Fatalf("New without opt-in: %v, want ErrUnavailable", err)
			}
			s, err := New(&Options{BwrapPath: tc.bwrap, WorkDirBase: base, Logger: logger, AllowUnsandboxed: true})
			if err != nil {
				t.Fatal(err)
			}
			if s.Sandboxed() {
				t.Fatal("Sandboxed() with no working bwrap")
			}
			if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "UNSANDBOXED") {
				t.Errorf("running unsandboxed was not logged loudly: %s", logs.String())
			}
			b := newBox(t, s)
			out, _, code := run(t, b, "pwd")
			if code != 0 || strings.TrimSpace(out) != b.Dir() {
				t.Errorf("unsandboxed pwd %q (exit %d), want %s", out, code, b.Dir())
			}
		})
	}
	if entries, _ := os.ReadDir(base); len(entries) != 0 {
		t.Errorf("work dirs left behind: %v", entries)
	}
}

func TestOutputCap(t *testing.T) {
	c := NewOutputCap(10)
	a, b := c.Buffer(), c.Buffer()
	a.Write([]byte("12345"))
	b.Write([]byte("abc"))
	a.Write([]byte("6789"))
	b.Write([]byte("zzz"))
	if a.String() != "1234567" || b.String() != "abc" {
		t.Errorf("buffers %q %q", a.String(), b.String())
	}
	if !c.Truncated() || !a.Truncated() || !b.Truncated() || c.Total() != 15 {
		t.Errorf("truncated %v %v %v total %d", c.Truncated(), a.Truncated(), b.Truncated(), c.Total())
	}
	// A character cut at the limit is dropped, not mangled.
	u := NewOutputCap(4).Buffer()
	u.Write([]byte("aé€"))
	if got := u.String(); got != "aé" {
		t.Errorf("cut UTF-8: %q", got)
	}
}

// The sandbox dies with loom: a helper process standing in for loom starts
// a sandboxed program, reports its uid, and is SIGKILLed (no cleanup runs);
// the program must be gone soon after.
func TestDiesWithLoom(t *testing.T) {
	requireBwrap(t)
	if os.Geteuid() != 0 {
		t.Fatal("tests must run as root: the check finds the sandbox by its uid")
	}
	base := testBase(t)
	// The program's stdout, handed through the helper (its fd 3): it
	// says when the program runs, and reaches end of file when the last
	// process holding it (bwrap, the shell, the sleeps) is gone.
	program, programW := pipe(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperLoom$")
	cmd.Env = append(os.Environ(), "LOOM_SANDBOX_HELPER="+base)
	cmd.ExtraFiles = []*os.File{programW}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var uid uint32
	if _, err := fmt.Fscan(stdout, &uid); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("reading the helper's uid: %v", err)
	}
	programW.Close()
	// Wait for the program itself, not just bwrap: killed while bwrap is
	// still setting up, before it asked to die with its parent, the
	// sandbox would outlive the helper.
	pr := bufio.NewReader(program)
	if line, err := pr.ReadString('\n'); line != "running\n" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the program did not start: %q, %v", line, err)
	}
	cmd.Process.Kill()
	cmd.Wait()
	// End of file: every process of the sandbox has exited. Should one
	// survive, the read blocks and the test's own timeout reports it.
	if rest, err := io.ReadAll(pr); err != nil || len(rest) != 0 {
		t.Errorf("after the helper died the program wrote %q, %v", rest, err)
	}
	// Exited processes of the uid may still wait to be reaped.
	testutil.WaitFor(t, "the processes of the uid to be reaped", func() bool { return len(UIDPIDs(uid)) == 0 })
	// The dead loom's tmpfs (the box's /tmp and /dev/shm) are still
	// mounted; the next loom on the same base unmounts them.
	if n := mountsUnder(t, base); n == 0 {
		t.Error("the killed helper left no tmpfs mounted: nothing to check the cleanup on")
	}
	newSandbox(t, &Options{WorkDirBase: base})
	if n := mountsUnder(t, base); n != 0 {
		t.Errorf("%d mounts left under %s after the next loom started", n, base)
	}
}

// mountsUnder counts the mounts below dir.
func mountsUnder(t *testing.T, dir string) int {
	t.Helper()
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for line := range strings.Lines(string(data)) {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			n++
		}
	}
	return n
}

// TestHelperLoom is TestDiesWithLoom's stand-in for loom; it does nothing
// in a normal run.
func TestHelperLoom(t *testing.T) {
	base := os.Getenv("LOOM_SANDBOX_HELPER")
	if base == "" {
		return
	}
	// No quota tmpfs on the work directory (its /tmp and /dev/shm are
	// tmpfs all the same): this loom is killed, and its mounts outlive it.
	s, err := New(&Options{WorkDirBase: base, DiskBytes: -1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.NewBox()
	if err != nil {
		t.Fatal(err)
	}
	// fd 3 is the test's pipe: the program's stdout.
	program := os.NewFile(3, "program")
	if _, err := b.Start(Command{Args: []string{"bash", "-c", "sleep 300 & echo running; exec sleep 300"}, Stdout: program}); err != nil {
		t.Fatal(err)
	}
	program.Close()
	uid, _ := b.UID()
	fmt.Println(uid)
	time.Sleep(time.Minute) // until killed; a bound should the test be gone
}

// When loom is a subreaper (a container's PID 1 is one), the sandbox's PID
// 1 can end up as loom's child once bwrap exits: loom must reap it. A
// helper process plays loom as a subreaper and counts its zombies.
func TestNoZombiesAsSubreaper(t *testing.T) {
	requireBwrap(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperReaper$")
	cmd.Env = append(os.Environ(), "LOOM_SANDBOX_REAPER="+testBase(t))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "zombies=0\n") {
		t.Errorf("helper output:\n%s", out)
	}
}

// TestHelperReaper is TestNoZombiesAsSubreaper's stand-in for loom; it does
// nothing in a normal run.
func TestHelperReaper(t *testing.T) {
	base := os.Getenv("LOOM_SANDBOX_REAPER")
	if base == "" {
		return
	}
	const prSetChildSubreaper = 36
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		t.Fatal(errno)
	}
	// No quota tmpfs on the work directory (its /tmp and /dev/shm are
	// tmpfs all the same): this loom is killed, and its mounts outlive it.
	s, err := New(&Options{WorkDirBase: base, DiskBytes: -1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.NewBox()
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if _, err := b.Run(context.Background(), Command{Args: []string{"bash", "-c", "sleep 300 & true"}}); err != nil {
			t.Fatal(err)
		}
	}
	if p, err := b.Start(Command{Args: []string{"sleep", "300"}}); err != nil {
		t.Fatal(err)
	} else {
		p.Kill()
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	// Children still exiting on a loaded machine are not zombies yet:
	// poll, boundedly. Without reaping they stay forever.
	zombies := 0
	testutil.Eventually(testutil.Patience, func() bool {
		zombies = 0
		for _, pid := range livePIDsAll() {
			if string(statusField(pid, "PPid:")) == strconv.Itoa(os.Getpid()) {
				zombies++
			}
		}
		return zombies == 0
	})
	fmt.Printf("zombies=%d\n", zombies)
}

// livePIDsAll lists every pid in /proc, zombies included.
func livePIDsAll() []int {
	d, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range d {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}
