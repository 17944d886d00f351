package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/loomgate/loom/tools"
)

// Command is a program to run in a Box.
type Command struct {
	// Args is the argv. Args[0] is looked up in the sandbox's PATH
	// (/usr/local/bin:/usr/bin:/bin).
	Args []string
	// Env holds extra KEY=VALUE pairs on top of the sandbox's minimal
	// environment (PATH, HOME and TMPDIR, LANG).
	Env []string
	// Stdin, Stdout and Stderr are as in os/exec. Nil means /dev/null.
	// An *os.File is handed to the program as is; any other writer gets a
	// pipe, which must not block for long (see OutputCap).
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

// Exit is how a program ended.
type Exit struct {
	// Code is the exit code, or 128+n when the program was killed by
	// signal n, as a shell reports it (137 for SIGKILL, 152 for SIGXCPU).
	Code int
	// Killed is true when Kill or Box.Close stopped the program.
	Killed bool
}

// Process is a program started in a Box: under bubblewrap, one bwrap
// invocation whose namespaces hold the program and everything it starts.
type Process struct {
	box  *Box
	cmd  *exec.Cmd
	done chan struct{}
	// stderrHead keeps the start of stderr, where bwrap reports setup
	// failures.
	stderrHead *CappedBuffer

	mu     sync.Mutex
	reaped bool // the process loom started was reaped: its pgid may be reused
	exited bool // Done is closed or about to be
	killed bool
	// init is the sandbox's PID 1 (bwrap's reaper) and pidNS the inode of
	// its PID namespace, from bwrap's --info-fd; unset when unsandboxed or
	// before bwrap reported them.
	init  *os.Process
	pidNS uint64
	exit  Exit
	err   error
}

// infoFD is the descriptor number bwrap writes its JSON info to: the first
// of exec.Cmd.ExtraFiles.
const infoFD = 3

// Start starts c in the Box. The Process must be waited for (Wait) or
// killed; Box.Close kills whatever is still running. After Close it
// returns tools.ErrClosed.
func (b *Box) Start(c Command) (*Process, error) {
	if len(c.Args) == 0 {
		return nil, errors.New("sandbox: empty command")
	}
	s := b.sb
	p := &Process{box: b, done: make(chan struct{}), stderrHead: NewOutputCap(4096).Buffer()}
	argv := s.limitArgs(b)
	env := []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8"}
	if s.sandboxed {
		env = append(env, "HOME="+s.opts.MountPoint, "TMPDIR=/tmp")
		env = append(env, c.Env...)
		argv = append(argv, s.bwrapArgs(b, env)...)
		argv = append(argv, c.Args...)
	} else {
		env = append(env, "HOME="+b.dir, "TMPDIR="+b.dir)
		argv = append(argv, c.Args...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout = c.Stdin, c.Stdout
	cmd.Stderr = p.stderrHead
	if c.Stderr != nil {
		cmd.Stderr = io.MultiWriter(p.stderrHead, c.Stderr)
	}
	cmd.Dir = "/"
	if !s.sandboxed {
		cmd.Dir = b.dir
		cmd.Env = env
	} else {
		// bwrap sets the program's environment (--clearenv, --setenv);
		// its own needs nothing.
		cmd.Env = []string{}
	}
	// Own process group, to kill an unsandboxed program's children with
	// it; SIGKILL if loom dies, on top of bwrap's --die-with-parent.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if b.ownUID {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: b.uid, Gid: b.uid, Groups: []uint32{}}
	}
	// Bounds Wait when something outside the namespace kept a pipe open.
	cmd.WaitDelay = killTimeout
	p.cmd = cmd

	var infoR *os.File
	if s.sandboxed {
		r, w, err := os.Pipe()
		if err != nil {
			return nil, fmt.Errorf("sandbox: %w", err)
		}
		defer w.Close()
		infoR = r
		cmd.ExtraFiles = []*os.File{w}
	}

	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		if infoR != nil {
			infoR.Close()
		}
		return nil, tools.ErrClosed
	}
	// Started under the Box's lock, so Close either sees the process or
	// has already refused it.
	err := cmd.Start()
	if err == nil {
		b.procs[p] = struct{}{}
	}
	b.mu.Unlock()
	if err != nil {
		if infoR != nil {
			infoR.Close()
		}
		return nil, fmt.Errorf("sandbox: starting %s: %w", argv[0], err)
	}

	infoDone := make(chan struct{})
	if infoR != nil {
		go p.readInfo(infoR, infoDone)
	} else {
		close(infoDone)
	}
	go p.wait(infoDone)
	return p, nil
}

// limitArgs is the prlimit prefix that applies the rlimits, then execs the
// program (or bwrap). It runs as the Box's uid, so the process limit counts
// that uid's processes from bwrap on.
func (s *Sandbox) limitArgs(b *Box) []string {
	if s.prlimit == "" {
		return nil
	}
	o := s.opts
	args := []string{s.prlimit}
	if o.CPUSeconds > 0 {
		// SIGXCPU at the soft limit says why the program died; SIGKILL a
		// second later if it ignores that.
		args = append(args, fmt.Sprintf("--cpu=%d:%d", o.CPUSeconds, o.CPUSeconds+1))
	}
	if o.MemoryBytes > 0 {
		args = append(args, "--as="+strconv.FormatInt(o.MemoryBytes, 10))
	}
	if o.MaxFileBytes > 0 {
		args = append(args, "--fsize="+strconv.FormatInt(o.MaxFileBytes, 10))
	}
	// As a shared uid (loom not root) the limit would count loom's own
	// threads, so it is only set for a uid of the Box's own.
	if o.MaxProcesses > 0 && b.ownUID {
		args = append(args, "--nproc="+strconv.Itoa(o.MaxProcesses))
	}
	return append(args, "--")
}

// bwrapArgs builds the bwrap command line up to the program's argv.
func (s *Sandbox) bwrapArgs(b *Box, env []string) []string {
	o := s.opts
	args := []string{
		s.bwrap,
		// Every namespace, including user (needed by --disable-userns)
		// and network: the sandbox has only its own loopback.
		"--unshare-all", "--unshare-user", "--disable-userns",
		"--die-with-parent", "--new-session",
		"--hostname", "sandbox",
		"--cap-drop", "ALL",
	}
	args = append(args, s.mounts...)
	args = append(args, "--dev", "/dev", "--proc", "/proc")
	if b.tmpDir != "" {
		// loom's own tmpfs, with an inode limit (Box.mountTmpfs).
		args = append(args, "--bind", b.tmpDir, "/tmp", "--bind", b.shmDir, "/dev/shm")
	} else {
		// bwrap's, size-capped; bwrap sets no inode limit.
		for _, dir := range []string{"/tmp", "/dev/shm"} {
			if o.TmpBytes > 0 {
				args = append(args, "--size", strconv.FormatInt(o.TmpBytes, 10))
			}
			args = append(args, "--tmpfs", dir)
		}
	}
	args = append(args,
		"--bind", b.dir, o.MountPoint,
		// The tmpfs bwrap builds /dev on has neither a size nor an inode
		// limit: read-only, once /dev/shm is on it. Not recursive: the
		// device nodes, /dev/pts and /dev/shm are mounts of their own and
		// stay writable.
		"--remount-ro", "/dev",
		// Last: the root tmpfs bwrap built the tree on becomes read-only,
		// so nothing but the mounts above is writable.
		"--remount-ro", "/",
		"--chdir", o.MountPoint,
		"--clearenv",
	)
	for _, kv := range env {
		k, v, _ := cut(kv)
		args = append(args, "--setenv", k, v)
	}
	return append(args, "--info-fd", strconv.Itoa(infoFD), "--")
}

func cut(kv string) (string, string, bool) {
	for i := range len(kv) {
		if kv[i] == '=' {
			return kv[:i], kv[i+1:], true
		}
	}
	return kv, "", false
}

// readInfo takes the sandbox's PID 1 and PID namespace from bwrap's
// --info-fd, for Kill and to wait until the namespace is empty.
func (p *Process) readInfo(r *os.File, done chan<- struct{}) {
	defer close(done)
	defer r.Close()
	var info struct {
		ChildPID int    `json:"child-pid"`
		PIDNS    uint64 `json:"pid-namespace"`
	}
	if err := json.NewDecoder(io.LimitReader(r, 64<<10)).Decode(&info); err != nil || info.ChildPID <= 0 {
		return
	}
	init, err := os.FindProcess(info.ChildPID)
	if err != nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exited {
		init.Release()
		return
	}
	p.init, p.pidNS = init, info.PIDNS
	if p.killed {
		// Kill ran before the info came: finish its job.
		_ = init.Signal(syscall.SIGKILL)
	}
}

func (p *Process) wait(infoDone <-chan struct{}) {
	err := p.cmd.Wait()
	p.mu.Lock()
	p.reaped = true
	p.mu.Unlock()
	// bwrap has exited: the info pipe's writers are gone or going.
	select {
	case <-infoDone:
	case <-time.After(killTimeout):
	}
	p.mu.Lock()
	ns := p.pidNS
	p.mu.Unlock()
	var drainErr error
	if ns != 0 {
		// bwrap exits as soon as the program does, while its PID 1 may
		// still be taking the rest of the namespace down (a background
		// job): Done means all of it is gone.
		drainErr = killMatching(nsMatch(ns))
	}
	p.mu.Lock()
	p.exited = true
	exit := Exit{Code: exitCode(p.cmd.ProcessState), Killed: p.killed}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		err = nil // the exit code says it
	}
	if err == nil && p.box.sb.sandboxed && !exit.Killed && exit.Code == 1 {
		// bwrap reports a failed setup (a mount, a namespace) as exit 1
		// and a "bwrap: " message, before the program could write
		// anything. A program can fake it, but only to get an error
		// instead of its exit code.
		if head := p.stderrHead.String(); strings.HasPrefix(head, "bwrap: ") {
			err = &SetupError{Code: exit.Code, Stderr: head}
		}
	}
	p.exit, p.err = exit, errors.Join(err, drainErr)
	if p.init != nil {
		if drainErr == nil {
			// bwrap may exit before its PID 1, which is then re-parented
			// to the nearest subreaper: loom itself when loom is a
			// container's PID 1. Reap it then, or zombies pile up; for
			// any other parent this fails at once (ECHILD).
			_, _ = p.init.Wait()
		}
		p.init.Release()
		p.init = nil
	}
	p.mu.Unlock()
	p.box.untrack(p)
	close(p.done)
}

func exitCode(ps *os.ProcessState) int {
	if ps == nil {
		return -1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// Done is closed when the program has ended (and, sandboxed, with it
// everything in its namespace).
func (p *Process) Done() <-chan struct{} { return p.done }

// Wait waits for the program to end. The error is a *SetupError when
// bwrap failed before the program ran; a non-zero exit is not an error.
func (p *Process) Wait() (Exit, error) {
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exit, p.err
}

// PID is the pid of the process loom started (bwrap, or the program when
// unsandboxed).
func (p *Process) PID() int { return p.cmd.Process.Pid }

// PIDNamespace is the inode of the sandbox's PID namespace, 0 if unknown
// (unsandboxed, or bwrap has not reported it yet).
func (p *Process) PIDNamespace() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pidNS
}

// Kill stops the program and everything it started, and waits (at most a
// few seconds) until they are gone. Sandboxed, that is the whole PID
// namespace: killing its PID 1 makes the kernel kill the rest.
// Unsandboxed, it is the process group; what left the group is found by
// uid at Box.Close when the Box has a uid of its own.
func (p *Process) Kill() error {
	p.mu.Lock()
	p.killed = true
	if p.box.sb.sandboxed {
		// Both through pidfds: safe however late. bwrap's group holds
		// only bwrap; its PID 1 has a session of its own.
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		if p.init != nil {
			_ = p.init.Signal(syscall.SIGKILL)
		}
	} else if !p.reaped {
		// The group's leader is not reaped, so the pgid is still its.
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	}
	p.mu.Unlock()
	// Done comes once the namespace is empty (see wait).
	select {
	case <-p.done:
		return nil
	case <-time.After(3 * killTimeout):
		return &KillError{PIDs: []int{p.cmd.Process.Pid}}
	}
}
