package python

import (
	"os"
	"strings"
	"testing"

	"github.com/loomgate/loom/tools/sandbox"
)

// TestDiskQuotaToldToTheModel: code that writes 1 GB into the work
// directory, a file of 1 MiB at a time, gets ENOSPC at the quota; the
// interpreter survives, and the result tells the model the quota is full.
func TestDiskQuotaToldToTheModel(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("the disk quota is a tmpfs mounted by loom: run the tests as root (scripts/test does)")
	}
	s := open(t, newServer(t, nil, &sandbox.Options{DiskBytes: 8 << 20}))
	res := run(t, s, `
chunk = b"\0" * (1 << 20)
written = 0
try:
    for i in range(1024):
        with open(f"f{i}", "wb") as f:
            f.write(chunk)
        written += 1
except OSError as e:
    print("stopped after", written, "MiB:", e.strerror)
`)
	out := res.Text()
	if !strings.Contains(out, "stopped after") || !strings.Contains(out, "No space left on device") {
		t.Errorf("the write was not stopped: %q", out)
	}
	if !strings.Contains(out, "disk quota of 8388608 bytes is used up") {
		t.Errorf("the model is not told of the quota: %q", out)
	}
	// The interpreter is still there, with its state.
	expect(t, run(t, s, `print(written < 1024)`), "True\n"+sandbox.DiskFullNotice(s.Box()), false)
}
