package store_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The stores and the job engine share values with the engine through this
// package, not by importing the engine: a store that imported it again
// would tie every implementation to the engine's dependencies and allow
// import cycles the day the engine needs a store's helper.
func TestStoresDoNotImportEngine(t *testing.T) {
	// go test puts its own go first on the PATH of the test.
	out, err := exec.Command("go", "list", "-deps",
		"github.com/loomgate/loom/store/...", "github.com/loomgate/loom/background").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for pkg := range strings.Lines(string(out)) {
		if strings.TrimSpace(pkg) == "github.com/loomgate/loom/engine" {
			t.Fatal("a package under store/ or background depends on github.com/loomgate/loom/engine; share values through package store instead")
		}
	}
}
