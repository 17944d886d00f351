package replicas

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/loomgate/loom/internal/testutil"
)

// startTimeout bounds how long a replica may take to open its store and
// listen.
const startTimeout = 30 * time.Second

// replica is one loom process. Its address stays the same across
// restarts, as a balancer's configuration expects.
type replica struct {
	name string
	addr string
	bin  string
	args []string
	env  []string              // more environment variables, NAME=value
	logs testutil.LockedBuffer // stderr of every run, for failure messages

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed when the current process has exited
	state  *os.ProcessState
}

// freePort returns a loopback address no one listens on right now.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// newReplica returns an unstarted replica with loom serve's arguments;
// --addr and --log-format are added.
func newReplica(t *testing.T, name string, args ...string) *replica {
	t.Helper()
	r := &replica{name: name, addr: freePort(t), bin: needLoom(t), args: args}
	t.Cleanup(func() {
		r.kill()
		if t.Failed() {
			t.Logf("replica %s logs (without the per-response lines):\n%s", r.name, r.lifecycleLogs())
		}
	})
	return r
}

// start starts the process and waits, bounded, until it listens.
func (r *replica) start(t *testing.T) {
	t.Helper()
	if err := r.tryStart(); err != nil {
		t.Fatal(err)
	}
}

// tryStart starts the process and waits, bounded, until it listens: the
// explicit signal is its "loom listening" log line, written after the
// listener is open.
func (r *replica) tryStart() error {
	args := append([]string{"serve", "--addr", r.addr, "--log-format", "json"}, r.args...)
	cmd := exec.Command(r.bin, args...)
	cmd.Env = append(append(os.Environ(), "LOOM_REASONING_KEY=replicas-share-this-key-0123456789"), r.env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start replica %s: %v", r.name, err)
	}
	listening := make(chan struct{})
	exited := make(chan struct{})
	r.mu.Lock()
	r.cmd, r.exited, r.state = cmd, exited, nil
	r.mu.Unlock()
	fmt.Fprintf(&r.logs, "--- start %s\n", strings.Join(args, " "))
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		var once sync.Once
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(&r.logs, line)
			var rec struct{ Msg string }
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "loom listening" {
				once.Do(func() { close(listening) })
			}
		}
		io.Copy(io.Discard, stderr)
		cmd.Wait()
		r.mu.Lock()
		r.state = cmd.ProcessState
		r.mu.Unlock()
		close(exited)
	}()
	select {
	case <-listening:
		return nil
	case <-exited:
		return fmt.Errorf("replica %s exited before listening:\n%s", r.name, r.logs.String())
	case <-time.After(startTimeout):
		return fmt.Errorf("replica %s did not listen within %v:\n%s", r.name, startTimeout, r.logs.String())
	}
}

// signal sends sig to the running process.
func (r *replica) signal(sig syscall.Signal) error {
	r.mu.Lock()
	cmd := r.cmd
	r.mu.Unlock()
	if err := cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("signal replica %s: %v", r.name, err)
	}
	return nil
}

// waitExit waits, bounded, for the process to exit and returns its state.
func (r *replica) waitExit(timeout time.Duration) (*os.ProcessState, error) {
	r.mu.Lock()
	exited := r.exited
	r.mu.Unlock()
	select {
	case <-exited:
	case <-time.After(timeout):
		return nil, fmt.Errorf("replica %s did not exit within %v", r.name, timeout)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.state, nil
}

// kill ends the process, if it runs, and waits for it.
func (r *replica) kill() {
	r.mu.Lock()
	cmd, exited := r.cmd, r.exited
	r.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Kill()
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
	}
}

func (r *replica) url() string { return "http://" + r.addr }

// lifecycleLogs is the log without the one line per response, which
// would drown what matters in a load test.
func (r *replica) lifecycleLogs() string {
	var b strings.Builder
	for line := range strings.Lines(r.logs.String()) {
		if !strings.Contains(line, `"msg":"response"`) {
			b.WriteString(line)
		}
	}
	return b.String()
}

// killWhen SIGKILLs victim once trigger is closed (the load reached
// killAt completed requests), and waits for its exit. The window it
// returns brackets the death: at is taken just before the signal (the
// victim may die, and a client see its stream cut, before the signal
// call returns), diedBy just after the exit was seen; a request running
// on the victim died between the two. signalled, if set, is called with
// at once the signal is sent.
func killWhen(trigger <-chan struct{}, victim *replica, killAt int, signalled func(at time.Time)) <-chan killWindow {
	done := make(chan killWindow, 1)
	go func() {
		var w killWindow
		defer func() { done <- w }()
		select {
		case <-trigger:
		case <-time.After(2 * time.Minute):
			w.err = fmt.Errorf("the load never reached %d completed requests", killAt)
			return
		}
		w.at = time.Now()
		if w.err = victim.signal(syscall.SIGKILL); w.err != nil {
			return
		}
		if signalled != nil {
			signalled(w.at)
		}
		_, w.err = victim.waitExit(30 * time.Second)
		w.diedBy = time.Now()
	}()
	return done
}

// killWindow is what killWhen saw: when the signal went, when the exit
// was seen, and what failed.
type killWindow struct {
	at, diedBy time.Time
	err        error
}
