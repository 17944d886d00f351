package integration

import (
	"os"
	"testing"

	"github.com/loomgate/loom/store/postgres/pgtest"
	"github.com/loomgate/loom/tools/mcp/mcptest"
)

func TestMain(m *testing.M) {
	// pgtest.Main stops the private PostgreSQL cluster, if one started.
	code := pgtest.Main(m)
	mcptest.RemoveBuild()
	os.Exit(code)
}
