package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// Box is one session's place in the sandbox: a private work directory and,
// when loom runs as root, a uid of its own. Every program it starts runs
// under that uid with the work directory as its current directory. It is
// safe for concurrent use.
type Box struct {
	sb  *Sandbox
	dir string
	uid uint32
	// ownUID is true when uid is the Box's alone (loom runs as root); then
	// Close can find every process the session left by its uid.
	ownUID bool

	mu     sync.Mutex
	procs  map[*Process]struct{}
	closed bool
	// quota is the size of the work directory's tmpfs, 0 when it is a
	// plain directory.
	quota int64
}

// NewBox creates a Box: a fresh work directory (mode 0700, owned by the
// Box's uid) under Options.WorkDirBase. Close removes it.
func (s *Sandbox) NewBox() (*Box, error) {
	b := &Box{sb: s, uid: uint32(os.Geteuid()), procs: make(map[*Process]struct{})}
	if s.ownUIDs {
		uid, err := s.uids.get()
		if err != nil {
			return nil, err
		}
		b.uid, b.ownUID = uid, true
	}
	var rnd [12]byte
	_, _ = rand.Read(rnd[:])
	b.dir = filepath.Join(s.opts.WorkDirBase, "s-"+hex.EncodeToString(rnd[:]))
	err := os.Mkdir(b.dir, 0o700)
	if err == nil && s.ownUIDs && s.opts.DiskBytes > 0 {
		err = b.mountQuota(s.opts.DiskBytes)
	}
	if err == nil && b.ownUID {
		err = os.Chown(b.dir, int(b.uid), int(b.uid))
	}
	if err != nil {
		b.unmountQuota()
		_ = os.RemoveAll(b.dir)
		b.releaseUID()
		return nil, fmt.Errorf("sandbox: creating work directory: %w", err)
	}
	return b, nil
}

// Dir is the work directory's path on the host.
func (b *Box) Dir() string { return b.dir }

// WorkDir is the work directory as the Box's programs see it: the mount
// point when sandboxed, the host path otherwise.
func (b *Box) WorkDir() string {
	if b.sb.sandboxed {
		return b.sb.opts.MountPoint
	}
	return b.dir
}

// UID is the uid the Box's programs run as, and whether it is the Box's
// alone.
func (b *Box) UID() (uid uint32, own bool) { return b.uid, b.ownUID }

// Run starts c and waits for it. When ctx ends first, every process of the
// program is killed and Run returns ctx's error with the Exit.
func (b *Box) Run(ctx context.Context, c Command) (Exit, error) {
	p, err := b.Start(c)
	if err != nil {
		return Exit{}, err
	}
	select {
	case <-p.Done():
	case <-ctx.Done():
		kerr := p.Kill()
		exit, _ := p.Wait()
		return exit, errors.Join(ctx.Err(), kerr)
	}
	return p.Wait()
}

// Close kills every process the Box started and, when the Box has a uid
// of its own, every process still running as that uid (whatever escaped
// its process group or namespace), then removes the work directory. It
// waits for the processes to be gone, at most a few seconds. A second
// Close does nothing.
func (b *Box) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	procs := make([]*Process, 0, len(b.procs))
	for p := range b.procs {
		procs = append(procs, p)
	}
	b.mu.Unlock()

	var errs []error
	for _, p := range procs {
		errs = append(errs, p.Kill())
	}
	leftover := false
	if b.ownUID {
		if err := killMatching(uidMatch(b.uid)); err != nil {
			errs, leftover = append(errs, err), true
		}
		reapOrphans(b.uid)
	}
	if err := b.unmountQuota(); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, removeAll(b.dir))
	// A uid with processes left is never handed out again by this loom.
	if !leftover {
		b.releaseUID()
	}
	return errors.Join(errs...)
}

// mountQuota makes the work directory a tmpfs of size bytes, owned by the
// Box's uid: the work directory's total quota. nosuid and nodev, like the
// sandbox's other writable mounts.
func (b *Box) mountQuota(size int64) error {
	data := fmt.Sprintf("size=%d,mode=0700,uid=%d,gid=%d", size, b.uid, b.uid)
	if err := syscall.Mount("tmpfs", b.dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, data); err != nil {
		return fmt.Errorf("sandbox: mounting the work directory's tmpfs (its disk quota): %w", err)
	}
	b.quota = size
	return nil
}

// unmountQuota detaches the work directory's tmpfs, if mounted; its
// memory is freed once the last process holding it is gone.
func (b *Box) unmountQuota() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.quota == 0 {
		return nil
	}
	if err := syscall.Unmount(b.dir, syscall.MNT_DETACH); err != nil {
		return fmt.Errorf("sandbox: unmounting the work directory: %w", err)
	}
	b.quota = 0
	return nil
}

// DiskQuota is the work directory's size limit in bytes, 0 when there is
// none (loom not running as root).
func (b *Box) DiskQuota() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.quota
}

// DiskFull reports whether the work directory's quota is (nearly) used
// up, so a tool can tell the model why its writes failed.
func (b *Box) DiskFull() bool {
	b.mu.Lock()
	quota := b.quota
	b.mu.Unlock()
	if quota == 0 {
		return false
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(b.dir, &st); err != nil {
		return false
	}
	// Less than one block left, or under 1% of the quota: the next
	// write of any size fails.
	free := int64(st.Bavail) * int64(st.Bsize)
	return free < int64(st.Bsize) || free < quota/100
}

func (b *Box) releaseUID() {
	if b.ownUID {
		b.sb.uids.put(b.uid)
	}
}

func (b *Box) untrack(p *Process) {
	b.mu.Lock()
	delete(b.procs, p)
	b.mu.Unlock()
}
