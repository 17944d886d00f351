package sandbox

import (
	"os"
	"strings"
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
