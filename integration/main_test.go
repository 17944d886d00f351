package integration

import (
	"os"
	"testing"

	"github.com/loomgate/loom/store/postgres/pgtest"
	"github.com/loomgate/loom/tools/mcp/mcptest"
)

func TestMain(m *testing.M) {
	// A benchmark's upstream, or its clients, in a process of its own is
	// this binary run again: it serves and exits here.
	serveBenchUpstreamIfAsked()
	serveBenchClientIfAsked()
	// pgtest.Main stops the private PostgreSQL cluster, if one started.
	code := pgtest.Main(m)
	mcptest.RemoveBuild()
	os.Exit(code)
}
