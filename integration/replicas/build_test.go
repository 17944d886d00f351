package replicas

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/loomgate/loom/store/postgres/pgtest"
)

// binDir holds the binaries the tests build, for the whole test run.
var binDir string

func TestMain(m *testing.M) {
	var err error
	if binDir, err = os.MkdirTemp("", "loom-replicas-bin-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// pgtest.Main runs the tests and stops the private PostgreSQL
	// cluster, if pgtest started one.
	code := pgtest.Main(m)
	os.RemoveAll(binDir)
	os.Exit(code)
}

// loomBinary builds cmd/loom once per test run and returns its path. The
// build goes through the go command's cache, so a second run of the tests
// does not compile it again.
var loomBinary = sync.OnceValues(func() (string, error) {
	bin := filepath.Join(binDir, "loom")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/loomgate/loom/cmd/loom")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build cmd/loom: %v\n%s", err, out)
	}
	return bin, nil
})

// needLoom returns the loom binary's path, failing the test if it cannot
// be built.
func needLoom(t *testing.T) string {
	t.Helper()
	bin, err := loomBinary()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}
