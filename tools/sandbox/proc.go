package sandbox

import (
	"bufio"
	"bytes"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// killTimeout bounds how long a kill waits for processes to be gone.
const killTimeout = 5 * time.Second

// procMatch tells whether a /proc entry belongs to what is being killed.
type procMatch func(pid int) bool

// livePIDs lists the processes in /proc that match and are not zombies: a
// zombie runs nothing and is its parent's to reap.
func livePIDs(match procMatch) []int {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	var pids []int
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil || pid == os.Getpid() {
			continue
		}
		if match(pid) && !zombie(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// UIDPIDs lists the live processes running as uid (real, effective, saved
// or filesystem). Tests use it to check that nothing of a session is left.
func UIDPIDs(uid uint32) []int { return livePIDs(uidMatch(uid)) }

// NamespacePIDs lists the live processes in the PID namespace with inode
// ino.
func NamespacePIDs(ino uint64) []int { return livePIDs(nsMatch(ino)) }

func uidMatch(uid uint32) procMatch {
	want := []byte(strconv.FormatUint(uint64(uid), 10))
	return func(pid int) bool {
		f := statusField(pid, "Uid:")
		for _, v := range bytes.Fields(f) {
			if bytes.Equal(v, want) {
				return true
			}
		}
		return false
	}
}

func nsMatch(ino uint64) procMatch {
	want := "pid:[" + strconv.FormatUint(ino, 10) + "]"
	return func(pid int) bool {
		l, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/pid")
		return err == nil && l == want
	}
}

func zombie(pid int) bool {
	s := statusField(pid, "State:")
	return len(s) > 0 && (s[0] == 'Z' || s[0] == 'X')
}

// statusField returns the value of one line of /proc/pid/status.
func statusField(pid int, key string) []byte {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return nil
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if v, ok := bytes.CutPrefix(sc.Bytes(), []byte(key)); ok {
			return bytes.TrimSpace(v)
		}
	}
	return nil
}

// killMatching SIGKILLs every live process that matches until none is
// left, or killTimeout passes. New processes can appear while it runs (a
// fork bomb), hence the loop.
func killMatching(match procMatch) error {
	deadline := time.Now().Add(killTimeout)
	for {
		pids := livePIDs(match)
		if len(pids) == 0 {
			return nil
		}
		for _, pid := range pids {
			killIf(pid, match)
		}
		if time.Now().After(deadline) {
			return &KillError{PIDs: pids}
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// killIf kills pid if it still matches. The handle is taken first (a pidfd
// on Linux) and the match checked after, so a pid reused in between by an
// unrelated process is not killed.
func killIf(pid int, match procMatch) {
	p, err := os.FindProcess(pid)
	if err != nil {
		return
	}
	defer p.Release()
	if match(pid) {
		_ = p.Signal(syscall.SIGKILL)
	}
}

// uidPool hands out session uids from a range, round robin so that a uid
// is not reused at once, skipping any uid a process still runs as.
type uidPool struct {
	mu          sync.Mutex
	base, count uint32
	next        uint32
	used        map[uint32]bool
}

func newUIDPool(base, count uint32) *uidPool {
	// A random start: a restarted loom does not begin with the uids its
	// previous run used.
	return &uidPool{base: base, count: count, next: rand.Uint32N(count), used: make(map[uint32]bool)}
}

func (p *uidPool) get() (uint32, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range p.count {
		off := (p.next + i) % p.count
		uid := p.base + off
		if p.used[uid] || len(UIDPIDs(uid)) > 0 {
			continue
		}
		p.used[uid] = true
		p.next = (off + 1) % p.count
		return uid, nil
	}
	return 0, errNoUID
}

func (p *uidPool) put(uid uint32) {
	p.mu.Lock()
	delete(p.used, uid)
	p.mu.Unlock()
}

// reapOrphans waits for this process's zombie children that ran as uid.
// When loom is a subreaper (a container's PID 1, or PR_SET_CHILD_SUBREAPER),
// processes of a killed sandbox whose parents died first are re-parented to
// loom; nobody else will wait for them. Only zombies of the session's own
// uid are reaped, by pid, so no other child's exit status is taken from the
// code that waits for it. It polls for a short, bounded while, since the
// kernel re-parents and kills asynchronously.
func reapOrphans(uid uint32) {
	self := []byte(strconv.Itoa(os.Getpid()))
	isOrphan := func(pid int) bool {
		return bytes.Equal(bytes.TrimSpace(statusField(pid, "PPid:")), self) && zombie(pid) && uidMatch(uid)(pid)
	}
	for range 20 {
		d, err := os.Open("/proc")
		if err != nil {
			return
		}
		names, _ := d.Readdirnames(-1)
		d.Close()
		found := false
		for _, n := range names {
			pid, err := strconv.Atoi(n)
			if err != nil || !isOrphan(pid) {
				continue
			}
			found = true
			var ws syscall.WaitStatus
			syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
		}
		if !found {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}
