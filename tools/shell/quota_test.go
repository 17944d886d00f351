package shell

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/loomgate/loom/tools/sandbox"
)

// TestDiskQuotaToldToTheModel: a command that tries to write 1 GB into
// the work directory stops at the quota, and the call's output tells the
// model that the quota is full.
func TestDiskQuotaToldToTheModel(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("the disk quota is a tmpfs mounted by loom: run the tests as root (scripts/test does)")
	}
	base, err := os.MkdirTemp("", "loom-shell-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	sb, err := sandbox.New(&sandbox.Options{WorkDirBase: base, DiskBytes: 8 << 20, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(sb, nil)
	if err != nil {
		t.Fatal(err)
	}
	sess, err := srv.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	out := call(t, sess.(*Session), `{"commands": ["for i in $(seq 1 1024); do head -c 1048576 /dev/zero > f$i || exit 7; done"]}`)
	co := out.Output[0]
	if co.Outcome.ExitCode == nil || *co.Outcome.ExitCode != 7 {
		t.Errorf("outcome %+v, want exit 7", co.Outcome)
	}
	if !strings.Contains(co.Stderr, "No space left") || !strings.Contains(co.Stderr, "disk quota of 8388608 bytes is used up") {
		t.Errorf("the model is not told: stderr %q", co.Stderr)
	}
}
