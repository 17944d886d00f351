package sandbox

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
)

// TestDiskQuotaStopsAGigabyte: a session writes 1 GB into its work
// directory in files each under the per-file limit; the quota stops it
// with ENOSPC well before, the files persist across the session's
// programs, DiskFull says so, and Close frees everything.
func TestDiskQuotaStopsAGigabyte(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("the disk quota is a tmpfs mounted by loom: run the sandbox tests as root (scripts/test does)")
	}
	const quota = 16 << 20
	s := newSandbox(t, &Options{DiskBytes: quota})
	b := newBox(t, s)
	if b.DiskQuota() != quota {
		t.Fatalf("DiskQuota %d, want %d", b.DiskQuota(), quota)
	}
	// 1024 files of 1 MiB: 1 GiB in all, each far under MaxFileBytes.
	out, errOut, code := run(t, b, `for i in $(seq 1 1024); do head -c 1048576 /dev/zero > f$i || exit 7; done; echo wrote all`)
	if code != 7 || strings.Contains(out, "wrote all") || !strings.Contains(errOut, "No space left") {
		t.Fatalf("1 GB into a 16 MiB quota: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if !b.DiskFull() {
		t.Error("DiskFull is false after the quota was hit")
	}
	// What fit stays for the session's next program, and is the quota.
	out, _, _ = run(t, b, `du -sk . | cut -f1`)
	if kb := strings.TrimSpace(out); kb == "" || len(kb) > 5 {
		t.Errorf("du of the work directory: %q", out)
	}
	dir := b.Dir()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("work directory left after Close: %v", err)
	}
}

// TestTmpfsInodesCapped: empty files take no space, so only an inode
// limit stops a program creating them by the million, each pinning kernel
// memory. A session creates empty files in its work directory, /tmp and
// /dev/shm in a bounded loop: each refuses with ENOSPC at its tmpfs's
// inode limit (far under the loop's bound, which the kernel's default let
// through), /dev cannot be written at all, the work directory's use stays
// within its quota, and DiskFull says so.
func TestTmpfsInodesCapped(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("the inode limits are on tmpfs mounted by loom: run the sandbox tests as root (scripts/test does)")
	}
	const quota, tmp = 16 << 20, 8 << 20
	const bound = 50_000 // files the loop tries; the kernel's default allows millions
	s := newSandbox(t, &Options{DiskBytes: quota, TmpBytes: tmp})
	b := newBox(t, s)
	if want := tmpfsInodes(quota); b.DiskFiles() != want || want >= bound {
		t.Fatalf("DiskFiles %d, want %d (and under %d)", b.DiskFiles(), want, bound)
	}
	// One line per directory: how many files were created before the
	// first refusal, and why it was refused.
	script := fmt.Sprintf(`for d in /mnt/data /tmp /dev/shm /dev; do
  n=0
  while [ $n -lt %d ] && : > $d/e$n 2>/dev/null; do n=$((n+1)); done
  err=$( : 2>&1 > $d/e$n ) || true
  echo "$d $n ${err##*: }"
done`, bound)
	out, errOut, code := run(t, b, script)
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	// The root of each tmpfs takes one inode.
	want := map[string]string{
		"/mnt/data": fmt.Sprintf("%d No space left on device", tmpfsInodes(quota)-1),
		"/tmp":      fmt.Sprintf("%d No space left on device", tmpfsInodes(tmp)-1),
		"/dev/shm":  fmt.Sprintf("%d No space left on device", tmpfsInodes(tmp)-1),
		"/dev":      "0 Read-only file system",
	}
	got := map[string]string{}
	for line := range strings.Lines(out) {
		dir, rest, _ := strings.Cut(strings.TrimSpace(line), " ")
		got[dir] = rest
	}
	for dir, w := range want {
		if got[dir] != w {
			t.Errorf("%s: created %q, want %q (of at most %d)", dir, got[dir], w, bound)
		}
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(b.Dir(), &st); err != nil {
		t.Fatal(err)
	}
	if used := int64(st.Blocks-st.Bfree) * int64(st.Bsize); used > quota {
		t.Errorf("the work directory uses %d bytes, over its quota of %d", used, quota)
	}
	if st.Files != uint64(tmpfsInodes(quota)) || st.Ffree != 0 {
		t.Errorf("the work directory's tmpfs has %d inodes, %d free; want %d, none free", st.Files, st.Ffree, tmpfsInodes(quota))
	}
	if !b.DiskFull() || !strings.Contains(DiskFullNotice(b), "files") {
		t.Errorf("DiskFull %v, notice %q: want full, for its files", b.DiskFull(), DiskFullNotice(b))
	}
}
