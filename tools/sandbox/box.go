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

	// tmpDir and shmDir are the host directories, each a tmpfs loom
	// mounted, that the sandbox sees as /tmp and /dev/shm; "" when bwrap
	// makes those (loom not root), without an inode limit.
	tmpDir, shmDir string

	mu     sync.Mutex
	procs  map[*Process]struct{}
	closed bool
	// mounted are the tmpfs loom mounted for the Box, until Close
	// unmounts them.
	mounted []string
	// quota and quotaFiles are the size and the inode count of the work
	// directory's tmpfs, 0 when it is a plain directory.
	quota, quotaFiles int64
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
		if err = b.mountTmpfs(b.dir, s.opts.DiskBytes); err == nil {
			b.quota, b.quotaFiles = s.opts.DiskBytes, tmpfsInodes(s.opts.DiskBytes)
		}
	}
	if err == nil && b.ownUID {
		err = os.Chown(b.dir, int(b.uid), int(b.uid))
	}
	if err == nil && s.ownUIDs && s.sandboxed {
		// bwrap's own tmpfs take no inode limit: as root, loom mounts
		// /tmp and /dev/shm itself, next to the work directory.
		b.tmpDir, b.shmDir = b.dir+".tmp", b.dir+".shm"
		for _, dir := range []string{b.tmpDir, b.shmDir} {
			if err == nil {
				err = os.Mkdir(dir, 0o700)
			}
			if err == nil {
				err = b.mountTmpfs(dir, s.opts.TmpBytes)
			}
		}
	}
	if err != nil {
		b.unmountAll()
		b.removeDirs()
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
	if err := b.unmountAll(); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, b.removeDirs())
	// A uid with processes left is never handed out again by this loom.
	if !leftover {
		b.releaseUID()
	}
	return errors.Join(errs...)
}

// Every tmpfs the sandbox mounts has an inode limit as well as a size:
// an empty file takes no space, so without one a program can create files
// until the kernel's default limit (half the host's memory pages), each
// pinning about 1 KiB of kernel memory that no size limit counts (1.5
// million empty files held 1.5 GB under a 256 MiB quota that read 0 used).
// A tmpfs of size bytes gets one inode per tmpfsBytesPerInode of it, at
// least tmpfsMinInodes: 32768 files for the default 256 MiB work directory,
// 8192 for a 64 MiB /tmp, whose inodes then cost at most about an eighth of
// the size in kernel memory.
const (
	tmpfsBytesPerInode = 8 << 10
	tmpfsMinInodes     = 1024
)

// tmpfsInodes is the inode limit of a tmpfs of size bytes.
func tmpfsInodes(size int64) int64 { return max(size/tmpfsBytesPerInode, tmpfsMinInodes) }

// mountTmpfs mounts a tmpfs of size bytes (no limit if size is negative)
// on dir, owned by the Box's uid, with its inode limit. nosuid and nodev,
// like the sandbox's other writable mounts.
func (b *Box) mountTmpfs(dir string, size int64) error {
	data := fmt.Sprintf("mode=0700,uid=%d,gid=%d", b.uid, b.uid)
	if size > 0 {
		data += fmt.Sprintf(",size=%d,nr_inodes=%d", size, tmpfsInodes(size))
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, data); err != nil {
		return fmt.Errorf("sandbox: mounting a tmpfs on %s: %w", dir, err)
	}
	b.mu.Lock()
	b.mounted = append(b.mounted, dir)
	b.mu.Unlock()
	return nil
}

// unmountAll detaches the tmpfs loom mounted for the Box; their memory is
// freed once the last process holding them is gone.
func (b *Box) unmountAll() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	var errs []error
	for _, dir := range b.mounted {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			errs = append(errs, fmt.Errorf("sandbox: unmounting %s: %w", dir, err))
		}
	}
	b.mounted, b.quota, b.quotaFiles = nil, 0, 0
	return errors.Join(errs...)
}

// removeDirs removes the work directory and the Box's /tmp and /dev/shm.
func (b *Box) removeDirs() error {
	errs := []error{removeAll(b.dir)}
	for _, dir := range []string{b.tmpDir, b.shmDir} {
		if dir != "" {
			errs = append(errs, removeAll(dir))
		}
	}
	return errors.Join(errs...)
}

// DiskQuota is the work directory's size limit in bytes, 0 when there is
// none (loom not running as root).
func (b *Box) DiskQuota() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.quota
}

// DiskFiles is the number of files and directories the work directory
// may hold (its tmpfs's inodes, the root included), 0 when there is no
// quota.
func (b *Box) DiskFiles() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.quotaFiles
}

// DiskFull reports whether the work directory's quota, in bytes or in
// files, is (nearly) used up, so a tool can tell the model why its writes
// failed.
func (b *Box) DiskFull() bool {
	bytesFull, filesFull := b.diskFull()
	return bytesFull || filesFull
}

// diskFull reports which of the work directory's quotas is (nearly) used
// up: less than one block or one inode left, or under 1% of either, so
// that the next write of any size, or the next file, fails.
func (b *Box) diskFull() (bytesFull, filesFull bool) {
	b.mu.Lock()
	quota, files := b.quota, b.quotaFiles
	b.mu.Unlock()
	if quota == 0 {
		return false, false
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(b.dir, &st); err != nil {
		return false, false
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	freeFiles := int64(st.Ffree)
	return free < int64(st.Bsize) || free < quota/100, freeFiles < 1 || freeFiles < files/100
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
