// Package sandbox runs model-written programs (the Python interpreter, shell
// commands) under bubblewrap, with limits, for packages tools/python and
// tools/shell.
//
// A Sandbox is the operator's configuration, shared by every response. A Box
// is one tool session's share of it: a private work directory and, when loom
// runs as root, a user id of its own. Every program a Box starts is a
// Process: one bwrap invocation with its own namespaces.
//
// # Threat model
//
// The code is assumed hostile. Inside a Box it gets:
//
//   - no network: a new network namespace holding only its own loopback, so
//     neither the host's loopback services nor the outside are reachable;
//   - a read-only view of the system directories (/usr, /etc, the /bin and
//     /lib links) and nothing else of the host: not /home, /root, /work, other
//     sessions' work directories or loom's files; writable are only its work
//     directory (mounted at /mnt/data) and size-capped tmpfs /tmp and
//     /dev/shm (/dev itself, a tmpfs of bwrap's, is read-only);
//   - its own PID, IPC, UTS, cgroup and user namespaces, no capabilities, no
//     further user namespaces; it dies with loom (bwrap --die-with-parent and
//     Pdeathsig);
//   - as root, loom runs each Box under a uid of its own (Options.UIDBase),
//     so the per-uid process limit is per session, sessions cannot touch each
//     other's files, and Close can find and kill every process the session
//     left, however it tried to escape its process group;
//   - limits: wall time per call (the caller's ctx, then SIGKILL to the whole
//     namespace), CPU seconds, address space and file size per process
//     (RLIMIT_CPU, RLIMIT_AS, RLIMIT_FSIZE), processes per session
//     (RLIMIT_NPROC, only with a uid of its own), the work directory's total
//     size (as root, the directory is a tmpfs of Options.DiskBytes: writes
//     past it fail with ENOSPC, Box.DiskFull reports it), the files each
//     tmpfs may hold (as root, every tmpfs loom mounts, the work directory,
//     /tmp and /dev/shm, has one inode per 8 KiB of its size, so that empty
//     files cannot pin unbounded kernel memory), and the output the caller
//     keeps (OutputCap).
//
// What is not isolated: the kernel is shared (a kernel bug is an escape;
// there is no seccomp filter); world-readable files under the read-only
// directories can be read; RLIMIT_AS is per process, so a session's total
// memory can reach MaxProcesses x MemoryBytes (use a cgroup to bound the
// total); as another user than root the work directory lives on the host's
// disk and its total size is not bounded (only each file's), and /tmp and
// /dev/shm are bwrap's tmpfs, capped in size but not in inodes; as root
// its tmpfs counts against the host's memory; CPU time is bounded per process, not per
// session. Without bubblewrap (Options.AllowUnsandboxed) none of the
// namespace isolation applies: the code runs as a host process with network
// access, only the rlimits and the per-session uid (as root) remain.
//
// The package is Linux only.
package sandbox
