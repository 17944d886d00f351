package sandbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// probeTimeout bounds New's check that bwrap works.
const probeTimeout = 10 * time.Second

// Sandbox is the operator's sandbox configuration, shared by all sessions.
// It is safe for concurrent use.
type Sandbox struct {
	opts      Options
	log       *slog.Logger
	bwrap     string // resolved path; "" when unsandboxed
	prlimit   string // resolved path; "" when missing (unsandboxed only)
	sandboxed bool
	// ownUIDs is true when loom runs as root: each Box gets a uid of its
	// own from uids.
	ownUIDs bool
	uids    *uidPool
	// mounts are the bwrap arguments for the read-only view of the host.
	mounts []string
}

// New checks the configuration and that bubblewrap works here (it runs
// /usr/bin/true in a sandbox), so that a broken sandbox shows at startup
// and not at the model's first call.
//
// Where bubblewrap is missing or cannot create its namespaces, New fails
// with an error matching ErrUnavailable, unless opts.AllowUnsandboxed is
// set: then it logs an error and returns a Sandbox that runs programs
// unsandboxed.
func New(opts *Options) (*Sandbox, error) {
	o := opts.resolved()
	s := &Sandbox{opts: o, log: o.Logger, ownUIDs: os.Geteuid() == 0}
	if err := prepareBase(o.WorkDirBase); err != nil {
		return nil, err
	}
	if s.ownUIDs {
		if uint64(o.UIDBase)+uint64(o.UIDCount) > 1<<32-2 {
			return nil, fmt.Errorf("sandbox: uid range %d+%d overflows", o.UIDBase, o.UIDCount)
		}
		s.uids = newUIDPool(o.UIDBase, o.UIDCount)
	} else if o.MaxProcesses > 0 {
		s.log.Warn("sandbox: loom is not running as root, so sessions share loom's uid and the process limit (RLIMIT_NPROC) is not applied",
			"uid", os.Getuid())
	}
	if !s.ownUIDs && o.DiskBytes > 0 {
		s.log.Warn("sandbox: loom is not running as root, so a session's work directory cannot be a size-limited tmpfs: the disk quota is not applied, only the per-file limit",
			"disk_bytes", o.DiskBytes, "max_file_bytes", o.MaxFileBytes)
	}
	if p, err := exec.LookPath(o.PrlimitPath); err == nil {
		s.prlimit = p
	}

	unavailable := s.findBwrap()
	if unavailable == nil && s.prlimit == "" {
		unavailable = &UnavailableError{Reason: "prlimit (util-linux) not found, so no limits could be applied", Err: exec.ErrNotFound}
	}
	if unavailable == nil {
		unavailable = s.probe()
	}
	if unavailable != nil {
		if !o.AllowUnsandboxed {
			return nil, unavailable
		}
		s.sandboxed, s.bwrap = false, ""
		s.log.Error("sandbox: bubblewrap unavailable; model-written code will run UNSANDBOXED, with network access and "+
			"every file loom's user can reach, because the operator allowed it",
			"reason", unavailable.Error(), "rlimits", s.prlimit != "")
	}
	return s, nil
}

// findBwrap resolves the bwrap binary and builds the mount arguments.
func (s *Sandbox) findBwrap() *UnavailableError {
	p, err := exec.LookPath(s.opts.BwrapPath)
	if err != nil {
		return &UnavailableError{Reason: "bwrap not found at " + strconv.Quote(s.opts.BwrapPath), Err: err}
	}
	s.bwrap, s.sandboxed = p, true
	s.mounts = readOnlyMounts(s.opts.ReadOnlyPaths)
	return nil
}

// probe runs true in a sandbox: bwrap can be installed and still fail
// where user namespaces are restricted.
func (s *Sandbox) probe() *UnavailableError {
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	box, err := s.NewBox()
	if err != nil {
		return &UnavailableError{Reason: "could not prepare a work directory", Err: err}
	}
	exit, err := box.Run(ctx, Command{Args: []string{"true"}})
	cerr := box.Close()
	switch {
	case err != nil:
		return &UnavailableError{Reason: "bwrap could not run a test program", Err: err}
	case exit.Code != 0:
		return &UnavailableError{Reason: "bwrap could not run a test program", Err: fmt.Errorf("true exited %d", exit.Code)}
	case cerr != nil:
		return &UnavailableError{Reason: "a test sandbox could not be cleaned up", Err: cerr}
	}
	return nil
}

// Sandboxed reports whether programs run under bubblewrap. It is false
// only when the operator allowed running unsandboxed and bwrap was
// unavailable.
func (s *Sandbox) Sandboxed() bool { return s.sandboxed }

// MountPoint is where a Box's work directory appears to its programs when
// sandboxed. Unsandboxed, programs see the host path (Box.WorkDir).
func (s *Sandbox) MountPoint() string { return s.opts.MountPoint }

// Logger is the sandbox's logger, for the tool packages built on it.
func (s *Sandbox) Logger() *slog.Logger { return s.log }

// readOnlyMounts turns host paths into bwrap arguments. A symlink (/bin on
// a merged-/usr system) is recreated as the same symlink, so it resolves
// inside the sandbox as on the host; a missing path is skipped.
func readOnlyMounts(paths []string) []string {
	var args []string
	for _, p := range paths {
		p = filepath.Clean(p)
		fi, err := os.Lstat(p)
		if err != nil {
			continue
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			target, err := os.Readlink(p)
			if err != nil {
				continue
			}
			args = append(args, "--symlink", target, p)
			continue
		}
		args = append(args, "--ro-bind", p, p)
	}
	return args
}

// prepareBase creates the work directory base. It must belong to loom's
// user: a base someone else created could be swapped for a link to
// anywhere. Mode 0711 lets session uids reach their own directory without
// listing the others.
func prepareBase(base string) error {
	if !filepath.IsAbs(base) {
		return fmt.Errorf("sandbox: WorkDirBase %q is not absolute", base)
	}
	if err := os.MkdirAll(base, 0o711); err != nil {
		return fmt.Errorf("sandbox: work directory base: %w", err)
	}
	fi, err := os.Lstat(base)
	if err != nil {
		return fmt.Errorf("sandbox: work directory base: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("sandbox: work directory base %q must be a directory owned by uid %d", base, os.Geteuid())
	}
	if err := os.Chmod(base, 0o711); err != nil {
		return fmt.Errorf("sandbox: work directory base: %w", err)
	}
	unmountStale(base)
	return nil
}

// unmountStale detaches work directory tmpfs mounts a previous loom left
// under base when it was killed before closing its sessions: they would
// hold their memory until the host reboots.
func unmountStale(base string) {
	if os.Geteuid() != 0 {
		return
	}
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	prefix := filepath.Clean(base) + "/s-"
	for _, line := range strings.Split(string(data), "\n") {
		// Field 5 is the mount point (octal escapes for spaces, which
		// our names never contain).
		f := strings.Fields(line)
		if len(f) > 4 && strings.HasPrefix(f[4], prefix) && !strings.Contains(f[4][len(prefix):], "/") {
			_ = syscall.Unmount(f[4], syscall.MNT_DETACH)
		}
	}
}

// removeAll removes a work directory even where the program made parts of
// it unreadable (which stops RemoveAll for a non-root loom).
func removeAll(dir string) error {
	if err := os.RemoveAll(dir); err == nil {
		return nil
	}
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if d != nil && d.IsDir() {
			_ = os.Chmod(path, 0o700)
		}
		return nil
	})
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("sandbox: removing work directory: %w", err)
	}
	return nil
}

var errNoUID = errors.New("sandbox: no free uid in the configured range")
