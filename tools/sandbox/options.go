package sandbox

import (
	"log/slog"
	"os"
	"path/filepath"
)

// Defaults for a nil Options or a zero field.
const (
	DefaultCPUSeconds   = 120
	DefaultMemoryBytes  = 512 << 20
	DefaultMaxProcesses = 64
	DefaultMaxFileBytes = 256 << 20
	DefaultTmpBytes     = 64 << 20
	DefaultDiskBytes    = 256 << 20
	DefaultMountPoint   = "/mnt/data"
	DefaultUIDBase      = 900_000_000
	DefaultUIDCount     = 100_000
)

// DefaultReadOnlyPaths are the host paths a sandbox sees, read-only: enough
// for /usr/bin/python3, bash and the usual tools. Paths that are symlinks on
// the host (merged /usr) become the same symlinks inside.
var DefaultReadOnlyPaths = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc"}

// Options configure a Sandbox. A nil *Options, or a zero field, means the
// default. For the limits a negative value means no limit.
type Options struct {
	// BwrapPath is the bubblewrap binary. Default: "bwrap" looked up in
	// PATH.
	BwrapPath string
	// PrlimitPath is util-linux's prlimit, which applies the rlimits.
	// Default: "prlimit" looked up in PATH.
	PrlimitPath string
	// AllowUnsandboxed lets New succeed when bubblewrap is missing or
	// cannot create namespaces here: programs then run as plain host
	// processes. Only the operator may set it; New logs it as an error.
	AllowUnsandboxed bool

	// WorkDirBase holds the per-session work directories. It is created
	// mode 0711 if missing and must be owned by loom's user; every
	// directory above it must be searchable by other users when loom runs
	// as root (sessions run under their own uids). Default:
	// $TMPDIR/loom-sandbox.
	WorkDirBase string
	// MountPoint is where the work directory appears inside the sandbox,
	// and the programs' working directory. Default /mnt/data, where
	// gpt-oss expects it.
	MountPoint string
	// ReadOnlyPaths are the host paths visible, read-only, inside the
	// sandbox. Default DefaultReadOnlyPaths. An interpreter installed
	// elsewhere (pyenv, /opt) needs its directory added here.
	ReadOnlyPaths []string

	// CPUSeconds is RLIMIT_CPU of every process: over the whole life of a
	// long-lived interpreter, not per call. Default 120.
	CPUSeconds int
	// MemoryBytes is RLIMIT_AS of every process. Default 512 MiB.
	MemoryBytes int64
	// MaxProcesses is RLIMIT_NPROC for a session's uid. It applies only
	// when loom runs as root (each session gets a uid of its own); as any
	// other user it would count loom's own threads too, so it is not set
	// and New logs a warning. Default 64.
	MaxProcesses int
	// MaxFileBytes is RLIMIT_FSIZE: the largest file a process may write.
	// Default 256 MiB.
	MaxFileBytes int64
	// TmpBytes is the size of each of the sandbox's tmpfs mounts (/tmp,
	// /dev/shm), which live in memory. As root loom mounts them, with one
	// inode per 8 KiB of this size (at least 1024), like the work
	// directory; as another user bwrap does, with no inode limit.
	// Default 64 MiB.
	TmpBytes int64
	// DiskBytes is the total a session may store in its work directory:
	// the directory is a tmpfs of this size (so it lives in memory, and
	// counts against the host's RAM and swap as it fills), and past it
	// writes fail with ENOSPC inside the sandbox. It holds one file or
	// directory per 8 KiB of this size (at least 1024): empty files take
	// no space but each pins kernel memory. Mounting needs root; as
	// another user there is no quota (only MaxFileBytes per file) and New
	// logs a warning. Default 256 MiB (32768 files).
	DiskBytes int64

	// UIDBase and UIDCount are the range of uids given to sessions when
	// loom runs as root. The uids need no passwd entry; they must not be
	// used by anything else on the host, and two loom processes on one
	// host should use different ranges (a uid with a running process is
	// skipped, which covers most overlaps). Default 900000000 and 100000.
	UIDBase  uint32
	UIDCount uint32

	// Logger receives the sandbox's warnings. Default slog.Default().
	Logger *slog.Logger
}

func (o *Options) resolved() Options {
	var r Options
	if o != nil {
		r = *o
	}
	orDefault(&r.BwrapPath, "bwrap")
	orDefault(&r.PrlimitPath, "prlimit")
	orDefault(&r.WorkDirBase, filepath.Join(os.TempDir(), "loom-sandbox"))
	orDefault(&r.MountPoint, DefaultMountPoint)
	if r.ReadOnlyPaths == nil {
		r.ReadOnlyPaths = DefaultReadOnlyPaths
	}
	orDefault(&r.CPUSeconds, DefaultCPUSeconds)
	orDefault(&r.MemoryBytes, DefaultMemoryBytes)
	orDefault(&r.MaxProcesses, DefaultMaxProcesses)
	orDefault(&r.MaxFileBytes, DefaultMaxFileBytes)
	orDefault(&r.TmpBytes, DefaultTmpBytes)
	orDefault(&r.DiskBytes, DefaultDiskBytes)
	orDefault(&r.UIDBase, DefaultUIDBase)
	orDefault(&r.UIDCount, DefaultUIDCount)
	if r.Logger == nil {
		r.Logger = slog.Default()
	}
	return r
}

// orDefault sets *p to def when it holds its zero value.
func orDefault[T comparable](p *T, def T) {
	var zero T
	if *p == zero {
		*p = def
	}
}
